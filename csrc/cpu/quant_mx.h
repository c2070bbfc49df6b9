// CPU kernels of the quant family's split-layout formats (MX, nvfp4, fp8, int8,
// MLX affine) and of quantize_activations; one build per ISA.
#pragma once
#include "core/quant_mx.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                                        \
  namespace isa {                                                 \
  void dequantize_split_run(const quant::DequantArgs& a);         \
  void quantize_split_run(const quant::QuantArgs& a);             \
  void quantize_activations_run(const quant::ActQuantArgs& a);    \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void dequantize_split_run(const quant::DequantArgs& a) { BRAZE_CPU_PICK(dequantize_split_run)(a); }
inline void quantize_split_run(const quant::QuantArgs& a) { BRAZE_CPU_PICK(quantize_split_run)(a); }
inline void quantize_activations_run(const quant::ActQuantArgs& a) { BRAZE_CPU_PICK(quantize_activations_run)(a); }
}  // namespace braze::cpu
