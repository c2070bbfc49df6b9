// Launch plans of the ops family (shaders/metal/ops/), from the Args that
// braze::ops::prepare_* validated (csrc/core/ops.cpp).
#pragma once
#include "core/ops.h"
#include "plan.h"

namespace braze::metal {

// Plan::error is set (and nothing planned) for arguments no kernel handles:
// sizes or strides past 32 bits, negative strides, a Hadamard size outside
// m * 2^k (m in 1, 12, 20, 28; n <= 32768).
Plan plan_act(const ops::ActArgs& a);
Plan plan_embedding(const ops::EmbeddingArgs& a);
Plan plan_hadamard(const ops::HadamardArgs& a);

}  // namespace braze::metal
