#include "bindings/families.h"
#include "core/quant_mx.h"

#include <nanobind/stl/string.h>

namespace braze::bind {

void bind_quant_activations(nb::module_& m, const Launcher<quant::ActQuantArgs>& l) {
  const Launcher<quant::ActQuantArgs> run = l;
  m.def("quantize_activations", [run](const std::string& format, Array x, Array xq, Array sx, uintptr_t stream) {
    Tensor tx = tensor("x", x), tq = tensor("xq", xq), ts = tensor("sx", sx);
    auto a = quant::prepare_quantize_activations(format, tx, tq, ts);
    run.run(a, {&tx, &tq, &ts}, stream);
  }, nb::arg("format"), nb::arg("x"), nb::arg("xq"), nb::arg("sx"), nb::arg("stream") = 0);
}

}  // namespace braze::bind
