// The Metal executor's C++ face (implemented in executor.mm, Apple only):
// runs a launch plan over the op's arrays, one command buffer per call.
#pragma once
#include <cstdint>
#include <string>

#include "plans/plan.h"

namespace braze::metal {

// One array argument of an op, by role (absent: ptr == nullptr).
struct ArgBuffer {
  void* ptr = nullptr;         // host pointer (unified memory), or id<MTLBuffer> if device_buffer
  std::uint64_t offset = 0;    // bytes into the MTLBuffer (device_buffer only)
  std::uint64_t bytes = 0;     // extent the kernels may touch, from ptr (+ offset)
  bool device_buffer = false;  // a DLPack device-8 array (MLX, torch MPS)
  bool output = false;         // written by the op: host copies are copied back
};

// Runs `plan` synchronously (the caller's arrays are host-visible on return).
// Throws std::runtime_error with Metal's message on failure.
void execute(const Plan& plan, const ArgBuffer* roles, int nroles);

// Where braze.metallib was found, or why not (for `braze info`).
std::string library_path();

}  // namespace braze::metal
