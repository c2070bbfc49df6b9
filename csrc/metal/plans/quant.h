// Launch plans of the quant family (shaders/metal/quant/), from the Args that
// braze::quant::prepare_* validated (csrc/core/quant.cpp, quant_mx.cpp).
#pragma once
#include "core/quant.h"
#include "core/quant_mx.h"
#include "core/quant_w8a8.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for what no kernel handles: sizes
// or strides past 32 bits, and quantize of a format without a Metal encoder
// (GGUF's fp4 blocks, which prepare_quantize already refuses on every backend:
// they have no quantizer anywhere).
Plan plan_dequantize(const quant::DequantArgs& a);
Plan plan_quantize(const quant::QuantArgs& a);
Plan plan_quantize_activations(const quant::ActQuantArgs& a);
// matmul: the GEMV kernel for m <= QMM_GEMV_MAX_ROWS (16) rows of x, the GEMM kernel beyond.
Plan plan_matmul(const quant::MatmulArgs& a);
// matmul_w8a8 (quantized x): GEMV up to QMM_GEMV_MAX_ROWS rows, 32 x 32 tiles beyond.
Plan plan_matmul_w8a8(const quant::W8A8Args& a);

// Whether Metal quantizes format f (the formats of plan_quantize).
bool metal_quantizes(quant::QFormat f);

}  // namespace braze::metal
