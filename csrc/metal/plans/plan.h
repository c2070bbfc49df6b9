// Portable launch plans: every decision of a Metal launch (kernel name, grid,
// threadgroup size, buffer binding order, scalar parameters, scratch memory)
// made in plain C++. The Objective-C++ executor (csrc/metal/*.mm) and the
// Linux simulator (tests/mtlsim/) both run exactly these plans.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braze::metal {

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2 };
const char* dtype_suffix(DType t);  // "f32" | "f16" | "bf16": kernel host-name suffix
std::size_t dtype_size(DType t);

// A buffer one dispatch binds: one of the op's array arguments (its role) or a
// scratch buffer of the plan, plus a byte offset into it.
struct BufferRef {
  int role = -1;     // >= 0: the op's array argument with this role
  int scratch = -1;  // >= 0: Plan::scratch_bytes[scratch]
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
  std::vector<std::uint64_t> scratch_bytes;
  std::vector<Dispatch> dispatches;
};

template <class P>
std::vector<std::uint8_t> param_bytes(const P& p) {
  const auto* b = reinterpret_cast<const std::uint8_t*>(&p);
  return std::vector<std::uint8_t>(b, b + sizeof(P));
}

}  // namespace braze::metal
