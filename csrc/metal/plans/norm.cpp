#include "norm.h"

#include <algorithm>
#include <string>

#include "norm/norm_params.h"

namespace braze::metal {
namespace {

using norm::Op;

constexpr std::uint64_t kPartialBudget = 8ull << 20;  // f32 partials per gradient, at most
constexpr std::uint32_t kMaxBlocks = 256;
constexpr std::uint32_t kReduceThreads = 256;

bool is_vjp(Op op) { return op == Op::rms_norm_vjp || op == Op::layer_norm_vjp; }

// Threads for a segment of `len` elements: enough for NORM_REG_ELEMS each,
// a whole number of simdgroups, at most NORM_MAX_THREADS (then looped).
std::uint32_t threads_for(std::uint64_t len, bool* looped) {
  *looped = len > std::uint64_t(NORM_REG_ELEMS) * NORM_MAX_THREADS;
  if (*looped) return NORM_MAX_THREADS;
  std::uint64_t t = (len + NORM_REG_ELEMS - 1) / NORM_REG_ELEMS;
  t = (t + 31) / 32 * 32;
  return std::uint32_t(std::clamp<std::uint64_t>(t, 32, NORM_MAX_THREADS));
}

std::string kernel_name(const char* op, bool looped, DType t) {
  return std::string(op) + (looped ? "_looped_" : "_") + dtype_suffix(t);
}

// "" or why no kernel handles `a` (the core has checked everything else).
std::string validate(const norm::Args& a) {
  if (std::uint64_t(a.cols) > kU32) return "row length exceeds 2^32 - 1";
  if (std::uint64_t(a.rows) > kU32) return "row count exceeds 2^32 - 1";
  if (a.rows > 1)
    for (std::int64_t s : {a.x_stride, a.r_stride, a.y_stride, a.h_stride})
      if (!fits_u32(s)) return "row stride out of range";
  if (a.op == Op::rms_norm_gated && std::uint64_t(a.rows) * std::uint64_t(a.cols / a.group) > kU32)
    return "too many row segments";
  return "";
}

std::uint32_t stride(const norm::Args& a, std::int64_t s) { return a.rows > 1 ? std::uint32_t(s) : 0u; }

// The op's arrays, bound in the kernels' order; an absent optional input is
// bound to x (the kernel never reads it).
struct Arrays {
  BufferRef x, w, b, aux, out, aux_out, dw, db;
};

Arrays arrays(Plan& plan, const norm::Args& a) {
  Arrays r;
  r.x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  const std::uint64_t vec = std::uint64_t(a.cols) * dtype_size(a.wdtype);
  r.w = a.w ? plan.array(a.w, vec) : r.x;
  r.b = a.b ? plan.array(a.b, vec) : r.x;
  r.aux = a.r ? plan.array(a.r, row_bytes(a.rows, a.cols, a.r_stride, a.dtype)) : r.x;
  r.out = plan.array(a.y, row_bytes(a.rows, a.cols, a.y_stride, a.dtype), true);
  r.aux_out = a.h ? plan.array(a.h, row_bytes(a.rows, a.cols, a.h_stride, a.dtype), true) : r.out;
  if (a.dw) r.dw = plan.array(a.dw, vec, true);
  if (a.db) r.db = plan.array(a.db, vec, true);
  return r;
}

NormParams base_params(const norm::Args& a) {
  NormParams p{};
  p.n = std::uint32_t(a.cols);
  p.segments = 1;
  p.rows = std::uint32_t(a.rows);
  p.stride_x = stride(a, a.x_stride);
  p.stride_aux = a.r ? stride(a, a.r_stride) : 0u;
  p.stride_out = stride(a, a.y_stride);
  p.stride_aux_out = a.h ? stride(a, a.h_stride) : 0u;
  p.flags = (a.w ? NORM_HAS_WEIGHT : 0u) | (a.b ? NORM_HAS_BIAS : 0u) | (a.dw ? NORM_NEED_DWEIGHT : 0u) |
            (a.db ? NORM_NEED_DBIAS : 0u);
  p.eps = a.eps;
  p.weight_offset = a.w_offset;
  return p;
}

void plan_forward(Plan& plan, const norm::Args& a) {
  NormParams p = base_params(a);
  if (a.op == Op::rms_norm_gated && a.group != a.cols) {
    p.segments = std::uint32_t(a.cols / a.group);
    p.n = std::uint32_t(a.group);
  }
  const Arrays r = arrays(plan, a);
  Dispatch d;
  bool looped = false;
  d.threads[0] = threads_for(p.n, &looped);
  d.threadgroups[0] = std::uint32_t(std::uint64_t(a.rows) * p.segments);
  d.kernel = kernel_name(norm::op_name(a.op), looped, a.dtype);
  d.buffers = {r.x, r.w, r.b, r.aux, r.out, r.aux_out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
}

// Partial column sums per block of rows (a function of the shape only), then
// one reduction per gradient: the result does not depend on the schedule.
void plan_vjp(Plan& plan, const norm::Args& a) {
  NormParams p = base_params(a);
  const std::uint64_t n = std::uint64_t(a.cols);
  const std::uint64_t cap = std::clamp<std::uint64_t>(kPartialBudget / n, 1, kMaxBlocks);
  std::uint64_t blocks = std::min<std::uint64_t>(std::uint64_t(a.rows), cap);
  if (blocks > 0) {
    p.rows_per_block = std::uint32_t((std::uint64_t(a.rows) + blocks - 1) / blocks);
    blocks = (std::uint64_t(a.rows) + p.rows_per_block - 1) / p.rows_per_block;
  }
  p.blocks = std::uint32_t(blocks);
  const Arrays r = arrays(plan, a);
  const std::uint64_t part_bytes = blocks * n * sizeof(float);
  plan.scratch_bytes.push_back(std::max<std::uint64_t>(4, ((a.dw ? 1 : 0) + (a.db ? 1 : 0)) * part_bytes));
  if (blocks > 0) {
    Dispatch d;
    bool looped = false;
    d.threads[0] = threads_for(n, &looped);
    d.threadgroups[0] = std::uint32_t(blocks);
    d.kernel = kernel_name(norm::op_name(a.op), looped, a.dtype);
    d.buffers = {r.x, r.w, r.aux, r.out, BufferRef{-1, 0, -1, 0}};
    d.params = param_bytes(p);
    plan.dispatches.push_back(d);
  }
  const NormReduceParams rp{std::uint32_t(n), std::uint32_t(blocks)};
  std::uint64_t offset = 0;
  for (const BufferRef* g : {a.dw ? &r.dw : nullptr, a.db ? &r.db : nullptr}) {
    if (!g) continue;
    Dispatch d;
    d.kernel = kernel_name("norm_reduce_cols", false, a.dtype);
    d.threads[0] = kReduceThreads;
    d.threadgroups[0] = std::uint32_t((n + kReduceThreads - 1) / kReduceThreads);
    d.buffers = {BufferRef{-1, 0, -1, offset}, *g};
    d.params = param_bytes(rp);
    plan.dispatches.push_back(d);
    offset += part_bytes;
  }
}

}  // namespace

Plan plan_norm(const norm::Args& a) {
  Plan plan;
  plan.error = validate(a);
  if (!plan.error.empty()) return plan;
  if (a.wdtype != a.dtype && (a.w || a.b || a.dw || a.db)) {
    plan.error = "Metal norm kernels take weight / bias in x's dtype";
    return plan;
  }
  if (is_vjp(a.op)) {
    if (a.cols > 0) plan_vjp(plan, a);
  } else if (a.rows > 0 && a.cols > 0) {
    plan_forward(plan, a);
  }
  return plan;
}

}  // namespace braze::metal
