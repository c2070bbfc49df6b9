// braze.quant.matmul on CUDA for __half activations (quant_matmul.cuh).
#include "cuda/quant_matmul.cuh"

namespace braze::cuda::matmul_impl {
template void matmul_typed<__half>(const MatmulArgs&, cudaStream_t);
}  // namespace braze::cuda::matmul_impl
