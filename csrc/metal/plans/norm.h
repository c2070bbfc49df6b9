// Launch plans of the norm family (shaders/metal/norm/), from the typed
// arguments that braze::norm::prepare_* validated (csrc/core/norm.cpp).
#pragma once
#include "core/norm.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for arguments no kernel handles
// (sizes past 32 bits).
Plan plan_norm(const norm::NormArgs& a);
Plan plan_norm_vjp(const norm::NormVjpArgs& a);

}  // namespace braze::metal
