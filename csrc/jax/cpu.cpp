// The CPU handler, linked into braze._cpu (jax.ffi target "braze" on "cpu").
#include "cpu/attention.h"
#include "cpu/norm.h"
#include "cpu/ops.h"
#include "cpu/quant.h"
#include "cpu/quant_mx.h"
#include "cpu/rope.h"
#include "cpu/sampling.h"
#include "jax/handler.h"

namespace braze::xla {
namespace {
template <class A, void (*run)(const A&)> void on_cpu(const A& a, uintptr_t) { run(a); }

const Launchers kCpu{
    on_cpu<norm::NormArgs, cpu::norm_run>, on_cpu<norm::NormVjpArgs, cpu::norm_vjp_run>,
    on_cpu<rope::Args, cpu::rope_run>, on_cpu<sampling::NormalizeArgs, cpu::normalize_run>,
    on_cpu<sampling::ArgmaxArgs, cpu::argmax_run>, on_cpu<sampling::MaskArgs, cpu::mask_run>,
    on_cpu<sampling::PenaltyArgs, cpu::penalties_run>, on_cpu<sampling::SampleArgs, cpu::sample_run>,
    on_cpu<sampling::PhiloxArgs, cpu::philox_run>, on_cpu<ops::ActArgs, cpu::act_run>,
    on_cpu<ops::EmbeddingArgs, cpu::embedding_run>, on_cpu<ops::HadamardArgs, cpu::hadamard_run>,
    on_cpu<attention::AppendKvArgs, cpu::append_kv_run>, on_cpu<attention::DecodeArgs, cpu::decode_run>,
    on_cpu<attention::PrefillArgs, cpu::prefill_run>, on_cpu<attention::MergeArgs, cpu::merge_states_run>,
    on_cpu<quant::DequantArgs, cpu::dequantize_run>, on_cpu<quant::QuantArgs, cpu::quantize_run>,
    on_cpu<quant::ActQuantArgs, cpu::quantize_activations_run>, on_cpu<quant::MatmulArgs, cpu::matmul_run>,
    on_cpu<quant::W8A8Args, cpu::matmul_w8a8_run>};

ffi::Error cpu_call(ffi::RemainingArgs args, ffi::RemainingRets rets, ffi::Dictionary attrs) {
  return handle(kCpu, Device::cpu, 0, 0, args, rets, attrs);
}
}  // namespace
}  // namespace braze::xla

extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* braze_xla_cpu(XLA_FFI_CallFrame* frame);
XLA_FFI_DEFINE_HANDLER_SYMBOL(braze_xla_cpu, braze::xla::cpu_call,
                              ::xla::ffi::Ffi::Bind().RemainingArgs().RemainingRets().Attrs<::xla::ffi::Dictionary>());
