#include "bindings/families.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

namespace braze::bind {

void bind_quant(nb::module_& m, const QuantLaunchers& l) {
  // The format table as Python reads it (braze.quant builds its Format records from this).
  m.def("_quant_formats", [] {
    std::vector<std::tuple<std::string, int, int, std::string, std::string, bool, bool>> v;
    for (int i = 0; i < quant::kNumFormats; ++i) {
      const auto& f = quant::kFormats[i];
      v.emplace_back(f.name, f.blocks.block, f.blocks.block_bytes,
                     f.layout == quant::Layout::blocks ? "blocks" : "split", quant::group_name(f.group),
                     quant::dequantize_built(quant::QFormat(i)), quant::quantize_built(quant::QFormat(i)));
    }
    return v;
  }, "(name, block elements, block bytes, layout, group, dequantize built, quantize built) per format.");

  const Launcher<quant::DequantArgs> deq = l.dequantize;
  m.def("dequantize", [deq](const std::string& format, int64_t k, Array data, OptArray scales, OptArray biases,
                            OptArray tensor_scale, Array out, int64_t group, uintptr_t stream) {
    Tensor td = tensor("data", data), ts = tensor("scales", scales), tb = tensor("biases", biases),
           tt = tensor("tensor_scale", tensor_scale), to = tensor("out", out);
    auto a = quant::prepare_dequantize(format, k, td, ts, tb, tt, to, group);
    deq.run(a, {&td, &ts, &tb, &tt, &to}, stream);
  }, nb::arg("format"), nb::arg("k"), nb::arg("data"), nb::arg("scales").none(), nb::arg("biases").none(),
     nb::arg("tensor_scale").none(), nb::arg("out"), nb::arg("group") = 0, nb::arg("stream") = 0);

  const Launcher<quant::QuantArgs> qua = l.quantize;
  m.def("quantize", [qua](const std::string& format, Array x, Array data, OptArray scales, OptArray biases,
                          OptArray tensor_scale, int64_t group, int scale_rule, uintptr_t stream) {
    Tensor tx = tensor("w", x), td = tensor("data", data), ts = tensor("scales", scales),
           tb = tensor("biases", biases), tt = tensor("tensor_scale", tensor_scale);
    auto a = quant::prepare_quantize(format, tx, td, ts, tb, tt, group, scale_rule);
    qua.run(a, {&tx, &td, &ts, &tb, &tt}, stream);
  }, nb::arg("format"), nb::arg("w"), nb::arg("data"), nb::arg("scales").none(), nb::arg("biases").none(),
     nb::arg("tensor_scale").none(), nb::arg("group") = 0, nb::arg("scale_rule") = 0, nb::arg("stream") = 0);

  if (l.matmul_w8a8.launch || l.matmul_w8a8.launch_arrays) {
    const Launcher<quant::W8A8Args> w8 = l.matmul_w8a8;
    m.def("matmul_w8a8", [w8](const std::string& format, Array x, Array x_scale, Array data, Array scales,
                              OptArray bias, Array out, uintptr_t stream) {
      Tensor tx = tensor("x", x), txs = tensor("x_scale", x_scale), td = tensor("data", data),
             ts = tensor("scales", scales), tbias = tensor("bias", bias), to = tensor("out", out);
      auto a = quant::prepare_matmul_w8a8(format, tx, txs, td, ts, tbias, to);
      w8.run(a, {&tx, &txs, &td, &ts, &tbias, &to}, stream);
    }, nb::arg("format"), nb::arg("x"), nb::arg("x_scale"), nb::arg("data"), nb::arg("scales"), nb::arg("bias").none(),
       nb::arg("out"), nb::arg("stream") = 0,
       "out[M, N] = x_scale[M] w_scale[N] (x[M, K] . W[N, K]^T) (+ bias): int8 x int8, e4m3 x e4m3 / e5m2.");
  }
  if (!l.matmul.launch && !l.matmul.launch_arrays) return;
  const Launcher<quant::MatmulArgs> mm = l.matmul;
  m.def("matmul", [mm](const std::string& format, Array x, Array data, OptArray scales, OptArray biases,
                       OptArray tensor_scale, OptArray bias, Array out, int64_t group, uintptr_t stream) {
    Tensor tx = tensor("x", x), td = tensor("data", data), ts = tensor("scales", scales),
           tb = tensor("biases", biases), tt = tensor("tensor_scale", tensor_scale), tbias = tensor("bias", bias),
           to = tensor("out", out);
    auto a = quant::prepare_matmul(format, tx, td, ts, tb, tt, tbias, to, group);
    mm.run(a, {&tx, &td, &ts, &tb, &tt, &tbias, &to}, stream);
  }, nb::arg("format"), nb::arg("x"), nb::arg("data"), nb::arg("scales").none(), nb::arg("biases").none(),
     nb::arg("tensor_scale").none(), nb::arg("bias").none(), nb::arg("out"), nb::arg("group") = 0,
     nb::arg("stream") = 0, "out[M, N] = x[M, K] W[N, K]^T (+ bias); format '' is a dense weight of x's dtype.");
}

}  // namespace braze::bind
