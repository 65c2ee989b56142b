// The body of x86/lora_avx2.cpp and x86/lora_avx512.cpp: the LoRA shrink and expand loops over a
// register type `Isa` (8 or 16 floats). Included once by each, inside its namespace, after it has
// defined Isa. The order of every sum is lora.h's: 16 lane sums (one 16-float group is one zmm or
// two ymm), each term fused (fma), so every width gives the scalar twin's bits.
// Isa: V, kWidth, zero(), loadf(const float*), loadh(const uint16_t*), storef(float*, V),
//      fma(V a, V b, V c) = a * b + c rounded once, set1(float).

template <bool Half>
inline Isa::V load_w(const void* m, int64_t i) {
  if constexpr (Half) return Isa::loadh(static_cast<const uint16_t*>(m) + i);
  else return Isa::loadf(static_cast<const float*>(m) + i);
}

template <bool Half>
inline float elem(const void* m, int64_t i) {
  if constexpr (Half) return _cvtsh_ss(static_cast<const uint16_t*>(m)[i]);
  else return static_cast<const float*>(m)[i];
}

template <bool Half, int NB>
void shrink_t(const void* a, const float* const* xs, int64_t n_in, float scale, float* out) {
  constexpr int kW = Isa::kWidth, kN = 16 / kW;  // registers per 16-lane group
  const int64_t main = n_in / 16 * 16;
  typename Isa::V acc[NB][kN];
  for (int r = 0; r < NB; ++r) {
    for (int v = 0; v < kN; ++v) acc[r][v] = Isa::zero();
  }
  for (int64_t c = 0; c < main; c += 16) {
    for (int v = 0; v < kN; ++v) {
      const typename Isa::V va = load_w<Half>(a, c + v * kW);
      for (int r = 0; r < NB; ++r) acc[r][v] = Isa::fma(va, Isa::loadf(xs[r] + c + v * kW), acc[r][v]);
    }
  }
  for (int r = 0; r < NB; ++r) {
    alignas(64) float lane[16];
    for (int v = 0; v < kN; ++v) Isa::storef(lane + v * kW, acc[r][v]);
    for (int w = 8; w >= 1; w /= 2) {
      for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
    }
    float s = lane[0];
    for (int64_t c = main; c < n_in; ++c) s = std::fma(elem<Half>(a, c), xs[r][c], s);
    out[r] = scale * s;
  }
}

template <bool Half, int NB>
void expand_t(const float* const* us, const void* bt, int64_t n_out, int64_t o0, int64_t len, int32_t rank,
              float* const* ys) {
  constexpr int kW = Isa::kWidth;
  const int64_t main = len / kW * kW;
  for (int64_t o = 0; o < main; o += kW) {
    typename Isa::V acc[NB];
    for (int r = 0; r < NB; ++r) acc[r] = Isa::loadf(ys[r] + o);
    for (int32_t j = 0; j < rank; ++j) {
      const typename Isa::V vb = load_w<Half>(bt, j * n_out + o0 + o);
      for (int r = 0; r < NB; ++r) acc[r] = Isa::fma(Isa::set1(us[r][j]), vb, acc[r]);
    }
    for (int r = 0; r < NB; ++r) Isa::storef(ys[r] + o, acc[r]);
  }
  for (int64_t o = main; o < len; ++o) {
    for (int r = 0; r < NB; ++r) {
      float acc = ys[r][o];
      for (int32_t j = 0; j < rank; ++j) acc = std::fma(us[r][j], elem<Half>(bt, j * n_out + o0 + o), acc);
      ys[r][o] = acc;
    }
  }
}

template <bool Half>
void shrink_nb(const void* a, const float* const* xs, int64_t nb, int64_t n_in, float scale, float* out) {
  switch (nb) {
    case 1: return shrink_t<Half, 1>(a, xs, n_in, scale, out);
    case 2: return shrink_t<Half, 2>(a, xs, n_in, scale, out);
    case 3: return shrink_t<Half, 3>(a, xs, n_in, scale, out);
    default: return shrink_t<Half, 4>(a, xs, n_in, scale, out);
  }
}

template <bool Half>
void expand_nb(const float* const* us, int64_t nb, const void* bt, int64_t n_out, int64_t o0, int64_t len,
               int32_t rank, float* const* ys) {
  switch (nb) {
    case 1: return expand_t<Half, 1>(us, bt, n_out, o0, len, rank, ys);
    case 2: return expand_t<Half, 2>(us, bt, n_out, o0, len, rank, ys);
    case 3: return expand_t<Half, 3>(us, bt, n_out, o0, len, rank, ys);
    default: return expand_t<Half, 4>(us, bt, n_out, o0, len, rank, ys);
  }
}

void lora_shrink_rows(const void* a, bool half, const float* const* xs, int64_t nb, int64_t n_in, float scale,
                      float* out) {
  if (half) shrink_nb<true>(a, xs, nb, n_in, scale, out);
  else shrink_nb<false>(a, xs, nb, n_in, scale, out);
}

void lora_expand_rows(const float* const* us, int64_t nb, const void* bt, bool half, int64_t n_out, int64_t o0,
                      int64_t len, int32_t rank, float* const* ys) {
  if (half) expand_nb<true>(us, nb, bt, n_out, o0, len, rank, ys);
  else expand_nb<false>(us, nb, bt, n_out, o0, len, rank, ys);
}
