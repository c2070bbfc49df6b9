// CUDA entries of the quant family: each runs validated Args on the arrays'
// device, on `stream` (0 = the legacy default stream). They never synchronize
// and allocate nothing (amax passes accumulate in the output's own scale slot),
// except matmul's many-row path of a quantized W on Hopper (quant_matmul.cuh: a
// stream-ordered scratch for W dequantized).
#pragma once
#include <cstdint>

#include "core/quant.h"
#include "core/quant_mx.h"
#include "core/quant_w8a8.h"

namespace braze::cuda {
void dequantize_run(const quant::DequantArgs& a, uintptr_t stream);
void quantize_run(const quant::QuantArgs& a, uintptr_t stream);
void quantize_activations_run(const quant::ActQuantArgs& a, uintptr_t stream);
// out = x W^T (+ bias): csrc/cuda/quant_matmul.cu.
void matmul_run(const quant::MatmulArgs& a, uintptr_t stream);
// W8A8 (quantized x, int8 / fp8 weight): csrc/cuda/quant_w8a8.cu.
void matmul_w8a8_run(const quant::W8A8Args& a, uintptr_t stream);
}  // namespace braze::cuda
