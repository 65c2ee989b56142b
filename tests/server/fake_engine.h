// FakeEngine: a deterministic tessera::Engine for the server tests (no model).
//
// Tokenizer: byte-level; token id = byte value (0..255), BOS = 256, EOS = 257; add_bos = true.
// Chat template: "<|role|>\n" + content + "\n" per message, then "<|assistant|>\n".
// Generation, one token per running sample per step (every step_delay):
//   - temperature 0: the prompt's bytes, cycled (prompt "abc" -> "abcabc..."); a '#' in the
//     prompt becomes EOS (finish "stop" unless ignore_eos);
//   - temperature > 0: lowercase letters from mt19937_64(seed + 1000003 * sample_index); without
//     a seed, from a per-request counter (different every request);
//   - stop strings are matched on the text; text that may begin a stop string is held back, as a
//     real detokenizer does; max_tokens ends with "length";
//   - logprobs: the chosen token -0.5; alternatives (token + j) % 256 at -0.5 - j.
// Fault injection by prompt text: "REJECT" -> submit fails (kInvalidArgument); "CRASH" -> the
// request fails with kError after 3 tokens (others are unaffected).
// KV blocks (block_size 16): a request holds ceil(tokens / 16) blocks per sample while it runs and
// frees them when it finishes or is aborted; num_blocks_in_use() is the integrity check.
// Prefix cache: a prompt seen before reports floor((len - 1) / 16) * 16 cached tokens.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "tessera/engine.h"

namespace tessera::testing {

struct FakeEngineConfig {
  int32_t context_length = 256;
  int32_t num_kv_blocks = 1024;
  int32_t max_num_seqs = 256;        // running at once; the rest wait
  int32_t max_queue = 1000;          // unfinished requests; submit fails past it
  std::chrono::microseconds step_delay{1000};
  std::string name = "fake-model";
};

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(FakeEngineConfig config = {});
  ~FakeEngine() override;

  const ModelInfo& model_info() const override { return info_; }
  std::vector<int32_t> tokenize(const std::string& text, bool add_bos, bool parse_special) const override;
  std::string detokenize(const std::vector<int32_t>& ids) const override;
  std::string token_piece(int32_t id) const override { return detokenize({id}); }
  // "<|role|>\ncontent\n" per message, tools as one "<|tools|>" line (JSON as given); ids one per byte.
  Result<ChatPrompt> chat_prompt(const ChatTemplateInput& input, bool add_bos) const override;
  Result<std::shared_ptr<RequestStream>> submit(GenerateRequest request) override;
  // One submit() per request (the fake has no steps for them to fall between).
  Result<std::vector<std::shared_ptr<RequestStream>>> submit_all(std::vector<GenerateRequest> requests) override {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (GenerateRequest& r : requests) {
      auto s = submit(std::move(r));
      if (!s.ok()) return s.error();
      streams.push_back(std::move(s.value()));
    }
    return streams;
  }
  void abort(int64_t request_id) override;
  MetricsSnapshot metrics() const override;
  int32_t num_unfinished_requests() const override;
  void shutdown(std::chrono::milliseconds grace) override;

  // Test hooks.
  int32_t num_blocks_in_use() const;
  int64_t num_aborted() const { return num_aborted_.load(); }
  int64_t num_submitted() const { return num_submitted_.load(); }
  void set_step_delay(std::chrono::microseconds d) { step_delay_us_.store(d.count()); }

  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kBlockSize = 16;

 private:
  struct Sample;
  struct Req;
  class Stream;

  void loop();
  void step_locked();
  void finish_locked(Req& r, Sample& s, FinishReason reason, const std::string& error);
  void free_locked(Req& r);
  int32_t blocks_for(const Req& r) const;

  FakeEngineConfig config_;
  ModelInfo info_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, std::unique_ptr<Req>> requests_;   // unfinished, by id
  std::deque<int64_t> waiting_;
  std::set<int64_t> running_;
  std::vector<int64_t> aborts_;
  std::set<std::vector<int32_t>> seen_prompts_;
  int32_t num_blocks_used_ = 0;
  int64_t next_id_ = 1;
  bool accepting_ = true;
  bool stop_ = false;
  MetricsSnapshot counters_;
  std::atomic<int64_t> num_aborted_{0};
  std::atomic<int64_t> num_submitted_{0};
  std::atomic<int64_t> step_delay_us_;
  std::thread thread_;
};

}  // namespace tessera::testing
