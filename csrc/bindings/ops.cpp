#include "bindings/families.h"

namespace braze::bind {

namespace {
// The activations share one argument block; each entry point fixes its op.
void run_act(const Launcher<ops::ActArgs>& l, ops::Op op, const Array& x, const Array& out, bool approximate_tanh,
             bool interleaved, double alpha, double limit, uintptr_t stream) {
  Tensor tx = tensor("x", x), to = tensor("out", out);
  auto a = ops::prepare_act(op, tx, to, approximate_tanh, interleaved, alpha, limit);
  l.run(a, {&tx, &to}, stream);
}

// Their VJPs: dx (out, x's shape) from x and the output's cotangent dy.
void run_act_vjp(const Launcher<ops::ActArgs>& l, ops::Op op, const Array& x, const Array& dy, const Array& out,
                 bool approximate_tanh, bool interleaved, double alpha, double limit, uintptr_t stream) {
  Tensor tx = tensor("x", x), td = tensor("dy", dy), to = tensor("out", out);
  auto a = ops::prepare_act(op, tx, to, approximate_tanh, interleaved, alpha, limit, &td);
  l.run(a, {&tx, &td, &to}, stream);
}
}  // namespace

void bind_ops(nb::module_& m, const OpsLaunchers& l) {
  const Launcher<ops::ActArgs> act = l.act;
  m.def("silu_and_mul", [act](Array x, Array out, bool interleaved, uintptr_t stream) {
    run_act(act, ops::Op::silu_and_mul, x, out, false, interleaved, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("interleaved"), nb::arg("stream") = 0);

  m.def("gelu_and_mul", [act](Array x, Array out, bool approximate_tanh, bool interleaved, uintptr_t stream) {
    run_act(act, ops::Op::gelu_and_mul, x, out, approximate_tanh, interleaved, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("approximate_tanh"), nb::arg("interleaved"), nb::arg("stream") = 0);

  m.def("swiglu_clamped", [act](Array x, Array out, double alpha, double limit, bool interleaved,
                                uintptr_t stream) {
    run_act(act, ops::Op::swiglu_clamped, x, out, false, interleaved, alpha, limit, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("alpha"), nb::arg("limit"), nb::arg("interleaved"),
     nb::arg("stream") = 0);

  m.def("silu", [act](Array x, Array out, uintptr_t stream) {
    run_act(act, ops::Op::silu, x, out, false, false, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("stream") = 0);

  m.def("gelu", [act](Array x, Array out, bool approximate_tanh, uintptr_t stream) {
    run_act(act, ops::Op::gelu, x, out, approximate_tanh, false, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("approximate_tanh"), nb::arg("stream") = 0);

  m.def("silu_and_mul_vjp", [act](Array x, Array dy, Array out, bool interleaved, uintptr_t stream) {
    run_act_vjp(act, ops::Op::silu_and_mul_vjp, x, dy, out, false, interleaved, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("dy"), nb::arg("out"), nb::arg("interleaved"), nb::arg("stream") = 0);

  m.def("gelu_and_mul_vjp", [act](Array x, Array dy, Array out, bool approximate_tanh, bool interleaved,
                                  uintptr_t stream) {
    run_act_vjp(act, ops::Op::gelu_and_mul_vjp, x, dy, out, approximate_tanh, interleaved, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("dy"), nb::arg("out"), nb::arg("approximate_tanh"), nb::arg("interleaved"),
     nb::arg("stream") = 0);

  m.def("swiglu_clamped_vjp", [act](Array x, Array dy, Array out, double alpha, double limit, bool interleaved,
                                    uintptr_t stream) {
    run_act_vjp(act, ops::Op::swiglu_clamped_vjp, x, dy, out, false, interleaved, alpha, limit, stream);
  }, nb::arg("x"), nb::arg("dy"), nb::arg("out"), nb::arg("alpha"), nb::arg("limit"), nb::arg("interleaved"),
     nb::arg("stream") = 0);

  m.def("silu_vjp", [act](Array x, Array dy, Array out, uintptr_t stream) {
    run_act_vjp(act, ops::Op::silu_vjp, x, dy, out, false, false, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("dy"), nb::arg("out"), nb::arg("stream") = 0);

  m.def("gelu_vjp", [act](Array x, Array dy, Array out, bool approximate_tanh, uintptr_t stream) {
    run_act_vjp(act, ops::Op::gelu_vjp, x, dy, out, approximate_tanh, false, 0.0, 0.0, stream);
  }, nb::arg("x"), nb::arg("dy"), nb::arg("out"), nb::arg("approximate_tanh"), nb::arg("stream") = 0);

  const Launcher<ops::EmbeddingArgs> emb = l.embedding;
  m.def("embedding", [emb](Array ids, Array table, Array out, uintptr_t stream) {
    Tensor ti = tensor("ids", ids), tt = tensor("table", table), to = tensor("out", out);
    auto a = ops::prepare_embedding(ti, tt, to);
    emb.run(a, {&ti, &tt, &to}, stream);
  }, nb::arg("ids"), nb::arg("table"), nb::arg("out"), nb::arg("stream") = 0);

  const Launcher<ops::HadamardArgs> had = l.hadamard;
  if (!had.launch && !had.launch_arrays) return;  // a backend without the kernel binds no entry
  m.def("hadamard", [had](Array x, Array out, double scale, uintptr_t stream) {
    Tensor tx = tensor("x", x), to = tensor("out", out);
    auto a = ops::prepare_hadamard(tx, to, scale);
    had.run(a, {&tx, &to}, stream);
  }, nb::arg("x"), nb::arg("out"), nb::arg("scale"), nb::arg("stream") = 0,
     "scale: NaN means 1/sqrt(n).");
}

}  // namespace braze::bind
