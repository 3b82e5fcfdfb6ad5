// Block linears in plain C++ (no torch): GGUF's Q4_1 and Q8_0 weights times activations quantized
// to int8 per block of 32, with one integer dot-product path per ISA and a reference.
//
// Layout (specdec/models/blocks.py packs it): weights in tiles of 16 output rows; for tile j, block
// g (32 input columns) and quad c (columns 4c..4c+3 of the block), 64 values e = o * 4 + i (output
// 16j + o, column 32g + 4c + i).
// - Q4_1: 32 bytes a quad, q (0..15) for e = b in byte b's low nibble, e = b + 32 in its high one;
//   d and m [tiles, G, 16] float16 bits.
// - Q8_0: 64 bytes a quad, q + 128 (q in -127..127); d as above, no m.
// Output n of row t = sum over blocks g, in order, of acc = fma(float(isum), d dx, acc) and, for
// Q4_1, acc = fma(m, sx, acc): isum = <q[n, g], qx[t, g]> (an exact integer), qx = round(x / dx),
// dx = max|x| / 127 per block, sx the block's float sum (left to right). Every path computes exactly
// this sequence per output, so all paths, every row count and every split of rows give the same bits.

#pragma once

#include <cstdint>
#include <vector>

namespace specdec::blocks {

constexpr int64_t kBlock = 32;
constexpr int64_t kTile = 16;

struct Quantized {          // one activation matrix [T, K], per block of 32
  std::vector<int8_t> q;    // [T, K]: qx
  std::vector<float> scale; // [T, G]: dx
  std::vector<float> sum;   // [T, G]: sx
  std::vector<int32_t> qsum;// [T, G]: the sum of the block's qx (Q8_0's +128 offset taken back)
};

void quantize(const float* x, int64_t T, int64_t K, Quantized& a);

struct Tile {           // one tile's operands
  const uint8_t* w;     // [G, 8, 32] (Q4_1) or [G, 8, 64] (Q8_0)
  const uint16_t* d;    // [G, 16] float16 bits
  const uint16_t* m;    // [G, 16] float16 bits; null for Q8_0
};

// Rows [t0, t0 + nt) of one tile: out[r * N + o] for r < nt, o < 16. ``q4`` Q4_1, else Q8_0.
void tile_rows(bool q4, const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out, int64_t N);
// The same by plain loops: what every path must equal bit for bit.
void tile_rows_reference(bool q4, const Quantized& a, int64_t t0, int64_t nt, int64_t K, const Tile& tile, float* out,
                         int64_t N);

// The integer path this build compiled: "avx512vnni", "avxvnni", "avx2", "neon-dotprod" or "reference".
const char* path();
// Rows one tile_rows call takes at once on this path (its register budget).
int64_t rows_at_once();

float half_to_float(uint16_t h);

}  // namespace specdec::blocks
