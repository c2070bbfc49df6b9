// The Hopper GEMM (shaders/cuda/quant/gemm_tc90.cuh) behind quant.matmul's
// many-row path. Its unit, quant_gemm_tc90.cu, is built for sm_90a only (a
// target of its own, where BRAZE_CUDA_ARCHS holds 90) and the rest of the
// module sees BRAZE_CUDA_TC90 = 1 then; other builds and GPUs keep the mma.sync GEMM.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include "core/dtype.h"
#include "core/error.h"
#include "cuda/tc90.h"

namespace braze::cuda {

enum class Tc90In { bf16, f16, e4m3, e5m2 };

struct Tc90Args {
  Tc90In in;
  DType out_dtype;                      // f32, f16, bf16; bias of the same type
  const void* x; int64_t x_stride;      // [m, k], stride in bytes
  const void* w; int64_t w_stride;      // [n, k], stride in bytes
  int64_t m, n, k;                      // k in elements
  void* out; int64_t out_stride;        // elements
  const void* bias;                     // [n] or null
  const float* row_scale;               // [m] or null
  const float* col_scale; int64_t col_scale_stride;  // [n] (stride 1), one value (stride 0), or null
  bool promote = false;                 // fp8: 128 x 128 tiles, sums moved to f32 every 128 bytes of K
};

// Whether gemm_tc90_run takes these operands on `device` (the current device):
// a build with the sm_90a unit, a compute-capability-9 GPU, x and W 16-byte
// aligned with 16-byte row strides, k * element bytes >= 16, dimensions that
// fit the tensor maps. A null w skips W's alignment check (a scratch the caller
// allocates, 256-byte aligned).
bool tc90_usable(const Tc90Args& a, int device);
// BRAZE_CUDA_GEMM=mma in the environment (read once) keeps the mma.sync GEMMs
// (quant.matmul's and W8A8's); unset or "wgmma" is the default.
inline bool tc90_enabled() {
  static const bool on = wgmma_chosen("BRAZE_CUDA_GEMM");
  return on;
}
void gemm_tc90_run(const Tc90Args& a, int device, cudaStream_t s);

}  // namespace braze::cuda
