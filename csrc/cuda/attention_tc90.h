// The Hopper flash-attention forward (shaders/cuda/attention/flash_tc90.cuh)
// behind ragged prefill. Its unit, attention_tc90.cu, is built for sm_90a only
// (the braze_cuda_tc90 target, where BRAZE_CUDA_ARCHS holds 90) and
// attention.cu calls it when BRAZE_CUDA_TC90 is defined; other builds and GPUs
// keep the mma.sync flash kernel.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "cuda/attention/params.cuh"
#include "cuda/tc90.h"

namespace braze::cuda {

// BRAZE_CUDA_ATTN=mma in the environment (read once) keeps the mma.sync flash
// kernel for prefill; unset or "wgmma" is the default.
inline bool attn_tc90_enabled() {
  static const bool on = wgmma_chosen("BRAZE_CUDA_ATTN");
  return on;
}

// Runs ragged prefill (p.mode kRagged, p filled as for flash.cuh) on the wgmma
// kernel and returns true where it applies: f16 / bf16, head_dim 128,
// scale > 0, a compute-capability-9 device, q / k / v 16-byte aligned
// with 16-byte token and head strides (what a tensor map can express), out
// 4-byte aligned with even strides. Otherwise returns false having done nothing.
bool prefill_tc90(DType t, const attn::AttendParams& p, int64_t dim, int64_t kv_heads, int device, cudaStream_t s);

}  // namespace braze::cuda
