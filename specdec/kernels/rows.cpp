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
// specdec_native::rows_slots(x, w, cos, sin, ks, vs, slot, start, at, vis, vis_off, H, KV, hd, eps):
// the same for rows of many sequences in one call (the batch target, specdec/models/lean_rows.py):
// per layer [S, KV, capacity, hd] caches, and per row its slot, prefix length and write position
// (at rows_slots below); each row's floats are what ``rows`` gives that row of its sequence alone.
// specdec_native::norm(x, w, eps): that final RMSNorm by the same loops (so a forward's floats are
// this file's and the kernels' alone, the same on every CPU).
//
// Why: a plain step of a small model on 4-bit weights is bound by per-operation overhead, not by
// bytes. Here norm, rotary, attention and the gated MLP's activation are plain loops, so a layer
// costs its four 4-bit matmuls and little else. Attention, SiLU and the norms' sums run on lanes.h's
// 16 float lanes (one AVX-512 register, two AVX2 ones, four NEON ones, or plain loops): as scalar
// loops they cost more than the matmuls once a few rows are verified over a few hundred cached
// tokens (docs/memwall.md). Exactness: every row's floats come from the same loops in the same
// order whatever T and whatever other rows exist (the matmul kernel computes each output row alone,
// quant.row_invariant), and a tree node's keys are read in the order plain decoding would have
// them, so a verifier row is bit for bit the plain step's row; with Q4_1 weights the bits are also
// the same on every CPU (lanes.h, blocks.h), with torch's int4 kernel they are torch's.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "blocks.h"
#include "lanes.h"
#include "q4.h"

#include <cmath>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kStride = 15;  // tensors per layer in w

using specdec::lanes::Vec;

// out[t] = x[t] / rms(x[t]) * w, row by row.
void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t C, float eps) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * C;
    const float inv = 1.0f / std::sqrt(specdec::lanes::dot<Vec>(xr, xr, C) / static_cast<float>(C) + eps);
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

// Per row t of a call: the cache slot its key and value go to (``slot``: which sequence, ``at``: which
// position) and the keys it attends over, in order.
struct Plan {
  std::vector<int64_t> slot, at;
  std::vector<Keys> keys;
  int64_t most = 0;  // the longest key list
  void add(int64_t s, int64_t a, Keys k) {
    slot.push_back(s);
    at.push_back(a);
    keys.push_back(k);
    most = std::max(most, k.size());
  }
};

// The forward of T rows through every layer. ks, vs: per layer [S, KV, capacity, hd] (or [KV,
// capacity, hd], S = 1) float32 caches.
at::Tensor forward(at::Tensor x, const std::vector<at::Tensor>& w, at::Tensor cos, at::Tensor sin,
                   std::vector<at::Tensor>& ks, std::vector<at::Tensor>& vs, const Plan& plan, int64_t H, int64_t KV,
                   int64_t hd, double eps_d) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat, "x must be [T, C] float32");
  TORCH_CHECK(static_cast<int64_t>(w.size()) == kStride * static_cast<int64_t>(ks.size()), "15 weights per layer");
  x = x.contiguous().clone();
  cos = cos.contiguous();
  sin = sin.contiguous();
  const int64_t T = x.size(0), C = x.size(1), D = (H + KV) * hd, group = H / KV;
  TORCH_CHECK(static_cast<int64_t>(plan.at.size()) == T, "one plan entry per row");
  const float eps = static_cast<float>(eps_d);
  at::Tensor h = at::empty({T, C}, x.options());
  at::Tensor q = at::empty({T, H * hd}, x.options());
  at::Tensor att = at::empty({T, H * hd}, x.options());
  float* X = x.data_ptr<float>();
  for (size_t l = 0; l < ks.size(); ++l) {
    const at::Tensor* L = w.data() + l * kStride;
    at::Tensor& kc = ks[l];
    at::Tensor& vc = vs[l];
    const int64_t cap = kc.size(-2), slots = kc.numel() / (KV * cap * hd), per_slot = KV * cap * hd;
    TORCH_CHECK(kc.is_contiguous() && vc.is_contiguous() && kc.size(-1) == hd && kc.size(-3) == KV, "cache shapes");
    for (int64_t t = 0; t < T; ++t)
      TORCH_CHECK(plan.slot[t] < slots && plan.at[t] < cap && plan.keys[t].size() <= cap, "caches must hold the rows");
    float* K = kc.data_ptr<float>();
    float* V = vc.data_ptr<float>();
    rms_norm(X, L[0].data_ptr<float>(), h.data_ptr<float>(), T, C, eps);
    at::Tensor y = linear(h, L + 1, &L[4]);
    const float* Y = y.data_ptr<float>();
    const int64_t yw = y.size(1);
    for (int64_t t = 0; t < T; ++t) {
      const float *yr = Y + t * yw, *c = cos.data_ptr<float>() + t * D, *s = sin.data_ptr<float>() + t * D;
      for (int64_t i = 0; i < H; ++i) rope(yr + i * hd, c + i * hd, s + i * hd, q.data_ptr<float>() + t * H * hd + i * hd, hd);
      float *Ks = K + plan.slot[t] * per_slot, *Vs = V + plan.slot[t] * per_slot;
      for (int64_t g = 0; g < KV; ++g) {
        const int64_t at = plan.at[t];
        rope(yr + (H + g) * hd, c + (H + g) * hd, s + (H + g) * hd, Ks + (g * cap + at) * hd, hd);
        std::memcpy(Vs + (g * cap + at) * hd, yr + D + g * hd, hd * sizeof(float));
      }
    }
    const float* Qp = q.data_ptr<float>();
    float* A = att.data_ptr<float>();
    at::parallel_for(0, T * H, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> scores(plan.most);
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t t = i / H, head = i % H, g = head / group;
        const Keys& keys = plan.keys[t];
        const float *Ks = K + plan.slot[t] * per_slot + g * cap * hd, *Vs = V + plan.slot[t] * per_slot + g * cap * hd;
        specdec::lanes::attend<Vec>(Qp + i * hd, Ks, Vs, hd, keys.size(), [&](int64_t j) { return keys.slot(j); }, hd,
                                    scores.data(), A + i * hd);
      }
    });
    x.add_(linear(att, L + 5, nullptr));
    rms_norm(X, L[8].data_ptr<float>(), h.data_ptr<float>(), T, C, eps);
    at::Tensor gu = linear(h, L + 9, nullptr);
    const int64_t I = gu.size(1) / 2;
    at::Tensor a = at::empty({T, I}, x.options());
    float* G = gu.data_ptr<float>();
    float* Ap = a.data_ptr<float>();
    for (int64_t t = 0; t < T; ++t) specdec::lanes::silu_mul<Vec>(G + t * 2 * I, G + t * 2 * I + I, Ap + t * I, I);
    x.add_(linear(a, L + 12, nullptr));
  }
  return x;
}

// One sequence: row t at slot start + t, seeing [0, start + t] (a chain) or its tree list.
at::Tensor rows(at::Tensor x, std::vector<at::Tensor> w, at::Tensor cos, at::Tensor sin, std::vector<at::Tensor> ks,
                std::vector<at::Tensor> vs, int64_t start, at::Tensor vis, at::Tensor vis_off, int64_t H, int64_t KV,
                int64_t hd, double eps) {
  vis = vis.contiguous();
  vis_off = vis_off.contiguous();
  Plan plan;
  const bool chain = vis.numel() == 0 && vis_off.numel() == 0;
  const int64_t* o = chain ? nullptr : vis_off.data_ptr<int64_t>();
  for (int64_t t = 0; t < x.size(0); ++t)
    plan.add(0, start + t, chain ? Keys{start, t + 1, nullptr} : Keys{start, o[t + 1] - o[t], vis.data_ptr<int64_t>() + o[t]});
  return forward(x, w, cos, sin, ks, vs, plan, H, KV, hd, eps);
}

// Many sequences in one call (the batch target): row t belongs to cache slot slot[t], whose prefix
// holds start[t] positions; its key goes to position at[t] (start[t] + its index among its
// sequence's new rows); it sees [0, at[t]] (a chain: vis_off[t + 1] == vis_off[t]) or [0, start[t])
// and then start[t] + vis[j] for j in [vis_off[t], vis_off[t + 1]) (a tree node).
at::Tensor rows_slots(at::Tensor x, std::vector<at::Tensor> w, at::Tensor cos, at::Tensor sin,
                      std::vector<at::Tensor> ks, std::vector<at::Tensor> vs, at::Tensor slot, at::Tensor start,
                      at::Tensor at, at::Tensor vis, at::Tensor vis_off, int64_t H, int64_t KV, int64_t hd, double eps) {
  slot = slot.contiguous();
  start = start.contiguous();
  at = at.contiguous();
  vis = vis.contiguous();
  vis_off = vis_off.contiguous();
  const int64_t T = x.size(0);
  TORCH_CHECK(slot.numel() == T && start.numel() == T && at.numel() == T && vis_off.numel() == T + 1, "per-row lists");
  const int64_t *S = slot.data_ptr<int64_t>(), *L = start.data_ptr<int64_t>(), *A = at.data_ptr<int64_t>();
  const int64_t* o = vis_off.data_ptr<int64_t>();
  const int64_t* v = vis.numel() > 0 ? vis.data_ptr<int64_t>() : nullptr;
  Plan plan;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = o[t + 1] - o[t];
    plan.add(S[t], A[t], n == 0 ? Keys{L[t], A[t] - L[t] + 1, nullptr} : Keys{L[t], n, v + o[t]});
  }
  return forward(x, w, cos, sin, ks, vs, plan, H, KV, hd, eps);
}

// The final norm of the native forward: rms_norm row by row, the same floats on every CPU.
at::Tensor norm(at::Tensor x, at::Tensor w, double eps) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == at::kFloat && w.scalar_type() == at::kFloat, "x [T, C], w [C] float32");
  x = x.contiguous();
  w = w.contiguous();
  at::Tensor out = at::empty_like(x);
  rms_norm(x.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), x.size(0), x.size(1), static_cast<float>(eps));
  return out;
}

}  // namespace

TORCH_LIBRARY(specdec_native, m) {
  m.def(
      "rows(Tensor x, Tensor[] w, Tensor cos, Tensor sin, Tensor[] ks, Tensor[] vs, int start, Tensor vis, "
      "Tensor vis_off, int H, int KV, int hd, float eps) -> Tensor",
      &rows);
  m.def(
      "rows_slots(Tensor x, Tensor[] w, Tensor cos, Tensor sin, Tensor[] ks, Tensor[] vs, Tensor slot, Tensor start, "
      "Tensor at, Tensor vis, Tensor vis_off, int H, int KV, int hd, float eps) -> Tensor",
      &rows_slots);
  m.def("q4_linear(Tensor x, Tensor qs, Tensor d, Tensor m, bool reference=False) -> Tensor", &specdec::q4_linear);
  m.def("q8_linear(Tensor x, Tensor qs, Tensor d, bool reference=False) -> Tensor", &specdec::q8_linear);
  m.def("norm(Tensor x, Tensor w, float eps) -> Tensor", &norm);
  m.def("path() -> str", [] { return std::string(specdec::blocks::path()); });
}
