// Host pieces shared by the sm_90a (Hopper) launchers: the driver's tensor-map
// encoder (cuTensorMapEncodeTiled, found once through the runtime, so the module
// needs no link to libcuda), whether a device can run those kernels, and the
// choice between a wgmma path and its mma.sync fallback read from the environment.
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cuda/runtime.cuh"

namespace braze::cuda {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// Null when the driver lacks it (older than CUDA 12).
inline EncodeTiled tensor_map_encoder() {
  static const EncodeTiled fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    cudaGetLastError();
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}

// A compute-capability-9 device and a driver with the encoder.
inline bool tc90_device(int device) { return cc_major(device) == 9 && tensor_map_encoder() != nullptr; }

// `var` in the environment: unset or "wgmma" -> true, "mma" -> false, anything
// else a ValueError naming the variable. Callers cache the answer (read once).
inline bool wgmma_chosen(const char* var) {
  const char* v = std::getenv(var);
  const std::string s = v ? v : "wgmma";
  if (s != "mma" && s != "wgmma")
    throw ValueError(std::string(var) + " must be 'mma' or 'wgmma', got '" + s + "'");
  return s == "wgmma";
}

}  // namespace braze::cuda
