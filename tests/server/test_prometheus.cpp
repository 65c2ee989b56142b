// Prometheus text rendering: exact lines for gauges, counters and cumulative histogram buckets.
#include <gtest/gtest.h>

#include "server/prometheus.h"

namespace tessera::server {
namespace {

TEST(Prometheus, RendersGaugesCountersAndCumulativeBuckets) {
  MetricsSnapshot m;
  m.num_requests_running = 3;
  m.num_requests_waiting = 2;
  m.kv_cache_usage = 0.25;
  m.prompt_tokens = 120;
  m.spec_accepted_per_position = {5, 2};
  m.time_to_first_token = Histogram::with_bounds({0.1, 1.0});
  m.time_to_first_token.observe(0.05);
  m.time_to_first_token.observe(0.5);
  m.time_to_first_token.observe(0.7);
  m.time_to_first_token.observe(3.0);
  ServerCounters s;
  s.num_client_disconnects = 4;
  const std::string text = render_prometheus(m, s, "smol\"lm");
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("# TYPE tessera:num_requests_running gauge"));
  EXPECT_TRUE(has("tessera:num_requests_running{model_name=\"smol\\\"lm\"} 3"));
  EXPECT_TRUE(has("tessera:num_requests_waiting{model_name=\"smol\\\"lm\"} 2"));
  EXPECT_TRUE(has("tessera:kv_cache_usage_perc{model_name=\"smol\\\"lm\"} 0.25"));
  EXPECT_TRUE(has("# TYPE tessera:prompt_tokens_total counter"));
  EXPECT_TRUE(has("tessera:prompt_tokens_total{model_name=\"smol\\\"lm\"} 120"));
  EXPECT_TRUE(has("tessera:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"smol\\\"lm\",position=\"1\"} 2"));
  EXPECT_TRUE(has("# TYPE tessera:time_to_first_token_seconds histogram"));
  EXPECT_TRUE(has("tessera:time_to_first_token_seconds_bucket{model_name=\"smol\\\"lm\",le=\"0.1\"} 1"));
  EXPECT_TRUE(has("tessera:time_to_first_token_seconds_bucket{model_name=\"smol\\\"lm\",le=\"1\"} 3"));
  EXPECT_TRUE(has("tessera:time_to_first_token_seconds_bucket{model_name=\"smol\\\"lm\",le=\"+Inf\"} 4"));
  EXPECT_TRUE(has("tessera:time_to_first_token_seconds_sum{model_name=\"smol\\\"lm\"} 4.25"));
  EXPECT_TRUE(has("tessera:time_to_first_token_seconds_count{model_name=\"smol\\\"lm\"} 4"));
  EXPECT_TRUE(has("tessera:client_disconnects_total{model_name=\"smol\\\"lm\"} 4"));
  EXPECT_EQ(escape_label_value("a\\b\nc"), "a\\\\b\\nc");
}

TEST(Prometheus, RendersTheKvDiskTierOnlyWhenConfigured) {
  MetricsSnapshot m;
  ServerCounters s;
  EXPECT_EQ(render_prometheus(m, s, "m").find("kv_disk"), std::string::npos);  // no --kv-cache-dir
  m.disk_tier_enabled = true;
  m.disk_hit_tokens = 4080;
  m.disk_corrupt_blocks = 2;
  m.disk_read_seconds = Histogram::with_bounds({1e-4, 1e-3});
  m.disk_read_seconds.observe(5e-4);
  m.disk_write_seconds = Histogram::with_bounds({1e-4, 1e-3});
  const std::string text = render_prometheus(m, s, "m");
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("tessera:kv_disk_enabled{model_name=\"m\"} 1"));
  EXPECT_TRUE(has("tessera:kv_disk_hit_tokens_total{model_name=\"m\"} 4080"));
  EXPECT_TRUE(has("tessera:kv_disk_corrupt_blocks_total{model_name=\"m\"} 2"));
  EXPECT_TRUE(has("tessera:kv_disk_read_seconds_bucket{model_name=\"m\",le=\"0.001\"} 1"));
  EXPECT_TRUE(has("tessera:kv_disk_read_seconds_count{model_name=\"m\"} 1"));
}

TEST(Prometheus, RendersTheSeriesRoutersReadUnderVllmNames) {
  MetricsSnapshot m;
  m.num_requests_running = 3;
  m.num_requests_waiting = 2;
  m.kv_cache_usage = 0.25;
  m.prefix_cache_queries = 4000;
  m.prefix_cache_hits = 3000;
  ModelInfo info;
  info.block_size = 16;
  info.num_kv_blocks = 40;
  info.kv_dtype = "q8";
  info.enable_prefix_caching = true;
  const std::string text = render_vllm_compatible(m, info, "smol");
  auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
  EXPECT_TRUE(has("# TYPE vllm:num_requests_running gauge"));
  EXPECT_TRUE(has("vllm:num_requests_running{model_name=\"smol\"} 3"));
  EXPECT_TRUE(has("# TYPE vllm:num_requests_waiting gauge"));
  EXPECT_TRUE(has("vllm:num_requests_waiting{model_name=\"smol\"} 2"));
  EXPECT_TRUE(has("# TYPE vllm:kv_cache_usage_perc gauge"));
  EXPECT_TRUE(has("vllm:kv_cache_usage_perc{model_name=\"smol\"} 0.25"));
  EXPECT_TRUE(has("# TYPE vllm:prefix_cache_queries_total counter"));
  EXPECT_TRUE(has("vllm:prefix_cache_queries_total{model_name=\"smol\"} 4000"));
  EXPECT_TRUE(has("# TYPE vllm:prefix_cache_hits_total counter"));
  EXPECT_TRUE(has("vllm:prefix_cache_hits_total{model_name=\"smol\"} 3000"));
  EXPECT_TRUE(has("# TYPE vllm:cache_config_info gauge"));
  EXPECT_TRUE(has("vllm:cache_config_info{model_name=\"smol\",block_size=\"16\",num_gpu_blocks=\"40\","
                  "cache_dtype=\"q8\",enable_prefix_caching=\"True\"} 1"));
}

}  // namespace
}  // namespace tessera::server
