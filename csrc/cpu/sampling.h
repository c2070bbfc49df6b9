// CPU entries of the sampling family: one build per ISA, the active one picked at call time.
#pragma once
#include "core/sampling.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                                \
  namespace isa {                                         \
  void normalize_run(const sampling::NormalizeArgs& a);   \
  void argmax_run(const sampling::ArgmaxArgs& a);         \
  void mask_run(const sampling::MaskArgs& a);             \
  void penalties_run(const sampling::PenaltyArgs& a);     \
  void sample_run(const sampling::SampleArgs& a);         \
  void philox_run(const sampling::PhiloxArgs& a);         \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void normalize_run(const sampling::NormalizeArgs& a) { BRAZE_CPU_PICK(normalize_run)(a); }
inline void argmax_run(const sampling::ArgmaxArgs& a) { BRAZE_CPU_PICK(argmax_run)(a); }
inline void mask_run(const sampling::MaskArgs& a) { BRAZE_CPU_PICK(mask_run)(a); }
inline void penalties_run(const sampling::PenaltyArgs& a) { BRAZE_CPU_PICK(penalties_run)(a); }
inline void sample_run(const sampling::SampleArgs& a) { BRAZE_CPU_PICK(sample_run)(a); }
inline void philox_run(const sampling::PhiloxArgs& a) { BRAZE_CPU_PICK(philox_run)(a); }
}  // namespace braze::cpu
