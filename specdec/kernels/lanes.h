// Sixteen float lanes, one design on every CPU: the vector arithmetic of the native forward
// (attention, SiLU, dot products, sums) written once over a 16-lane type, with one type per ISA.
//
// Contract: ``Ref`` is the reference (an array of 16 floats, each operation lane by lane with
// std::fma, std::nearbyint, IEEE +-*/). ``Vec`` is the type this build computes with: one __m512
// (AVX-512), two __m256 (AVX2), four float32x4_t (NEON) or ``Ref`` itself (any other CPU). Every
// operation is lane-wise and exactly rounded, and the only reduction (``sum``) adds the lanes in
// one fixed tree (l += l + 8, then + 4, + 2, + 1), so ``f<Vec>`` and ``f<Ref>`` give identical bits
// for every function below: the same transcript on an AVX2 laptop, an AVX-512 server and ARM.
// The build must not contract a * b + c on its own (-ffp-contract=off, kernels/__init__.py): a
// fused multiply-add appears only where the code says fma.
//
// Why 16 lanes everywhere, not the register width: the lane count decides the summation order, and
// the summation order decides the bits. AVX2 and NEON emulate the 16 lanes with 2 and 4 registers.

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace specdec::lanes {

constexpr int kLanes = 16;

struct Ref {
  float v[kLanes];
  static Ref load(const float* p) {
    Ref r;
    std::memcpy(r.v, p, sizeof r.v);
    return r;
  }
  void store(float* p) const { std::memcpy(p, v, sizeof v); }
  static Ref set1(float x) {
    Ref r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = x;
    return r;
  }
#define SPECDEC_LANEWISE(name, expr)          \
  static Ref name(const Ref& a, const Ref& b) { \
    Ref r;                                      \
    for (int l = 0; l < kLanes; ++l) {          \
      const float x = a.v[l], y = b.v[l];       \
      r.v[l] = (expr);                          \
    }                                           \
    return r;                                   \
  }
  SPECDEC_LANEWISE(add, x + y)
  SPECDEC_LANEWISE(sub, x - y)
  SPECDEC_LANEWISE(mul, x* y)
  SPECDEC_LANEWISE(div, x / y)
  SPECDEC_LANEWISE(min, x < y ? x : y)
  SPECDEC_LANEWISE(max, x > y ? x : y)
#undef SPECDEC_LANEWISE
  static Ref fma(const Ref& a, const Ref& b, const Ref& c) {  // a * b + c, one rounding
    Ref r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = std::fma(a.v[l], b.v[l], c.v[l]);
    return r;
  }
  static Ref round(const Ref& a) {  // to nearest, ties to even
    Ref r;
    for (int l = 0; l < kLanes; ++l) r.v[l] = std::nearbyint(a.v[l]);
    return r;
  }
  static Ref pow2(const Ref& n) {  // 2^n for integral n in [-126, 127]
    Ref r;
    for (int l = 0; l < kLanes; ++l) {
      const int32_t bits = (static_cast<int32_t>(n.v[l]) + 127) << 23;
      std::memcpy(&r.v[l], &bits, sizeof bits);
    }
    return r;
  }
  float sum() const {
    float t[kLanes];
    std::memcpy(t, v, sizeof t);
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) t[l] = t[l] + t[l + w];
    return t[0];
  }
};

#if defined(__AVX512F__)
struct Vec {
  __m512 v;
  static Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static Vec set1(float x) { return {_mm512_set1_ps(x)}; }
  static Vec add(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
  static Vec sub(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
  static Vec mul(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
  static Vec div(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
  static Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
  static Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  static Vec round(Vec a) { return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)}; }
  static Vec pow2(Vec n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127));
    return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
  }
  float sum() const {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));  // lanes 0 + 2, 1 + 3
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct Vec {  // lanes 0-7 in lo, 8-15 in hi
  __m256 lo, hi;
  static Vec load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
  void store(float* p) const {
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
  }
  static Vec set1(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
  static Vec add(Vec a, Vec b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
  static Vec sub(Vec a, Vec b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
  static Vec mul(Vec a, Vec b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
  static Vec div(Vec a, Vec b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
  static Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
  static Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
  static Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
  static Vec round(Vec a) {
    constexpr int kMode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    return {_mm256_round_ps(a.lo, kMode), _mm256_round_ps(a.hi, kMode)};
  }
  static __m256 pow2(__m256 n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static Vec pow2(Vec n) { return {pow2(n.lo), pow2(n.hi)}; }
  float sum() const {
    const __m256 a = _mm256_add_ps(lo, hi);  // l + (l + 8)
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
  }
};
#elif defined(__ARM_NEON) && defined(__aarch64__)
struct Vec {  // lanes 4i..4i+3 in r[i]
  float32x4_t r[4];
#define SPECDEC_NEON(expr) \
  Vec o;                   \
  for (int i = 0; i < 4; ++i) o.r[i] = (expr); \
  return o;
  static Vec load(const float* p) { SPECDEC_NEON(vld1q_f32(p + 4 * i)) }
  void store(float* p) const {
    for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, r[i]);
  }
  static Vec set1(float x) { SPECDEC_NEON(vdupq_n_f32(x)) }
  static Vec add(const Vec& a, const Vec& b) { SPECDEC_NEON(vaddq_f32(a.r[i], b.r[i])) }
  static Vec sub(const Vec& a, const Vec& b) { SPECDEC_NEON(vsubq_f32(a.r[i], b.r[i])) }
  static Vec mul(const Vec& a, const Vec& b) { SPECDEC_NEON(vmulq_f32(a.r[i], b.r[i])) }
  static Vec div(const Vec& a, const Vec& b) { SPECDEC_NEON(vdivq_f32(a.r[i], b.r[i])) }
  static Vec min(const Vec& a, const Vec& b) { SPECDEC_NEON(vbslq_f32(vcltq_f32(a.r[i], b.r[i]), a.r[i], b.r[i])) }
  static Vec max(const Vec& a, const Vec& b) { SPECDEC_NEON(vbslq_f32(vcgtq_f32(a.r[i], b.r[i]), a.r[i], b.r[i])) }
  static Vec fma(const Vec& a, const Vec& b, const Vec& c) { SPECDEC_NEON(vfmaq_f32(c.r[i], a.r[i], b.r[i])) }
  static Vec round(const Vec& a) { SPECDEC_NEON(vrndnq_f32(a.r[i])) }
  static Vec pow2(const Vec& n) {
    SPECDEC_NEON(vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n.r[i]), vdupq_n_s32(127)), 23)))
  }
#undef SPECDEC_NEON
  float sum() const {
    const float32x4_t a = vaddq_f32(r[0], r[2]), b = vaddq_f32(r[1], r[3]);  // l + (l + 8)
    const float32x4_t c = vaddq_f32(a, b);                                     // + 4
    const float32x2_t d = vadd_f32(vget_low_f32(c), vget_high_f32(c));         // + 2
    return vget_lane_f32(d, 0) + vget_lane_f32(d, 1);                          // + 1
  }
};
#else
using Vec = Ref;
#endif

// 16 floats from p[0, n) (n <= 16), the rest zero.
template <class V>
inline V load_part(const float* p, int64_t n) {
  float t[kLanes] = {};
  std::memcpy(t, p, sizeof(float) * static_cast<size_t>(n));
  return V::load(t);
}

// e^x to about 2 ulp: a fixed sequence of operations (a range clamp, n = round(x / ln 2), a
// two-part reduction, a degree-7 polynomial, a scale by 2^n).
template <class V>
inline V exp(V x) {
  x = V::min(V::max(x, V::set1(-87.0f)), V::set1(88.0f));
  const V n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  V r = V::fma(n, V::set1(-0.693145751953125f), x);
  r = V::fma(n, V::set1(-1.428606765330187045e-06f), r);
  V p = V::set1(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = V::fma(p, r, V::set1(c));
  return V::mul(p, V::pow2(n));
}

// sum_i a[i] b[i]: element i into lane i % 16 by fused multiply-adds, then the lane tree.
template <class V>
inline float dot(const float* a, const float* b, int64_t n) {
  V acc = V::set1(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = V::fma(V::load(a + i), V::load(b + i), acc);
  if (i < n) acc = V::fma(load_part<V>(a + i, n - i), load_part<V>(b + i, n - i), acc);
  return acc.sum();
}

// sum_i a[i]: element i into lane i % 16, then the lane tree.
template <class V>
inline float total(const float* a, int64_t n) {
  V acc = V::set1(0.0f);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc = V::add(acc, V::load(a + i));
  if (i < n) acc = V::add(acc, load_part<V>(a + i, n - i));
  return acc.sum();
}

// a[i] = e^(a[i] - m) for i < n.
template <class V>
inline void exp_shifted(float* a, int64_t n, float m) {
  const V mv = V::set1(m);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) exp(V::sub(V::load(a + i), mv)).store(a + i);
  if (i < n) {
    float t[kLanes];
    exp(V::sub(load_part<V>(a + i, n - i), mv)).store(t);
    std::memcpy(a + i, t, sizeof(float) * static_cast<size_t>(n - i));
  }
}

// out[d] += p * v[d] for d < n (one fused multiply-add per element).
template <class V>
inline void axpy(float p, const float* v, float* out, int64_t n) {
  const V pv = V::set1(p);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) V::fma(pv, V::load(v + i), V::load(out + i)).store(out + i);
  for (; i < n; ++i) out[i] = std::fma(p, v[i], out[i]);
}

// o[j] = silu(g[j]) u[j] = g[j] / (1 + e^-g[j]) u[j].
template <class V>
inline void silu_mul(const float* g, const float* u, float* o, int64_t n) {
  const V one = V::set1(1.0f), zero = V::set1(0.0f);
  for (int64_t j = 0; j < n; j += kLanes) {
    const int64_t m = n - j < kLanes ? n - j : kLanes;
    const V x = load_part<V>(g + j, m);
    const V y = V::mul(V::div(x, V::add(one, exp(V::sub(zero, x)))), load_part<V>(u + j, m));
    float t[kLanes];
    y.store(t);
    std::memcpy(o + j, t, sizeof(float) * static_cast<size_t>(m));
  }
}

// One head of one row: softmax(q K^T / sqrt(hd)) V over keys slot(0..n): key j at k + slot(j) *
// kstride. ``scores`` holds n floats of scratch. The same floats whatever else is computed.
template <class V, class Slot>
inline void attend(const float* q, const float* k, const float* v, int64_t kstride, int64_t n, const Slot& slot,
                   int64_t hd, float* scores, float* out) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = dot<V>(q, k + slot(j) * kstride, hd) * scale;
    m = std::fmax(m, scores[j]);
  }
  exp_shifted<V>(scores, n, m);
  const float inv = 1.0f / total<V>(scores, n);
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n; ++j) axpy<V>(scores[j] * inv, v + slot(j) * kstride, out, hd);
}

}  // namespace specdec::lanes
