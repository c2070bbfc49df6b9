// Host launcher of braze.quant.matmul on CUDA: dispatch on the activation
// dtype (the typed bodies: quant_matmul.cuh, one unit per dtype).
#include "cuda/quant_matmul.cuh"

namespace braze::cuda {
namespace matmul_impl {
template void matmul_typed<float>(const MatmulArgs&, cudaStream_t);
}  // namespace matmul_impl

void matmul_run(const braze::quant::MatmulArgs& a, uintptr_t stream) {
  if (a.m == 0 || a.w.rows == 0) return;
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (a.dtype) {
    case DType::f32: matmul_impl::matmul_typed<float>(a, s); break;
    case DType::f16: matmul_impl::matmul_typed<__half>(a, s); break;
    case DType::bf16: matmul_impl::matmul_typed<__nv_bfloat16>(a, s); break;
    default: throw TypeError(std::string("matmul: unsupported dtype ") + dtype_name(a.dtype));
  }
  check_launch("matmul");
}

}  // namespace braze::cuda
