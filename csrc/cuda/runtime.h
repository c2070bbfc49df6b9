// CUDA runtime services for the extension module, callable from plain C++
// (no CUDA headers): whether this process can run the CUDA kernels here.
#pragma once
#include <string>
#include <utility>

namespace braze::cuda {

// (true, "") when a driver and a device of compute capability >= 8.0 are
// present, else (false, why). Never throws.
std::pair<bool, std::string> device_status();

}  // namespace braze::cuda
