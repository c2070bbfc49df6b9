// CPU entries of the attention family: one build per ISA, the active one picked
// at call time. The values of the index arrays (slots, block ids, lengths,
// cu_seqlens) are checked here on the host before any kernel writes.
#pragma once
#include "core/attention.h"
#include "cpu/runtime.h"

namespace braze::cpu {
#define BRAZE_DECLARE(isa)                                      \
  namespace isa {                                               \
  void append_kv_run(const attention::AppendKvArgs& a);         \
  void decode_run(const attention::DecodeArgs& a);              \
  void prefill_run(const attention::PrefillArgs& a);            \
  void merge_states_run(const attention::MergeArgs& a);         \
  }
BRAZE_CPU_FOR_EACH_ISA(BRAZE_DECLARE)
#undef BRAZE_DECLARE

inline void append_kv_run(const attention::AppendKvArgs& a) {
  attention::check_slots(a);
  BRAZE_CPU_PICK(append_kv_run)(a);
}
inline void decode_run(const attention::DecodeArgs& a) {
  attention::check_paged(a.kv, a.batch);
  BRAZE_CPU_PICK(decode_run)(a);
}
inline void prefill_run(const attention::PrefillArgs& a) {
  attention::check_prefill(a);
  BRAZE_CPU_PICK(prefill_run)(a);
}
inline void merge_states_run(const attention::MergeArgs& a) { BRAZE_CPU_PICK(merge_states_run)(a); }
}  // namespace braze::cpu
