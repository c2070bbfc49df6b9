// CPU entries of the ops family: one build per ISA, the active one picked at call time.
#pragma once
#include "core/ops.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                          \
  namespace isa {                                   \
  void act_run(const ops::ActArgs& a);              \
  void embedding_run(const ops::EmbeddingArgs& a);  \
  void hadamard_run(const ops::HadamardArgs& a);    \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void act_run(const ops::ActArgs& a) { BRAZE_CPU_PICK(act_run)(a); }
inline void embedding_run(const ops::EmbeddingArgs& a) { BRAZE_CPU_PICK(embedding_run)(a); }
inline void hadamard_run(const ops::HadamardArgs& a) { BRAZE_CPU_PICK(hadamard_run)(a); }
}  // namespace braze::cpu
