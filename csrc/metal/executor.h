// The Metal executor's C++ face: runs a launch plan over the op's arrays, one
// command buffer per call. Implemented by executor.mm on Apple, and by the MSL
// simulator (tests/mtlsim/executor_sim.cpp) on Linux.
#pragma once
#include <string>

#include "core/tensor.h"
#include "plans/plan.h"

namespace braze::metal {

// Runs `plan` synchronously (the caller's arrays are host-visible on return).
// `arrays` are the call's validated tensors: each plan array is one of them or
// starts inside one (a host array is wrapped without a copy where it can be;
// a Metal array binds its MTLBuffer at its byte offset). Throws
// std::runtime_error with the executor's message on failure.
void execute(const Plan& plan, TensorList arrays);

// Where braze.metallib was found, or why not (for `braze info`).
std::string library_path();

}  // namespace braze::metal
