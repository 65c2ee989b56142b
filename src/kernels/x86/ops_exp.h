// Internal: the exponential of the element-wise ops (swiglu, softmax), written once over a vector
// type. Included by x86/ops_avx2.cpp and x86/ops_avx512.cpp, each passing its own Ops (from its
// anonymous namespace): the same operations in the same order on 8 or 16 lanes, so both paths give
// every element the same bits (Ops.SwigluAvx512MatchesAvx2BitForBit). It holds no intrinsics itself.
//
// e^x = 2^n * p(r): x clamped to [-87.3, 88.7], n = round(x / ln 2), r = x - n ln 2 in two steps
// (ln 2's high part is exact in float), p a degree-6 polynomial (relative error ~1e-7; the tests
// bound it against ops_ref). Ops provides: V, set1, min, max, mul, add, round (to nearest even),
// fmadd(a, b, c) = a * b + c, fnmadd(a, b, c) = c - a * b, and pow2(n) = 2^n for integral n.
#pragma once

namespace tessera::kernels::x86 {

template <typename Ops>
inline typename Ops::V exp_poly(typename Ops::V x) {
  using V = typename Ops::V;
  x = Ops::min(Ops::max(x, Ops::set1(-87.3f)), Ops::set1(88.7f));
  const V n = Ops::round(Ops::mul(x, Ops::set1(1.44269504088896341f)));
  V r = Ops::fnmadd(n, Ops::set1(0.693359375f), x);
  r = Ops::fnmadd(n, Ops::set1(-2.12194440e-4f), r);
  V p = Ops::set1(1.9875691500e-4f);
  p = Ops::fmadd(p, r, Ops::set1(1.3981999507e-3f));
  p = Ops::fmadd(p, r, Ops::set1(8.3334519073e-3f));
  p = Ops::fmadd(p, r, Ops::set1(4.1665795894e-2f));
  p = Ops::fmadd(p, r, Ops::set1(1.6666665459e-1f));
  p = Ops::fmadd(p, r, Ops::set1(5.0000001201e-1f));
  p = Ops::fmadd(p, Ops::mul(r, r), Ops::add(r, Ops::set1(1.0f)));
  return Ops::mul(p, Ops::pow2(n));
}

}  // namespace tessera::kernels::x86
