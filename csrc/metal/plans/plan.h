// Portable launch plans: every decision of a Metal launch (kernel name, grid,
// threadgroup size, buffer binding order, scalar parameters, scratch memory)
// made in plain C++ from a family's validated core Args. The Objective-C++
// executor (csrc/metal/executor.mm) and the Linux simulator
// (tests/mtlsim/executor_sim.cpp) both run exactly these plans.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace braze::metal {

const char* dtype_suffix(DType t);  // "f32" | "f16" | "bf16": kernel host-name suffix

// One of the op's arrays a dispatch binds: its first byte and the extent the
// kernels may touch. Arrays with the same pointer are one entry (in place).
struct PlanArray {
  const void* ptr = nullptr;
  std::uint64_t bytes = 0;
  bool output = false;
};

// What a dispatch binds at one [[buffer(i)]]: an op array, a scratch buffer
// of the plan or a constant table the plan computed, plus a byte offset.
struct BufferRef {
  int array = -1;
  int scratch = -1;
  int constant = -1;
  std::uint64_t offset = 0;
};

// One dispatchThreadgroups call. Buffers are bound at [[buffer(0)]],
// [[buffer(1)]], ... in order, and `params` (setBytes) at
// [[buffer(buffers.size())]]. No function constants: variants are separate
// host names (e.g. rms_norm_looped_f16).
struct Dispatch {
  std::string kernel;
  std::uint32_t threadgroups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  std::vector<BufferRef> buffers;
  std::vector<std::uint8_t> params;
};

// Plans never throw (the simulator and the executor both report `error`).
// Dispatches run in order, each seeing the previous ones' writes (one serial
// compute encoder). Scratch buffers are private to the call; their contents
// on entry are undefined.
struct Plan {
  std::string error;  // non-empty: the arguments were rejected; run nothing
  std::vector<PlanArray> arrays;
  std::vector<std::uint64_t> scratch_bytes;
  std::vector<std::vector<std::uint8_t>> constants;
  std::vector<Dispatch> dispatches;

  // The op array at `ptr` (added on first use; outputs stay outputs).
  BufferRef array(const void* ptr, std::uint64_t bytes, bool output = false);
};

// Bytes from the first element of `rows` rows of `cols` elements (row stride
// `stride`, in elements) to one past the last.
std::uint64_t row_bytes(std::int64_t rows, std::int64_t cols, std::int64_t stride, DType t);

template <class P>
std::vector<std::uint8_t> param_bytes(const P& p) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(&p);
  return std::vector<std::uint8_t>(b, b + sizeof(P));
}

constexpr std::uint64_t kU32 = 0xffffffffull;
inline bool fits_u32(std::int64_t v) { return v >= 0 && std::uint64_t(v) <= kU32; }

}  // namespace braze::metal
