// Launch plans of the sampling family (shaders/metal/sampling/), from the
// typed arguments that braze::sampling::prepare_* validated
// (csrc/core/sampling.cpp).
#pragma once
#include "core/sampling.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for arguments no kernel handles
// (sizes or strides past 32 bits).
Plan plan_normalize(const sampling::NormalizeArgs& a);
Plan plan_argmax(const sampling::ArgmaxArgs& a);
Plan plan_mask(const sampling::MaskArgs& a);
Plan plan_penalties(const sampling::PenaltyArgs& a);
Plan plan_sample(const sampling::SampleArgs& a);
Plan plan_philox(const sampling::PhiloxArgs& a);

}  // namespace braze::metal
