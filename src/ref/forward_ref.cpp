#include "ref/forward_ref.h"

#include <cmath>

#include "kernels/quant.h"

namespace tessera::ref {

namespace {

Result<std::vector<float>> dequantized(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.find_tensor(name);
  if (!t) return make_error(ErrorCode::kCorruptFile, "tensor '{}' is missing", name);
  std::vector<float> out(static_cast<size_t>(t->num_elements));
  const int64_t row = t->dims[0];
  const size_t row_bytes = dtype_row_bytes(t->type, row);
  for (int64_t r = 0; r < t->num_elements / row; ++r) {
    kernels::dequantize_row_ref(t->type, t->data + static_cast<size_t>(r) * row_bytes,
                                out.data() + r * row, row);
  }
  return out;
}

// out[i] = sum_j w[i][j] * x[j];  w: [rows][cols]  (PyTorch: x @ W.T)
void matvec(float* out, const float* x, const std::vector<float>& w, int32_t rows, int32_t cols) {
  for (int32_t i = 0; i < rows; ++i) {
    float sum = 0.0f;
    for (int32_t j = 0; j < cols; ++j) sum += w[static_cast<size_t>(i) * cols + j] * x[j];
    out[i] = sum;
  }
}

// out = x / sqrt(mean(x^2) + eps) * weight
void rmsnorm(float* out, const float* x, const std::vector<float>& weight, int32_t n, float eps) {
  float ss = 0.0f;
  for (int32_t j = 0; j < n; ++j) ss += x[j] * x[j];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int32_t j = 0; j < n; ++j) out[j] = weight[static_cast<size_t>(j)] * (inv * x[j]);
}

// Rotates each head's pairs by pos * base^(-2i/head_dim): pairs (2i, 2i+1) in GGUF's llama layout,
// (i, i + head_dim/2) in neox layout (qwen2).
void rope(float* vec, int32_t num_heads, int32_t head_dim, int32_t pos, const kernels::RopeParams& p) {
  for (int32_t h = 0; h < num_heads; ++h) {
    float* head = vec + h * head_dim;
    for (int32_t i = 0; i < head_dim / 2; ++i) {
      const double freq = std::pow(static_cast<double>(p.freq_base), -2.0 * i / head_dim);
      double angle = static_cast<double>(pos) * p.freq_scale * freq;
      if (p.freq_factors != nullptr) angle /= p.freq_factors[i];  // Llama 3.1 rope_freqs
      const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
      const int32_t a = p.layout == kernels::RopeLayout::kNormal ? 2 * i : i;
      const int32_t b = p.layout == kernels::RopeLayout::kNormal ? 2 * i + 1 : i + head_dim / 2;
      const float x0 = head[a], x1 = head[b];
      head[a] = x0 * c - x1 * s;
      head[b] = x0 * s + x1 * c;
    }
  }
}

}  // namespace

Result<std::unique_ptr<RefModel>> RefModel::load(const std::string& path) {
  auto file = gguf::GgufFile::open(path);
  if (!file) return file.error();
  const gguf::GgufFile& f = *file;
  auto config = ModelConfig::from_gguf(f);
  if (!config) return config.error();
  std::unique_ptr<RefModel> m(new RefModel());
  m->config_ = *config;
  const ModelConfig& c = m->config_;

  auto load = [&](std::vector<float>& dst, const std::string& name) -> Status {
    auto r = dequantized(f, name);
    if (!r) return r.error();
    dst = std::move(*r);
    return ok_status();
  };
  TESSERA_TRY(load(m->token_embd_, "token_embd.weight"));
  TESSERA_TRY(load(m->output_norm_, "output_norm.weight"));
  TESSERA_TRY(load(m->output_, c.tied_output ? "token_embd.weight" : "output.weight"));
  m->layers_.resize(static_cast<size_t>(c.num_layers));
  for (int32_t l = 0; l < c.num_layers; ++l) {
    Layer& w = m->layers_[static_cast<size_t>(l)];
    const std::string p = fmt::format("blk.{}.", l);
    TESSERA_TRY(load(w.attn_norm, p + "attn_norm.weight"));
    if (c.fused_qkv) {  // [q_dim + 2 kv_dim][dim]: q rows, then k, then v
      std::vector<float> qkv;
      TESSERA_TRY(load(qkv, p + "attn_qkv.weight"));
      const auto q_end = qkv.begin() + static_cast<int64_t>(c.q_dim()) * c.dim;
      const auto k_end = q_end + static_cast<int64_t>(c.kv_dim()) * c.dim;
      w.wq.assign(qkv.begin(), q_end);
      w.wk.assign(q_end, k_end);
      w.wv.assign(k_end, qkv.end());
    } else {
      TESSERA_TRY(load(w.wq, p + "attn_q.weight"));
      TESSERA_TRY(load(w.wk, p + "attn_k.weight"));
      TESSERA_TRY(load(w.wv, p + "attn_v.weight"));
    }
    if (c.has_qk_norm) {
      TESSERA_TRY(load(w.q_norm, p + "attn_q_norm.weight"));
      TESSERA_TRY(load(w.k_norm, p + "attn_k_norm.weight"));
    }
    if (c.has_post_norms) {
      TESSERA_TRY(load(w.post_attn_norm, p + "post_attention_norm.weight"));
      TESSERA_TRY(load(w.post_ffn_norm, p + "post_ffw_norm.weight"));
    }
    TESSERA_TRY(load(w.wo, p + "attn_output.weight"));
    if (c.has_qkv_bias) {
      TESSERA_TRY(load(w.bq, p + "attn_q.bias"));
      TESSERA_TRY(load(w.bk, p + "attn_k.bias"));
      TESSERA_TRY(load(w.bv, p + "attn_v.bias"));
    }
    TESSERA_TRY(load(w.ffn_norm, p + "ffn_norm.weight"));
    if (c.fused_gate_up) {  // [2 ffn][dim]: gate rows, then up
      std::vector<float> gate_up;
      TESSERA_TRY(load(gate_up, p + "ffn_up.weight"));
      const auto half = gate_up.begin() + static_cast<int64_t>(c.ffn_dim) * c.dim;
      w.w_gate.assign(gate_up.begin(), half);
      w.w_up.assign(half, gate_up.end());
    } else {
      TESSERA_TRY(load(w.w_gate, p + "ffn_gate.weight"));
      TESSERA_TRY(load(w.w_up, p + "ffn_up.weight"));
    }
    TESSERA_TRY(load(w.w_down, p + "ffn_down.weight"));
  }
  const auto ctx = static_cast<size_t>(c.context_length);
  m->key_cache_.assign(static_cast<size_t>(c.num_layers) * ctx * c.kv_dim(), 0.0f);
  m->value_cache_.assign(m->key_cache_.size(), 0.0f);
  m->x_.resize(c.dim);
  m->xb_.resize(std::max(c.dim, c.q_dim()));
  m->xb2_.resize(c.dim);
  m->q_.resize(c.q_dim());
  m->k_.resize(c.kv_dim());
  m->v_.resize(c.kv_dim());
  m->att_.resize(ctx);
  m->hb_.resize(c.ffn_dim);
  m->hb2_.resize(c.ffn_dim);
  m->logits_.resize(c.vocab_size);
  return m;
}

const std::vector<float>& RefModel::forward(int32_t token, int32_t pos) {
  const ModelConfig& c = config_;
  TESSERA_CHECK(pos == num_cached_ && pos < c.context_length, "ref forward: position {} (cached {})", pos, num_cached_);
  TESSERA_CHECK(token >= 0 && token < c.vocab_size, "ref forward: token {}", token);
  const int32_t dim = c.dim, kv_dim = c.kv_dim(), hd = c.head_dim;
  float* x = x_.data();
  for (int32_t j = 0; j < dim; ++j) x[j] = token_embd_[static_cast<size_t>(token) * dim + j] * c.embedding_scale;
  const float* freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data();

  for (int32_t l = 0; l < c.num_layers; ++l) {
    const Layer& w = layers_[static_cast<size_t>(l)];
    // h = rmsnorm(x); q, k, v = h @ Wq.T, h @ Wk.T, h @ Wv.T (+ bias)
    rmsnorm(xb_.data(), x, w.attn_norm, dim, c.rms_eps);
    matvec(q_.data(), xb_.data(), w.wq, c.q_dim(), dim);
    matvec(k_.data(), xb_.data(), w.wk, kv_dim, dim);
    matvec(v_.data(), xb_.data(), w.wv, kv_dim, dim);
    if (c.has_qkv_bias) {
      for (int32_t j = 0; j < c.q_dim(); ++j) q_[j] += w.bq[j];
      for (int32_t j = 0; j < kv_dim; ++j) k_[j] += w.bk[j], v_[j] += w.bv[j];
    }
    if (c.has_qk_norm) {  // each head normed on its own
      for (int32_t h = 0; h < c.num_heads; ++h) rmsnorm(&q_[h * hd], &q_[h * hd], w.q_norm, hd, c.rms_eps);
      for (int32_t h = 0; h < c.num_kv_heads; ++h) rmsnorm(&k_[h * hd], &k_[h * hd], w.k_norm, hd, c.rms_eps);
    }
    kernels::RopeParams rope_params = c.is_local(l) ? c.rope_local : c.rope;
    rope_params.freq_factors = freq_factors;
    rope(q_.data(), c.num_heads, hd, pos, rope_params);
    rope(k_.data(), c.num_kv_heads, hd, pos, rope_params);
    // A local layer attends to the last sliding_window positions only.
    const int32_t first = c.is_local(l) ? std::max(0, pos - c.sliding_window + 1) : 0;
    // The cache row of this position: key_cache[l][pos][:] = k
    const size_t layer_off = static_cast<size_t>(l) * c.context_length * kv_dim;
    for (int32_t j = 0; j < kv_dim; ++j) {
      key_cache_[layer_off + static_cast<size_t>(pos) * kv_dim + j] = k_[j];
      value_cache_[layer_off + static_cast<size_t>(pos) * kv_dim + j] = v_[j];
    }
    // Per query head: att = softmax(q·K[first..pos] · attn_scale); out = att @ V. GQA: head h
    // reads KV head h / group.
    for (int32_t h = 0; h < c.num_heads; ++h) {
      const float* qh = q_.data() + h * hd;
      const int32_t kvh = h / c.group_size();
      float max_score = -INFINITY;
      for (int32_t t = first; t <= pos; ++t) {
        const float* kt = key_cache_.data() + layer_off + static_cast<size_t>(t) * kv_dim + kvh * hd;
        float score = 0.0f;
        for (int32_t i = 0; i < hd; ++i) score += qh[i] * kt[i];
        att_[t] = score * c.attn_scale;
        max_score = std::max(max_score, att_[t]);
      }
      float sum = 0.0f;
      for (int32_t t = first; t <= pos; ++t) sum += (att_[t] = std::exp(att_[t] - max_score));
      float* out = xb_.data() + h * hd;
      for (int32_t i = 0; i < hd; ++i) out[i] = 0.0f;
      for (int32_t t = first; t <= pos; ++t) {
        const float* vt = value_cache_.data() + layer_off + static_cast<size_t>(t) * kv_dim + kvh * hd;
        const float a = att_[t] / sum;
        for (int32_t i = 0; i < hd; ++i) out[i] += a * vt[i];
      }
    }
    // x += attn @ Wo.T
    matvec(xb2_.data(), xb_.data(), w.wo, dim, c.q_dim());
    if (c.has_post_norms) rmsnorm(xb2_.data(), xb2_.data(), w.post_attn_norm, dim, c.rms_eps);
    for (int32_t j = 0; j < dim; ++j) x[j] += xb2_[j];
    // x += (act(h @ Wgate.T) * (h @ Wup.T)) @ Wdown.T;  act = silu or gelu (tanh form)
    rmsnorm(xb_.data(), x, w.ffn_norm, dim, c.rms_eps);
    matvec(hb_.data(), xb_.data(), w.w_gate, c.ffn_dim, dim);
    matvec(hb2_.data(), xb_.data(), w.w_up, c.ffn_dim, dim);
    for (int32_t j = 0; j < c.ffn_dim; ++j) {
      const float g = hb_[j];
      const float act = c.ffn_activation == ModelConfig::Activation::kGeluTanh
                            ? 0.5f * g * (1.0f + std::tanh(0.7978845608f * (g + 0.044715f * g * g * g)))
                            : g / (1.0f + std::exp(-g));
      hb_[j] = act * hb2_[j];
    }
    matvec(xb2_.data(), hb_.data(), w.w_down, dim, c.ffn_dim);
    if (c.has_post_norms) rmsnorm(xb2_.data(), xb2_.data(), w.post_ffn_norm, dim, c.rms_eps);
    for (int32_t j = 0; j < dim; ++j) x[j] += xb2_[j];
  }
  rmsnorm(x, x, output_norm_, dim, c.rms_eps);
  matvec(logits_.data(), x, output_, c.vocab_size, dim);
  num_cached_ = pos + 1;
  return logits_;
}

}  // namespace tessera::ref
