// braze._cuda: the CUDA backend (built when a CUDA toolkit is found). It
// imports without a driver or GPU; usable() says whether it can run here.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings/families.h"
#include "cuda/attention.h"
#include "cuda/norm.h"
#include "cuda/ops.h"
#include "cuda/quant.h"
#include "cuda/rope.h"
#include "cuda/runtime.h"
#include "cuda/sampling.h"

namespace nb = nanobind;
using namespace braze;

namespace {
template <class Args> bind::Launcher<Args> launcher(void (*run)(const Args&, uintptr_t stream)) {
  bind::Launcher<Args> l;
  l.launch = run;
  l.backend = "cuda";
  l.device = Device::cuda;
  return l;
}
}  // namespace

NB_MODULE(_cuda, m) {
  bind::bind_common(m);
  bind::bind_norm(m, {launcher(cuda::norm_run), launcher(cuda::norm_vjp_run)});
  bind::bind_rope(m, launcher(cuda::rope_run));
  bind::bind_sampling(m, {launcher(cuda::normalize_run), launcher(cuda::argmax_run), launcher(cuda::mask_run),
                          launcher(cuda::penalties_run), launcher(cuda::sample_run), launcher(cuda::philox_run)});
  bind::bind_ops(m, {launcher(cuda::act_run), launcher(cuda::embedding_run), launcher(cuda::hadamard_run)});
  bind::bind_quant(m, {launcher(cuda::dequantize_run), launcher(cuda::quantize_run), launcher(cuda::matmul_run),
                       launcher(cuda::matmul_w8a8_run)});
  bind::bind_quant_activations(m, launcher(cuda::quantize_activations_run));
  bind::bind_attention(m, {launcher(cuda::append_kv_run), launcher(cuda::decode_run), launcher(cuda::prefill_run),
                           launcher(cuda::merge_states_run)});
  m.def("attention_workspace_bytes", [](const std::string& op, const std::string& dtype, int64_t rows,
                                        int64_t q_heads, int64_t head_dim, int64_t max_blocks, int64_t block_size,
                                        int device) {
    const DType t = dtype == "float32" ? DType::f32 : dtype == "float16" ? DType::f16
                    : dtype == "bfloat16" ? DType::bf16
                    : throw TypeError("dtype must be float32, float16 or bfloat16, got " + dtype);
    nb::gil_scoped_release nogil;
    return cuda::attention_workspace_bytes(op, t, rows, q_heads, head_dim, max_blocks, block_size, device);
  }, nb::arg("op"), nb::arg("dtype"), nb::arg("rows"), nb::arg("q_heads"), nb::arg("head_dim"),
     nb::arg("max_blocks"), nb::arg("block_size"), nb::arg("device"),
     "Bytes of the uint8 `workspace` array attention `op` needs on CUDA `device` (decode's split-K states).");
  m.def("norm_vjp_workspace_bytes", [](const std::string& op, const std::string& dtype, int64_t rows, int64_t cols,
                                       int grads, int device) {
    const norm::Op o = op == "rms_norm_vjp" ? norm::Op::rms_norm_vjp
                       : op == "layer_norm_vjp" ? norm::Op::layer_norm_vjp
                       : throw ValueError("op must be 'rms_norm_vjp' or 'layer_norm_vjp', got '" + op + "'");
    const DType t = dtype == "float32" ? DType::f32 : dtype == "float16" ? DType::f16
                    : dtype == "bfloat16" ? DType::bf16
                    : throw TypeError("dtype must be float32, float16 or bfloat16, got " + dtype);
    nb::gil_scoped_release nogil;
    return cuda::norm_vjp_workspace_bytes(o, t, rows, cols, grads, device);
  }, nb::arg("op"), nb::arg("dtype"), nb::arg("rows"), nb::arg("cols"), nb::arg("grads"), nb::arg("device"),
     "Bytes of the uint8 `workspace` array that op (rms_norm_vjp or layer_norm_vjp) needs on CUDA `device`.");
  m.def("usable", [] { return cuda::device_status(); },
        "(True, '') when a CUDA driver and a GPU of compute capability >= 8.0 are present, else (False, why).");
}
