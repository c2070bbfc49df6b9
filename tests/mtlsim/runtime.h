// Host-side entry of the simulator runtime.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "mtlsim_abi.h"

namespace mtlsim {
// Runs kernel `kernel` over grid[0..2] threadgroups of tg[0..2] threads with
// buffers bound at [[buffer(i)]] and `tg_args[i]` bytes at [[threadgroup(i)]].
// Returns "" or the first error the launch hit.
std::string dispatch(const std::string& kernel, const unsigned grid[3], const unsigned tg[3],
                     const std::vector<void*>& buffers, const std::vector<std::size_t>& tg_args,
                     std::uint64_t seed, bool shuffle);
// Whether the library holds a kernel of this host name.
bool has_kernel(const std::string& kernel);
}  // namespace mtlsim
