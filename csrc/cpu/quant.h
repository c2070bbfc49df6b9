// CPU entries of the quant family: one build per ISA, the active one picked at call time.
#pragma once
#include "core/quant.h"
#include "core/quant_w8a8.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                            \
  namespace isa {                                     \
  void dequantize_run(const quant::DequantArgs& a);   \
  void quantize_run(const quant::QuantArgs& a);       \
  void matmul_run(const quant::MatmulArgs& a);        \
  void matmul_w8a8_run(const quant::W8A8Args& a);     \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void dequantize_run(const quant::DequantArgs& a) { BRAZE_CPU_PICK(dequantize_run)(a); }
inline void quantize_run(const quant::QuantArgs& a) { BRAZE_CPU_PICK(quantize_run)(a); }
inline void matmul_run(const quant::MatmulArgs& a) { BRAZE_CPU_PICK(matmul_run)(a); }
inline void matmul_w8a8_run(const quant::W8A8Args& a) { BRAZE_CPU_PICK(matmul_w8a8_run)(a); }
}  // namespace braze::cpu
