// braze.quant.matmul on CUDA for __nv_bfloat16 activations (quant_matmul.cuh).
#include "cuda/quant_matmul.cuh"

namespace braze::cuda::matmul_impl {
template void matmul_typed<__nv_bfloat16>(const MatmulArgs&, cudaStream_t);
}  // namespace braze::cuda::matmul_impl
