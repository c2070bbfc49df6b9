#include "bindings/families.h"

namespace braze::bind {

namespace {
rope::Options options(double base, int64_t rotary_dim, bool interleaved, double scale, bool inverse) {
  rope::Options o;
  o.base = base;
  o.rotary_dim = rotary_dim;
  o.interleaved = interleaved;
  o.scale = scale;
  o.inverse = inverse;
  return o;
}

}  // namespace

// rotary_dim < 0 means the whole head.
void bind_rope(nb::module_& m, const Launcher<rope::Args>& ctx) {
  m.def("rope", [ctx](Array x, Array pos, OptArray inv_freq, Array out, double base, int64_t rotary_dim,
                      bool interleaved, double scale, bool inverse, uintptr_t stream) {
    Tensor tx = tensor("x", x), tp = tensor("positions", pos),
           tf = tensor("inv_freq", inv_freq), to = tensor("out", out);
    auto a = rope::prepare_rope(tx, tp, tf, to, options(base, rotary_dim, interleaved, scale, inverse));
    ctx.run(a, {&tx, &tp, &tf, &to}, stream);
  }, nb::arg("x"), nb::arg("positions"), nb::arg("inv_freq").none(), nb::arg("out"), nb::arg("base"),
     nb::arg("rotary_dim"), nb::arg("interleaved"), nb::arg("attention_scale"), nb::arg("inverse"),
     nb::arg("stream") = 0);

  m.def("rope_qk", [ctx](Array q, Array k, Array pos, OptArray inv_freq, Array q_out, Array k_out, double base,
                         int64_t rotary_dim, bool interleaved, double scale, bool inverse, uintptr_t stream) {
    Tensor tq = tensor("q", q), tk = tensor("k", k), tp = tensor("positions", pos),
           tf = tensor("inv_freq", inv_freq), tqo = tensor("q_out", q_out),
           tko = tensor("k_out", k_out);
    auto a = rope::prepare_rope_qk(tq, tk, tp, tf, tqo, tko, options(base, rotary_dim, interleaved, scale, inverse));
    ctx.run(a, {&tq, &tk, &tp, &tf, &tqo, &tko}, stream);
  }, nb::arg("q"), nb::arg("k"), nb::arg("positions"), nb::arg("inv_freq").none(), nb::arg("q_out"),
     nb::arg("k_out"), nb::arg("base"), nb::arg("rotary_dim"), nb::arg("interleaved"), nb::arg("attention_scale"),
     nb::arg("inverse"), nb::arg("stream") = 0);
}

}  // namespace braze::bind
