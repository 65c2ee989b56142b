// The reader on the real test-data files: stories260K (a trained llama model, 48 F32 tensors) and
// the vocab-only tokenizer files. Expected values were read with an independent Python decoder of
// the GGUF layout, not with this reader.
#include <gtest/gtest.h>

#include <cstring>

#include "make_test_gguf.h"

namespace tessera::gguf {
namespace {

const std::string kModels = TESSERA_TESTDATA_DIR "/models/";
const std::string kTokenizers = TESSERA_TESTDATA_DIR "/tokenizer/";

uint32_t f32_bits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  return bits;
}

TEST(GgufFiles, Stories260K) {
  auto r = GgufFile::open(kModels + "stories260K.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.alignment(), 32u);
  EXPECT_EQ(g.file_size(), 1185376u);
  EXPECT_EQ(g.data_offset(), 14176u);  // header ends at 14152
  ASSERT_EQ(g.metadata().size(), 19u);
  EXPECT_EQ(g.metadata().front().first, "tokenizer.ggml.tokens");
  EXPECT_EQ(g.metadata().back().first, "llama.attention.layer_norm_rms_epsilon");

  EXPECT_EQ(g.get_string("general.architecture").value(), "llama");
  EXPECT_EQ(g.get_string("general.name").value(), "llama");
  EXPECT_EQ(g.get_string("tokenizer.ggml.model").value(), "llama");
  EXPECT_EQ(g.get_uint("llama.context_length").value(), 2048u);
  EXPECT_EQ(g.get_uint("llama.embedding_length").value(), 64u);
  EXPECT_EQ(g.get_uint("llama.feed_forward_length").value(), 172u);
  EXPECT_EQ(g.get_uint("llama.attention.head_count").value(), 8u);
  EXPECT_EQ(g.get_uint("llama.attention.head_count_kv").value(), 4u);
  EXPECT_EQ(g.get_uint("llama.block_count").value(), 5u);
  EXPECT_EQ(g.get_uint("llama.rope.dimension_count").value(), 8u);
  EXPECT_EQ(g.find("llama.block_count")->type, ValueType::kUint32);
  EXPECT_EQ(g.get_float("llama.attention.layer_norm_rms_epsilon").value(), static_cast<double>(1e-5f));
  EXPECT_EQ(g.find("llama.attention.layer_norm_rms_epsilon")->type, ValueType::kFloat32);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.unknown_token_id").value(), 0u);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.bos_token_id").value(), 1u);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.eos_token_id").value(), 2u);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.padding_token_id").value(), 4294967295u);

  const auto tokens = g.get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[510], "~");
  EXPECT_EQ(tokens[511], "\xe2\x80\x8a");  // U+200A hair space
  const auto scores = g.get_float_array("tokenizer.ggml.scores").value();
  ASSERT_EQ(scores.size(), 512u);
  EXPECT_EQ(scores[0], 0.0f);
  EXPECT_EQ(scores[511], -252.0f);
  const auto types = g.get_int_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(types[511], 1);

  ASSERT_EQ(g.tensors().size(), 48u);
  const TensorInfo& embd = g.tensors()[0];
  EXPECT_EQ(embd.name, "token_embd.weight");
  EXPECT_EQ(embd.dims, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd.type, DType::F32);
  EXPECT_EQ(embd.offset, 0u);
  EXPECT_EQ(embd.num_bytes, 131072u);
  EXPECT_EQ(embd.rows(), 512);
  EXPECT_EQ(f32_bits(embd.data), 0xbe96e950u);
  EXPECT_EQ(f32_bits(embd.data + 4), 0x3f0fd864u);
  const TensorInfo* norm = g.find_tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->offset, 131072u);
  EXPECT_EQ(f32_bits(norm->data), 0x401d54efu);
  const TensorInfo* down = g.find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->dims, (std::vector<int64_t>{172, 64}));
  EXPECT_EQ(down->offset, 355840u);
  const TensorInfo* k4 = g.find_tensor("blk.4.attn_k.weight");
  ASSERT_NE(k4, nullptr);
  EXPECT_EQ(k4->dims, (std::vector<int64_t>{64, 32}));
  const TensorInfo& last = g.tensors().back();
  EXPECT_EQ(last.name, "blk.4.ffn_norm.weight");
  EXPECT_EQ(last.offset, 1170944u);
  EXPECT_EQ(g.data_offset() + last.offset + last.num_bytes, g.file_size());
  EXPECT_EQ(f32_bits(last.data + 63 * 4), 0x3f9dfc45u);
  EXPECT_EQ(g.find_tensor("blk.5.attn_q.weight"), nullptr);

  int64_t num_params = 0;
  for (const TensorInfo& t : g.tensors()) num_params += t.num_elements;
  EXPECT_EQ(num_params, 292800);  // (1185376 - 14176) / 4
  EXPECT_GT(testing::touch_everything(g), 0u);
}

TEST(GgufFiles, VocabGpt2) {
  auto r = GgufFile::open(kTokenizers + "ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.tensors().size(), 0u);
  ASSERT_EQ(g.metadata().size(), 16u);
  EXPECT_EQ(g.get_string("general.architecture").value(), "gpt2");
  EXPECT_EQ(g.get_string("general.name").value(), "gpt-2");
  EXPECT_EQ(g.get_uint("gpt2.block_count").value(), 12u);
  EXPECT_EQ(g.get_uint("gpt2.context_length").value(), 1024u);
  EXPECT_EQ(g.get_uint("gpt2.embedding_length").value(), 768u);
  EXPECT_EQ(g.get_uint("gpt2.feed_forward_length").value(), 3072u);
  EXPECT_EQ(g.get_uint("gpt2.attention.head_count").value(), 12u);
  EXPECT_EQ(g.get_float("gpt2.attention.layer_norm_epsilon").value(), static_cast<double>(1e-5f));
  EXPECT_EQ(g.get_uint("general.file_type").value(), 1u);
  EXPECT_EQ(g.get_string("tokenizer.ggml.model").value(), "gpt2");
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre").value(), "gpt-2");
  EXPECT_EQ(g.get_uint("tokenizer.ggml.bos_token_id").value(), 50256u);
  EXPECT_EQ(g.get_uint("tokenizer.ggml.eos_token_id").value(), 50256u);

  const auto tokens = g.get_string_array("tokenizer.ggml.tokens").value();
  ASSERT_EQ(tokens.size(), 50257u);
  EXPECT_EQ(tokens[0], "!");
  EXPECT_EQ(tokens[4], "%");
  EXPECT_EQ(tokens[50255], "\xc4\xa0gazed");  // "Ġgazed"
  EXPECT_EQ(tokens[50256], "<|endoftext|>");
  const auto types = g.get_int_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(types.size(), 50257u);
  EXPECT_EQ(types[0], 1);
  EXPECT_EQ(types[50256], 3);
  const auto merges = g.get_string_array("tokenizer.ggml.merges").value();
  ASSERT_EQ(merges.size(), 50000u);
  EXPECT_EQ(merges[0], "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(merges[2], "h e");
  EXPECT_EQ(merges[49999], "\xc4\xa0g azed");
}

TEST(GgufFiles, VocabLlamaSpm) {
  auto r = GgufFile::open(kTokenizers + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  ASSERT_EQ(g.metadata().size(), 22u);
  EXPECT_EQ(g.get_string("general.name").value(), "llama-spm");
  EXPECT_EQ(g.get_uint("llama.vocab_size").value(), 32000u);
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre").value(), "default");
  EXPECT_EQ(g.get_bool("tokenizer.ggml.add_bos_token").value(), true);
  EXPECT_EQ(g.get_bool("tokenizer.ggml.add_eos_token").value(), false);
  const auto scores = g.get_float_array("tokenizer.ggml.scores").value();
  ASSERT_EQ(scores.size(), 32000u);
  EXPECT_EQ(scores[31999], -31740.0f);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens").value()[31999], "\xe7\xbb\x99");  // 给
}

TEST(GgufFiles, VocabStarcoder) {
  auto r = GgufFile::open(kTokenizers + "ggml-vocab-starcoder.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const GgufFile& g = *r;
  ASSERT_EQ(g.metadata().size(), 19u);
  EXPECT_EQ(g.get_string("general.architecture").value(), "starcoder2");
  EXPECT_EQ(g.get_string("tokenizer.ggml.pre").value(), "starcoder");
  EXPECT_EQ(g.get_uint("starcoder2.attention.head_count_kv").value(), 2u);
  EXPECT_EQ(g.get_float("starcoder2.rope.freq_base").value(), 999999.4375);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.tokens").value().size(), 49152u);
  EXPECT_EQ(g.get_string_array("tokenizer.ggml.merges").value().size(), 48872u);
}

TEST(GgufFiles, MissingFileIsNotFound) {
  auto r = GgufFile::open(kModels + "no-such-model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

// The real model survives a write through GgufWriter: every value and tensor byte comes back.
TEST(GgufFiles, Stories260KRewritesIdentically) {
  auto r = GgufFile::open(kModels + "stories260K.gguf");
  ASSERT_TRUE(r.ok());
  GgufWriter w;
  for (const auto& [key, value] : r->metadata()) w.set_value(key, value);
  for (const TensorInfo& t : r->tensors()) {
    ASSERT_TRUE(w.add_tensor_ref(t.name, t.dims, t.type, {t.data, t.num_bytes}).ok());
  }
  const auto bytes = w.to_bytes().value();
  // Same layout rules as the original, so the same bytes.
  ASSERT_EQ(bytes.size(), r->file_size());
  const auto original = MappedFile::open(kModels + "stories260K.gguf").value();
  EXPECT_EQ(std::memcmp(bytes.data(), original.data(), bytes.size()), 0);
}

}  // namespace
}  // namespace tessera::gguf
