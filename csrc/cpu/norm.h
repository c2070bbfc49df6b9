// CPU entries of the norm family: one build per ISA, the active one picked at call time.
#pragma once
#include "core/norm.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                          \
  namespace isa {                                   \
  void norm_run(const norm::NormArgs& a);           \
  void norm_vjp_run(const norm::NormVjpArgs& a);    \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void norm_run(const norm::NormArgs& a) { BRAZE_CPU_PICK(norm_run)(a); }
inline void norm_vjp_run(const norm::NormVjpArgs& a) { BRAZE_CPU_PICK(norm_vjp_run)(a); }
}  // namespace braze::cpu
