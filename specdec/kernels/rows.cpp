// The row-exact forward of a Llama/Qwen2 decoder on 4-bit weights, every row by the same loops.
//
// Contract (specdec/kernels/__init__.py builds this file, specdec/models/native.py calls it):
// specdec_native::rows(x, w, cos, sin, ks, vs, start, vis, vis_off, H, KV, hd, eps) -> x'
// - x [T, C] float32: the hidden states of T new tokens at cache slots [start, start + T);
//   cos, sin [T, (H + KV) hd]: their rotary tables (Llama's rotate_half convention).
// - w: per layer 15 tensors: ln1 [C], qkv (3 operands, then its bias or empty), o (3), ln2 [C],
//   gate_up (3), down (3); a linear's operands are torch's _weight_int4pack_mm_for_cpu pack
//   (packed, scales-and-zeros, empty; groups of 32) or a Q4_1 block linear's (q4.cpp: nibbles, d, m),
//   as specdec/models/quant.py packs them.
// - ks, vs: per layer [KV, capacity, hd] float32 caches; row t's key and value are written at slot
//   start + t.
// - vis, vis_off: empty for a chain (row t sees slots [0, start + t]); else int64 lists, row t
//   seeing slots [0, start) and then start + vis[j] for j in [vis_off[t], vis_off[t + 1]) in order
//   (a tree node: the prefix, its ancestors, itself).
// Returns the last layer's output [T, C] (before the final norm).
//
// Why: a plain step of a small model on 4-bit weights is bound by per-operation overhead, not by
// bytes. Here norm, rotary, attention and the gated MLP's activation are plain loops, so a layer
// costs its four 4-bit matmuls and little else. Where the CPU has AVX-512, attention and the
// activation run on 16-float vectors (attend16, silu_mul): as scalar loops they cost more than the
// matmuls once a few rows are verified over a few hundred cached tokens (docs/memwall.md). Exactness: every row's floats come from the same
// loops in the same order whatever T and whatever other rows exist (the matmul kernel computes each
// output row alone, quant.row_invariant), and a tree node's keys are read in the order plain
// decoding would have them, so a verifier row is bit for bit the plain step's row.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "q4.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kStride = 15;  // tensors per layer in w

// e^x to about 2 ulp, a fixed sequence of operations (no library call, so the compiler may vectorize
// it; the same binary always computes the same value).
inline float fexp(float x) {
  x = std::fmin(std::fmax(x, -87.0f), 88.0f);
  const float n = std::nearbyint(x * 1.44269504088896341f);
  float r = std::fma(n, -0.693145751953125f, x);
  r = std::fma(n, -1.428606765330187045e-06f, r);
  float p = 1.0f / 5040;
  p = std::fma(p, r, 1.0f / 720);
  p = std::fma(p, r, 1.0f / 120);
  p = std::fma(p, r, 1.0f / 24);
  p = std::fma(p, r, 1.0f / 6);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

#if defined(__AVX512F__)
// fexp on 16 lanes: the same sequence of operations, so a lane gives what fexp gives.
inline __m512 fexp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(bits));
}

inline __mmask16 tail(int64_t left) { return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1); }
#endif

// Sums by lane (element i into lane i % 16), the lanes then added in a fixed tree: the order depends
// on n alone, never on the pointers' alignment (a compiler's reduction may peel iterations to align
// them, and a heap buffer's alignment differs from call to call).
constexpr int kLanes = 16;

inline float lanes_total(float* lane) {
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

inline float dot(const float* a, const float* b, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = std::fma(a[i + l], b[i + l], lane[l]);
  for (int l = 0; i + l < n; ++l) lane[l] = std::fma(a[i + l], b[i + l], lane[l]);
  return lanes_total(lane);
}

inline float total(const float* a, int64_t n) {
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l];
  for (int l = 0; i + l < n; ++l) lane[l] += a[i + l];
  return lanes_total(lane);
}

// out[t] = x[t] / rms(x[t]) * w, row by row.
void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t C, float eps) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * C;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, C) / static_cast<float>(C) + eps);
    float* o = out + t * C;
#pragma omp simd
    for (int64_t i = 0; i < C; ++i) o[i] = xr[i] * inv * w[i];
  }
}

// One linear's three operands: torch's int4 pack (packed, scales-and-zeros, empty) or a Q4_1 block
// linear (q4.cpp: nibbles, d, m).
at::Tensor linear(const at::Tensor& h, const at::Tensor* w, const at::Tensor* bias) {
  at::Tensor y = w[2].numel() > 0 ? specdec::q4_linear(h, w[0], w[1], w[2])
                                  : at::_weight_int4pack_mm_for_cpu(h.to(at::kBFloat16), w[0], 32, w[1]).to(at::kFloat);
  if (bias != nullptr && bias->numel() > 0) y.add_(*bias);
  return y;
}

// Rotate one head's half-split vector: out = y cos + rotate_half(y) sin.
inline void rope(const float* y, const float* c, const float* s, float* out, int64_t hd) {
  const int64_t half = hd / 2;
#pragma omp simd
  for (int64_t d = 0; d < half; ++d) out[d] = y[d] * c[d] - y[d + half] * s[d];
#pragma omp simd
  for (int64_t d = half; d < hd; ++d) out[d] = y[d] * c[d] + y[d - half] * s[d];
}

struct Keys {
  int64_t start, n;          // prefix slots [0, start), then n more
  const int64_t* more;       // their slots' offsets from start (nullptr: 0, 1, ..., n - 1)
  int64_t slot(int64_t j) const { return j < start ? j : start + (more ? more[j - start] : j - start); }
  int64_t size() const { return start + n; }
};

// One head of one row: softmax(q K^T / sqrt(hd)) V over the keys' slots, in slot-list order.
void attend(const float* q, const float* k, const float* v, int64_t kstride, const Keys& keys, int64_t hd,
            float* scores, float* out) {
  const int64_t n = keys.size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = dot(q, k + keys.slot(j) * kstride, hd) * scale;
    m = std::fmax(m, scores[j]);
  }
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) scores[j] = fexp(scores[j] - m);
  const float inv = 1.0f / total(scores, n);
  for (int64_t d = 0; d < hd; ++d) out[d] = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float p = scores[j] * inv;
    const float* vr = v + keys.slot(j) * kstride;
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) out[d] += p * vr[d];
  }
}

#if defined(__AVX512F__)
// attend() with 16-float vectors (hd a multiple of 16): one key's dot product is hd / 16
// multiply-adds and one lane reduction, the softmax runs 16 scores at a time, and the value sum
// keeps hd / 16 accumulators. A fixed sequence for a given (q, keys, hd), like the scalar loops,
// so a row's floats still do not depend on the other rows.
void attend16(const float* q, const float* k, const float* v, int64_t kstride, const Keys& keys, int64_t hd,
              float* scores, float* out) {
  const int64_t n = keys.size(), nv = hd / 16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  __m512 qv[16];  // hd <= 256
  for (int64_t c = 0; c < nv; ++c) qv[c] = _mm512_loadu_ps(q + 16 * c);
  float m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const float* kr = k + keys.slot(j) * kstride;
    __m512 acc = _mm512_mul_ps(qv[0], _mm512_loadu_ps(kr));
    for (int64_t c = 1; c < nv; ++c) acc = _mm512_fmadd_ps(qv[c], _mm512_loadu_ps(kr + 16 * c), acc);
    scores[j] = _mm512_reduce_add_ps(acc) * scale;
    m = std::fmax(m, scores[j]);
  }
  const __m512 mv = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 live = tail(n - j);
    const __m512 e = fexp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, scores + j), mv));
    _mm512_mask_storeu_ps(scores + j, live, e);
    sum = _mm512_mask_add_ps(sum, live, sum, e);
  }
  const float inv = 1.0f / _mm512_reduce_add_ps(sum);
  __m512 acc[16];
  for (int64_t c = 0; c < nv; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m512 p = _mm512_set1_ps(scores[j] * inv);
    const float* vr = v + keys.slot(j) * kstride;
    for (int64_t c = 0; c < nv; ++c) acc[c] = _mm512_fmadd_ps(p, _mm512_loadu_ps(vr + 16 * c), acc[c]);
  }
  for (int64_t c = 0; c < nv; ++c) _mm512_storeu_ps(out + 16 * c, acc[c]);
}

// The gated MLP's activation, silu(g) * u, 16 at a time.
void silu_mul(const float* g, const float* u, float* o, int64_t I) {
  for (int64_t j = 0; j < I; j += 16) {
    const __mmask16 live = tail(I - j);
    const __m512 x = _mm512_maskz_loadu_ps(live, g + j);
    const __m512 e = fexp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    const __m512 y = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(o + j, live, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(live, u + j)));
  }
}
constexpr bool kVectors = true;
#else
void attend16(const float*, const float*, const float*, int64_t, const Keys&, int64_t, float*, float*) {}
void silu_mul(const float* g, const float* u, float* o, int64_t I) {
#pragma omp simd
  for (int64_t j = 0; j < I; ++j) o[j] = g[j] / (1.0f + fexp(-g[j])) * u[j];
}
constexpr bool kVectors = false;
#endif

Keys keys_of(int64_t t, int64_t start, const at::Tensor& vis, const at::Tensor& off) {
  if (vis.numel() == 0 && off.numel() == 0) return {start, t + 1, nullptr};
  const int64_t* o = off.data_ptr<int64_t>();
  return {start, o[t + 1] - o[t], vis.data_ptr<int64_t>() + o[t]};
}

at::Tensor rows(at::Tensor x, std::vector<at::Tensor> w, at::Tensor cos, at::Tensor sin, std::vector<at::Tensor> ks,
                std::vector<at::Tensor> vs, int64_t start, at::Tensor vis, at::Tensor vis_off, int64_t H, int64_t KV,
                int64_t hd, double eps_d) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x must be [T, C] float32");
  TORCH_CHECK(static_cast<int64_t>(w.size()) == kStride * static_cast<int64_t>(ks.size()), "15 weights per layer");
  x = x.contiguous().clone();
  cos = cos.contiguous();
  sin = sin.contiguous();
  vis = vis.contiguous();
  vis_off = vis_off.contiguous();
  const int64_t T = x.size(0), C = x.size(1), D = (H + KV) * hd, group = H / KV;
  const float eps = static_cast<float>(eps_d);
  at::Tensor h = at::empty({T, C}, x.options());
  at::Tensor q = at::empty({T, H * hd}, x.options());
  at::Tensor att = at::empty({T, H * hd}, x.options());
  const int64_t most = start + T;
  float* X = x.data_ptr<float>();
  for (size_t l = 0; l < ks.size(); ++l) {
    const at::Tensor* L = w.data() + l * kStride;
    at::Tensor& kc = ks[l];
    at::Tensor& vc = vs[l];
    TORCH_CHECK(kc.is_contiguous() && vc.is_contiguous() && kc.size(1) >= most, "caches must hold the new slots");
    const int64_t cap = kc.size(1);
    float* K = kc.data_ptr<float>();
    float* V = vc.data_ptr<float>();
    rms_norm(X, L[0].data_ptr<float>(), h.data_ptr<float>(), T, C, eps);
    at::Tensor y = linear(h, L + 1, &L[4]);
    const float* Y = y.data_ptr<float>();
    const int64_t yw = y.size(1);
    for (int64_t t = 0; t < T; ++t) {
      const float *yr = Y + t * yw, *c = cos.data_ptr<float>() + t * D, *s = sin.data_ptr<float>() + t * D;
      for (int64_t i = 0; i < H; ++i) rope(yr + i * hd, c + i * hd, s + i * hd, q.data_ptr<float>() + t * H * hd + i * hd, hd);
      for (int64_t g = 0; g < KV; ++g) {
        const int64_t slot = start + t;
        rope(yr + (H + g) * hd, c + (H + g) * hd, s + (H + g) * hd, K + (g * cap + slot) * hd, hd);
        std::memcpy(V + (g * cap + slot) * hd, yr + D + g * hd, hd * sizeof(float));
      }
    }
    const float* Qp = q.data_ptr<float>();
    const bool vec = kVectors && hd % 16 == 0 && hd <= 256;
    float* A = att.data_ptr<float>();
    at::parallel_for(0, T * H, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> scores(most);
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t t = i / H, head = i % H, g = head / group;
        const Keys keys = keys_of(t, start, vis, vis_off);
        (vec ? attend16 : attend)(Qp + i * hd, K + g * cap * hd, V + g * cap * hd, hd, keys, hd, scores.data(),
                                  A + i * hd);
      }
    });
    x.add_(linear(att, L + 5, nullptr));
    rms_norm(X, L[8].data_ptr<float>(), h.data_ptr<float>(), T, C, eps);
    at::Tensor gu = linear(h, L + 9, nullptr);
    const int64_t I = gu.size(1) / 2;
    at::Tensor a = at::empty({T, I}, x.options());
    float* G = gu.data_ptr<float>();
    float* Ap = a.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) silu_mul(G + t * 2 * I, G + t * 2 * I + I, Ap + t * I, I);
    x.add_(linear(a, L + 12, nullptr));
  }
  return x;
}

}  // namespace

TORCH_LIBRARY(specdec_native, m) {
  m.def(
      "rows(Tensor x, Tensor[] w, Tensor cos, Tensor sin, Tensor[] ks, Tensor[] vs, int start, Tensor vis, "
      "Tensor vis_off, int H, int KV, int hd, float eps) -> Tensor",
      &rows);
  m.def("q4_linear(Tensor x, Tensor qs, Tensor d, Tensor m) -> Tensor", &specdec::q4_linear);
  m.def("q8_linear(Tensor x, Tensor qs, Tensor d) -> Tensor", &specdec::q8_linear);
  m.def("vnni() -> bool", &specdec::vnni);
}
