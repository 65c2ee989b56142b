#include "server/backend_contract.h"

#include <algorithm>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#ifndef TESSERA_VERSION
#define TESSERA_VERSION "unknown"
#endif

namespace tessera::server {
namespace {

using json = nlohmann::json;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace

LoadsSections parse_loads_include(std::string_view include) {
  LoadsSections s;
  size_t start = 0;
  while (start <= include.size()) {
    size_t end = include.find(',', start);
    if (end == std::string_view::npos) end = include.size();
    std::string_view name = include.substr(start, end - start);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name == "all") s.memory = s.queues = true;
    if (name == "memory") s.memory = true;
    if (name == "queues") s.queues = true;
    start = end + 1;
  }
  return s;
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  size_t start = 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view pair = query.substr(start, end - start);
    const size_t eq = pair.find('=');
    const std::string key = percent_decode(pair.substr(0, eq));
    if (key == name) return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    start = end + 1;
  }
  return std::nullopt;
}

double ThroughputMeter::update(int64_t generation_tokens, std::chrono::steady_clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (primed_) {
    const double seconds = std::chrono::duration<double>(now - last_time_).count();
    // Reads less than a second apart (SMG asks /loads and /v1/loads back to back; two gateways
    // poll together) keep the last rate instead of measuring over a few milliseconds.
    if (seconds < 1.0) return last_rate_;
    last_rate_ = static_cast<double>(generation_tokens - last_tokens_) / seconds;
  }
  primed_ = true;
  last_tokens_ = generation_tokens;
  last_time_ = now;
  return last_rate_;
}

json worker_loads(const MetricsSnapshot& m, const ModelInfo& info, const LoadsSections& sections,
                  double gen_throughput, const std::string& timestamp) {
  const int64_t capacity = static_cast<int64_t>(info.num_kv_blocks) * info.block_size;
  const int64_t used = static_cast<int64_t>(m.num_kv_blocks_used) * info.block_size;
  const double hit_rate =
      m.prefix_cache_queries > 0 ? static_cast<double>(m.prefix_cache_hits) / static_cast<double>(m.prefix_cache_queries) : 0.0;
  const double utilization =
      info.max_num_seqs > 0 ? static_cast<double>(m.num_requests_running) / info.max_num_seqs : 0.0;
  json rank = {
      {"dp_rank", 0},
      {"num_running_reqs", m.num_requests_running},
      {"num_waiting_reqs", m.num_requests_waiting},
      {"num_total_reqs", m.num_requests_running + m.num_requests_waiting},
      {"num_waiting_uncached_tokens", m.num_waiting_uncached_tokens},
      {"num_used_tokens", used},
      {"num_total_tokens", used + m.num_waiting_uncached_tokens},
      {"max_total_num_tokens", capacity},
      {"max_running_requests", info.max_num_seqs},
      {"token_usage", m.kv_cache_usage},
      {"active_token_usage", m.kv_cache_usage},
      {"gen_throughput", gen_throughput},
      {"cache_hit_rate", hit_rate},
      {"utilization", utilization},
  };
  if (sections.memory) {
    rank["memory"] = {{"weight_gb", static_cast<double>(info.weight_bytes) / kGiB},
                      {"kv_cache_gb", static_cast<double>(info.kv_cache_bytes) / kGiB},
                      {"token_capacity", capacity}};
  }
  if (sections.queues) {
    rank["queues"] = {{"waiting", m.num_requests_waiting}, {"running", m.num_requests_running}, {"retracted", 0}};
  }
  json aggregate = {{"total_running_reqs", m.num_requests_running},
                    {"total_waiting_reqs", m.num_requests_waiting},
                    {"total_reqs", m.num_requests_running + m.num_requests_waiting},
                    {"avg_token_usage", m.kv_cache_usage},
                    {"avg_throughput", gen_throughput},
                    {"avg_utilization", utilization}};
  return json{{"timestamp", timestamp},
              {"version", TESSERA_VERSION},
              {"dp_rank_count", 1},
              {"loads", json::array({std::move(rank)})},
              {"aggregate", std::move(aggregate)}};
}

json server_info(const MetricsSnapshot& m, const ModelInfo& info, const std::string& served_model_name,
                 double uptime_seconds, int32_t requests_in_flight) {
  return json{{"server_type", "tessera"},
              {"version", TESSERA_VERSION},
              // The file's name, as /v1/models' root: an open route must not show the host's paths.
              {"model_path", std::filesystem::path(info.path).filename().string()},
              {"served_model_name", served_model_name},
              {"architecture", info.architecture},
              {"max_model_len", info.context_length},
              {"context_length", info.context_length},
              {"vocab_size", info.vocab_size},
              {"max_num_seqs", info.max_num_seqs},
              {"max_running_requests", info.max_num_seqs},
              {"max_num_batched_tokens", info.max_num_batched_tokens},
              {"block_size", info.block_size},
              {"page_size", info.block_size},
              {"num_kv_blocks", info.num_kv_blocks},
              {"max_total_num_tokens", static_cast<int64_t>(info.num_kv_blocks) * info.block_size},
              {"kv_cache_dtype", info.kv_dtype},
              {"enable_prefix_caching", info.enable_prefix_caching},
              // The KV disk tier (--kv-cache-dir): its budget and namespace; the path stays private.
              {"kv_cache_dir_enabled", info.kv_cache_dir_enabled && m.disk_tier_enabled},
              {"kv_cache_dir_size", info.kv_cache_dir_bytes},
              {"kv_cache_dir_namespace", info.kv_cache_dir_namespace},
              {"dp_size", 1},
              {"tp_size", 1},
              {"uptime_seconds", uptime_seconds},
              {"active_requests", requests_in_flight},
              {"num_running_reqs", m.num_requests_running},
              {"num_waiting_reqs", m.num_requests_waiting}};
}

json version_info() { return json{{"version", TESSERA_VERSION}}; }

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000));
}

std::optional<std::string> safe_request_id(std::string_view value) {
  if (value.empty() || value.size() > 128) return std::nullopt;
  for (char c : value) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    const bool ok = alnum || c == '.' || c == '_' || c == ':' || c == '/' ||
                    c == '+' || c == '=' || c == '@' || c == '-';
    if (!ok) return std::nullopt;
  }
  return std::string(value);
}

bool ContractRoutes::handles(std::string_view path) {
  return path == "/v1/loads" || path == "/loads" || path == "/server_info" || path == "/get_server_info" ||
         path == "/version";
}

json ContractRoutes::answer(const Engine& engine, const std::string& served_model_name, int32_t requests_in_flight,
                            std::string_view path, std::string_view query) {
  if (path == "/version") return version_info();
  const MetricsSnapshot m = engine.metrics();
  const auto now = std::chrono::steady_clock::now();
  if (path == "/server_info" || path == "/get_server_info") {
    return server_info(m, engine.model_info(), served_model_name,
                       std::chrono::duration<double>(now - started_).count(), requests_in_flight);
  }
  const LoadsSections sections = parse_loads_include(query_param(query, "include").value_or(""));
  return worker_loads(m, engine.model_info(), sections, meter_.update(m.generation_tokens, now),
                      iso8601_utc(std::chrono::system_clock::now()));
}

}  // namespace tessera::server
