// The CUDA handler, linked into braze._cuda (jax.ffi target "braze" on "CUDA"):
// the kernels launch on XLA's stream, with no host synchronization.
#include "cuda/attention.h"
#include "cuda/norm.h"
#include "cuda/ops.h"
#include "cuda/quant.h"
#include "cuda/rope.h"
#include "cuda/sampling.h"
#include "jax/handler.h"

namespace braze::xla {
namespace {
const Launchers kCuda{cuda::norm_run,      cuda::norm_vjp_run,     cuda::rope_run,       cuda::normalize_run,
                      cuda::argmax_run,    cuda::mask_run,         cuda::penalties_run,  cuda::sample_run,
                      cuda::philox_run,    cuda::act_run,          cuda::embedding_run,  cuda::hadamard_run,
                      cuda::append_kv_run, cuda::decode_run,       cuda::prefill_run,    cuda::merge_states_run,
                      cuda::dequantize_run, cuda::quantize_run,    cuda::quantize_activations_run, cuda::matmul_run,
                      cuda::matmul_w8a8_run};

ffi::Error cuda_call(void* stream, int32_t device, ffi::RemainingArgs args, ffi::RemainingRets rets,
                     ffi::Dictionary attrs) {
  return handle(kCuda, Device::cuda, device, reinterpret_cast<uintptr_t>(stream), args, rets, attrs);
}
}  // namespace
}  // namespace braze::xla

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* braze_xla_cuda(XLA_FFI_CallFrame* frame);
XLA_FFI_DEFINE_HANDLER_SYMBOL(braze_xla_cuda, braze::xla::cuda_call,
                              ::xla::ffi::Ffi::Bind()
                                  .Ctx<::xla::ffi::PlatformStream<void*>>()
                                  .Ctx<::xla::ffi::DeviceOrdinal>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attrs<::xla::ffi::Dictionary>());
