// The tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh) behind quant.matmul's
// 2..16-row path for q4_0 / q4_K weights and f16 / bf16 x, in a unit of its own
// (quant_gemv_mma.cu) so it builds beside the large matmul units.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "core/quant.h"

namespace braze::cuda {

namespace quant {
struct MmParams;
}

// BRAZE_CUDA_GEMV=simt in the environment (read once) keeps every GEMV on the
// CUDA-core kernel (gemv.cuh); unset or "mma" is the default.
inline bool gemv_mma_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("BRAZE_CUDA_GEMV");
    const std::string s = v ? v : "mma";
    if (s != "mma" && s != "simt") throw ValueError("BRAZE_CUDA_GEMV must be 'mma' or 'simt', got '" + s + "'");
    return s == "mma";
  }();
  return on;
}

// Runs the tensor-core GEMV and returns true where it applies: enabled, a
// compute-capability 8+ GPU, format q4_0 or q4_K, 2..16 rows of x (fewer where the
// GPU's shared memory takes only the short-stage form: quant_gemv_mma.cu), x 16-byte
// aligned with a row stride of a multiple of 8 elements, a tile's shared memory
// within the GPU's per-CTA limit. Else false, nothing launched.
template <class T>
bool gemv_mma_run(const quant::MmParams& p, braze::quant::QFormat format, int device, cudaStream_t s);

extern template bool gemv_mma_run<__half>(const quant::MmParams&, braze::quant::QFormat, int, cudaStream_t);
extern template bool gemv_mma_run<__nv_bfloat16>(const quant::MmParams&, braze::quant::QFormat, int,
                                                 cudaStream_t);

}  // namespace braze::cuda
