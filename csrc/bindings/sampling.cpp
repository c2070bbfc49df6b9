#include "bindings/families.h"

namespace braze::bind {

namespace {
using sampling::Op;
using sampling::ParamIn;

// A per-row parameter: `value` unless the array is given (float32 / int32 [B]).
struct Param {
  Tensor t;
  double value;
  Param(const char* name, double v, const OptArray& arr) : t(tensor(name, arr)), value(v) {}
  ParamIn in() const { return {&t, value}; }
};
}  // namespace

void bind_sampling(nb::module_& m, const SamplingLaunchers& l) {
  const Launcher<sampling::NormalizeArgs> norm = l.normalize;
  for (Op op : {Op::softmax, Op::log_softmax, Op::logsumexp}) {
    m.def(sampling::op_name(op), [norm, op](Array x, Array out, double temperature, OptArray temperature_arr,
                                            uintptr_t stream) {
      Tensor tx = tensor("logits", x), to = tensor("out", out);
      Param t("temperature", temperature, temperature_arr);
      auto a = sampling::prepare_normalize(op, tx, to, t.in());
      norm.run(a, {&tx, &to, &t.t}, stream);
    }, nb::arg("logits"), nb::arg("out"), nb::arg("temperature"), nb::arg("temperature_arr").none(),
       nb::arg("stream") = 0);
  }

  const Launcher<sampling::ArgmaxArgs> argmax = l.argmax;
  m.def("argmax", [argmax](Array x, Array out, uintptr_t stream) {
    Tensor tx = tensor("logits", x), to = tensor("out", out);
    auto a = sampling::prepare_argmax(tx, to);
    argmax.run(a, {&tx, &to}, stream);
  }, nb::arg("logits"), nb::arg("out"), nb::arg("stream") = 0);

  const Launcher<sampling::MaskArgs> mask = l.mask;
  m.def("top_k_mask", [mask](Array x, Array out, int64_t k, OptArray k_arr, uintptr_t stream) {
    Tensor tx = tensor("logits", x), to = tensor("out", out);
    Param pk("k", double(k), k_arr);
    auto a = sampling::prepare_top_k_mask(tx, to, pk.in());
    mask.run(a, {&tx, &to, &pk.t}, stream);
  }, nb::arg("logits"), nb::arg("out"), nb::arg("k"), nb::arg("k_arr").none(), nb::arg("stream") = 0);

  for (Op op : {Op::top_p_mask, Op::min_p_mask}) {
    m.def(sampling::op_name(op), [mask, op](Array x, Array out, double p, OptArray p_arr, double temperature,
                                            OptArray temperature_arr, uintptr_t stream) {
      Tensor tx = tensor("logits", x), to = tensor("out", out);
      Param pp("p", p, p_arr), t("temperature", temperature, temperature_arr);
      auto a = sampling::prepare_prob_mask(op, tx, to, pp.in(), t.in());
      mask.run(a, {&tx, &to, &pp.t, &t.t}, stream);
    }, nb::arg("logits"), nb::arg("out"), nb::arg("p"), nb::arg("p_arr").none(), nb::arg("temperature"),
       nb::arg("temperature_arr").none(), nb::arg("stream") = 0);
  }

  const Launcher<sampling::PenaltyArgs> penalties = l.penalties;
  m.def("apply_penalties", [penalties](Array x, Array ids, Array out, double repetition, double frequency,
                                 double presence, uintptr_t stream) {
    Tensor tx = tensor("logits", x), ti = tensor("token_ids", ids), to = tensor("out", out);
    auto a = sampling::prepare_apply_penalties(tx, ti, to, repetition, frequency, presence);
    penalties.run(a, {&tx, &ti, &to}, stream);
  }, nb::arg("logits"), nb::arg("token_ids"), nb::arg("out"), nb::arg("repetition"), nb::arg("frequency"),
     nb::arg("presence"), nb::arg("stream") = 0);

  const Launcher<sampling::SampleArgs> sample = l.sample;
  m.def("sample", [sample](Array x, Array out, double temperature, OptArray temperature_arr, int64_t top_k,
                        OptArray top_k_arr, double top_p, OptArray top_p_arr, double min_p, OptArray min_p_arr,
                        uint64_t seed, uint64_t offset, uintptr_t stream) {
    Tensor tx = tensor("logits", x), to = tensor("out", out);
    Param t("temperature", temperature, temperature_arr), k("top_k", double(top_k), top_k_arr),
        p("top_p", top_p, top_p_arr), mp("min_p", min_p, min_p_arr);
    auto a = sampling::prepare_sample(tx, to, t.in(), k.in(), p.in(), mp.in(), seed, offset);
    sample.run(a, {&tx, &to, &t.t, &k.t, &p.t, &mp.t}, stream);
  }, nb::arg("logits"), nb::arg("out"), nb::arg("temperature"), nb::arg("temperature_arr").none(),
     nb::arg("top_k"), nb::arg("top_k_arr").none(), nb::arg("top_p"), nb::arg("top_p_arr").none(),
     nb::arg("min_p"), nb::arg("min_p_arr").none(), nb::arg("seed"), nb::arg("offset"),
     nb::arg("stream") = 0);

  const Launcher<sampling::PhiloxArgs> philox = l.philox;
  m.def("philox_uniform", [philox](Array out, uint64_t seed, uint64_t offset, uintptr_t stream) {
    Tensor to = tensor("out", out);
    auto a = sampling::prepare_philox_uniform(to, seed, offset);
    philox.run(a, {&to}, stream);
  }, nb::arg("out"), nb::arg("seed"), nb::arg("offset"), nb::arg("stream") = 0,
     "The uniform in [0, 1) that row r of sample(seed=seed, offset=offset) draws, for r < len(out).");
}

}  // namespace braze::bind
