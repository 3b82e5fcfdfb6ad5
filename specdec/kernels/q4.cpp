// GGUF-style block linears as torch operators: the glue between tensors and blocks.cpp's core.
//
// Contract (specdec/models/blocks.py packs the operands; blocks.h states the layout and the
// arithmetic):
// - q4_linear(x [T, K] f32, qs [N/16, G, 8, 32] u8, d [N/16, G, 16] f16, m [N/16, G, 16] f16) and
//   q8_linear(x, qs [N/16, G, 8, 64] u8, d): [T, N] float32, x W'^T with x quantized to int8 per
//   block of 32. N must be a multiple of 16 and K of 32.
// - ``reference=True`` runs blocks.cpp's plain loops instead of this build's ISA path: the same bits
//   (tests/test_kernels.py checks it on real layers).
// Exactness: each output is a fixed sequence of operations on its own row (blocks.h), whatever T
// and however the tiles are split among threads, so the verifier's rows are bit for bit the plain
// step's, on every CPU.

#include "q4.h"

#include <ATen/Parallel.h>

#include "blocks.h"

namespace specdec {
namespace {

at::Tensor block_linear(bool q4, const at::Tensor& x_in, const at::Tensor& qs, const at::Tensor& d, const at::Tensor* m,
                        bool reference) {
  const at::Tensor x = (x_in.dim() == 1 ? x_in.view({1, -1}) : x_in).contiguous().to(at::kFloat);
  const int64_t T = x.size(0), K = x.size(1), G = K / blocks::kBlock, tiles = qs.size(0), N = blocks::kTile * tiles;
  TORCH_CHECK(K % blocks::kBlock == 0 && qs.size(1) == G && d.size(0) == tiles && d.size(1) == G, "operand shapes");
  TORCH_CHECK(qs.is_contiguous() && d.is_contiguous() && (m == nullptr || m->is_contiguous()), "operands contiguous");
  blocks::Quantized a;
  blocks::quantize(x.data_ptr<float>(), T, K, a);
  at::Tensor y = at::empty({T, N}, x.options());
  float* Y = y.data_ptr<float>();
  const uint8_t* W = qs.data_ptr<uint8_t>();
  const auto* D = reinterpret_cast<const uint16_t*>(d.data_ptr<at::Half>());
  const auto* M = m ? reinterpret_cast<const uint16_t*>(m->data_ptr<at::Half>()) : nullptr;
  const int64_t wtile = qs.stride(0);
  const auto run = reference ? blocks::tile_rows_reference : blocks::tile_rows;
  at::parallel_for(0, tiles, 4, [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const blocks::Tile tile{W + j * wtile, D + j * G * 16, M ? M + j * G * 16 : nullptr};
      run(q4, a, 0, T, K, tile, Y + 16 * j, N);
    }
  });
  return y;
}

}  // namespace

at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, const at::Tensor& m, bool reference) {
  return block_linear(true, x, qs, d, &m, reference);
}

at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, bool reference) {
  return block_linear(false, x, qs, d, nullptr, reference);
}

}  // namespace specdec
