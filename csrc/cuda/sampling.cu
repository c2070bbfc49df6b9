// Host launchers of the sampling family: a block per row (grid = rows), the
// caller's stream and device; nothing here synchronizes or allocates.
#include "cuda/sampling.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/runtime.cuh"
#include "cuda/sampling/kernels.cuh"

namespace braze::cuda {
namespace {

using braze::sampling::Args;
using braze::sampling::Op;
using namespace braze::cuda::sampling;

template <class T> void launch(const Args& a, cudaStream_t s) {
  const dim3 grid(unsigned(a.rows)), block(kThreads);
  switch (a.op) {
    case Op::softmax: case Op::log_softmax: case Op::logsumexp: normalize_kernel<T><<<grid, block, 0, s>>>(a); break;
    case Op::argmax: argmax_kernel<T><<<grid, block, 0, s>>>(a); break;
    case Op::top_k_mask: case Op::top_p_mask: case Op::min_p_mask: mask_kernel<T><<<grid, block, 0, s>>>(a); break;
    case Op::apply_penalties: penalty_kernel<T><<<grid, block, 0, s>>>(a); break;
    case Op::sample: sample_kernel<T><<<grid, block, 0, s>>>(a); break;
    case Op::philox_uniform: break;
  }
}

}  // namespace

void sampling_run(const Args& a, uintptr_t stream) {
  if (a.rows == 0) return;
  if (a.rows > INT32_MAX) throw ValueError("logits: at most 2^31 - 1 rows are supported on CUDA");
  DeviceGuard guard(a.device_id);
  auto s = reinterpret_cast<cudaStream_t>(stream);
  if (a.op == Op::philox_uniform) {
    philox_uniform_kernel<<<unsigned((a.rows + 255) / 256), 256, 0, s>>>(a);
  } else {
    switch (a.dtype) {
      case DType::f32: launch<float>(a, s); break;
      case DType::f16: launch<__half>(a, s); break;
      case DType::bf16: launch<__nv_bfloat16>(a, s); break;
      default: throw TypeError(std::string("logits: unsupported dtype ") + dtype_name(a.dtype));
    }
  }
  check_launch("sampling");
}

}  // namespace braze::cuda
