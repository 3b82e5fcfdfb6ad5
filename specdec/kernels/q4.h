// Block linears (q4.cpp): Q4_1 / Q8_0 weights times int8-quantized activations, torch's side.
#pragma once

#include <ATen/ATen.h>

namespace specdec {
// ``reference``: the plain-loop path (blocks.cpp) instead of this build's ISA path; the same bits.
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, const at::Tensor& m,
                     bool reference = false);
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, bool reference = false);
}  // namespace specdec
