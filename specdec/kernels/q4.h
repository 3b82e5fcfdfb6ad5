// Block linears (q4.cpp): Q4_1 / Q8_0 weights times int8-quantized activations.
#pragma once

#include <ATen/ATen.h>

namespace specdec {
at::Tensor q4_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d, const at::Tensor& m);
at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& qs, const at::Tensor& d);
bool vnni();
}  // namespace specdec
