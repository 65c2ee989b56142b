// Issue 30, finding 5: model files that ask for huge memory. A generated corpus of hostile GGUFs
// (huge counts, huge arrays, huge hyperparameters, truncations), each of which must end in a clean
// Error from GgufFile::parse or ModelConfig::from_gguf, quickly and without allocating what the
// file asks for. The small ones are also the fuzzer's seeds (fuzz/corpus/hostile-*; regenerate
// with TESSERA_REGEN_FUZZ_CORPUS=1). Also finding 13: files that load with a warning.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>

#include "gguf/gguf_writer.h"
#include "gguf/make_test_gguf.h"
#include "model/model_config.h"
#include "model/model_warnings.h"

namespace tessera {
namespace {

using Bytes = std::vector<uint8_t>;
using gguf::testing::ByteBuilder;

// A complete one-layer llama with dim 8 (F32 weights): what ModelConfig accepts. `edit` changes
// metadata before the file is written.
Bytes tiny_llama(const std::function<void(gguf::GgufWriter&)>& edit = {}) {
  constexpr int64_t kDim = 8, kFfn = 16, kVocab = 4;
  gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_uint32("llama.block_count", 1);
  w.set_uint32("llama.embedding_length", kDim);
  w.set_uint32("llama.feed_forward_length", kFfn);
  w.set_uint32("llama.attention.head_count", 2);
  w.set_uint32("llama.attention.head_count_kv", 1);
  w.set_uint32("llama.context_length", 64);
  auto add = [&](const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const std::vector<float> v(static_cast<size_t>(n), 0.5f);
    EXPECT_TRUE(w.add_tensor_f32(name, dims, v).ok()) << name;
  };
  add("token_embd.weight", {kDim, kVocab});
  add("output_norm.weight", {kDim});
  add("blk.0.attn_norm.weight", {kDim});
  add("blk.0.ffn_norm.weight", {kDim});
  add("blk.0.attn_q.weight", {kDim, kDim});
  add("blk.0.attn_k.weight", {kDim, kDim / 2});
  add("blk.0.attn_v.weight", {kDim, kDim / 2});
  add("blk.0.attn_output.weight", {kDim, kDim});
  add("blk.0.ffn_gate.weight", {kDim, kFfn});
  add("blk.0.ffn_up.weight", {kDim, kFfn});
  add("blk.0.ffn_down.weight", {kFfn, kDim});
  if (edit) edit(w);
  return w.to_bytes().value();
}

// The small hostile files, by name (each also a fuzz seed).
std::vector<std::pair<std::string, Bytes>> hostile_files() {
  std::vector<std::pair<std::string, Bytes>> files;
  auto hyper = [&](const std::string& name, const std::string& key, uint64_t value) {
    files.emplace_back("hostile-" + name, tiny_llama([&](gguf::GgufWriter& w) { w.set_uint64(key, value); }));
  };
  hyper("block-count-2e24", "llama.block_count", uint64_t{1} << 24);
  hyper("block-count-2", "llama.block_count", 2);
  hyper("embedding-length-2e24", "llama.embedding_length", uint64_t{1} << 24);
  hyper("ffn-length-2e24", "llama.feed_forward_length", uint64_t{1} << 24);
  hyper("head-count-2e20", "llama.attention.head_count", uint64_t{1} << 20);
  hyper("key-length-2e30", "llama.attention.key_length", uint64_t{1} << 30);
  hyper("context-length-2e40", "llama.context_length", uint64_t{1} << 40);
  // Headers whose counts claim more than any file could hold.
  files.emplace_back("hostile-tensor-count-2e60", ByteBuilder().header(3, uint64_t{1} << 60, 0).bytes);
  files.emplace_back("hostile-kv-count-2e60", ByteBuilder().header(3, 0, uint64_t{1} << 60).bytes);
  // One uint8 array of 2^40 items, and one of 2^20 items in a file that has 16 bytes of them.
  files.emplace_back("hostile-array-2e40",
                     ByteBuilder().header(3, 0, 1).str("a").u32(9).u32(0).u64(uint64_t{1} << 40).u64(0).u64(0).bytes);
  files.emplace_back("hostile-array-truncated",
                     ByteBuilder().header(3, 0, 1).str("a").u32(9).u32(0).u64(uint64_t{1} << 20).u64(0).u64(0).bytes);
  files.emplace_back("hostile-string-2e62",
                     ByteBuilder().header(3, 0, 1).str("s").u32(8).u64(uint64_t{1} << 62).u64(0).bytes);
  // Nested arrays: 4 levels of 2^16 (only the first item is present).
  ByteBuilder nested;
  nested.header(3, 0, 1).str("n").u32(9);
  for (int i = 0; i < 3; ++i) nested.u32(9).u64(uint64_t{1} << 16);
  nested.u32(0).u64(uint64_t{1} << 16).u64(0);
  files.emplace_back("hostile-nested-arrays", nested.bytes);
  return files;
}

// Parse, then (if the GGUF layer accepts it) the model config: one of them must refuse.
Status load_config(const Bytes& bytes) {
  auto g = gguf::testing::parse_bytes(bytes);
  if (!g.ok()) return g.error();
  auto c = ModelConfig::from_gguf(*g);
  if (!c.ok()) return c.error();
  return ok_status();
}

int64_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

TEST(HostileGguf, TinyLlamaIsAccepted) {
  // The base of the corpus is a valid model: each hostile file fails for its one edit.
  EXPECT_TRUE(load_config(tiny_llama()).ok());
}

TEST(HostileGguf, EveryCorpusFileEndsInACleanErrorQuickly) {
  for (const auto& [name, bytes] : hostile_files()) {
    SCOPED_TRACE(name);
    const auto start = std::chrono::steady_clock::now();
    const Status s = load_config(bytes);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_FALSE(s.ok());
    EXPECT_FALSE(s.error().message.empty());
    std::printf("%s: %s\n", name.c_str(), s.error().message.c_str());
    EXPECT_LT(seconds, 5.0);
  }
}

TEST(HostileGguf, EveryTruncationOfTheTinyModelIsAnError) {
  const Bytes full = tiny_llama();
  for (size_t len = 0; len < full.size(); len += 7) {
    const Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_FALSE(load_config(cut).ok()) << "truncated at " << len;
  }
}

// The reproducer: a 32 MiB file holding one uint8 array of 32 Mi items decoded to ~48 bytes
// each (1.54 GiB peak). Now refused before the array is allocated: peak RSS grows by less than
// twice the file size.
TEST(HostileGguf, HugeUint8ArrayIsRefusedWithinTwiceTheFileSize) {
  constexpr uint64_t kItems = uint64_t{32} << 20;
  ByteBuilder b;
  b.header(3, 0, 1).str("tokenizer.ggml.token_type").u32(9).u32(0).u64(kItems);
  b.bytes.resize(b.bytes.size() + kItems, 1);
  const int64_t before = peak_rss_bytes();
  const Status s = load_config(b.bytes);
  const int64_t grown = peak_rss_bytes() - before;
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("more than"), std::string::npos) << s.error().message;
  EXPECT_LT(grown, 2 * static_cast<int64_t>(b.bytes.size())) << "peak RSS grew by " << grown;
}

TEST(HostileGguf, FuzzSeedsAreCurrent) {
  const bool regen = std::getenv("TESSERA_REGEN_FUZZ_CORPUS") != nullptr;
  for (const auto& [name, bytes] : hostile_files()) {
    SCOPED_TRACE(name);
    EXPECT_LT(bytes.size(), 4096u);
    const std::string path = std::string(TESSERA_FUZZ_CORPUS_DIR) + "/" + name;
    if (regen) {
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                  static_cast<std::streamsize>(bytes.size()));
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in.good()) << "missing " << path;
    const Bytes committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(committed, bytes);
  }
}

// Issue 30, finding 13: legal but suspicious files load with a warning (model/model_warnings.h).
std::vector<std::string> warnings_of(const Bytes& bytes) {
  auto g = gguf::testing::parse_bytes(bytes);
  EXPECT_TRUE(g.ok());
  auto c = ModelConfig::from_gguf(*g);
  EXPECT_TRUE(c.ok());
  return model_file_warnings(*g, *c);
}

TEST(ModelFileWarnings, SmallVocabularyAndAFileTypeNoMatrixHas) {
  auto with = [](std::vector<std::string> tokens, uint32_t file_type) {
    return tiny_llama([&](gguf::GgufWriter& w) {
      w.set_string_array("tokenizer.ggml.tokens", tokens);
      w.set_uint32("general.file_type", file_type);
    });
  };
  EXPECT_TRUE(warnings_of(with({"a", "b", "c", "d"}, 0)).empty());  // 4 tokens, 4 rows, all F32
  EXPECT_TRUE(warnings_of(tiny_llama()).empty());                    // neither key: nothing to compare
  EXPECT_TRUE(warnings_of(with({"a", "b", "c", "d"}, 99)).empty());  // a file type this check does not know
  EXPECT_EQ(warnings_of(with({"a", "b"}, 2)),
            (std::vector<std::string>{"the vocabulary has 2 tokens but token_embd.weight has 4 rows: ids 2..3 have no text",
                                      "general.file_type 2 says the weights are Q4_0, but no layer matrix is (7 F32)"}));
  EXPECT_EQ(warnings_of(with({"a", "b", "c", "d", "e"}, 15)),  // more tokens than rows is not this warning
            (std::vector<std::string>{"general.file_type 15 says the weights are Q4_K, but no layer matrix is (7 F32)"}));
}

}  // namespace
}  // namespace tessera
