// make_synthetic_gguf: writes a llama-architecture GGUF of a chosen shape with random weights, for
// speed comparisons on a model larger than SmolLM2 (B1/B2 on a "1.1B"). Default shape: TinyLlama
// 1.1B (22 layers, dim 2048, 32 query / 4 KV heads, FFN 5632, untied output), except the vocab:
// llama.cpp needs a valid tokenizer, so the tokenizer metadata (and so the vocab, 49,152 instead of
// TinyLlama's 32,000) is copied from a donor GGUF (SmolLM2 by default). Matrices are quantized with
// kernels::quantize_row_ref into the chosen type (Q4_1 or Q8_0 ...); norms are f32 ones.
// Weights are uniform in [-0.035, 0.035] from a fixed-seed xorshift, so the file is reproducible.
// Usage: make_synthetic_gguf OUT.gguf [--type q4_1|q8_0] [--donor SmolLM2.gguf] [--layers 22]
//        [--dim 2048] [--heads 32] [--kv-heads 4] [--ffn 5632] [--ctx 4096]
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "kernels/quant.h"
#include "util/dtype.h"

namespace {

using tessera::DType;

struct Shape {
  int64_t layers = 22;    // transformer blocks
  int64_t dim = 2048;     // hidden width
  int64_t heads = 32;     // query heads
  int64_t kv_heads = 4;   // KV heads
  int64_t ffn = 5632;     // FFN hidden width
  int64_t ctx = 4096;     // context_length written to the metadata
};

// Fills `values` with uniform [-a, a] from a xorshift64 stream.
void fill_uniform(std::vector<float>& values, uint64_t& state, float a) {
  for (float& v : values) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float u = static_cast<float>(state >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    v = (2.0f * u - 1.0f) * a;
  }
}

int fail(const std::string& message) {
  fmt::print(stderr, "make_synthetic_gguf: {}\n", message);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: make_synthetic_gguf OUT.gguf [--type q4_1|q8_0] [--donor GGUF] [--layers N] ...");
  const std::string out_path = argv[1];
  std::string type_name = "q4_1";
  std::string donor_path = "/work/main/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  Shape s;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--type") type_name = value;
    else if (flag == "--donor") donor_path = value;
    else if (flag == "--layers") s.layers = std::atoll(value.c_str());
    else if (flag == "--dim") s.dim = std::atoll(value.c_str());
    else if (flag == "--heads") s.heads = std::atoll(value.c_str());
    else if (flag == "--kv-heads") s.kv_heads = std::atoll(value.c_str());
    else if (flag == "--ffn") s.ffn = std::atoll(value.c_str());
    else if (flag == "--ctx") s.ctx = std::atoll(value.c_str());
    else return fail("unknown flag " + flag);
  }
  DType type;
  uint32_t file_type;  // llama.cpp's general.file_type (LLAMA_FTYPE_MOSTLY_*)
  if (type_name == "q4_1") type = DType::Q4_1, file_type = 3;
  else if (type_name == "q8_0") type = DType::Q8_0, file_type = 7;
  else if (type_name == "q4_0") type = DType::Q4_0, file_type = 2;
  else return fail("--type must be q4_1, q4_0 or q8_0");

  auto donor = tessera::gguf::GgufFile::open(donor_path);
  if (!donor) return fail(donor->path() + ": " + donor.error().message);
  auto tokens = donor->get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return fail("donor has no tokenizer.ggml.tokens");
  const auto vocab = static_cast<int64_t>(tokens->size());

  tessera::gguf::GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", fmt::format("synthetic-{}L-{}d-{}", s.layers, s.dim, type_name));
  w.set_uint32("general.file_type", file_type);
  w.set_uint32("llama.vocab_size", static_cast<uint32_t>(vocab));
  w.set_uint32("llama.context_length", static_cast<uint32_t>(s.ctx));
  w.set_uint32("llama.embedding_length", static_cast<uint32_t>(s.dim));
  w.set_uint32("llama.block_count", static_cast<uint32_t>(s.layers));
  w.set_uint32("llama.feed_forward_length", static_cast<uint32_t>(s.ffn));
  w.set_uint32("llama.rope.dimension_count", static_cast<uint32_t>(s.dim / s.heads));
  w.set_uint32("llama.attention.head_count", static_cast<uint32_t>(s.heads));
  w.set_uint32("llama.attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  w.set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_float32("llama.rope.freq_base", 10000.0f);
  for (const auto& [key, value] : donor->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.set_value(key, value);
  }

  std::deque<std::vector<uint8_t>> storage;  // keeps every tensor's bytes alive until write()
  uint64_t state = 0x9E3779B97F4A7C15ull;
  std::vector<float> row;
  auto add_matrix = [&](const std::string& name, int64_t rows, int64_t cols) -> bool {
    const size_t row_bytes = tessera::dtype_row_bytes(type, cols);
    std::vector<uint8_t>& bytes = storage.emplace_back(row_bytes * static_cast<size_t>(rows));
    row.resize(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      fill_uniform(row, state, 0.035f);
      tessera::kernels::quantize_row_ref(type, row.data(), bytes.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    const auto st = w.add_tensor_ref(name, {cols, rows}, type, bytes);
    if (!st) fmt::print(stderr, "make_synthetic_gguf: {}: {}\n", name, st.error().message);
    return static_cast<bool>(st);
  };
  auto add_ones = [&](const std::string& name, int64_t n) -> bool {
    const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
    return static_cast<bool>(w.add_tensor_f32(name, {n}, ones));
  };

  const int64_t head_dim = s.dim / s.heads;
  const int64_t kv_dim = head_dim * s.kv_heads;
  bool ok = add_matrix("token_embd.weight", vocab, s.dim) && add_ones("output_norm.weight", s.dim) &&
            add_matrix("output.weight", vocab, s.dim);
  for (int64_t l = 0; ok && l < s.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    ok = add_ones(p + "attn_norm.weight", s.dim) && add_matrix(p + "attn_q.weight", s.dim, s.dim) &&
         add_matrix(p + "attn_k.weight", kv_dim, s.dim) && add_matrix(p + "attn_v.weight", kv_dim, s.dim) &&
         add_matrix(p + "attn_output.weight", s.dim, s.dim) && add_ones(p + "ffn_norm.weight", s.dim) &&
         add_matrix(p + "ffn_gate.weight", s.ffn, s.dim) && add_matrix(p + "ffn_up.weight", s.ffn, s.dim) &&
         add_matrix(p + "ffn_down.weight", s.dim, s.ffn);
  }
  if (!ok) return 1;
  if (auto st = w.write(out_path); !st) return fail(st.error().message);
  size_t total = 0;
  for (const auto& b : storage) total += b.size();
  fmt::print("make_synthetic_gguf: wrote {} ({} layers, dim {}, {}/{} heads, ffn {}, vocab {}, {}, {:.1f} MB of matrices)\n",
             out_path, s.layers, s.dim, s.heads, s.kv_heads, s.ffn, vocab, type_name, total / 1e6);
  return 0;
}
