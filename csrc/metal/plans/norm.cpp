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

bool fits_rows(std::int64_t rows, std::int64_t cols) {
  return std::uint64_t(cols) <= kU32 && std::uint64_t(rows) <= kU32;
}

// "" or why no kernel handles a forward norm (the core has checked everything else).
std::string validate(const norm::NormArgs& a) {
  if (!fits_rows(a.rows, a.cols)) return std::uint64_t(a.cols) > kU32 ? "row length exceeds 2^32 - 1"
                                                                       : "row count exceeds 2^32 - 1";
  if (a.rows > 1)
    for (std::int64_t s : {a.x_stride, a.residual_stride, a.gate_stride, a.out_stride, a.residual_out_stride})
      if (!fits_u32(s)) return "row stride out of range";
  if (a.group > 0 && std::uint64_t(a.rows) * std::uint64_t(a.cols / a.group) > kU32) return "too many row segments";
  return "";
}

std::string validate(const norm::NormVjpArgs& a) {
  if (!fits_rows(a.rows, a.cols)) return std::uint64_t(a.cols) > kU32 ? "row length exceeds 2^32 - 1"
                                                                       : "row count exceeds 2^32 - 1";
  if (a.rows > 1)
    for (std::int64_t s : {a.x_stride, a.dy_stride, a.dx_stride})
      if (!fits_u32(s)) return "row stride out of range";
  return "";
}

std::uint32_t stride(std::int64_t rows, std::int64_t s) { return rows > 1 ? std::uint32_t(s) : 0u; }

// An optional [rows, cols] array, or `fallback` (bound, never read) when absent.
BufferRef rows_or(Plan& plan, const void* p, std::int64_t rows, std::int64_t cols, std::int64_t s, DType t,
                  BufferRef fallback, bool written = false) {
  return p ? plan.array(p, row_bytes(rows, cols, s, t), written) : fallback;
}

NormParams base_params(std::int64_t rows, std::int64_t cols, float eps, float weight_offset) {
  NormParams p{};
  p.n = std::uint32_t(cols);
  p.segments = 1;
  p.rows = std::uint32_t(rows);
  p.eps = eps;
  p.weight_offset = weight_offset;
  return p;
}

// The kernels' aux input is the residual (add_rms_norm) or the gate
// (rms_norm_gated), their aux output the residual_out; x's place when absent.
void plan_forward(Plan& plan, const norm::NormArgs& a) {
  NormParams p = base_params(a.rows, a.cols, a.eps, a.weight_offset);
  const void* aux = a.residual ? a.residual : a.gate;
  const std::int64_t aux_stride = a.residual ? a.residual_stride : a.gate_stride;
  p.stride_x = stride(a.rows, a.x_stride);
  p.stride_aux = aux ? stride(a.rows, aux_stride) : 0u;
  p.stride_out = stride(a.rows, a.out_stride);
  p.stride_aux_out = a.residual_out ? stride(a.rows, a.residual_out_stride) : 0u;
  p.flags = (a.weight ? NORM_HAS_WEIGHT : 0u) | (a.bias ? NORM_HAS_BIAS : 0u);
  if (a.group != a.cols) {
    p.segments = std::uint32_t(a.cols / a.group);
    p.n = std::uint32_t(a.group);
  }
  const std::uint64_t vec = std::uint64_t(a.cols) * dtype_size(a.dtype);
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  const BufferRef w = a.weight ? plan.array(a.weight, vec) : x;
  const BufferRef b = a.bias ? plan.array(a.bias, vec) : x;
  const BufferRef ax = rows_or(plan, aux, a.rows, a.cols, aux_stride, a.dtype, x);
  const BufferRef out = plan.array(a.out, row_bytes(a.rows, a.cols, a.out_stride, a.dtype), true);
  const BufferRef ax_out = rows_or(plan, a.residual_out, a.rows, a.cols, a.residual_out_stride, a.dtype, out, true);
  Dispatch d;
  bool looped = false;
  d.threads[0] = threads_for(p.n, &looped);
  d.threadgroups[0] = std::uint32_t(std::uint64_t(a.rows) * p.segments);
  d.kernel = kernel_name(norm::op_name(a.op), looped, a.dtype);
  d.buffers = {x, w, b, ax, out, ax_out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
}

// Partial column sums per block of rows (a function of the shape only), then
// one reduction per gradient: the result does not depend on the schedule.
// The kernels' aux input is dy.
void plan_vjp(Plan& plan, const norm::NormVjpArgs& a) {
  NormParams p = base_params(a.rows, a.cols, a.eps, a.weight_offset);
  p.stride_x = stride(a.rows, a.x_stride);
  p.stride_aux = stride(a.rows, a.dy_stride);
  p.stride_out = stride(a.rows, a.dx_stride);
  p.flags = (a.weight ? NORM_HAS_WEIGHT : 0u) | (a.bias ? NORM_HAS_BIAS : 0u) |
            (a.dweight ? NORM_NEED_DWEIGHT : 0u) | (a.dbias ? NORM_NEED_DBIAS : 0u);
  const std::uint64_t n = std::uint64_t(a.cols);
  const std::uint64_t cap = std::clamp<std::uint64_t>(kPartialBudget / n, 1, kMaxBlocks);
  std::uint64_t blocks = std::min<std::uint64_t>(std::uint64_t(a.rows), cap);
  if (blocks > 0) {
    p.rows_per_block = std::uint32_t((std::uint64_t(a.rows) + blocks - 1) / blocks);
    blocks = (std::uint64_t(a.rows) + p.rows_per_block - 1) / p.rows_per_block;
  }
  p.blocks = std::uint32_t(blocks);
  const std::uint64_t vec = n * dtype_size(a.dtype);
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  const BufferRef w = a.weight ? plan.array(a.weight, vec) : x;
  const BufferRef dy = plan.array(a.dy, row_bytes(a.rows, a.cols, a.dy_stride, a.dtype));
  const BufferRef dx = plan.array(a.dx, row_bytes(a.rows, a.cols, a.dx_stride, a.dtype), true);
  BufferRef dw, db;
  if (a.dweight) dw = plan.array(a.dweight, vec, true);
  if (a.dbias) db = plan.array(a.dbias, vec, true);
  const std::uint64_t part_bytes = blocks * n * sizeof(float);
  plan.scratch_bytes.push_back(std::max<std::uint64_t>(4, ((a.dweight ? 1 : 0) + (a.dbias ? 1 : 0)) * part_bytes));
  if (blocks > 0) {
    Dispatch d;
    bool looped = false;
    d.threads[0] = threads_for(n, &looped);
    d.threadgroups[0] = std::uint32_t(blocks);
    d.kernel = kernel_name(norm::op_name(a.op), looped, a.dtype);
    d.buffers = {x, w, dy, dx, BufferRef{-1, 0, -1, 0}};
    d.params = param_bytes(p);
    plan.dispatches.push_back(d);
  }
  const NormReduceParams rp{std::uint32_t(n), std::uint32_t(blocks)};
  std::uint64_t offset = 0;
  for (const BufferRef* g : {a.dweight ? &dw : nullptr, a.dbias ? &db : nullptr}) {
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

Plan plan_norm(const norm::NormArgs& a) {
  Plan plan;
  plan.error = validate(a);
  if (plan.error.empty() && a.rows > 0 && a.cols > 0) plan_forward(plan, a);
  return plan;
}

Plan plan_norm_vjp(const norm::NormVjpArgs& a) {
  Plan plan;
  plan.error = validate(a);
  if (plan.error.empty() && a.cols > 0) plan_vjp(plan, a);
  return plan;
}

}  // namespace braze::metal
