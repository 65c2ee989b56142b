// The backend contract's bodies from a fixed snapshot: SGLang's /v1/loads fields with their exact
// values, the include sections, the query parser, the throughput meter and the X-Request-ID rule.
#include <gtest/gtest.h>

#include "server/backend_contract.h"

namespace tessera::server {
namespace {

using json = nlohmann::json;

MetricsSnapshot snapshot() {
  MetricsSnapshot m;
  m.num_requests_running = 3;
  m.num_requests_waiting = 2;
  m.num_waiting_uncached_tokens = 700;
  m.num_kv_blocks_used = 10;
  m.kv_cache_usage = 0.25;
  m.prefix_cache_queries = 4000;
  m.prefix_cache_hits = 3000;
  m.generation_tokens = 500;
  return m;
}

ModelInfo info() {
  ModelInfo i;
  i.path = "/models/x.gguf";
  i.architecture = "llama";
  i.context_length = 2048;
  i.num_kv_blocks = 40;
  i.block_size = 16;
  i.max_num_seqs = 12;
  i.max_num_batched_tokens = 512;
  i.kv_dtype = "f16";
  i.enable_prefix_caching = true;
  i.weight_bytes = size_t{1} << 29;
  i.kv_cache_bytes = int64_t{1} << 28;
  return i;
}

TEST(BackendContract, WorkerLoadsCarrySglangFieldsWithEngineValues) {
  const json j = worker_loads(snapshot(), info(), LoadsSections{}, 12.5, "2026-12-02T00:00:00.000Z");
  EXPECT_EQ(j["dp_rank_count"], 1);
  EXPECT_EQ(j["timestamp"], "2026-12-02T00:00:00.000Z");
  ASSERT_EQ(j["loads"].size(), 1u);
  const json& r = j["loads"][0];
  EXPECT_EQ(r["dp_rank"], 0);
  EXPECT_EQ(r["num_running_reqs"], 3);
  EXPECT_EQ(r["num_waiting_reqs"], 2);
  EXPECT_EQ(r["num_total_reqs"], 5);
  EXPECT_EQ(r["num_waiting_uncached_tokens"], 700);
  EXPECT_EQ(r["num_used_tokens"], 160);        // 10 blocks x 16
  EXPECT_EQ(r["num_total_tokens"], 860);       // used + waiting uncached
  EXPECT_EQ(r["max_total_num_tokens"], 640);   // 40 blocks x 16
  EXPECT_EQ(r["max_running_requests"], 12);
  EXPECT_DOUBLE_EQ(r["token_usage"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(r["gen_throughput"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(r["cache_hit_rate"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(r["utilization"].get<double>(), 0.25);  // 3 of 12
  EXPECT_FALSE(r.contains("memory"));
  EXPECT_FALSE(r.contains("queues"));
  EXPECT_EQ(j["aggregate"]["total_reqs"], 5);
  EXPECT_EQ(j["aggregate"]["total_running_reqs"], 3);
}

TEST(BackendContract, IncludeTurnsOnSectionsAndIgnoresOthers) {
  const LoadsSections smg = parse_loads_include("core,disagg,queues,memory");
  EXPECT_TRUE(smg.memory);
  EXPECT_TRUE(smg.queues);
  const LoadsSections core = parse_loads_include("core, spec ,nonsense");
  EXPECT_FALSE(core.memory);
  EXPECT_FALSE(core.queues);
  EXPECT_TRUE(parse_loads_include("all").memory);
  const json j = worker_loads(snapshot(), info(), smg, 0.0, "t");
  const json& r = j["loads"][0];
  EXPECT_DOUBLE_EQ(r["memory"]["weight_gb"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["memory"]["kv_cache_gb"].get<double>(), 0.25);
  EXPECT_EQ(r["memory"]["token_capacity"], 640);
  EXPECT_EQ(r["queues"]["waiting"], 2);
  EXPECT_EQ(r["queues"]["running"], 3);
}

TEST(BackendContract, QueryParamDecodes) {
  EXPECT_EQ(query_param("model=m&include=core%2Cmemory", "include"), "core,memory");
  EXPECT_EQ(query_param("include=a+b", "include"), "a b");
  EXPECT_EQ(query_param("include", "include"), "");
  EXPECT_EQ(query_param("model=m", "include"), std::nullopt);
  EXPECT_EQ(query_param("", "include"), std::nullopt);
  EXPECT_EQ(query_param("x=%zz", "x"), "%zz");
}

TEST(BackendContract, ThroughputIsTheRateBetweenReads) {
  ThroughputMeter meter;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::seconds(100);
  EXPECT_DOUBLE_EQ(meter.update(1000, t0), 0.0);
  EXPECT_DOUBLE_EQ(meter.update(1500, t0 + std::chrono::seconds(2)), 250.0);
  EXPECT_DOUBLE_EQ(meter.update(1600, t0 + std::chrono::seconds(2)), 250.0);  // same instant: last rate
  EXPECT_DOUBLE_EQ(meter.update(1600, t0 + std::chrono::milliseconds(2900)), 250.0);  // < 1 s: last rate
  EXPECT_DOUBLE_EQ(meter.update(1500, t0 + std::chrono::seconds(12)), 0.0);   // 10 s idle after 1500
}

TEST(BackendContract, ServerInfoAndVersion) {
  const json j = server_info(snapshot(), info(), "smol", 7.5, 4);
  EXPECT_EQ(j["served_model_name"], "smol");
  EXPECT_EQ(j["max_model_len"], 2048);
  EXPECT_EQ(j["max_num_seqs"], 12);
  EXPECT_EQ(j["max_num_batched_tokens"], 512);
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_EQ(j["max_total_num_tokens"], 640);
  EXPECT_EQ(j["kv_cache_dtype"], "f16");
  EXPECT_EQ(j["active_requests"], 4);
  EXPECT_EQ(j["kv_cache_dir_enabled"], false);  // no --kv-cache-dir
  EXPECT_EQ(j["kv_cache_dir_size"], 0);
  EXPECT_DOUBLE_EQ(j["uptime_seconds"].get<double>(), 7.5);
  EXPECT_TRUE(version_info()["version"].is_string());
  EXPECT_EQ(iso8601_utc(std::chrono::system_clock::time_point{} + std::chrono::milliseconds(1764682706123)),
            "2025-12-02T13:38:26.123Z");
}

TEST(BackendContract, RequestIdOnlyWhenSafe) {
  EXPECT_EQ(safe_request_id("abc-123_x.y:z"), "abc-123_x.y:z");
  EXPECT_EQ(safe_request_id("3f2a/4b=+@"), "3f2a/4b=+@");
  EXPECT_EQ(safe_request_id(""), std::nullopt);
  EXPECT_EQ(safe_request_id("has space"), std::nullopt);
  EXPECT_EQ(safe_request_id("quote\""), std::nullopt);
  EXPECT_EQ(safe_request_id("crlf\r\nX-Evil: 1"), std::nullopt);
  EXPECT_EQ(safe_request_id(std::string(128, 'a')), std::string(128, 'a'));
  EXPECT_EQ(safe_request_id(std::string(129, 'a')), std::nullopt);
}

}  // namespace
}  // namespace tessera::server
