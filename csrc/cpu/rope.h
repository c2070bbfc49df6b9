// CPU entry of the rope family: one run() per ISA build, the active one picked at call time.
#pragma once
#include "core/rope.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa) namespace isa { void rope_run(const rope::Args& a); }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void rope_run(const rope::Args& a) { BRAZE_CPU_PICK(rope_run)(a); }
}  // namespace braze::cpu
