// The entries of the XLA FFI table: each adapts a native call's decoded slots
// to its family's prepare_* and launcher, exactly as csrc/bindings/<family>.cpp
// does for nanobind (same argument names, same order, same checks).
#include "jax/table.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace braze::xla {

namespace {
rope::Options rope_options(const Call& c, int k) {
  rope::Options o;
  o.base = c.f(k);
  o.rotary_dim = c.i(k + 1);
  o.interleaved = c.b(k + 2);
  o.scale = c.f(k + 3);
  o.inverse = c.b(k + 4);
  return o;
}

void act(Call& c, ops::Op op, bool tanh, bool il, double alpha, double limit) {
  c.launch(ops::prepare_act(op, c.a(0), c.a(1), tanh, il, alpha, limit));
}

// x dy >out: the activations' VJPs.
void act_vjp(Call& c, ops::Op op, bool tanh, bool il, double alpha, double limit) {
  c.launch(ops::prepare_act(op, c.a(0), c.a(2), tanh, il, alpha, limit, &c.a(1)));
}

sampling::ParamIn param(const Call& c, int array, int scalar) { return {&c.a(array), c.f(scalar)}; }

void set_workspace(norm::NormVjpArgs& a, const Tensor& ws) {
  if (!ws.defined()) return;  // sized by the backend's norm_vjp_workspace_bytes at trace time
  a.workspace = ws.data;
  a.workspace_bytes = ws.shape[0];
}

std::vector<Entry> build() {
  using sampling::Op;
  std::vector<Entry> v = {
      // norm
      {"rms_norm", "x weight? >out eps:f weight_offset:f",
       [](Call& c) { c.launch(norm::prepare_rms_norm(c.a(0), c.a(1), c.a(2), c.f(0), c.f(1))); }},
      {"layer_norm", "x weight? bias? >out eps:f",
       [](Call& c) { c.launch(norm::prepare_layer_norm(c.a(0), c.a(1), c.a(2), c.a(3), c.f(0))); }},
      {"add_rms_norm", "x residual weight? >out >residual_out eps:f weight_offset:f",
       [](Call& c) {
         c.launch(norm::prepare_add_rms_norm(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.f(0), c.f(1)));
       }},
      {"rms_norm_gated", "x gate weight? >out eps:f group_size:i",
       [](Call& c) { c.launch(norm::prepare_rms_norm_gated(c.a(0), c.a(1), c.a(2), c.a(3), c.f(0), c.i(1))); }},
      {"rms_norm_vjp", "x weight? dy >dx >dweight? eps:f weight_offset:f >workspace?",
       [](Call& c) {
         auto a = norm::prepare_rms_norm_vjp(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.f(0), c.f(1));
         set_workspace(a, c.a(5));
         c.launch(a);
       }},
      {"layer_norm_vjp", "x weight? bias? dy >dx >dweight? >dbias? eps:f >workspace?",
       [](Call& c) {
         auto a = norm::prepare_layer_norm_vjp(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5), c.a(6), c.f(0));
         set_workspace(a, c.a(7));
         c.launch(a);
       }},
      // rope
      {"rope", "x positions inv_freq? >out base:f rotary_dim:i interleaved:b attention_scale:f inverse:b",
       [](Call& c) { c.launch(rope::prepare_rope(c.a(0), c.a(1), c.a(2), c.a(3), rope_options(c, 0))); }},
      {"rope_qk",
       "q k positions inv_freq? >q_out >k_out base:f rotary_dim:i interleaved:b attention_scale:f inverse:b",
       [](Call& c) {
         c.launch(rope::prepare_rope_qk(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5), rope_options(c, 0)));
       }},
      // sampling (a per-row parameter: its scalar, and its array when given)
      {"softmax", "logits >out temperature:f temperature?",
       [](Call& c) { c.launch(sampling::prepare_normalize(Op::softmax, c.a(0), c.a(1), param(c, 2, 0))); }},
      {"log_softmax", "logits >out temperature:f temperature?",
       [](Call& c) { c.launch(sampling::prepare_normalize(Op::log_softmax, c.a(0), c.a(1), param(c, 2, 0))); }},
      {"logsumexp", "logits >out temperature:f temperature?",
       [](Call& c) { c.launch(sampling::prepare_normalize(Op::logsumexp, c.a(0), c.a(1), param(c, 2, 0))); }},
      {"argmax", "logits >out", [](Call& c) { c.launch(sampling::prepare_argmax(c.a(0), c.a(1))); }},
      {"top_k_mask", "logits >out k:i k?",
       [](Call& c) {
         c.launch(sampling::prepare_top_k_mask(c.a(0), c.a(1), {&c.a(2), double(c.i(0))}));
       }},
      {"top_p_mask", "logits >out p:f p? temperature:f temperature?",
       [](Call& c) {
         c.launch(sampling::prepare_prob_mask(Op::top_p_mask, c.a(0), c.a(1), param(c, 2, 0), param(c, 3, 1)));
       }},
      {"min_p_mask", "logits >out p:f p? temperature:f temperature?",
       [](Call& c) {
         c.launch(sampling::prepare_prob_mask(Op::min_p_mask, c.a(0), c.a(1), param(c, 2, 0), param(c, 3, 1)));
       }},
      {"apply_penalties", "logits token_ids >out repetition:f frequency:f presence:f",
       [](Call& c) {
         c.launch(sampling::prepare_apply_penalties(c.a(0), c.a(1), c.a(2), c.f(0), c.f(1), c.f(2)));
       }},
      {"sample",
       "logits >out temperature:f temperature? top_k:i top_k? top_p:f top_p? min_p:f min_p? seed:u offset:u",
       [](Call& c) {
         c.launch(sampling::prepare_sample(c.a(0), c.a(1), param(c, 2, 0), {&c.a(3), double(c.i(1))},
                                           param(c, 4, 2), param(c, 5, 3), c.u(4), c.u(5)));
       }},
      {"philox_uniform", ">out seed:u offset:u",
       [](Call& c) { c.launch(sampling::prepare_philox_uniform(c.a(0), c.u(0), c.u(1))); }},
      // ops
      {"silu_and_mul", "x >out interleaved:b",
       [](Call& c) { act(c, ops::Op::silu_and_mul, false, c.b(0), 0.0, 0.0); }},
      {"gelu_and_mul", "x >out approximate_tanh:b interleaved:b",
       [](Call& c) { act(c, ops::Op::gelu_and_mul, c.b(0), c.b(1), 0.0, 0.0); }},
      {"swiglu_clamped", "x >out alpha:f limit:f interleaved:b",
       [](Call& c) { act(c, ops::Op::swiglu_clamped, false, c.b(2), c.f(0), c.f(1)); }},
      {"silu", "x >out", [](Call& c) { act(c, ops::Op::silu, false, false, 0.0, 0.0); }},
      {"gelu", "x >out approximate_tanh:b", [](Call& c) { act(c, ops::Op::gelu, c.b(0), false, 0.0, 0.0); }},
      {"silu_and_mul_vjp", "x dy >out interleaved:b",
       [](Call& c) { act_vjp(c, ops::Op::silu_and_mul_vjp, false, c.b(0), 0.0, 0.0); }},
      {"gelu_and_mul_vjp", "x dy >out approximate_tanh:b interleaved:b",
       [](Call& c) { act_vjp(c, ops::Op::gelu_and_mul_vjp, c.b(0), c.b(1), 0.0, 0.0); }},
      {"swiglu_clamped_vjp", "x dy >out alpha:f limit:f interleaved:b",
       [](Call& c) { act_vjp(c, ops::Op::swiglu_clamped_vjp, false, c.b(2), c.f(0), c.f(1)); }},
      {"silu_vjp", "x dy >out", [](Call& c) { act_vjp(c, ops::Op::silu_vjp, false, false, 0.0, 0.0); }},
      {"gelu_vjp", "x dy >out approximate_tanh:b",
       [](Call& c) { act_vjp(c, ops::Op::gelu_vjp, c.b(0), false, 0.0, 0.0); }},
      {"embedding", "ids table >out",
       [](Call& c) { c.launch(ops::prepare_embedding(c.a(0), c.a(1), c.a(2))); }},
      {"hadamard", "x >out scale:f", [](Call& c) { c.launch(ops::prepare_hadamard(c.a(0), c.a(1), c.f(0))); }},
      // attention (the workspace is a result: scratch XLA allocates)
      {"append_kv", "k v &k_cache &v_cache slot_mapping",
       [](Call& c) { c.launch(attention::prepare_append_kv(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4))); }},
      {"decode",
       "q k_cache v_cache block_table kv_lens >out >lse_out? scale:f window:i sinks? softcap:f >workspace?",
       [](Call& c) {
         c.launch(attention::prepare_decode(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.f(0), c.i(1), c.a(7),
                                            c.f(2), c.a(5), c.a(6), c.a(8)));
       }},
      {"prefill", "q k v cu_seqlens >out >lse_out? causal:b scale:f window:i sinks? softcap:f >workspace?",
       [](Call& c) {
         c.launch(attention::prepare_prefill(c.a(0), c.a(1), c.a(2), c.a(3), c.b(0), c.f(1), c.i(2), c.a(6),
                                             c.f(3), c.a(4), c.a(5), c.a(7)));
       }},
      {"prefill_paged",
       "q k_cache v_cache block_table cu_seqlens_q kv_lens >out >lse_out? scale:f window:i sinks? softcap:f "
       ">workspace?",
       [](Call& c) {
         c.launch(attention::prepare_prefill_paged(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5), c.f(0), c.i(1),
                                                   c.a(8), c.f(2), c.a(6), c.a(7), c.a(9)));
       }},
      {"merge_states", "o_a lse_a o_b lse_b >out >lse_out?",
       [](Call& c) {
         c.launch(attention::prepare_merge_states(c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5)));
       }},
      // quant (the format a string attribute)
      {"dequantize", "format:s k:i data scales? biases? tensor_scale? >out group:i",
       [](Call& c) {
         c.launch(quant::prepare_dequantize(c.s(0), c.i(1), c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.i(2)));
       }},
      {"matmul", "format:s x data scales? biases? tensor_scale? bias? >out group:i",
       [](Call& c) {
         c.launch(quant::prepare_matmul(c.s(0), c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5), c.a(6), c.i(1)));
       }},
      {"quantize", "format:s w >data >scales? >biases? >tensor_scale? group:i scale_rule:i",
       [](Call& c) {
         c.launch(quant::prepare_quantize(c.s(0), c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.i(1), int(c.i(2))));
       }},
      {"quantize_activations", "format:s x >xq >sx",
       [](Call& c) { c.launch(quant::prepare_quantize_activations(c.s(0), c.a(0), c.a(1), c.a(2))); }},
      {"matmul_w8a8", "format:s x x_scale data scales bias? >out",
       [](Call& c) {
         c.launch(quant::prepare_matmul_w8a8(c.s(0), c.a(0), c.a(1), c.a(2), c.a(3), c.a(4), c.a(5)));
       }},
  };
  for (Entry& e : v) {
    std::istringstream words(e.decl);
    std::string w;
    while (words >> w) {
      Slot s;
      auto colon = w.find(':');
      if (colon != std::string::npos) {
        s.name = w.substr(0, colon);
        s.kind = w[colon + 1];
        e.scalars.push_back(s);
        continue;
      }
      s.kind = 'a';
      if (w[0] == '>') s.output = true, s.input = false, w.erase(0, 1);
      else if (w[0] == '&') s.output = true, w.erase(0, 1);
      if (w.back() == '?') s.optional = true, w.pop_back();
      s.name = w;
      e.arrays.push_back(s);
    }
  }
  return v;
}
}  // namespace

const std::vector<Entry>& entries() {
  static const std::vector<Entry> table = build();
  return table;
}

const Entry* find(std::string_view name) {
  for (const Entry& e : entries())
    if (name == e.name) return &e;
  return nullptr;
}

const std::string& declarations() {
  static const std::string text = [] {
    std::string t;
    for (const Entry& e : entries()) t += std::string(e.name) + " " + e.decl + "\n";
    return t;
  }();
  return text;
}

}  // namespace braze::xla
