// Self-test of the kernels' core, without torch: every path this build compiled against the reference,
// bit for bit, and row t of a T-row call against a one-row call.
//
// Contract: built from selftest.cpp and blocks.cpp alone (specdec/kernels/selftest.py builds it for
// this CPU, for another -march, or cross-compiled for aarch64 and run under qemu). Prints one line
//   path=<integer path> lanes=<float path> checks=<n> failures=<n> hash=<16 hex digits>
// and exits 0 only if there were no failures. The inputs come from a fixed integer generator, so the
// hash (FNV-1a over every output's bytes) is the same on every machine whose paths agree with the
// reference: equal hashes from x86 and ARM builds prove them bit-identical to each other.

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "blocks.h"
#include "lanes.h"

namespace {

using namespace specdec;

struct Rng {  // splitmix64: the same numbers everywhere
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  float uniform() { return static_cast<float>(below(2000001) - 1000000) * 1e-6f; }  // [-1, 1], exact grid
};

struct Checks {
  int n = 0, failures = 0;
  uint64_t hash = 0xCBF29CE484222325ull;
  void eat(const void* p, size_t bytes) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < bytes; ++i) hash = (hash ^ b[i]) * 0x100000001B3ull;
  }
  void same(const char* what, const float* a, const float* b, size_t count) {
    ++n;
    eat(a, count * sizeof(float));
    if (std::memcmp(a, b, count * sizeof(float)) != 0) {
      ++failures;
      std::fprintf(stderr, "selftest: %s differs\n", what);
    }
  }
};

uint16_t half_bits(Rng& rng, int lo_exp, int hi_exp) {  // a normal float16 with a random exponent in range
  const int e = lo_exp + rng.below(hi_exp - lo_exp + 1);
  return static_cast<uint16_t>((rng.below(2) << 15) | (e << 10) | rng.below(1024));
}

void blocks_case(Checks& ck, Rng& rng, bool q4, int64_t K, int64_t tiles, int64_t T) {
  const int64_t G = K / blocks::kBlock, quad = q4 ? 32 : 64, N = tiles * blocks::kTile;
  std::vector<uint8_t> w(tiles * G * 8 * quad);
  for (auto& b : w) b = static_cast<uint8_t>(q4 ? rng.below(256) : 1 + rng.below(255));
  std::vector<uint16_t> d(tiles * G * 16), m(tiles * G * 16);
  for (auto& h : d) h = half_bits(rng, 5, 12);
  for (auto& h : m) h = half_bits(rng, 5, 14);
  std::vector<float> x(T * K);
  for (int64_t i = 0; i < T * K; ++i) x[i] = rng.uniform() * static_cast<float>(1 + rng.below(8));
  for (int64_t i = 0; i < K && T > 1; ++i) x[K + i] = 0.0f;  // an all-zero row (dx = 0)
  blocks::Quantized a;
  blocks::quantize(x.data(), T, K, a);
  std::vector<float> fast(T * N), ref(T * N), one(N);
  for (int64_t j = 0; j < tiles; ++j) {
    const blocks::Tile tile{w.data() + j * G * 8 * quad, d.data() + j * G * 16, q4 ? m.data() + j * G * 16 : nullptr};
    blocks::tile_rows(q4, a, 0, T, K, tile, fast.data() + 16 * j, N);
    blocks::tile_rows_reference(q4, a, 0, T, K, tile, ref.data() + 16 * j, N);
  }
  char what[96];
  std::snprintf(what, sizeof what, "%s K=%" PRId64 " N=%" PRId64 " T=%" PRId64 " path vs reference", q4 ? "q4_1" : "q8_0",
                K, N, T);
  ck.same(what, fast.data(), ref.data(), fast.size());
  for (int64_t t = 0; t < T; ++t) {  // row t alone, through the same path
    blocks::Quantized a1;
    blocks::quantize(x.data() + t * K, 1, K, a1);
    for (int64_t j = 0; j < tiles; ++j) {
      const blocks::Tile tile{w.data() + j * G * 8 * quad, d.data() + j * G * 16, q4 ? m.data() + j * G * 16 : nullptr};
      blocks::tile_rows(q4, a1, 0, 1, K, tile, one.data() + 16 * j, N);
    }
    std::snprintf(what, sizeof what, "%s K=%" PRId64 " T=%" PRId64 " row %" PRId64 " vs one row", q4 ? "q4_1" : "q8_0", K,
                  T, t);
    ck.same(what, one.data(), fast.data() + t * N, N);
  }
}

void lanes_case(Checks& ck, Rng& rng, int64_t hd, int64_t n) {
  std::vector<float> q(hd), k(n * hd), v(n * hd), s1(n), s2(n), o1(hd), o2(hd);
  for (auto& f : q) f = rng.uniform() * 3.0f;
  for (auto& f : k) f = rng.uniform() * 3.0f;
  for (auto& f : v) f = rng.uniform();
  std::vector<int64_t> slots(n);
  for (int64_t j = 0; j < n; ++j) slots[j] = (j * 7) % n;  // a permutation when gcd(7, n) = 1: tree-like reads
  const auto slot = [&](int64_t j) { return slots[j]; };
  lanes::attend<lanes::Vec>(q.data(), k.data(), v.data(), hd, n, slot, hd, s1.data(), o1.data());
  lanes::attend<lanes::Ref>(q.data(), k.data(), v.data(), hd, n, slot, hd, s2.data(), o2.data());
  char what[64];
  std::snprintf(what, sizeof what, "attend hd=%" PRId64 " n=%" PRId64, hd, n);
  ck.same(what, o1.data(), o2.data(), hd);
  std::vector<float> g(n * hd), u(n * hd), a1(n * hd), a2(n * hd);
  for (auto& f : g) f = rng.uniform() * 12.0f;
  for (auto& f : u) f = rng.uniform();
  lanes::silu_mul<lanes::Vec>(g.data(), u.data(), a1.data(), n * hd);
  lanes::silu_mul<lanes::Ref>(g.data(), u.data(), a2.data(), n * hd);
  ck.same("silu_mul", a1.data(), a2.data(), a1.size());
  const float d1 = lanes::dot<lanes::Vec>(g.data(), u.data(), n * hd), d2 = lanes::dot<lanes::Ref>(g.data(), u.data(), n * hd);
  ck.same("dot", &d1, &d2, 1);
}

const char* lanes_path() {
#if defined(__AVX512F__)
  return "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "avx2";
#elif defined(__ARM_NEON) && defined(__aarch64__)
  return "neon";
#else
  return "reference";
#endif
}

}  // namespace

int main() {
  Checks ck;
  Rng rng{42};
  for (const bool q4 : {true, false})
    for (const int64_t K : {32, 64, 160, 576})
      for (const int64_t T : {1, 2, 3, 5, 8, 9, 13}) blocks_case(ck, rng, q4, K, K == 576 ? 3 : 2, T);
  for (const int64_t hd : {64, 128, 40})
    for (const int64_t n : {1, 7, 16, 17, 100}) lanes_case(ck, rng, hd, n);
  std::printf("path=%s lanes=%s checks=%d failures=%d hash=%016" PRIx64 "\n", blocks::path(), lanes_path(), ck.n,
              ck.failures, ck.hash);
  return ck.failures == 0 ? 0 : 1;
}
