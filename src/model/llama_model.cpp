#include "model/llama_model.h"

#include <cmath>

#include "kernels/kernels_info.h"
#include "kernels/lora.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/lora_adapter.h"
#include "model/model_warnings.h"
#include "util/log.h"
#include "util/op_profile.h"

namespace tessera {

std::string_view LlamaModel::kernels_isa() { return kernels::active_isa(); }

namespace {

// Finds a tensor and checks its shape; the error names the tensor, what was expected and found.
Result<const gguf::TensorInfo*> expect_tensor(const gguf::GgufFile& f, const std::string& name,
                                              std::vector<int64_t> dims) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return make_error(ErrorCode::kCorruptFile, "tensor '{}' is missing", name);
  if (t->dims != dims) {
    return make_error(ErrorCode::kCorruptFile, "tensor '{}': expected shape [{}], found [{}]", name,
                      fmt::join(dims, ", "), fmt::join(t->dims, ", "));
  }
  return t;
}

// Rows [first_row, first_row + rows) of a [total_rows][cols] matrix: all of it, or one part of a
// fused tensor (phi3's attn_qkv, its gate-up ffn_up); rows are whole blocks, so a part is a view.
Result<kernels::WeightMatrix> load_matrix(const gguf::GgufFile& f, const std::string& name,
                                          int64_t rows, int64_t cols, int64_t first_row = 0,
                                          int64_t total_rows = -1) {
  auto t = expect_tensor(f, name, {cols, total_rows < 0 ? rows : total_rows});
  if (!t) return t.error();
  if (!kernels::dtype_supported_for_matmul((*t)->type)) {
    return make_error(ErrorCode::kUnsupported, "tensor '{}': type {} is not supported for matmul",
                      name, dtype_name((*t)->type));
  }
  const size_t offset = static_cast<size_t>(first_row) * dtype_row_bytes((*t)->type, cols);
  return kernels::WeightMatrix::view((*t)->type, (*t)->data + offset, rows, cols);
}

// Norm weights and biases: any float type, copied to f32.
Result<std::vector<float>> load_vector(const gguf::GgufFile& f, const std::string& name, int64_t n) {
  auto t = expect_tensor(f, name, {n});
  if (!t) return t.error();
  std::vector<float> out(static_cast<size_t>(n));
  kernels::dequantize_row_ref((*t)->type, (*t)->data, out.data(), n);
  return out;
}

// Reads one byte per page so the mapping is resident after load (the progress bar then shows the
// real reading, and the first step does not pay the page faults).
void prefault(const uint8_t* data, size_t bytes) {
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < bytes; i += 4096) sink = sink + data[i];
  (void)sink;
}

}  // namespace

ForwardWorkspace::ForwardWorkspace(const ModelConfig& c, int32_t max_tokens, int32_t max_seqs,
                                   int32_t max_context, int32_t num_threads)
    : max_tokens_(max_tokens) {
  kernels::AttnLimits limits;
  limits.max_tokens = max_tokens;
  limits.max_seqs = max_seqs;
  limits.max_context = max_context;
  limits.num_heads = c.num_heads;
  limits.num_kv_heads = c.num_kv_heads;
  limits.head_dim = c.head_dim;
  limits.num_threads = num_threads;
  attn_ws.reserve(limits);
  const auto n = static_cast<size_t>(max_tokens);
  x.resize(n * static_cast<size_t>(c.dim));
  h.resize(n * static_cast<size_t>(c.dim));
  q.resize(n * static_cast<size_t>(c.q_dim()));
  k.resize(n * static_cast<size_t>(c.kv_dim()));
  v.resize(n * static_cast<size_t>(c.kv_dim()));
  attn.resize(n * static_cast<size_t>(c.q_dim()));
  gate.resize(n * static_cast<size_t>(c.ffn_dim));
  up.resize(n * static_cast<size_t>(c.ffn_dim));
  final_rows.resize(n * static_cast<size_t>(c.dim));
  rope_cs.resize(n * static_cast<size_t>(c.head_dim));
  if (c.num_local_layers() > 0) rope_cs_local.resize(n * static_cast<size_t>(c.head_dim));
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::load(const std::string& path, const LoadProgress& progress) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.error();
  auto model = from_gguf(std::move(*file), progress);
  if (!model) return model.error().with_context("loading model '" + path + "'");
  return model;
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::from_gguf(gguf::GgufFile file, const LoadProgress& progress) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::move(file);
  auto config = ModelConfig::from_gguf(m->file_);
  if (!config) return config.error().with_context("model hyperparameters");
  m->config_ = *config;
  const ModelConfig& c = m->config_;
  const gguf::GgufFile& f = m->file_;
  for (const std::string& w : model_file_warnings(f, c)) TESSERA_LOG_WARN("model file: {}", w);

  auto embd = load_matrix(f, "token_embd.weight", c.vocab_size, c.dim);
  if (!embd) return embd.error();
  m->token_embd_ = std::move(*embd);
  auto out = load_matrix(f, c.tied_output ? "token_embd.weight" : "output.weight", c.vocab_size, c.dim);
  if (!out) return out.error();
  m->output_ = std::move(*out);
  auto out_norm = load_vector(f, "output_norm.weight", c.dim);
  if (!out_norm) return out_norm.error();
  m->output_norm_ = std::move(*out_norm);
  m->weight_bytes_ = m->output_.bytes();

  m->layers_.resize(static_cast<size_t>(c.num_layers));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& w = m->layers_[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    auto set_matrix = [&](kernels::WeightMatrix& dst, const char* name, int64_t rows, int64_t cols,
                          int64_t first_row = 0, int64_t total_rows = -1) -> Status {
      auto r = load_matrix(f, p + name, rows, cols, first_row, total_rows);
      if (!r) return r.error();
      dst = std::move(*r);
      m->weight_bytes_ += dst.bytes();
      prefault(dst.data(), dst.bytes());
      return ok_status();
    };
    auto set_vector = [&](std::vector<float>& dst, const char* name, int64_t n) -> Status {
      auto r = load_vector(f, p + name, n);
      if (!r) return r.error();
      dst = std::move(*r);
      return ok_status();
    };
    TESSERA_TRY(set_vector(w.attn_norm, "attn_norm.weight", c.dim));
    if (c.fused_qkv) {
      const int64_t qkv_rows = c.q_dim() + 2 * int64_t{c.kv_dim()};
      TESSERA_TRY(set_matrix(w.wq, "attn_qkv.weight", c.q_dim(), c.dim, 0, qkv_rows));
      TESSERA_TRY(set_matrix(w.wk, "attn_qkv.weight", c.kv_dim(), c.dim, c.q_dim(), qkv_rows));
      TESSERA_TRY(set_matrix(w.wv, "attn_qkv.weight", c.kv_dim(), c.dim, c.q_dim() + c.kv_dim(), qkv_rows));
    } else {
      TESSERA_TRY(set_matrix(w.wq, "attn_q.weight", c.q_dim(), c.dim));
      TESSERA_TRY(set_matrix(w.wk, "attn_k.weight", c.kv_dim(), c.dim));
      TESSERA_TRY(set_matrix(w.wv, "attn_v.weight", c.kv_dim(), c.dim));
    }
    TESSERA_TRY(set_matrix(w.wo, "attn_output.weight", c.dim, c.q_dim()));
    if (c.has_qk_norm) {
      TESSERA_TRY(set_vector(w.q_norm, "attn_q_norm.weight", c.head_dim));
      TESSERA_TRY(set_vector(w.k_norm, "attn_k_norm.weight", c.head_dim));
    }
    if (c.has_post_norms) {
      TESSERA_TRY(set_vector(w.post_attn_norm, "post_attention_norm.weight", c.dim));
      TESSERA_TRY(set_vector(w.post_ffn_norm, "post_ffw_norm.weight", c.dim));
    }
    if (c.has_qkv_bias) {
      TESSERA_TRY(set_vector(w.bq, "attn_q.bias", c.q_dim()));
      TESSERA_TRY(set_vector(w.bk, "attn_k.bias", c.kv_dim()));
      TESSERA_TRY(set_vector(w.bv, "attn_v.bias", c.kv_dim()));
    }
    TESSERA_TRY(set_vector(w.ffn_norm, "ffn_norm.weight", c.dim));
    if (c.fused_gate_up) {
      TESSERA_TRY(set_matrix(w.w_gate, "ffn_up.weight", c.ffn_dim, c.dim, 0, 2 * int64_t{c.ffn_dim}));
      TESSERA_TRY(set_matrix(w.w_up, "ffn_up.weight", c.ffn_dim, c.dim, c.ffn_dim, 2 * int64_t{c.ffn_dim}));
    } else {
      TESSERA_TRY(set_matrix(w.w_gate, "ffn_gate.weight", c.ffn_dim, c.dim));
      TESSERA_TRY(set_matrix(w.w_up, "ffn_up.weight", c.ffn_dim, c.dim));
    }
    TESSERA_TRY(set_matrix(w.w_down, "ffn_down.weight", c.dim, c.ffn_dim));
    if (progress) progress(static_cast<double>(l + 1) / c.num_layers);
  }
  // The matmul weights (not the embedding: it is only looked up by row) repacked into one
  // huge-page arena.
  std::vector<kernels::WeightMatrix*> matmul_weights = {&m->output_};
  for (LayerWeights& w : m->layers_) {
    for (kernels::WeightMatrix* x : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
      matmul_weights.push_back(x);
    }
  }
  kernels::WeightMatrix::pack_all_if_useful(matmul_weights);
  return m;
}

void LlamaModel::forward(const ForwardBatch& batch, KvStorage& kv, ForwardWorkspace& ws,
                         ThreadPool& pool, float* logits) const {
  using profile::Op;
  using profile::OpScope;
  const ModelConfig& c = config_;
  const auto num_tokens = static_cast<int64_t>(batch.tokens.size());
  TESSERA_CHECK(num_tokens > 0 && num_tokens <= ws.max_tokens(), "batch of {} tokens (workspace {})",
                num_tokens, ws.max_tokens());
  TESSERA_CHECK(batch.positions.size() == batch.tokens.size(), "positions/tokens size mismatch");
  TESSERA_CHECK(static_cast<int32_t>(std::max<size_t>(1, batch.group_attn.size())) == kv.num_groups(),
                "batch addresses {} KV-cache groups, the cache has {}", batch.group_attn.size(), kv.num_groups());
  const int64_t dim = c.dim;
  float* x = ws.x.data();
  float* h = ws.h.data();

  {
    OpScope scope(Op::kEmbedding);
    for (int64_t t = 0; t < num_tokens; ++t) {
      const int32_t id = batch.tokens[static_cast<size_t>(t)];
      TESSERA_CHECK(id >= 0 && id < c.vocab_size, "token id {} outside the vocabulary ({})", id, c.vocab_size);
      token_embd_.dequantize_row(id, x + t * dim);
      if (c.embedding_scale != 1.0f) kernels::scale(x + t * dim, c.embedding_scale, dim);
    }
  }

  {
    OpScope scope(Op::kRope);  // the rotation factors of this batch's positions, for every layer
    kernels::RopeParams rope = c.rope;
    rope.freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();
    kernels::rope_table(batch.positions.data(), num_tokens, c.head_dim, rope, ws.rope_cs.data());
    if (!ws.rope_cs_local.empty()) {
      kernels::RopeParams local = c.rope_local;
      local.freq_factors = rope.freq_factors;
      kernels::rope_table(batch.positions.data(), num_tokens, c.head_dim, local, ws.rope_cs_local.data());
    }
  }
  const float attn_scale = c.attn_scale;
  // Every sequence decoding one token: the attention rotates q and k and writes the K/V itself.
  const bool decode_step = kernels::is_single_token_step(batch.attn);
  // The per-token ops between the matmuls (norms, bias, rope, KV writes, residual adds) split their
  // rows over the pool from 8 tokens up (batched decode: otherwise a worker idles through them).
  // Every row is computed on its own, so the split never changes a value.
  const int64_t row_chunk =
      num_tokens < 8 ? num_tokens : (num_tokens + 2 * pool.num_threads() - 1) / (2 * pool.num_threads());
  auto over_rows = [&](auto&& fn) { pool.for_chunks(num_tokens, row_chunk, fn); };
  constexpr int64_t kInlineRowElems = int64_t{1} << 15;
  // x += h (the residual of the block before, unless `add` is false), then h = rmsnorm(x), row by
  // row in one pass. Up to 32K elements (batched decode) on the calling thread: cheaper than a
  // dispatch, and the same operations on every row either way.
  auto residual_then_norm = [&](bool add, const std::vector<float>& norm) {
    auto rows = [&](int64_t t0, int64_t t1) {
      if (add) kernels::add_inplace(x + t0 * dim, h + t0 * dim, (t1 - t0) * dim);
      kernels::rmsnorm(x + t0 * dim, norm.data(), c.rms_eps, h + t0 * dim, dim, t1 - t0);
    };
    if (num_tokens * dim <= kInlineRowElems) {
      rows(0, num_tokens);
    } else {
      over_rows(rows);
    }
  };
  for (const LoraSegment& seg : batch.lora_segments) {
    TESSERA_CHECK(seg.adapter != nullptr && seg.begin >= 0 && seg.begin <= seg.end &&
                      seg.end <= static_cast<int32_t>(batch.lora_rows.size()),
                  "LoRA segment [{}, {}) of {} rows", seg.begin, seg.end, batch.lora_rows.size());
  }
  std::vector<kernels::LoraJob> lora_jobs;  // one call's jobs: segments x targets of one input
  lora_jobs.reserve(batch.lora_segments.size() * 3);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = layers_[static_cast<size_t>(l)];
    // After the base matmuls of layer l that read one input: each adapter's delta on its own rows
    // for those targets (kernels/lora.h), in one call for every segment. No segments: nothing runs.
    auto lora = [&](const float* in, std::initializer_list<std::pair<LoraTarget, float*>> targets) {
      lora_jobs.clear();
      for (const LoraSegment& seg : batch.lora_segments) {
        const auto rows = batch.lora_rows.subspan(static_cast<size_t>(seg.begin), static_cast<size_t>(seg.end - seg.begin));
        for (const auto& [t, out] : targets) {
          const kernels::LoraPair& pair = seg.adapter->pair(l, t);
          if (!pair.empty()) lora_jobs.push_back({&pair, in, out, rows});
        }
      }
      kernels::lora_apply(lora_jobs, pool);
    };
    // Attention block. q, k and v read the same normed rows: one quantization, one dispatch.
    {
      OpScope scope(Op::kRmsnorm);  // with the residual add of the layer before's feed-forward
      residual_then_norm(l > 0, w.attn_norm);
    }
    {
      OpScope scope(Op::kQkv);
      const kernels::MatmulOut qkv[] = {{&w.wq, ws.q.data()}, {&w.wk, ws.k.data()}, {&w.wv, ws.v.data()}};
      kernels::matmul_group(qkv, h, num_tokens, pool);
      lora(h, {{LoraTarget::kQ, ws.q.data()}, {LoraTarget::kK, ws.k.data()}, {LoraTarget::kV, ws.v.data()}});
    }
    if (c.has_qkv_bias) {
      OpScope scope(Op::kBias);
      over_rows([&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          kernels::add_inplace(ws.q.data() + t * c.q_dim(), w.bq.data(), c.q_dim());
          kernels::add_inplace(ws.k.data() + t * c.kv_dim(), w.bk.data(), c.kv_dim());
          kernels::add_inplace(ws.v.data() + t * c.kv_dim(), w.bv.data(), c.kv_dim());
        }
      });
    }
    if (c.has_qk_norm) {  // each head of q and k normed on its own (rows of head_dim)
      OpScope scope(Op::kRmsnorm);
      over_rows([&](int64_t t0, int64_t t1) {
        kernels::rmsnorm(ws.q.data() + t0 * c.q_dim(), w.q_norm.data(), c.rms_eps, ws.q.data() + t0 * c.q_dim(),
                         c.head_dim, (t1 - t0) * c.num_heads);
        kernels::rmsnorm(ws.k.data() + t0 * c.kv_dim(), w.k_norm.data(), c.rms_eps, ws.k.data() + t0 * c.kv_dim(),
                         c.head_dim, (t1 - t0) * c.num_kv_heads);
      });
    }
    const kernels::KvLayer& kv_layer = kv.layer(l);
    const kernels::AttnMetadata& md = batch.attn_of_group(kv.group_of(l));  // the layer's block tables
    TESSERA_CHECK(kv_layer.window == c.window_of(l), "layer {}: KV window {} != the model's {}", l, kv_layer.window,
                  c.window_of(l));
    const float* rope_cs = c.is_local(l) ? ws.rope_cs_local.data() : ws.rope_cs.data();
    if (decode_step) {  // rope and the K/V writes inside the attention's units (same bits)
      OpScope scope(Op::kAttention);
      const kernels::DecodeTokens fresh{ws.k.data(), ws.v.data(), rope_cs, c.rope.layout};
      kernels::paged_attention_decode(kv_layer, md, ws.q.data(), fresh, c.num_heads, attn_scale,
                                      ws.attn.data(), pool, ws.attn_ws);
    } else {
      {
        OpScope scope(Op::kRope);
        over_rows([&](int64_t t0, int64_t t1) {
          const float* table = rope_cs + t0 * c.head_dim;
          kernels::rope_with_table(ws.q.data() + t0 * c.q_dim(), t1 - t0, c.num_heads, c.head_dim, c.rope.layout, table);
          kernels::rope_with_table(ws.k.data() + t0 * c.kv_dim(), t1 - t0, c.num_kv_heads, c.head_dim, c.rope.layout, table);
        });
      }
      {
        OpScope scope(Op::kWriteKv);
        over_rows([&](int64_t t0, int64_t t1) {
          kernels::write_kv(kv_layer, md, ws.k.data(), ws.v.data(), static_cast<int32_t>(t0),
                            static_cast<int32_t>(t1));
        });
      }
      OpScope scope(Op::kAttention);
      kernels::paged_attention(kv_layer, md, ws.q.data(), c.num_heads, attn_scale, ws.attn.data(), pool,
                               ws.attn_ws);
    }
    {
      OpScope scope(Op::kWo);
      kernels::matmul(w.wo, ws.attn.data(), num_tokens, h, pool);
      lora(ws.attn.data(), {{LoraTarget::kO, h}});
    }
    if (c.has_post_norms) {
      OpScope scope(Op::kRmsnorm);
      over_rows([&](int64_t t0, int64_t t1) {
        kernels::rmsnorm(h + t0 * dim, w.post_attn_norm.data(), c.rms_eps, h + t0 * dim, dim, t1 - t0);
      });
    }

    // Feed-forward block.
    {
      OpScope scope(Op::kRmsnorm);  // with the attention block's residual add
      residual_then_norm(true, w.ffn_norm);
    }
    {
      OpScope scope(Op::kFfnGateUp);
      const kernels::MatmulOut gate_up[] = {{&w.w_gate, ws.gate.data()}, {&w.w_up, ws.up.data()}};
      kernels::matmul_group(gate_up, h, num_tokens, pool);
      lora(h, {{LoraTarget::kGate, ws.gate.data()}, {LoraTarget::kUp, ws.up.data()}});
    }
    {
      OpScope scope(Op::kSwiglu);
      // One call per row, so which elements take the kernel's scalar tail never depends on the
      // batch; rows split over the pool from 8 rows up (batched decode: ~1 us per row).
      const int64_t ffn = c.ffn_dim;
      float* gate = ws.gate.data();
      const float* up = ws.up.data();
      const int64_t chunk = num_tokens < 8 ? num_tokens : (num_tokens + 2 * pool.num_threads() - 1) / (2 * pool.num_threads());
      pool.for_chunks(num_tokens, chunk, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          if (c.ffn_activation == ModelConfig::Activation::kGeluTanh) {
            kernels::geglu(gate + t * ffn, up + t * ffn, gate + t * ffn, ffn);
          } else {
            kernels::swiglu(gate + t * ffn, up + t * ffn, gate + t * ffn, ffn);
          }
        }
      });
    }
    {
      OpScope scope(Op::kFfnDown);
      kernels::matmul(w.w_down, ws.gate.data(), num_tokens, h, pool);
      lora(ws.gate.data(), {{LoraTarget::kDown, h}});
    }
    if (c.has_post_norms) {
      OpScope scope(Op::kRmsnorm);
      over_rows([&](int64_t t0, int64_t t1) {
        kernels::rmsnorm(h + t0 * dim, w.post_ffn_norm.data(), c.rms_eps, h + t0 * dim, dim, t1 - t0);
      });
    }
    // The feed-forward residual is added by the next layer's first norm, or just below.
  }
  {
    OpScope scope(Op::kResidual);
    over_rows([&](int64_t t0, int64_t t1) { kernels::add_inplace(x + t0 * dim, h + t0 * dim, (t1 - t0) * dim); });
  }

  // Logits only for the rows that need them.
  const auto num_rows = static_cast<int64_t>(batch.logits_rows.size());
  if (num_rows == 0) return;
  float* rows = ws.final_rows.data();
  {
    OpScope scope(Op::kFinalNorm);
    for (int64_t r = 0; r < num_rows; ++r) {
      const int32_t t = batch.logits_rows[static_cast<size_t>(r)];
      TESSERA_CHECK(t >= 0 && t < num_tokens, "logits row {} outside the batch", t);
      kernels::rmsnorm(x + t * dim, output_norm_.data(), c.rms_eps, rows + r * dim, dim, 1);
    }
  }
  OpScope scope(Op::kLogits);
  kernels::matmul(output_, rows, num_rows, logits, pool);
}

}  // namespace tessera
