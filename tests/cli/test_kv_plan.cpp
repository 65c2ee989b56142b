// KvPlan: the seed's figures (Llama-2-13B ~0.78 MB/token, ~35 concurrent 2,048-token requests on an
// 80 GB GPU after 26 GB of fp16 weights, 5x fewer KV heads ~ 5x concurrency) and the CLI parsing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/kv_plan_flags.h"
#include "util/byte_size.h"
#include "util/kv_dtype.h"

namespace tessera::cli {

using kv::compute_kv_plan;
using kv::KvPlan;
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

KvPlan plan_for(const std::vector<std::string>& args) {
  bool json = false;
  auto input = parse_kv_plan_args(args, &json);
  EXPECT_TRUE(input.ok()) << (input.ok() ? "" : input.error().message);
  auto plan = compute_kv_plan(*input);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().message);
  return *plan;
}

TEST(KvPlan, Llama2_13bMatchesTheSeed) {
  const KvPlan p = plan_for({"--preset", "llama-2-13b", "--memory", "80GiB", "--context", "2048"});
  EXPECT_EQ(p.bytes_per_token, 819200);  // 2 x 40 x 40 x 128 x 2
  EXPECT_NEAR(static_cast<double>(p.bytes_per_token) / (1 << 20), 0.78, 0.005);  // MiB per token
  EXPECT_EQ(p.input.weight_bytes, 26040000000);  // 13.02e9 params x 2 bytes: "26 GB"
  EXPECT_EQ(p.kv_budget_bytes, 80 * kGiB - 26040000000);
  EXPECT_EQ(p.num_blocks, 4566);
  EXPECT_EQ(p.blocks_per_request, 128);
  EXPECT_EQ(p.max_concurrency, 35);
  EXPECT_NEAR(p.max_concurrency_exact, 35.68, 0.01);
  // The same with the weights given as 26 GiB: 34.56, still "about 35".
  const KvPlan q = plan_for({"--preset", "llama-2-13b", "--memory", "80GiB", "--weights", "26GiB",
                             "--context", "2048"});
  EXPECT_EQ(q.kv_budget_bytes, 54 * kGiB);
  EXPECT_NEAR(q.max_concurrency_exact, 34.56, 0.01);
  EXPECT_EQ(q.max_concurrency, 34);
}

TEST(KvPlan, GqaFiveTimesFewerKvHeadsGivesFiveTimesTheConcurrency) {
  const KvPlan mha = plan_for({"--layers", "40", "--kv-heads", "40", "--head-dim", "128",
                               "--memory", "80GiB", "--weights", "26GiB", "--context", "2048"});
  const KvPlan gqa = plan_for({"--layers", "40", "--kv-heads", "8", "--head-dim", "128",
                               "--memory", "80GiB", "--weights", "26GiB", "--context", "2048"});
  const KvPlan mqa = plan_for({"--layers", "40", "--kv-heads", "1", "--head-dim", "128",
                               "--memory", "80GiB", "--weights", "26GiB", "--context", "2048"});
  EXPECT_EQ(mha.bytes_per_token, 5 * gqa.bytes_per_token);
  EXPECT_EQ(mha.bytes_per_token, 40 * mqa.bytes_per_token);
  EXPECT_NEAR(gqa.max_concurrency_exact, 5 * mha.max_concurrency_exact, 1e-9);
  EXPECT_EQ(mha.max_concurrency, 34);
  EXPECT_EQ(gqa.max_concurrency, 172);  // 22118 blocks / 128
  EXPECT_EQ(mqa.max_concurrency, 1382);
}

TEST(KvPlan, PagedVersusContiguousReservation) {
  // Requests use 500 of 2,048 reserved tokens: contiguous wastes 75.6 %, paged < 1 block each.
  const KvPlan p = plan_for({"--preset", "llama-2-13b", "--memory", "80GiB", "--context", "2048",
                             "--avg-tokens", "500"});
  EXPECT_EQ(p.contiguous_concurrency, 35);
  EXPECT_NEAR(p.contiguous_waste, 1.0 - 500.0 / 2048, 1e-12);
  EXPECT_EQ(p.paged_concurrency, 4566 / 32);  // ceil(500 / 16) = 32 blocks each
  EXPECT_NEAR(p.paged_waste, 12.0 / 512, 1e-12);
  EXPECT_GE(p.paged_concurrency, 4 * p.contiguous_concurrency);
}

TEST(KvPlan, PresetsAndDtypes) {
  EXPECT_EQ(kv_model_presets().size(), 8u);
  EXPECT_EQ(plan_for({"--preset", "Llama-3-8B", "--memory", "24GB"}).bytes_per_token, 131072);
  EXPECT_EQ(plan_for({"--preset", "llama-2-7b", "--memory", "24GB"}).bytes_per_token, 524288);
  EXPECT_EQ(plan_for({"--preset", "llama-2-70b", "--memory", "160GB"}).bytes_per_token, 327680);
  EXPECT_EQ(plan_for({"--preset", "mistral-7b", "--memory", "24GB"}).bytes_per_token, 131072);
  EXPECT_EQ(plan_for({"--preset", "smollm2-135m", "--memory", "1GB"}).bytes_per_token, 23040);
  EXPECT_EQ(plan_for({"--preset", "tinyllama-1.1b", "--memory", "4GB"}).bytes_per_token, 22528);
  EXPECT_EQ(plan_for({"--preset", "llama-3-8b", "--memory", "24GB", "--kv-dtype", "f32"})
                .bytes_per_token, 262144);
  // q8 as the engine stores it (`serve --kv-dtype q8`): 128 int8 + one f32 scale per row.
  EXPECT_EQ(plan_for({"--preset", "llama-3-8b", "--memory", "24GB", "--kv-dtype", "q8"})
                .bytes_per_token, 2 * 32 * 8 * 132);
}

TEST(KvPlan, JsonHasTheScriptedFields) {
  const KvPlan p = plan_for({"--preset", "llama-2-13b", "--memory", "80GiB", "--context", "2048"});
  const auto j = nlohmann::json::parse(render_kv_plan_json(p));
  EXPECT_EQ(j.at("bytes_per_token").get<int64_t>(), 819200);
  EXPECT_EQ(j.at("num_blocks").get<int64_t>(), 4566);
  EXPECT_EQ(j.at("max_concurrency").get<int64_t>(), 35);
  const std::string table = render_kv_plan_table(p);
  EXPECT_NE(table.find("819200"), std::string::npos);
  EXPECT_NE(table.find("35 requests of 2048 tokens"), std::string::npos);
  EXPECT_NE(table.find("contiguous"), std::string::npos);
}

TEST(KvPlan, BadInputIsAnError) {
  bool json = false;
  EXPECT_FALSE(parse_kv_plan_args({"--preset", "gpt-9"}, &json).ok());
  EXPECT_FALSE(parse_kv_plan_args({"--layers", "4"}, &json).ok());
  EXPECT_FALSE(parse_kv_plan_args({"--preset", "llama-2-7b", "--memory", "12XB"}, &json).ok());
  EXPECT_FALSE(parse_kv_plan_args({"--preset", "llama-2-7b", "--kv-dtype", "f13"}, &json).ok());
  // One KV dtype parser for every command: the engine's names only (no GGUF weight types).
  EXPECT_FALSE(parse_kv_plan_args({"--preset", "llama-2-7b", "--kv-dtype", "q8_0"}, &json).ok());
  EXPECT_FALSE(parse_kv_dtype("bf16").ok());
  EXPECT_EQ(*parse_kv_dtype("q8"), KvDType::kQ8);
  EXPECT_EQ(*parse_kv_dtype("f32"), KvDType::kF32);
  EXPECT_EQ(*parse_kv_dtype("f16"), KvDType::kF16);
  auto in = parse_kv_plan_args({"--preset", "llama-2-70b", "--memory", "80GB", "--json"}, &json);
  ASSERT_TRUE(in.ok());
  EXPECT_TRUE(json);
  auto plan = compute_kv_plan(*in);  // 138 GB of weights do not fit in 80 GiB
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::kOutOfRange);
}

TEST(KvPlan, ByteSizesUseTheSharedParser) {
  // util/byte_size.h: GiB = 2^30, GB = 10^9 (an "80 GB" A100 holds 80 GiB, so the tests say GiB).
  EXPECT_EQ(*parse_byte_size("80GB"), 80000000000);
  EXPECT_EQ(*parse_byte_size("80GiB"), 80 * kGiB);
  EXPECT_EQ(*parse_byte_size("512m"), 512 << 20);
  EXPECT_EQ(*parse_byte_size("1.5G"), 3 * kGiB / 2);
  EXPECT_EQ(*parse_byte_size("1234"), 1234);
  EXPECT_FALSE(parse_byte_size("lots").ok());
  // --memory 80GB is decimal: 80e9 - 26.04e9 of weights = 53.96e9 bytes of KV, 32.16 requests.
  const KvPlan p = plan_for({"--preset", "llama-2-13b", "--memory", "80GB", "--context", "2048"});
  EXPECT_EQ(p.kv_budget_bytes, 80000000000 - 26040000000);
  EXPECT_EQ(p.max_concurrency, 32);
}

// Gemma-3-270M's shape (18 layers, 15 with a 512-token window, 1 KV head x 256, f16) at 8,192
// tokens: a local layer holds at most ceil(511 / 16) + 1 = 33 of the 512 blocks once the blocks
// before its window are freed.
TEST(KvPlan, SlidingWindowLayersCountedPerLayerType) {
  const std::vector<std::string> shape = {"--layers", "18", "--kv-heads", "1", "--head-dim", "256", "--heads", "4",
                                          "--local-layers", "15", "--window", "512", "--context", "8192"};
  const KvPlan p = plan_for(shape);  // no --memory: bytes only
  EXPECT_FALSE(p.has_budget);
  EXPECT_EQ(p.bytes_per_token, 18432);
  EXPECT_EQ(p.bytes_per_token_global, 3072);
  EXPECT_EQ(p.bytes_per_token_local, 15360);
  EXPECT_EQ(p.blocks_per_request, 512);
  EXPECT_EQ(p.local_blocks_per_request, 33);
  EXPECT_EQ(p.bytes_per_sequence_kept, 150994944);
  EXPECT_EQ(p.bytes_per_sequence_freed, 16 * (3072 * 512 + 15360 * 33));  // 33275904: 4.54x less
  EXPECT_EQ(p.num_kv_cache_groups, 6);  // the engine's layout: 1 full + 5 sliding groups of 3 layers
  EXPECT_EQ(p.layers_per_block, 3);
  const std::string table = render_kv_plan_table(p);
  EXPECT_NE(table.find("with windows freed"), std::string::npos) << table;
  EXPECT_NE(table.find("no --memory"), std::string::npos) << table;

  std::vector<std::string> budget = shape;
  budget.insert(budget.end(), {"--memory", "1GiB", "--weights", "0"});
  const KvPlan q = plan_for(budget);
  EXPECT_EQ(q.max_concurrency, 7);               // 3640 blocks / 512
  EXPECT_EQ(q.concurrency_windows_freed, 32);    // 1 GiB / 33275904 bytes
  EXPECT_GE(q.concurrency_windows_freed, 4 * q.max_concurrency);
  // Gemma-3-1B's shape (26 layers, 22 local): groups of 4 layers, the sixth local group holds 2 and
  // its blocks carry 2 unused layer slots, which the engine allocates: 1 x 512 + 6 x 33 blocks of 4
  // layers (16 tokens x 1 KV head x 256 x f16 x K and V = 16 KiB a layer).
  const KvPlan g1 = plan_for({"--layers", "26", "--kv-heads", "1", "--head-dim", "256", "--local-layers", "22",
                              "--window", "512", "--context", "8192"});
  EXPECT_EQ(g1.num_kv_cache_groups, 7);
  EXPECT_EQ(g1.layers_per_block, 4);
  EXPECT_EQ(g1.bytes_per_sequence_freed, int64_t{16384} * 4 * (512 + 6 * 33));
  // A window on every layer but no window size (or the reverse) is an input error.
  bool json = false;
  auto bad = parse_kv_plan_args({"--layers", "4", "--kv-heads", "1", "--head-dim", "64", "--local-layers", "2",
                                 "--context", "100"}, &json);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(compute_kv_plan(*bad).ok());
}

}  // namespace
}  // namespace tessera::cli
