#include "bindings/families.h"

namespace braze::bind {

namespace {
template <class Args> bool has(const Launcher<Args>& l) { return l.launch || l.launch_arrays; }
}  // namespace

void bind_attention(nb::module_& m, const AttentionLaunchers& l) {
  const auto app = l.append_kv;
  if (has(app))
    m.def("append_kv", [app](Array k, Array v, Array k_cache, Array v_cache, Array slot_mapping, uintptr_t stream) {
      Tensor tk = tensor("k", k), tv = tensor("v", v), tkc = tensor("k_cache", k_cache),
             tvc = tensor("v_cache", v_cache), ts = tensor("slot_mapping", slot_mapping);
      auto a = attention::prepare_append_kv(tk, tv, tkc, tvc, ts);
      app.run(a, {&tk, &tv, &tkc, &tvc, &ts}, stream);
    }, nb::arg("k"), nb::arg("v"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("slot_mapping"),
       nb::arg("stream") = 0);

  const auto dec = l.decode;
  if (has(dec))
    m.def("decode", [dec](Array q, Array k_cache, Array v_cache, Array block_table, Array kv_lens, Array out,
                          OptArray lse_out, double scale, int64_t window, OptArray sinks, double softcap,
                          OptArray workspace, uintptr_t stream) {
      Tensor tq = tensor("q", q), tkc = tensor("k_cache", k_cache), tvc = tensor("v_cache", v_cache),
             tbt = tensor("block_table", block_table), tl = tensor("kv_lens", kv_lens), to = tensor("out", out),
             tlse = tensor("lse_out", lse_out), tsk = tensor("sinks", sinks), tws = tensor("workspace", workspace);
      auto a = attention::prepare_decode(tq, tkc, tvc, tbt, tl, scale, window, tsk, softcap, to, tlse, tws);
      dec.run(a, {&tq, &tkc, &tvc, &tbt, &tl, &to, &tlse, &tsk, &tws}, stream);
    }, nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("block_table"), nb::arg("kv_lens"),
       nb::arg("out"), nb::arg("lse_out").none(), nb::arg("scale"), nb::arg("window"), nb::arg("sinks").none(),
       nb::arg("softcap"), nb::arg("workspace").none() = nb::none(), nb::arg("stream") = 0,
       "scale: NaN means 1/sqrt(head_dim); window 0 and softcap 0 mean none.");

  const auto pre = l.prefill;
  if (has(pre)) {
    m.def("prefill", [pre](Array q, Array k, Array v, Array cu_seqlens, Array out, OptArray lse_out, bool causal,
                           double scale, int64_t window, OptArray sinks, double softcap, OptArray workspace,
                           uintptr_t stream) {
      Tensor tq = tensor("q", q), tk = tensor("k", k), tv = tensor("v", v), tcu = tensor("cu_seqlens", cu_seqlens),
             to = tensor("out", out), tlse = tensor("lse_out", lse_out), tsk = tensor("sinks", sinks),
             tws = tensor("workspace", workspace);
      auto a = attention::prepare_prefill(tq, tk, tv, tcu, causal, scale, window, tsk, softcap, to, tlse, tws);
      pre.run(a, {&tq, &tk, &tv, &tcu, &to, &tlse, &tsk, &tws}, stream);
    }, nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::arg("cu_seqlens"), nb::arg("out"), nb::arg("lse_out").none(),
       nb::arg("causal"), nb::arg("scale"), nb::arg("window"), nb::arg("sinks").none(), nb::arg("softcap"),
       nb::arg("workspace").none() = nb::none(), nb::arg("stream") = 0);

    m.def("prefill_paged", [pre](Array q, Array k_cache, Array v_cache, Array block_table, Array cu_seqlens_q,
                                 Array kv_lens, Array out, OptArray lse_out, double scale, int64_t window,
                                 OptArray sinks, double softcap, OptArray workspace, uintptr_t stream) {
      Tensor tq = tensor("q", q), tkc = tensor("k_cache", k_cache), tvc = tensor("v_cache", v_cache),
             tbt = tensor("block_table", block_table), tcu = tensor("cu_seqlens_q", cu_seqlens_q),
             tl = tensor("kv_lens", kv_lens), to = tensor("out", out), tlse = tensor("lse_out", lse_out),
             tsk = tensor("sinks", sinks), tws = tensor("workspace", workspace);
      auto a = attention::prepare_prefill_paged(tq, tkc, tvc, tbt, tcu, tl, scale, window, tsk, softcap, to, tlse,
                                                tws);
      pre.run(a, {&tq, &tkc, &tvc, &tbt, &tcu, &tl, &to, &tlse, &tsk, &tws}, stream);
    }, nb::arg("q"), nb::arg("k_cache"), nb::arg("v_cache"), nb::arg("block_table"), nb::arg("cu_seqlens_q"),
       nb::arg("kv_lens"), nb::arg("out"), nb::arg("lse_out").none(), nb::arg("scale"), nb::arg("window"),
       nb::arg("sinks").none(), nb::arg("softcap"), nb::arg("workspace").none() = nb::none(), nb::arg("stream") = 0);
  }

  const auto mer = l.merge;
  if (has(mer))
    m.def("merge_states", [mer](Array o_a, Array lse_a, Array o_b, Array lse_b, Array out, OptArray lse_out,
                                uintptr_t stream) {
      Tensor ta = tensor("o_a", o_a), tla = tensor("lse_a", lse_a), tb = tensor("o_b", o_b),
             tlb = tensor("lse_b", lse_b), to = tensor("out", out), tlse = tensor("lse_out", lse_out);
      auto a = attention::prepare_merge_states(ta, tla, tb, tlb, to, tlse);
      mer.run(a, {&ta, &tla, &tb, &tlb, &to, &tlse}, stream);
    }, nb::arg("o_a"), nb::arg("lse_a"), nb::arg("o_b"), nb::arg("lse_b"), nb::arg("out"),
       nb::arg("lse_out").none(), nb::arg("stream") = 0);
}

}  // namespace braze::bind
