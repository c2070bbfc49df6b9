// CPU entry of the norm family: one run() per ISA build, the active one picked at call time.
#pragma once
#include "core/norm.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa) namespace isa { void norm_run(const norm::Args& a); }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void norm_run(const norm::Args& a) { BRAZE_CPU_PICK(norm_run)(a); }
}  // namespace braze::cpu
