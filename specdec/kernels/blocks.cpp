// Block linears in plain C++: one design, one integer dot-product path per ISA, the same bits.
//
// Contract: blocks.h. Paths, chosen by the compiler's macros for the -march this file is built with
// (specdec/kernels/__init__.py), each computing blocks.h's sequence exactly:
// - avx512vnni: 16 outputs in one register, vpdpbusd (u8 weights x s8 activations) per quad.
// - avxvnni:    16 outputs in two 8-lane registers, the 256-bit vpdpbusd.
// - avx2:       two 8-lane registers; Q4_1 by vpmaddubsw on the unsigned nibbles, eight quads summed
//               in 16 bits (|sum| <= 8 * 2 * 15 * 127 = 30480, no saturation), one vpmaddwd per block;
//               Q8_0 by the sign trick (|q| x sign(x, q): pairs <= 2 * 127 * 127, no saturation).
// - neon-dotprod: four 4-lane registers, sdot (vdotq_s32) per quad.
// - reference:  plain loops (any CPU, and the standard every path is tested against).
// Integer sums are exact on every path; the float steps after them are one convert, one multiply
// (d dx) and one or two fused multiply-adds per block, in that order, lane by lane: identical
// roundings everywhere. The file is built with -ffp-contract=off so the reference's d * dx is never
// fused by the compiler either.
//
// Why integer dot products: each unpacked weight quad is reused for every row, so a k-row verify
// costs little more than one plain step (torch's int4 kernel does a float multiply-add per weight
// per row, so its verify cost grows like k steps).

#include "blocks.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace specdec::blocks {

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in float
    const float f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  const uint32_t bits = exp == 31 ? sign | 0x7F800000u | (man << 13) : sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void quantize(const float* x, int64_t T, int64_t K, Quantized& a) {
  const int64_t G = K / kBlock;
  a.q.assign(T * K, 0);
  a.scale.assign(T * G, 0.0f);
  a.sum.assign(T * G, 0.0f);
  a.qsum.assign(T * G, 0);
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
      a.qsum[t * G + g] = qsum;
    }
  }
}

namespace {

inline int weight(bool q4, const uint8_t* quad, int e) {  // value e of a quad (blocks.h's layout)
  if (q4) return e < 32 ? quad[e] & 0x0F : quad[e - 32] >> 4;
  return static_cast<int>(quad[e]) - 128;
}

inline int32_t x4(const int8_t* p) {  // four activation bytes as one 32-bit word
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

void tile_rows_reference(bool q4, const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out,
                         int64_t N) {
  const int64_t G = K / kBlock, quad = q4 ? 32 : 64;
  std::vector<float> acc(nt * kTile, 0.0f);
  int8_t w[kTile][kBlock];  // one block's weights unpacked: output o, column 4c + i
  for (int64_t g = 0; g < G; ++g) {
    for (int o = 0; o < kTile; ++o)
      for (int c = 0; c < 8; ++c)
        for (int i = 0; i < 4; ++i) w[o][4 * c + i] = static_cast<int8_t>(weight(q4, tile.w + (g * 8 + c) * quad, o * 4 + i));
    for (int64_t r = 0; r < nt; ++r) {
      const int64_t t = t0 + r;
      const int8_t* xq = a.q.data() + t * K + g * kBlock;
      const float dx = a.scale[t * G + g], sx = a.sum[t * G + g];
      for (int o = 0; o < kTile; ++o) {
        int32_t isum = 0;
        for (int i = 0; i < kBlock; ++i) isum += w[o][i] * xq[i];
        float& y = acc[r * kTile + o];
        y = std::fma(static_cast<float>(isum), half_to_float(tile.d[g * kTile + o]) * dx, y);
        if (q4) y = std::fma(half_to_float(tile.m[g * kTile + o]), sx, y);
      }
    }
  }
  for (int64_t r = 0; r < nt; ++r) std::memcpy(out + r * N, acc.data() + r * kTile, sizeof(float) * kTile);
}

namespace {

constexpr int64_t kAhead = 4;  // blocks prefetched ahead of the one computed

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
constexpr const char* kPath = "avx512vnni";
constexpr int64_t kRows = 8;

inline __m512i nibbles(const uint8_t* p) {  // 32 bytes -> 64 values, low nibbles first
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(raw, mask), hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m512 halves(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

template <bool kQ4, int NT>
void tile_fixed(const Quantized& a, int64_t t0, int64_t K, const Tile& tile, float* out, int64_t N) {
  const int64_t G = K / kBlock;
  constexpr int64_t kBytes = kQ4 ? 256 : 512;  // one block of a tile
  __m512 acc[NT];
  for (int r = 0; r < NT; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t b = 0; b < kBytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(tile.w + (g + kAhead) * kBytes + b), _MM_HINT_T0);
    __m512i w[8];
    for (int c = 0; c < 8; ++c)
      w[c] = kQ4 ? nibbles(tile.w + (g * 8 + c) * 32) : _mm512_loadu_si512(tile.w + (g * 8 + c) * 64);
    const __m512 d = halves(tile.d + g * 16);
    const __m512 m = kQ4 ? halves(tile.m + g * 16) : _mm512_setzero_ps();
    for (int r = 0; r < NT; ++r) {
      const int64_t t = t0 + r;
      const int8_t* xq = a.q.data() + t * K + g * kBlock;
      __m512i even = kQ4 ? _mm512_setzero_si512() : _mm512_set1_epi32(-128 * a.qsum[t * G + g]);
      __m512i odd = _mm512_setzero_si512();
      for (int c = 0; c < 8; c += 2) {  // two chains of integer sums: exact either way, half the latency
        even = _mm512_dpbusd_epi32(even, w[c], _mm512_set1_epi32(x4(xq + 4 * c)));
        odd = _mm512_dpbusd_epi32(odd, w[c + 1], _mm512_set1_epi32(x4(xq + 4 * c + 4)));
      }
      const __m512 isum = _mm512_cvtepi32_ps(_mm512_add_epi32(even, odd));
      acc[r] = _mm512_fmadd_ps(isum, _mm512_mul_ps(d, _mm512_set1_ps(a.scale[t * G + g])), acc[r]);
      if (kQ4) acc[r] = _mm512_fmadd_ps(m, _mm512_set1_ps(a.sum[t * G + g]), acc[r]);
    }
  }
  for (int r = 0; r < NT; ++r) _mm512_storeu_ps(out + r * N, acc[r]);
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#if defined(__AVXVNNI__)
#define SPECDEC_VNNI256 1
constexpr const char* kPath = "avxvnni";
#else
#define SPECDEC_VNNI256 0
constexpr const char* kPath = "avx2";
#endif
constexpr int64_t kRows = 4;

inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 halves8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// One block's integer sums for outputs 0-7 (h = 0) and 8-15 (h = 1); w as unpacked by tile_fixed.
template <bool kQ4>
inline void block_sums(const __m256i (&w)[8][2], const __m256i (&wa)[8][2], const int8_t* xq, int32_t qsum,
                       __m256i (&out)[2]) {
#if SPECDEC_VNNI256
  (void)wa;
  for (int h = 0; h < 2; ++h) {
    __m256i even = kQ4 ? _mm256_setzero_si256() : _mm256_set1_epi32(-128 * qsum), odd = _mm256_setzero_si256();
    for (int c = 0; c < 8; c += 2) {
      even = _mm256_dpbusd_avx_epi32(even, w[c][h], _mm256_set1_epi32(x4(xq + 4 * c)));
      odd = _mm256_dpbusd_avx_epi32(odd, w[c + 1][h], _mm256_set1_epi32(x4(xq + 4 * c + 4)));
    }
    out[h] = _mm256_add_epi32(even, odd);
  }
#else
  (void)qsum;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int h = 0; h < 2; ++h) {
    if (kQ4) {  // nibbles (0..15) x int8: eight quads' pair sums fit 16 bits
      __m256i s = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(w[c][h], _mm256_set1_epi32(x4(xq + 4 * c))));
      out[h] = _mm256_madd_epi16(s, ones);
    } else {  // |q| x sign(x, q) = q x, pairs within 16 bits; widened per quad
      __m256i s = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const __m256i p = _mm256_maddubs_epi16(wa[c][h], _mm256_sign_epi8(_mm256_set1_epi32(x4(xq + 4 * c)), w[c][h]));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
      }
      out[h] = s;
    }
  }
#endif
}

template <bool kQ4, int NT>
void tile_fixed(const Quantized& a, int64_t t0, int64_t K, const Tile& tile, float* out, int64_t N) {
  const int64_t G = K / kBlock;
  constexpr int64_t kBytes = kQ4 ? 256 : 512;
  constexpr bool kSigned = !kQ4 && !SPECDEC_VNNI256;  // avx2's Q8_0 sign trick
  __m256 acc[NT][2];
  for (int r = 0; r < NT; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i mask = _mm256_set1_epi8(0x0F), flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t b = 0; b < kBytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(tile.w + (g + kAhead) * kBytes + b), _MM_HINT_T0);
    __m256i w[8][2], wa[8][2];
    for (int c = 0; c < 8; ++c) {
      if (kQ4) {
        const __m256i raw = load32(tile.w + (g * 8 + c) * 32);
        w[c][0] = _mm256_and_si256(raw, mask);
        w[c][1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      } else {
        for (int h = 0; h < 2; ++h) {
          w[c][h] = load32(tile.w + (g * 8 + c) * 64 + 32 * h);
          if (kSigned) {
            w[c][h] = _mm256_xor_si256(w[c][h], flip);  // q + 128 -> q
            wa[c][h] = _mm256_abs_epi8(w[c][h]);
          }
        }
      }
    }
    const __m256 d[2] = {halves8(tile.d + g * 16), halves8(tile.d + g * 16 + 8)};
    __m256 m[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    if (kQ4) m[0] = halves8(tile.m + g * 16), m[1] = halves8(tile.m + g * 16 + 8);
    for (int r = 0; r < NT; ++r) {
      const int64_t t = t0 + r;
      __m256i isum[2];
      block_sums<kQ4>(w, wa, a.q.data() + t * K + g * kBlock, a.qsum[t * G + g], isum);
      const __m256 dx = _mm256_set1_ps(a.scale[t * G + g]), sx = _mm256_set1_ps(a.sum[t * G + g]);
      for (int h = 0; h < 2; ++h) {
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(d[h], dx), acc[r][h]);
        if (kQ4) acc[r][h] = _mm256_fmadd_ps(m[h], sx, acc[r][h]);
      }
    }
  }
  for (int r = 0; r < NT; ++r) {
    _mm256_storeu_ps(out + r * N, acc[r][0]);
    _mm256_storeu_ps(out + r * N + 8, acc[r][1]);
  }
}

#elif defined(__ARM_FEATURE_DOTPROD) && defined(__aarch64__)
constexpr const char* kPath = "neon-dotprod";
constexpr int64_t kRows = 4;

inline float32x4_t halves4(const uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

template <bool kQ4, int NT>
void tile_fixed(const Quantized& a, int64_t t0, int64_t K, const Tile& tile, float* out, int64_t N) {
  const int64_t G = K / kBlock;
  float32x4_t acc[NT][4];
  for (int r = 0; r < NT; ++r)
    for (int i = 0; i < 4; ++i) acc[r][i] = vdupq_n_f32(0.0f);
  const uint8x16_t mask = vdupq_n_u8(0x0F), flip = vdupq_n_u8(0x80);
  for (int64_t g = 0; g < G; ++g) {
    int8x16_t w[8][4];  // per quad: outputs 0-3, 4-7, 8-11, 12-15
    for (int c = 0; c < 8; ++c) {
      if (kQ4) {
        const uint8_t* p = tile.w + (g * 8 + c) * 32;
        const uint8x16_t r0 = vld1q_u8(p), r1 = vld1q_u8(p + 16);
        w[c][0] = vreinterpretq_s8_u8(vandq_u8(r0, mask));
        w[c][1] = vreinterpretq_s8_u8(vandq_u8(r1, mask));
        w[c][2] = vreinterpretq_s8_u8(vshrq_n_u8(r0, 4));
        w[c][3] = vreinterpretq_s8_u8(vshrq_n_u8(r1, 4));
      } else {
        for (int i = 0; i < 4; ++i) w[c][i] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(tile.w + (g * 8 + c) * 64 + 16 * i), flip));
      }
    }
    float32x4_t d[4], m[4];
    for (int i = 0; i < 4; ++i) {
      d[i] = halves4(tile.d + g * 16 + 4 * i);
      m[i] = kQ4 ? halves4(tile.m + g * 16 + 4 * i) : vdupq_n_f32(0.0f);
    }
    for (int r = 0; r < NT; ++r) {
      const int64_t t = t0 + r;
      const int8_t* xq = a.q.data() + t * K + g * kBlock;
      int32x4_t isum[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
      for (int c = 0; c < 8; ++c) {
        const int8x16_t xb = vreinterpretq_s8_s32(vdupq_n_s32(x4(xq + 4 * c)));
        for (int i = 0; i < 4; ++i) isum[i] = vdotq_s32(isum[i], w[c][i], xb);
      }
      const float32x4_t dx = vdupq_n_f32(a.scale[t * G + g]), sx = vdupq_n_f32(a.sum[t * G + g]);
      for (int i = 0; i < 4; ++i) {
        acc[r][i] = vfmaq_f32(acc[r][i], vcvtq_f32_s32(isum[i]), vmulq_f32(d[i], dx));
        if (kQ4) acc[r][i] = vfmaq_f32(acc[r][i], m[i], sx);
      }
    }
  }
  for (int r = 0; r < NT; ++r)
    for (int i = 0; i < 4; ++i) vst1q_f32(out + r * N + 4 * i, acc[r][i]);
}

#else
constexpr const char* kPath = "reference";
constexpr int64_t kRows = 8;

template <bool kQ4, int NT>
void tile_fixed(const Quantized& a, int64_t t0, int64_t K, const Tile& tile, float* out, int64_t N) {
  tile_rows_reference(kQ4, a, t0, NT, K, tile, out, N);
}
#endif

template <bool kQ4>
void tile_any(const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out, int64_t N) {
  switch (nt) {
    case 1: return tile_fixed<kQ4, 1>(a, t0, K, tile, out, N);
    case 2: return tile_fixed<kQ4, 2>(a, t0, K, tile, out, N);
    case 3: return tile_fixed<kQ4, 3>(a, t0, K, tile, out, N);
    case 4: return tile_fixed<kQ4, 4>(a, t0, K, tile, out, N);
    case 5: return tile_fixed<kQ4, (kRows >= 5 ? 5 : 4)>(a, t0, K, tile, out, N);
    case 6: return tile_fixed<kQ4, (kRows >= 6 ? 6 : 4)>(a, t0, K, tile, out, N);
    case 7: return tile_fixed<kQ4, (kRows >= 7 ? 7 : 4)>(a, t0, K, tile, out, N);
    default: return tile_fixed<kQ4, kRows>(a, t0, K, tile, out, N);
  }
}

}  // namespace

void tile_rows(bool q4, const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out, int64_t N) {
  for (int64_t r = 0; r < nt; r += kRows) {
    const int64_t n = std::min(kRows, nt - r);
    (q4 ? tile_any<true> : tile_any<false>)(a, t0 + r, n, K, tile, out + r * N, N);
  }
}

const char* path() { return kPath; }
int64_t rows_at_once() { return kRows; }

}  // namespace specdec::blocks
