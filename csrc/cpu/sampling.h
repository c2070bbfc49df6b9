// CPU entry of the sampling family: one run() per ISA build, the active one picked at call time.
#pragma once
#include "core/sampling.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa) namespace isa { void sampling_run(const sampling::Args& a); }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void sampling_run(const sampling::Args& a) { BRAZE_CPU_PICK(sampling_run)(a); }
}  // namespace braze::cpu
