// derive_engine_configs (engine/engine_config.h), the one source of the inner configs: the token
// budget derived when EngineConfig leaves it 0 (issue 30, finding 13: `tessera run
// --no-chunked-prefill` failed out of the box with "max_num_batched_tokens (2048) must be >=
// max_model_len (8192)").
#include <gtest/gtest.h>

#include "engine/engine_config.h"

namespace tessera {
namespace {

// A llama shape with a 32k trained context (max_model_len defaults to 8192 of it).
ModelConfig model_32k() {
  ModelConfig m;
  m.architecture = "llama";
  m.num_layers = 2;
  m.dim = 64;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.vocab_size = 100;
  m.context_length = 32768;
  return m;
}

Result<EngineConfigs> derive(EngineConfig c) {
  c.kv_cache_bytes = int64_t{64} << 20;
  return derive_engine_configs(c, model_32k(), 0);
}

TEST(EngineConfig, TokenBudgetIsDerivedFromChunkedPrefillAndMaxModelLen) {
  EngineConfig c;
  ASSERT_EQ(c.max_num_batched_tokens, 0);
  auto d = derive(c);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->max_model_len, 8192);
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 512);
  EXPECT_EQ(d->runner.max_num_batched_tokens, 512);

  c.enable_chunked_prefill = false;  // the whole prompt in one step: the budget is max_model_len
  d = derive(c);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 8192);
  EXPECT_EQ(d->runner.max_num_batched_tokens, 8192);
  EXPECT_EQ(d->spec.draft.max_num_batched_tokens, 8192);

  c.max_model_len = 300;  // never below the chunked default
  d = derive(c);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 512);
}

TEST(EngineConfig, AGivenTokenBudgetIsKeptAndChecked) {
  EngineConfig c;
  c.max_num_batched_tokens = 2048;
  auto d = derive(c);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 2048);
  c.enable_chunked_prefill = false;  // a budget the user chose that cannot hold a whole prompt
  d = derive(c);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("max_num_batched_tokens (2048) must be >= max_model_len (8192)"), std::string::npos)
      << d.error().message;
}

TEST(EngineConfig, LoraDtypeIsAutoF16OrF32) {
  EngineConfig c;
  for (const char* ok : {"auto", "f16", "f32"}) {
    c.lora_dtype = ok;
    EXPECT_TRUE(validate_engine_config(c).ok()) << ok;
  }
  c.lora_dtype = "bf16";
  const Status s = validate_engine_config(c);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "lora_dtype 'bf16' must be auto, f16 or f32");
}

}  // namespace
}  // namespace tessera
