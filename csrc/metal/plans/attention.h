// Launch plans of the attention family (shaders/metal/attention/), from the
// Args that braze::attention::prepare_* validated (csrc/core/attention.cpp).
// The values of the index arrays are checked on the host before a plan runs
// (attention::check_*, Metal's memory is unified: module.cpp).
#pragma once
#include "core/attention.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for sizes or strides past 32 bits.
Plan plan_append_kv(const attention::AppendKvArgs& a);
Plan plan_decode(const attention::DecodeArgs& a);
Plan plan_prefill(const attention::PrefillArgs& a);  // prefill and prefill_paged
Plan plan_merge_states(const attention::MergeArgs& a);

}  // namespace braze::metal
