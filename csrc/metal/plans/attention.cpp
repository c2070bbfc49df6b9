#include "attention.h"

#include <string>
#include <utility>

#include "attention/attention_params.h"

namespace braze::metal {
namespace {

using attention::Options;
using attention::Outputs;
using attention::PagedKv;

const char* kRange = "sizes or strides out of range (the Metal kernels take them in [0, 2^32))";

bool fits(std::initializer_list<std::int64_t> vs) {
  for (std::int64_t v : vs)
    if (!fits_u32(v)) return false;
  return true;
}

// Bytes from an array's first element to one past its last: outer axes as
// (size, stride) pairs, then `inner` contiguous elements.
std::uint64_t span(std::initializer_list<std::pair<std::int64_t, std::int64_t>> outer, std::int64_t inner, DType t) {
  std::int64_t last = inner;
  if (inner <= 0) return 0;
  for (const auto& [n, s] : outer) {
    if (n <= 0) return 0;
    last += (n - 1) * s;
  }
  return std::uint64_t(Format(t).bytes(last));
}

std::uint32_t u32(std::int64_t v) { return std::uint32_t(v); }

std::uint32_t sinks_code(const Options& o) {
  if (!o.sinks) return ATTN_SINKS_NONE;
  return o.sinks_dtype == DType::f32 ? ATTN_SINKS_F32 : o.sinks_dtype == DType::f16 ? ATTN_SINKS_F16 : ATTN_SINKS_BF16;
}

bool paged_fits(const PagedKv& kv) {
  return fits({kv.k_stride_b, kv.k_stride_s, kv.k_stride_h, kv.v_stride_b, kv.v_stride_s, kv.v_stride_h,
               kv.num_blocks, kv.block_size, kv.bt_stride, kv.max_blocks, kv.max_blocks * kv.block_size});
}

// The options and outputs every attention kernel shares.
AttnParams common(std::int64_t q_heads, std::int64_t kv_heads, std::int64_t dim, const Options& opt,
                  const Outputs& o) {
  AttnParams p{};
  p.q_heads = u32(q_heads);
  p.kv_heads = u32(kv_heads);
  p.dim = u32(dim);
  p.o_st = u32(o.out_stride_t);
  p.o_sh = u32(o.out_stride_h);
  p.has_lse = o.lse ? 1u : 0u;
  p.l_st = u32(o.lse_stride_t);
  p.l_sh = u32(o.lse_stride_h);
  p.window = opt.window > std::int64_t(kU32) ? std::uint32_t(kU32) : u32(opt.window);  // longer than any context
  p.sinks_dtype = sinks_code(opt);
  p.scale = opt.scale;
  p.softcap = opt.softcap;
  return p;
}

void set_paged(AttnParams& p, const PagedKv& kv) {
  p.k_st = u32(kv.k_stride_s);
  p.k_sh = u32(kv.k_stride_h);
  p.v_st = u32(kv.v_stride_s);
  p.v_sh = u32(kv.v_stride_h);
  p.k_sb = u32(kv.k_stride_b);
  p.v_sb = u32(kv.v_stride_b);
  p.block_size = u32(kv.block_size);
  p.num_blocks = u32(kv.num_blocks);
  p.bt_stride = u32(kv.bt_stride);
  p.max_blocks = u32(kv.max_blocks);
}

// Binds the paged cache, block table and kv_lens (buffers 1..5 of decode, 1, 2, 4, 5 of prefill_paged).
struct PagedRefs { BufferRef k, v, table, lens; };
PagedRefs bind_paged(Plan& plan, const PagedKv& kv, std::int64_t batch, std::int64_t kv_heads, std::int64_t dim,
                     DType t) {
  PagedRefs r;
  r.k = plan.array(kv.k, span({{kv.num_blocks, kv.k_stride_b}, {kv.block_size, kv.k_stride_s}, {kv_heads, kv.k_stride_h}},
                              dim, t));
  r.v = plan.array(kv.v, span({{kv.num_blocks, kv.v_stride_b}, {kv.block_size, kv.v_stride_s}, {kv_heads, kv.v_stride_h}},
                              dim, t));
  r.table = plan.array(kv.block_table, row_bytes(batch, kv.max_blocks, kv.bt_stride, DType::i32));
  r.lens = plan.array(kv.kv_lens, row_bytes(1, batch, 1, DType::i32));
  return r;
}

// Buffers of the optional sinks (in) and lse_out (out): absent ones bind `fallback`, never read nor written.
std::pair<BufferRef, BufferRef> bind_options(Plan& plan, const Options& opt, const Outputs& o, std::int64_t rows,
                                             std::int64_t heads, std::int64_t q_heads, BufferRef fallback) {
  const BufferRef sinks = opt.sinks ? plan.array(opt.sinks, row_bytes(1, q_heads, 1, opt.sinks_dtype)) : fallback;
  const BufferRef lse =
      o.lse ? plan.array(o.lse, span({{rows, o.lse_stride_t}, {heads, o.lse_stride_h}}, 1, DType::f32), true)
            : fallback;
  return {sinks, lse};
}

}  // namespace

Plan plan_append_kv(const attention::AppendKvArgs& a) {
  Plan plan;
  if (!fits({a.tokens, a.heads, a.num_blocks, a.block_size, a.num_blocks * a.block_size, a.k_stride_t, a.k_stride_h,
             a.v_stride_t, a.v_stride_h, a.kc_stride_b, a.kc_stride_s, a.kc_stride_h, a.vc_stride_b, a.vc_stride_s,
             a.vc_stride_h, a.slot_stride}))
    plan.error = kRange;
  if (!plan.error.empty() || a.tokens == 0 || a.heads == 0) return plan;
  AttnAppendParams p{};
  p.tokens = u32(a.tokens);
  p.heads = u32(a.heads);
  p.dim = u32(a.dim);
  p.block_size = u32(a.block_size);
  p.capacity = u32(a.num_blocks * a.block_size);
  p.k_st = u32(a.k_stride_t);
  p.k_sh = u32(a.k_stride_h);
  p.v_st = u32(a.v_stride_t);
  p.v_sh = u32(a.v_stride_h);
  p.kc_sb = u32(a.kc_stride_b);
  p.kc_ss = u32(a.kc_stride_s);
  p.kc_sh = u32(a.kc_stride_h);
  p.vc_sb = u32(a.vc_stride_b);
  p.vc_ss = u32(a.vc_stride_s);
  p.vc_sh = u32(a.vc_stride_h);
  p.slot_stride = u32(a.slot_stride);
  p.slot_i64 = a.slot_dtype == DType::i64 ? 1u : 0u;

  Dispatch d;
  d.kernel = std::string("append_kv_") + dtype_suffix(a.dtype);
  d.threads[0] = ATTN_THREADS;
  d.threadgroups[0] = u32(a.tokens);
  d.threadgroups[1] = u32(a.heads);
  const DType t = a.dtype;
  d.buffers = {plan.array(a.k, span({{a.tokens, a.k_stride_t}, {a.heads, a.k_stride_h}}, a.dim, t)),
               plan.array(a.v, span({{a.tokens, a.v_stride_t}, {a.heads, a.v_stride_h}}, a.dim, t)),
               plan.array(a.k_cache,
                          span({{a.num_blocks, a.kc_stride_b}, {a.block_size, a.kc_stride_s}, {a.heads, a.kc_stride_h}},
                               a.dim, t), true),
               plan.array(a.v_cache,
                          span({{a.num_blocks, a.vc_stride_b}, {a.block_size, a.vc_stride_s}, {a.heads, a.vc_stride_h}},
                               a.dim, t), true),
               plan.array(a.slots, row_bytes(a.tokens, 1, a.slot_stride, a.slot_dtype))};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_decode(const attention::DecodeArgs& a) {
  Plan plan;
  if (!paged_fits(a.kv) || !fits({a.batch, a.q_heads, a.q_stride_b, a.q_stride_h, a.o.out_stride_t, a.o.out_stride_h,
                                  a.o.lse_stride_t, a.o.lse_stride_h}))
    plan.error = kRange;
  if (!plan.error.empty() || a.batch == 0 || a.q_heads == 0) return plan;
  AttnParams p = common(a.q_heads, a.kv_heads, a.dim, a.opt, a.o);
  set_paged(p, a.kv);
  p.batch = u32(a.batch);
  p.q_st = u32(a.q_stride_b);
  p.q_sh = u32(a.q_stride_h);

  Dispatch d;
  d.kernel = std::string("decode_") + dtype_suffix(a.dtype);
  d.threads[0] = ATTN_THREADS;
  d.threadgroups[0] = u32(a.q_heads);
  d.threadgroups[1] = u32(a.batch);
  const BufferRef q = plan.array(a.q, span({{a.batch, a.q_stride_b}, {a.q_heads, a.q_stride_h}}, a.dim, a.dtype));
  const PagedRefs kv = bind_paged(plan, a.kv, a.batch, a.kv_heads, a.dim, a.dtype);
  const BufferRef out = plan.array(
      a.o.out, span({{a.batch, a.o.out_stride_t}, {a.q_heads, a.o.out_stride_h}}, a.dim, a.dtype), true);
  const auto [sinks, lse] = bind_options(plan, a.opt, a.o, a.batch, a.q_heads, a.q_heads, q);
  d.buffers = {q, kv.k, kv.v, kv.table, kv.lens, sinks, out, lse};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_prefill(const attention::PrefillArgs& a) {
  Plan plan;
  const std::int64_t tiles = (a.tokens + ATTN_TILE - 1) / ATTN_TILE + a.batch;  // >= every sequence's tiles
  if ((a.paged && !paged_fits(a.kv)) ||
      !fits({a.batch, a.tokens, tiles, a.q_heads, a.q_stride_t, a.q_stride_h, a.k_stride_t, a.k_stride_h,
             a.v_stride_t, a.v_stride_h, a.o.out_stride_t, a.o.out_stride_h, a.o.lse_stride_t, a.o.lse_stride_h}))
    plan.error = kRange;
  if (!plan.error.empty() || a.tokens == 0 || a.q_heads == 0) return plan;
  AttnParams p = common(a.q_heads, a.kv_heads, a.dim, a.opt, a.o);
  p.batch = u32(a.batch);
  p.q_st = u32(a.q_stride_t);
  p.q_sh = u32(a.q_stride_h);
  p.causal = a.causal ? 1u : 0u;

  Dispatch d;
  d.kernel = std::string(a.paged ? "prefill_paged_" : "prefill_") + dtype_suffix(a.dtype);
  d.threads[0] = ATTN_THREADS;
  d.threadgroups[0] = u32(tiles);
  d.threadgroups[1] = u32(a.q_heads);
  const DType t = a.dtype;
  const BufferRef q = plan.array(a.q, span({{a.tokens, a.q_stride_t}, {a.q_heads, a.q_stride_h}}, a.dim, t));
  const BufferRef cu = plan.array(a.cu_seqlens, row_bytes(1, a.batch + 1, 1, DType::i32));
  BufferRef k, v, table = q, lens = q;
  if (a.paged) {
    set_paged(p, a.kv);
    const PagedRefs kv = bind_paged(plan, a.kv, a.batch, a.kv_heads, a.dim, t);
    k = kv.k, v = kv.v, table = kv.table, lens = kv.lens;
  } else {
    p.k_st = u32(a.k_stride_t);
    p.k_sh = u32(a.k_stride_h);
    p.v_st = u32(a.v_stride_t);
    p.v_sh = u32(a.v_stride_h);
    k = plan.array(a.k, span({{a.tokens, a.k_stride_t}, {a.kv_heads, a.k_stride_h}}, a.dim, t));
    v = plan.array(a.v, span({{a.tokens, a.v_stride_t}, {a.kv_heads, a.v_stride_h}}, a.dim, t));
  }
  const BufferRef out =
      plan.array(a.o.out, span({{a.tokens, a.o.out_stride_t}, {a.q_heads, a.o.out_stride_h}}, a.dim, t), true);
  const auto [sinks, lse] = bind_options(plan, a.opt, a.o, a.tokens, a.q_heads, a.q_heads, q);
  d.buffers = {q, k, v, cu, table, lens, sinks, out, lse};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_merge_states(const attention::MergeArgs& a) {
  Plan plan;
  if (!fits({a.tokens, a.heads, a.tokens * a.heads, a.oa_stride_t, a.oa_stride_h, a.la_stride_t, a.la_stride_h,
             a.ob_stride_t, a.ob_stride_h, a.lb_stride_t, a.lb_stride_h, a.o.out_stride_t, a.o.out_stride_h,
             a.o.lse_stride_t, a.o.lse_stride_h}))
    plan.error = kRange;
  if (!plan.error.empty() || a.tokens == 0 || a.heads == 0) return plan;
  AttnMergeParams p{};
  p.heads = u32(a.heads);
  p.dim = u32(a.dim);
  p.a_st = u32(a.oa_stride_t);
  p.a_sh = u32(a.oa_stride_h);
  p.la_st = u32(a.la_stride_t);
  p.la_sh = u32(a.la_stride_h);
  p.b_st = u32(a.ob_stride_t);
  p.b_sh = u32(a.ob_stride_h);
  p.lb_st = u32(a.lb_stride_t);
  p.lb_sh = u32(a.lb_stride_h);
  p.o_st = u32(a.o.out_stride_t);
  p.o_sh = u32(a.o.out_stride_h);
  p.l_st = u32(a.o.lse_stride_t);
  p.l_sh = u32(a.o.lse_stride_h);
  p.has_lse = a.o.lse ? 1u : 0u;

  Dispatch d;
  d.kernel = std::string("merge_states_") + dtype_suffix(a.dtype);
  d.threads[0] = ATTN_THREADS;
  d.threadgroups[0] = u32(a.tokens * a.heads);
  const DType t = a.dtype;
  const auto rows = [&](std::int64_t st, std::int64_t sh, std::int64_t inner, DType dt) {
    return span({{a.tokens, st}, {a.heads, sh}}, inner, dt);
  };
  const BufferRef oa = plan.array(a.oa, rows(a.oa_stride_t, a.oa_stride_h, a.dim, t));
  const BufferRef out = plan.array(a.o.out, rows(a.o.out_stride_t, a.o.out_stride_h, a.dim, t), true);
  d.buffers = {oa, plan.array(a.la, rows(a.la_stride_t, a.la_stride_h, 1, DType::f32)),
               plan.array(a.ob, rows(a.ob_stride_t, a.ob_stride_h, a.dim, t)),
               plan.array(a.lb, rows(a.lb_stride_t, a.lb_stride_h, 1, DType::f32)), out,
               a.o.lse ? plan.array(a.o.lse, rows(a.o.lse_stride_t, a.o.lse_stride_h, 1, DType::f32), true) : out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
