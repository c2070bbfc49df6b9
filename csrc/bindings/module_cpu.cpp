// braze._cpu: the native CPU backend (always built).
#include "bindings/families.h"
#include "cpu/attention.h"
#include "cpu/hw_bf16.h"
#include "cpu/norm.h"
#include "cpu/ops.h"
#include "cpu/quant.h"
#include "cpu/quant_mx.h"
#include "cpu/rope.h"
#include "cpu/runtime.h"
#include "cpu/sampling.h"

#include <cstring>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace braze;

namespace {
template <class Args, void (*run)(const Args&)>
bind::Launcher<Args> launcher() {
  bind::Launcher<Args> l;
  l.launch = [](const Args& a, uintptr_t) { run(a); };
  l.backend = "cpu";
  l.device = Device::cpu;
  return l;
}
}  // namespace

NB_MODULE(_cpu, m) {
  bind::bind_common(m);
  bind::bind_norm(m, {launcher<norm::NormArgs, cpu::norm_run>(), launcher<norm::NormVjpArgs, cpu::norm_vjp_run>()});
  bind::bind_rope(m, launcher<rope::Args, cpu::rope_run>());
  bind::bind_sampling(m, {launcher<sampling::NormalizeArgs, cpu::normalize_run>(),
                          launcher<sampling::ArgmaxArgs, cpu::argmax_run>(),
                          launcher<sampling::MaskArgs, cpu::mask_run>(),
                          launcher<sampling::PenaltyArgs, cpu::penalties_run>(),
                          launcher<sampling::SampleArgs, cpu::sample_run>(),
                          launcher<sampling::PhiloxArgs, cpu::philox_run>()});
  bind::bind_ops(m, {launcher<ops::ActArgs, cpu::act_run>(), launcher<ops::EmbeddingArgs, cpu::embedding_run>(),
                     launcher<ops::HadamardArgs, cpu::hadamard_run>()});
  bind::bind_attention(m, {launcher<attention::AppendKvArgs, cpu::append_kv_run>(),
                           launcher<attention::DecodeArgs, cpu::decode_run>(),
                           launcher<attention::PrefillArgs, cpu::prefill_run>(),
                           launcher<attention::MergeArgs, cpu::merge_states_run>()});
  bind::bind_quant(m, {launcher<quant::DequantArgs, cpu::dequantize_run>(),
                       launcher<quant::QuantArgs, cpu::quantize_run>(),
                       launcher<quant::MatmulArgs, cpu::matmul_run>(),
                       launcher<quant::W8A8Args, cpu::matmul_w8a8_run>()});
  bind::bind_quant_activations(m, launcher<quant::ActQuantArgs, cpu::quantize_activations_run>());

  m.def("isa", [] { return std::string(cpu::isa_name(cpu::active_isa())); },
        "The instruction set the CPU kernels run with now.");
  m.def("isas_supported", [] {
    std::vector<std::string> v;
    for (auto i : {cpu::Isa::base, cpu::Isa::avx2, cpu::Isa::avx512})
      if (cpu::isa_supported(i)) v.push_back(cpu::isa_name(i));
    return v;
  }, "Instruction sets built into this module that this CPU can run.");
  m.def("set_isa", [](const std::string& name) {
    for (auto i : {cpu::Isa::base, cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (name == cpu::isa_name(i)) {
        if (!cpu::isa_supported(i)) throw ValueError("isa '" + name + "' is not supported on this CPU or build");
        cpu::set_isa(i);
        return;
      }
    }
    throw ValueError("isa must be one of 'base', 'avx2', 'avx512', got '" + name + "'");
  }, nb::arg("isa"));
  m.def("stream_min_bytes", &cpu::stream_min_bytes,
        "Outputs larger than this many bytes are written around the cache (non-temporal stores).");
  m.def("set_stream_min_bytes", &cpu::set_stream_min_bytes, nb::arg("bytes"),
        "For tests: 0 streams every output; a negative value restores the default (half the last-level cache).");
  m.def("quant_int8_activations", &cpu::quant_int8_activations,
        "Whether quant.matmul's GEMV quantizes x to int8 for the GGML formats (docs/quant.md).");
  m.def("set_quant_int8_activations", &cpu::set_quant_int8_activations, nb::arg("on"),
        "False runs every format's matmul with exact float32 x (rows past 16: the f32 GEMM).");
  m.def("quant_vnni", &cpu::quant_vnni,
        "Whether the avx512 build's int8 GEMV of q8_0 / q4_0 / q4_1 / q5_0 / q5_1 / iq4_nl uses AVX-512 VNNI.");
  m.def("set_quant_vnni", &cpu::set_quant_vnni, nb::arg("on"),
        "For tests: False runs those formats' vpmaddubsw path (the same results); True where the CPU "
        "has no VNNI raises ValueError.");
  m.def("quant_amx", &cpu::quant_amx,
        "Whether the avx512 build's int8 W8A8 GEMM (more than 16 rows) runs on the AMX tile unit "
        "(default where the CPU, the OS and the build have it, unless BRAZE_CPU_AMX=0).");
  m.def("set_quant_amx", &cpu::set_quant_amx, nb::arg("on"),
        "For tests: False runs the VNNI kernel (the same results); True where AMX is not usable "
        "raises ValueError.");
  m.def("_set_quant_amx_emulated", &cpu::set_quant_amx_emulated, nb::arg("on"),
        "Tests: True runs that GEMM's AMX path (any ISA build) on a software model of the tile "
        "instructions, so its logic is tested where the CPU has no AMX.");
  m.def("_quant_amx_emulated", &cpu::quant_amx_emulated);
  m.def("hw_bf16", &cpu::hw_bf16,
        "Whether the avx512 build's dequantize narrows to bfloat16 with AVX-512 BF16 instructions.");
  m.def("set_hw_bf16", &cpu::set_hw_bf16, nb::arg("on"),
        "For tests: False narrows with integer rounding (the same bits); True where the CPU has no "
        "AVX-512 BF16 raises ValueError.");
  // The copy ceiling of `braze bench`: the pool's threads each memcpy one slice.
  m.def("copy", [](bind::Array src, nb::ndarray<> dst) {
    size_t n = src.nbytes();
    if (dst.nbytes() != n) throw ValueError("dst must have as many bytes as src");
    if (src.device_type() != 1 || dst.device_type() != 1) throw ValueError("copy needs CPU arrays");
    auto s = static_cast<const char*>(src.data());
    auto d = static_cast<char*>(dst.data());
    nb::gil_scoped_release nogil;
    int64_t parts = cpu::num_threads();
    cpu::parallel_for(parts, [&](int64_t p, int) {
      size_t a = n * p / parts, b = n * (p + 1) / parts;
      std::memcpy(d + a, s + a, b - a);
    });
  }, nb::arg("src"), nb::arg("dst"), "Multi-threaded memcpy (the bandwidth ceiling of the CPU benchmarks).");
  m.def("_test_pool", [](const std::string& kind) {
    nb::gil_scoped_release nogil;
    return cpu::pool_self_test(kind);
  }, nb::arg("kind"), "Test-only: exercises the thread pool's nested regions ('nested') and task exceptions ('throw').");
  m.def("num_threads", &cpu::num_threads);
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw ValueError("n must be >= 1");
    cpu::set_num_threads(n);
  }, nb::arg("n"));
}
