// The answers /v1/responses keeps for previous_response_id and GET / DELETE /v1/responses/{id}:
// in memory only (gone on restart), at most `capacity` of them (kMaxStoredResponses), least recently
// used out first (a lookup counts as a use). A request with "store": false (what Codex sends) is
// not kept; the API's default is to keep it.
#pragma once
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace tessera::server {

inline constexpr size_t kMaxStoredResponses = 256;

class ResponseStore {
 public:
  struct Entry {
    nlohmann::ordered_json response;  // the response object as it was answered
    nlohmann::ordered_json items;     // the conversation so far: input items + this answer's output items
  };
  explicit ResponseStore(size_t capacity = kMaxStoredResponses) : capacity_(capacity) {}

  void put(const std::string& id, Entry entry);
  std::optional<Entry> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  using List = std::list<std::pair<std::string, Entry>>;
  mutable std::mutex mu_;
  size_t capacity_;
  List entries_;  // most recently used first
  std::unordered_map<std::string, List::iterator> index_;
};

}  // namespace tessera::server
