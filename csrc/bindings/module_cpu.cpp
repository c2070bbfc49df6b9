// braze._cpu: the native CPU backend (always built).
#include "bindings/exceptions.h"
#include "bindings/norm.h"
#include "cpu/norm.h"
#include "cpu/runtime.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

namespace nb = nanobind;
using namespace braze;

static void norm_launch(const norm::Args& a, uintptr_t) { cpu::norm_run(a); }

NB_MODULE(_cpu, m) {
  bind::register_exceptions(m);
  bind::bind_norm(m, norm_launch, Device::cpu, "cpu");

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
  m.def("num_threads", &cpu::num_threads);
  m.def("set_num_threads", [](int n) {
    if (n < 1) throw ValueError("n must be >= 1");
    cpu::set_num_threads(n);
  }, nb::arg("n"));
}
