// The engine flags read --kv-cache through util/byte_size.h, the same parser as `tessera kv-plan`:
// GiB = 2^30, GB = 10^9, bare G = 2^30, and bad sizes are refused with the parser's message.
#include <gtest/gtest.h>

#include "cli/engine_flags.h"

namespace tessera::cli {
namespace {

// Parses `--kv-cache TEXT` as `tessera serve` does; returns finish_engine_flags' error text.
std::string kv_cache(const std::string& text, int64_t* bytes) {
  CLI::App app;
  EngineConfig config;
  std::string kv_text;
  add_engine_flags(app, config, kv_text);
  app.parse(std::vector<std::string>{text, "--kv-cache"});  // CLI11 takes the arguments reversed
  config.model_path = "unused.gguf";                          // skip the default-model search
  const std::string error = finish_engine_flags(config, kv_text);
  *bytes = config.kv_cache_bytes;
  return error;
}

TEST(EngineFlags, KvCacheSizesHaveOneMeaning) {
  int64_t bytes = 0;
  EXPECT_EQ(kv_cache("512MiB", &bytes), "");
  EXPECT_EQ(bytes, 536870912);
  EXPECT_EQ(kv_cache("2GB", &bytes), "");
  EXPECT_EQ(bytes, 2000000000);
  EXPECT_EQ(kv_cache("2GiB", &bytes), "");
  EXPECT_EQ(bytes, 2147483648);
  EXPECT_EQ(kv_cache("1g", &bytes), "");
  EXPECT_EQ(bytes, 1073741824);
  EXPECT_NE(kv_cache("12XB", &bytes).find("unknown size unit in '12XB'"), std::string::npos);
  EXPECT_NE(kv_cache("0", &bytes).find("more than 0 bytes"), std::string::npos);
}

}  // namespace
}  // namespace tessera::cli
