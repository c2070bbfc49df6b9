#include "norm.h"

#include <algorithm>
#include <string>

#include "norm/norm_params.h"

namespace braze::metal {
namespace {

constexpr std::uint64_t kU32 = 0xffffffffull;
constexpr std::uint64_t kPartialBudget = 8ull << 20;  // f32 partials per gradient, at most
constexpr std::uint32_t kMaxBlocks = 256;
constexpr std::uint32_t kReduceThreads = 256;

bool is_vjp(NormOp op) { return op == NormOp::rms_norm_vjp || op == NormOp::layer_norm_vjp; }

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

BufferRef role(int r) { return BufferRef{r, -1, 0}; }

// "" or why no kernel handles `a`.
std::string validate(const NormArgs& a) {
  const NormOp op = a.op;
  const bool vjp = is_vjp(op);
  if (!a.present[kNormX]) return "x is required";
  if (!a.present[kNormOut]) return vjp ? "dx is required" : "out is required";
  const bool needs_aux = op == NormOp::add_rms_norm || op == NormOp::rms_norm_gated || vjp;
  if (a.present[kNormAux] != needs_aux) {
    return op == NormOp::add_rms_norm     ? "residual is required"
           : op == NormOp::rms_norm_gated ? "gate is required"
           : vjp                          ? "dy is required"
                                          : "unexpected auxiliary input";
  }
  if (a.present[kNormAuxOut] != (op == NormOp::add_rms_norm)) return "residual_out mismatch";
  if (a.present[kNormBias] && op != NormOp::layer_norm && op != NormOp::layer_norm_vjp)
    return "bias is only taken by layer_norm";
  if (a.present[kNormDWeight] && !(vjp && a.present[kNormWeight]))
    return "dweight needs a VJP with a weight";
  if (a.present[kNormDBias] && !(op == NormOp::layer_norm_vjp && a.present[kNormBias]))
    return "dbias needs layer_norm_vjp with a bias";
  if (a.n > kU32) return "row length exceeds 2^32 - 1";
  if (a.rows > kU32) return "row count exceeds 2^32 - 1";
  if (!(a.eps >= 0.0f)) return "eps must be >= 0";
  for (int r = 0; r < kNormRoles; ++r) {
    if (!a.present[r] || !norm_role_is_row(r) || a.rows <= 1) continue;
    if (a.row_stride[r] < 0 || std::uint64_t(a.row_stride[r]) > kU32)
      return "row stride out of range";
    const bool output = r == kNormOut || r == kNormAuxOut;
    if (output && std::uint64_t(a.row_stride[r]) < a.n) return "output rows overlap";
  }
  if (op == NormOp::rms_norm_gated && a.group_size != 0) {
    if (a.n % a.group_size != 0) return "group_size must divide the row length";
    if (a.rows * (a.n / a.group_size) > kU32) return "too many row segments";
  }
  return "";
}

std::uint32_t stride(const NormArgs& a, int r) {
  return a.present[r] && a.rows > 1 ? std::uint32_t(a.row_stride[r]) : 0u;
}

NormParams base_params(const NormArgs& a) {
  NormParams p{};
  p.n = std::uint32_t(a.n);
  p.segments = 1;
  p.rows = std::uint32_t(a.rows);
  p.stride_x = stride(a, kNormX);
  p.stride_aux = stride(a, kNormAux);
  p.stride_out = stride(a, kNormOut);
  p.stride_aux_out = stride(a, kNormAuxOut);
  p.flags = (a.present[kNormWeight] ? NORM_HAS_WEIGHT : 0u) |
            (a.present[kNormBias] ? NORM_HAS_BIAS : 0u) |
            (a.present[kNormDWeight] ? NORM_NEED_DWEIGHT : 0u) |
            (a.present[kNormDBias] ? NORM_NEED_DBIAS : 0u);
  p.eps = a.eps;
  p.weight_offset = a.weight_offset;
  return p;
}

// An absent optional input is bound to x: the kernel never reads it.
BufferRef input_or_x(const NormArgs& a, int r) { return role(a.present[r] ? r : kNormX); }

Plan plan_forward(const NormArgs& a) {
  Plan plan;
  if (a.rows == 0 || a.n == 0) return plan;
  NormParams p = base_params(a);
  if (a.op == NormOp::rms_norm_gated && a.group_size != 0) {
    p.segments = std::uint32_t(a.n / a.group_size);
    p.n = std::uint32_t(a.group_size);
  }
  Dispatch d;
  bool looped = false;
  d.threads[0] = threads_for(p.n, &looped);
  d.threadgroups[0] = std::uint32_t(a.rows * p.segments);
  d.kernel = kernel_name(norm_op_name(a.op), looped, a.dtype);
  d.buffers = {role(kNormX), input_or_x(a, kNormWeight), input_or_x(a, kNormBias),
               input_or_x(a, kNormAux), role(kNormOut),
               role(a.present[kNormAuxOut] ? kNormAuxOut : kNormOut)};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_vjp(const NormArgs& a) {
  Plan plan;
  if (a.n == 0) return plan;
  NormParams p = base_params(a);
  const std::uint64_t cap = std::clamp<std::uint64_t>(kPartialBudget / a.n, 1, kMaxBlocks);
  std::uint64_t blocks = std::min<std::uint64_t>(a.rows, cap);
  if (blocks > 0) {
    p.rows_per_block = std::uint32_t((a.rows + blocks - 1) / blocks);
    blocks = (a.rows + p.rows_per_block - 1) / p.rows_per_block;
  }
  p.blocks = std::uint32_t(blocks);
  const bool dw = a.present[kNormDWeight], db = a.present[kNormDBias];
  const std::uint64_t part_bytes = blocks * a.n * sizeof(float);
  plan.scratch_bytes.push_back(std::max<std::uint64_t>(4, (dw + db) * part_bytes));
  if (blocks > 0) {
    Dispatch d;
    bool looped = false;
    d.threads[0] = threads_for(a.n, &looped);
    d.threadgroups[0] = std::uint32_t(blocks);
    d.kernel = kernel_name(norm_op_name(a.op), looped, a.dtype);
    d.buffers = {role(kNormX), input_or_x(a, kNormWeight), role(kNormAux), role(kNormOut),
                 BufferRef{-1, 0, 0}};
    d.params = param_bytes(p);
    plan.dispatches.push_back(d);
  }
  const NormReduceParams rp{std::uint32_t(a.n), std::uint32_t(blocks)};
  std::uint64_t offset = 0;
  for (int r : {int(kNormDWeight), int(kNormDBias)}) {
    if (!a.present[r]) continue;
    Dispatch d;
    d.kernel = kernel_name("norm_reduce_cols", false, a.dtype);
    d.threads[0] = kReduceThreads;
    d.threadgroups[0] = std::uint32_t((a.n + kReduceThreads - 1) / kReduceThreads);
    d.buffers = {BufferRef{-1, 0, offset}, role(r)};
    d.params = param_bytes(rp);
    plan.dispatches.push_back(d);
    offset += part_bytes;
  }
  return plan;
}

}  // namespace

const char* norm_op_name(NormOp op) {
  switch (op) {
    case NormOp::rms_norm: return "rms_norm";
    case NormOp::layer_norm: return "layer_norm";
    case NormOp::add_rms_norm: return "add_rms_norm";
    case NormOp::rms_norm_gated: return "rms_norm_gated";
    case NormOp::rms_norm_vjp: return "rms_norm_vjp";
    case NormOp::layer_norm_vjp: return "layer_norm_vjp";
  }
  return "?";
}

bool norm_role_is_row(int role) {
  return role == kNormX || role == kNormAux || role == kNormOut || role == kNormAuxOut;
}

Plan plan_norm(const NormArgs& a) {
  std::string error = validate(a);
  if (!error.empty()) {
    Plan plan;
    plan.error = error;
    return plan;
  }
  return is_vjp(a.op) ? plan_vjp(a) : plan_forward(a);
}

}  // namespace braze::metal
