// Launch plans of the sampling family (shaders/metal/sampling/), from the Args
// that braze::sampling::prepare_* validated (csrc/core/sampling.cpp).
#pragma once
#include "core/sampling.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for arguments no kernel handles
// (sizes or strides past 32 bits).
Plan plan_sampling(const sampling::Args& a);

}  // namespace braze::metal
