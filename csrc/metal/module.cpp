// braze._metal: the Metal backend module. The same bindings as every backend
// (csrc/bindings/), the same core validation; each family's launcher turns
// the validated Args into a portable launch plan (plans/) that the executor
// runs. On Linux the tests build this very file against the MSL simulator's
// executor (tests/mtlsim/).
#include <nanobind/stl/string.h>

#include "bindings/families.h"
#include "executor.h"
#include "plans/attention.h"
#include "plans/norm.h"
#include "plans/ops.h"
#include "plans/quant.h"
#include "plans/rope.h"
#include "plans/sampling.h"

namespace nb = nanobind;
using namespace braze;

namespace {

template <class Args, metal::Plan (*plan_of)(const Args&)>
bind::Launcher<Args> launcher() {
  bind::Launcher<Args> l;
  l.launch_arrays = [](const Args& a, TensorList arrays) {
    const metal::Plan plan = plan_of(a);
    if (!plan.error.empty()) throw ValueError(plan.error);
    metal::execute(plan, arrays);
  };
  l.backend = "metal";
  l.device = Device::metal;
  l.host_device = Device::cpu;  // unified memory: host arrays run here too
  return l;
}

// The same, after a host check of the index arrays' values (unified memory:
// the kernels' inputs are readable here), the CPU backend's errors.
template <class Args, metal::Plan (*plan_of)(const Args&), void (*check)(const Args&)>
bind::Launcher<Args> checked_launcher() {
  bind::Launcher<Args> l = launcher<Args, plan_of>();
  l.launch_arrays = [](const Args& a, TensorList arrays) {
    check(a);
    const metal::Plan plan = plan_of(a);
    if (!plan.error.empty()) throw ValueError(plan.error);
    metal::execute(plan, arrays);
  };
  return l;
}

void check_decode(const attention::DecodeArgs& a) { attention::check_paged(a.kv, a.batch); }

}  // namespace

NB_MODULE(_metal, m) {
  bind::bind_common(m);
  bind::bind_norm(m, {launcher<norm::NormArgs, metal::plan_norm>(), launcher<norm::NormVjpArgs, metal::plan_norm_vjp>()});
  bind::bind_rope(m, launcher<rope::Args, metal::plan_rope>());
  bind::bind_sampling(m, {launcher<sampling::NormalizeArgs, metal::plan_normalize>(),
                          launcher<sampling::ArgmaxArgs, metal::plan_argmax>(),
                          launcher<sampling::MaskArgs, metal::plan_mask>(),
                          launcher<sampling::PenaltyArgs, metal::plan_penalties>(),
                          launcher<sampling::SampleArgs, metal::plan_sample>(),
                          launcher<sampling::PhiloxArgs, metal::plan_philox>()});
  bind::bind_ops(m, {launcher<ops::ActArgs, metal::plan_act>(), launcher<ops::EmbeddingArgs, metal::plan_embedding>(),
                     launcher<ops::HadamardArgs, metal::plan_hadamard>()});
  bind::bind_quant(m, {launcher<quant::DequantArgs, metal::plan_dequantize>(),
                       launcher<quant::QuantArgs, metal::plan_quantize>(),
                       launcher<quant::MatmulArgs, metal::plan_matmul>(),
                       launcher<quant::W8A8Args, metal::plan_matmul_w8a8>()});
  bind::bind_quant_activations(m, launcher<quant::ActQuantArgs, metal::plan_quantize_activations>());
  bind::bind_attention(m, {checked_launcher<attention::AppendKvArgs, metal::plan_append_kv, attention::check_slots>(),
                           checked_launcher<attention::DecodeArgs, metal::plan_decode, check_decode>(),
                           checked_launcher<attention::PrefillArgs, metal::plan_prefill, attention::check_prefill>(),
                           launcher<attention::MergeArgs, metal::plan_merge_states>()});
  m.def("library_path", &metal::library_path, "Where braze.metallib was loaded from.");
}
