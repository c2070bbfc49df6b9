#include "ops.h"

#include <algorithm>
#include <string>

#include "ops/ops_params.h"

namespace braze::metal {
namespace {

// <op>_ (the tanh forms of gelu: <op>_tanh_), op the forward's or the VJP's name.
std::string act_kernel_name(const ops::ActArgs& a) {
  const std::string op = ops::op_name(a.op);
  switch (a.act) {
    case ops::Act::silu: case ops::Act::gelu_erf: return op + "_";
    case ops::Act::gelu_tanh: return op + "_tanh_";
    case ops::Act::swiglu_clamped: return a.gated ? op + "_" : "";
  }
  return "";
}

bool float_dtype(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// Threads and column blocks of the elementwise tiling (ops_params.h): a whole
// number of simdgroups, no more than the row needs.
void column_tiling(Dispatch& d, std::int64_t cols, std::int64_t rows) {
  const std::uint64_t threads =
      std::min<std::uint64_t>(ACT_MAX_THREADS, (std::uint64_t(cols) + 31) / 32 * 32);
  const std::uint64_t per_group = threads * ACT_ELEMS;
  d.threads[0] = std::uint32_t(threads);
  d.threadgroups[0] = std::uint32_t((std::uint64_t(cols) + per_group - 1) / per_group);
  d.threadgroups[1] = std::uint32_t(rows);
}

}  // namespace

Plan plan_act(const ops::ActArgs& a) {
  Plan plan;
  const std::string name = act_kernel_name(a);
  const std::int64_t in_cols = a.gated ? 2 * a.cols : a.cols;
  const bool vjp = a.dy != nullptr;
  if (name.empty() || !float_dtype(a.dtype)) plan.error = "no Metal kernel for this activation and dtype";
  else if (!fits_u32(a.rows) || a.cols < 0 || !fits_u32(in_cols))
    plan.error = "row count or row length exceeds 2^32 - 1";
  else if (!fits_u32(a.x_stride) || !fits_u32(a.y_stride) || (vjp && !fits_u32(a.dy_stride)))
    plan.error = "stride out of range (the Metal kernels take strides in [0, 2^32))";
  if (!plan.error.empty() || a.rows == 0 || a.cols == 0) return plan;

  ActParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = std::uint32_t(a.x_stride);
  p.y_stride = std::uint32_t(a.y_stride);
  p.dy_stride = vjp ? std::uint32_t(a.dy_stride) : 0u;
  p.flags = a.gated && a.interleaved ? ACT_INTERLEAVED : 0u;
  p.alpha = a.alpha;
  p.limit = a.limit;

  Dispatch d;
  d.kernel = name + dtype_suffix(a.dtype);
  column_tiling(d, a.cols, a.rows);
  // In place (silu, gelu): x and y are one array, bound twice.
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, in_cols, a.x_stride, a.dtype));
  const BufferRef y = plan.array(a.y, row_bytes(a.rows, vjp ? in_cols : a.cols, a.y_stride, a.dtype), true);
  if (vjp) d.buffers = {x, plan.array(a.dy, row_bytes(a.rows, a.cols, a.dy_stride, a.dtype)), y};
  else d.buffers = {x, y};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_embedding(const ops::EmbeddingArgs& a) {
  Plan plan;
  if (!float_dtype(a.dtype) || (a.id_dtype != DType::i32 && a.id_dtype != DType::i64))
    plan.error = "no Metal kernel for these table and id dtypes";
  else if (!fits_u32(a.tokens) || !fits_u32(a.vocab) || !fits_u32(a.dim))
    plan.error = "token count, vocabulary or row length exceeds 2^32 - 1";
  else if (!fits_u32(a.ids_stride) || !fits_u32(a.table_stride) || !fits_u32(a.y_stride))
    plan.error = "stride out of range (the Metal kernels take strides in [0, 2^32))";
  if (!plan.error.empty() || a.tokens == 0 || a.dim == 0) return plan;

  EmbeddingParams p{};
  p.tokens = std::uint32_t(a.tokens);
  p.vocab = std::uint32_t(a.vocab);
  p.dim = std::uint32_t(a.dim);
  p.ids_stride = std::uint32_t(a.ids_stride);
  p.table_stride = std::uint32_t(a.table_stride);
  p.y_stride = std::uint32_t(a.y_stride);

  Dispatch d;
  d.kernel = std::string(a.id_dtype == DType::i64 ? "embedding_i64_" : "embedding_") + dtype_suffix(a.dtype);
  column_tiling(d, a.dim, a.tokens);
  const BufferRef ids = plan.array(a.ids, row_bytes(a.tokens, 1, a.ids_stride, a.id_dtype));
  // vocab == 0: every id is out of range and the table is never read; it is
  // still bound (an empty extent).
  const BufferRef table = plan.array(a.table, row_bytes(a.vocab, a.dim, a.table_stride, a.dtype));
  const BufferRef y = plan.array(a.y, row_bytes(a.tokens, a.dim, a.y_stride, a.dtype), true);
  d.buffers = {ids, table, y};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan plan_hadamard(const ops::HadamardArgs& a) {
  Plan plan;
  const bool m_ok = a.m == 1 || a.m == 12 || a.m == 20 || a.m == 28;
  if (!float_dtype(a.dtype)) plan.error = "no Metal kernel for this dtype";
  else if (!m_ok || a.log2 < 0 || a.log2 > 15 || a.n != (std::int64_t(a.m) << a.log2) || a.n > 32768)
    plan.error = "Hadamard size must be m * 2^k with m in {1, 12, 20, 28} and at most 32768";
  else if (!fits_u32(a.rows)) plan.error = "row count exceeds 2^32 - 1";
  else if (!fits_u32(a.x_stride) || !fits_u32(a.y_stride))
    plan.error = "stride out of range (the Metal kernels take strides in [0, 2^32))";
  if (!plan.error.empty() || a.rows == 0) return plan;

  // Bits of the column index: up to 5 in lanes, then registers (up to 8 per
  // sub-row for m = 1, as many as fit HAD_MAX_REGS for m > 1), then
  // simdgroups (at most 32); a row too long for that takes more registers.
  const int lane_bits = std::min(a.log2, 5);
  const int max_reg_bits = a.m == 1 ? 3 : (a.m == 12 ? 1 : 0);
  int reg_bits = std::min(a.log2 - lane_bits, max_reg_bits);
  int simd_bits = a.log2 - lane_bits - reg_bits;
  if (simd_bits > 5) {
    reg_bits += simd_bits - 5;
    simd_bits = 5;
  }
  const int regs = 1 << reg_bits;
  if (a.m * regs > HAD_MAX_REGS) {  // unreachable for n <= 32768
    plan.error = "Hadamard size needs more registers than the kernels keep";
    return plan;
  }

  HadamardParams p{};
  p.rows = std::uint32_t(a.rows);
  p.n = std::uint32_t(a.n);
  p.lane_bits = std::uint32_t(lane_bits);
  p.simd_bits = std::uint32_t(simd_bits);
  p.x_stride = std::uint32_t(a.x_stride);
  p.y_stride = std::uint32_t(a.y_stride);
  p.scale = a.scale;

  Dispatch d;
  if (a.m == 1 && regs == 8) d.kernel = "hadamard_";
  else if (a.m == 1) d.kernel = "hadamard_e" + std::to_string(regs) + "_";
  else d.kernel = "hadamard_m" + std::to_string(a.m) + "_e" + std::to_string(regs) + "_";
  d.kernel += dtype_suffix(a.dtype);
  d.threads[0] = 32u << simd_bits;
  d.threadgroups[0] = std::uint32_t(a.rows);
  // In place: x and y are one array, bound twice.
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.n, a.x_stride, a.dtype));
  const BufferRef y = plan.array(a.y, row_bytes(a.rows, a.n, a.y_stride, a.dtype), true);
  d.buffers = {x, y};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
