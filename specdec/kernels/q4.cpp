// GGUF-style block linears on the CPU: Q4_1 and Q8_0 weights times activations quantized to int8
// per block of 32, integer dot products (AVX-512 VNNI where the CPU has it).
//
// Contract (specdec/models/blocks.py packs the operands; specdec/kernels/q4.h declares these):
// Weights come in tiles of 16 output rows: for tile j, block g (32 input columns) and quad c
// (columns 4c..4c+3 of the block), 64 values e = o * 4 + i (output 16j + o, column 32g + 4c + i).
// - q4_linear(x [T, K] f32, qs [N/16, G, 8, 32] u8, d [N/16, G, 16] f16, m [N/16, G, 16] f16):
//   q (0..15) with byte b of a quad holding e = b in its low nibble, e = b + 32 in its high one;
//   output n of row t = sum over blocks g of d[n,g] dx[t,g] <q[n,g], qx[t,g]> + m[n,g] sx[t,g], where
//   x's block is quantized as qx = round(x / dx), dx = max|x| / 127, and sx is its exact float sum.
// - q8_linear(x, qs [N/16, G, 8, 64] u8 (q + 128, q in -127..127), d [N/16, G, 16] f16): the same
//   without the minimum.
// N must be a multiple of 16 and K of 32. Returns [T, N] f32.
//
// Why: torch's int4 CPU kernel converts to bfloat16 and its cost grows about linearly with the
// rows (3-4x from 1 to 5 rows here), so verifying k drafted tokens costs k plain steps. Here the
// 16 lanes of a register are 16 outputs: each weight quad is unpacked once and multiplied into
// every row with one integer dot-product instruction, so a k-row forward costs little more than
// one, which is the thesis speculative decoding rests on. Exactness: an output's value is a fixed
// sequence of operations on its own row (integer sums are exact; one float multiply-add per block
// in block order), whatever T and however the tiles are split among threads, so the verifier's
// rows are bit for bit the plain step's.

#include "q4.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace specdec {
namespace {

constexpr int64_t kBlock = 32;
constexpr int64_t kRowsAtOnce = 8;
constexpr int64_t kAhead = 4;  // blocks prefetched ahead of the one computed

struct Quantized {  // one activation matrix, per block of 32
  std::vector<int8_t> q;      // [T, K]
  std::vector<float> scale;   // [T, G]: dx
  std::vector<float> sum;     // [T, G]: the exact float sum of the block's x
  std::vector<int32_t> corr;  // [T, G]: -128 * sum of the block's qx (Q8_0's stored offset taken back)
};

Quantized quantize(const float* x, int64_t T, int64_t K) {
  const int64_t G = K / kBlock;
  Quantized a{std::vector<int8_t>(T * K), std::vector<float>(T * G), std::vector<float>(T * G),
              std::vector<int32_t>(T * G)};
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t g = 0; g < G; ++g) {
      const float* b = x + t * K + g * kBlock;
      float amax = 0.0f, s = 0.0f;
      for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::abs(b[i]));
      for (int64_t i = 0; i < kBlock; ++i) s += b[i];
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int8_t* q = a.q.data() + t * K + g * kBlock;
      int32_t qsum = 0;
      for (int64_t i = 0; i < kBlock; ++i) {
        q[i] = static_cast<int8_t>(std::nearbyint(b[i] * inv));
        qsum += q[i];
      }
      a.scale[t * G + g] = amax / 127.0f;
      a.sum[t * G + g] = s;
      a.corr[t * G + g] = -128 * qsum;
    }
  }
  return a;
}

struct Tile {  // one tile's weights (16 outputs), d and m (m null for Q8_0)
  const uint8_t* w;
  const at::Half* d;
  const at::Half* m;
};

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
inline __m512i quad4(const uint8_t* p) {  // 32 bytes -> 64 nibbles, low ones first
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(raw, mask), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m512 halves(const at::Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// NT rows (from t0) of one tile: out[r * N + o] for its 16 outputs.
template <bool kQ4, int NT>
void tile_rows(const Quantized& a, int64_t t0, int64_t K, const Tile& tile, float* out, int64_t N) {
  const int64_t G = K / kBlock;
  __m512 acc[NT];
  for (int r = 0; r < NT; ++r) acc[r] = _mm512_setzero_ps();
  constexpr int64_t kBytes = kQ4 ? 256 : 512;  // one block of a tile
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t b = 0; b < kBytes; b += 64)  // the stream a block ahead (measured: 10-30% at one row)
      _mm_prefetch(reinterpret_cast<const char*>(tile.w + (g + kAhead) * kBytes + b), _MM_HINT_T0);
    __m512i w[8];
    for (int c = 0; c < 8; ++c) w[c] = kQ4 ? quad4(tile.w + (g * 8 + c) * 32) : _mm512_loadu_si512(tile.w + (g * 8 + c) * 64);
    const __m512 d = halves(tile.d + g * 16);
    const __m512 m = kQ4 ? halves(tile.m + g * 16) : _mm512_setzero_ps();
    for (int r = 0; r < NT; ++r) {
      const int64_t t = t0 + r;
      const int32_t* xq = reinterpret_cast<const int32_t*>(a.q.data() + t * K + g * kBlock);
      __m512i even = kQ4 ? _mm512_setzero_si512() : _mm512_set1_epi32(a.corr[t * G + g]), odd = _mm512_setzero_si512();
      for (int c = 0; c < 8; c += 2) {  // two chains of integer sums: exact either way, half the latency
        even = _mm512_dpbusd_epi32(even, w[c], _mm512_set1_epi32(xq[c]));
        odd = _mm512_dpbusd_epi32(odd, w[c + 1], _mm512_set1_epi32(xq[c + 1]));
      }
      const __m512i isum = _mm512_add_epi32(even, odd);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, _mm512_set1_ps(a.scale[t * G + g])), acc[r]);
      if (kQ4) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(a.sum[t * G + g]), acc[r]);
    }
  }
  for (int r = 0; r < NT; ++r) _mm512_storeu_ps(out + r * N, acc[r]);
}
#else
// Without AVX-512 VNNI the block formats are not offered (models/blocks.py asks ``vnni()``).
template <bool kQ4, int NT>
void tile_rows(const Quantized&, int64_t, int64_t, const Tile&, float*, int64_t) {
  TORCH_CHECK(false, "the block linears need AVX-512 VNNI");
}
#endif

template <bool kQ4>
void tile_any(const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out, int64_t N) {
  switch (nt) {
    case 1: return tile_rows<kQ4, 1>(a, t0, K, tile, out, N);
    case 2: return tile_rows<kQ4, 2>(a, t0, K, tile, out, N);
    case 3: return tile_rows<kQ4, 3>(a, t0, K, tile, out, N);
    case 4: return tile_rows<kQ4, 4>(a, t0, K, tile, out, N);
    case 5: return tile_rows<kQ4, 5>(a, t0, K, tile, out, N);
    case 6: return tile_rows<kQ4, 6>(a, t0, K, tile, out, N);
    case 7: return tile_rows<kQ4, 7>(a, t0, K, tile, out, N);
    default: return tile_rows<kQ4, 8>(a, t0, K, tile, out, N);
  }
}

template <bool kQ4>
at::Tensor block_linear(const at::Tensor& x_in, const at::Tensor& qs, const at::Tensor& d, const at::Tensor* m) {
  const at::Tensor x = x_in.contiguous().to(at::kFloat);
  const int64_t T = x.size(0), K = x.size(1), G = K / kBlock, tiles = qs.size(0), N = 16 * tiles;
  TORCH_CHECK(K % kBlock == 0 && qs.size(1) == G && d.size(0) == tiles && d.size(1) == G, "operand shapes");
  const Quantized a = quantize(x.data_ptr<float>(), T, K);
  at::Tensor y = at::empty({T, N}, x.options());
  float* Y = y.data_ptr<float>();
  const uint8_t* W = qs.data_ptr<uint8_t>();
  const at::Half* D = d.data_ptr<at::Half>();
  const at::Half* M = m ? m->data_ptr<at::Half>() : nullptr;
  const int64_t wtile = qs.stride(0);
  at::parallel_for(0, tiles, 4, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const Tile tile{W + j * wtile, D + j * G * 16, M ? M + j * G * 16 : nullptr};
      for (int64_t t0 = 0; t0 < T; t0 += kRowsAtOnce)
        tile_any<kQ4>(a, t0, std::min(kRowsAtOnce, T - t0), K, tile, Y + t0 * N + 16 * j, N);
    }
  });
  return y;
}

}  // namespace

at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, const at::Tensor& m) {
  return block_linear<true>(x.dim() == 1 ? x.view({1, -1}) : x, qs, d, &m);
}

at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d) {
  return block_linear<false>(x.dim() == 1 ? x.view({1, -1}) : x, qs, d, nullptr);
}

bool vnni() {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  return true;
#else
  return false;
#endif
}

}  // namespace specdec
