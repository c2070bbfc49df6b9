// Launch plans of the rope family (shaders/metal/rope/), from the Args that
// braze::rope::prepare_* validated (csrc/core/rope.cpp).
#pragma once
#include "core/rope.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for arguments no kernel handles
// (sizes or strides past 32 bits, negative strides).
Plan plan_rope(const rope::Args& a);

}  // namespace braze::metal
