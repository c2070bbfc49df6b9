#include "sampling.h"

#include <algorithm>
#include <string>

#include "sampling/sampling_params.h"

namespace braze::metal {
namespace {

using sampling::Op;

bool row_op(Op op) {  // ops whose out is [rows, cols]
  return op == Op::softmax || op == Op::log_softmax || op == Op::top_k_mask || op == Op::top_p_mask ||
         op == Op::min_p_mask || op == Op::apply_penalties;
}

// "" or why no kernel handles `a` (the core has checked everything else).
std::string validate(const sampling::Args& a) {
  if (std::uint64_t(a.rows) > kU32) return "row count exceeds 2^32 - 1";
  if (a.op == Op::philox_uniform) return "";
  // cols < 2^32 - 1: SAMPLING_NONE (2^32 - 1) never names an index.
  if (std::uint64_t(a.cols) >= kU32) return "vocabulary exceeds 2^32 - 2";
  if (a.rows > 1 && (!fits_u32(a.x_stride) || (row_op(a.op) && !fits_u32(a.y_stride))))
    return "row stride out of range";
  if (a.op == Op::apply_penalties && (std::uint64_t(a.ids_len) > kU32 || !fits_u32(a.ids_stride)))
    return "token_ids too long";
  return "";
}

}  // namespace

Plan plan_sampling(const sampling::Args& a) {
  Plan plan;
  plan.error = validate(a);
  if (!plan.error.empty() || a.rows == 0) return plan;
  const bool philox = a.op == Op::philox_uniform;
  if (!philox && a.cols == 0) return plan;

  // The kernels' `p` is top_p, or the p of min_p_mask (which the core keeps as min_p).
  const sampling::RowParam<float>& pp = a.op == Op::min_p_mask ? a.min_p : a.p;
  SamplingParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = a.rows > 1 ? std::uint32_t(a.x_stride) : 0u;
  p.y_stride = row_op(a.op) && a.rows > 1 ? std::uint32_t(a.y_stride) : 0u;
  p.flags = (a.temperature.arr ? SAMPLING_ROW_TEMPERATURE : 0u) | (a.top_k.arr ? SAMPLING_ROW_K : 0u) |
            (pp.arr ? SAMPLING_ROW_P : 0u) | (a.op == Op::sample && a.min_p.arr ? SAMPLING_ROW_MIN_P : 0u) |
            (a.in_place ? SAMPLING_IN_PLACE : 0u);
  p.temperature = a.temperature.value;
  p.top_k = a.top_k.value;
  p.p = pp.value;
  p.min_p = a.op == Op::sample ? a.min_p.value : 0.0f;
  p.ids_len = std::uint32_t(a.ids_len);
  p.ids_stride = std::uint32_t(a.ids_stride);
  p.repetition = a.repetition;
  p.frequency = a.frequency;
  p.presence = a.presence;
  p.seed_lo = std::uint32_t(a.seed);
  p.seed_hi = std::uint32_t(a.seed >> 32);
  p.offset_lo = std::uint32_t(a.offset);
  p.offset_hi = std::uint32_t(a.offset >> 32);

  // The arrays, bound in sampling_params.h's order; an absent one is bound to
  // a present one (x, or out for philox_uniform) and never read.
  const std::uint64_t rows = std::uint64_t(a.rows);
  const bool y_rows = row_op(a.op);
  const DType ydt = y_rows && (a.op != Op::softmax && a.op != Op::log_softmax) ? a.dtype : DType::f32;
  const BufferRef y = plan.array(a.y, y_rows ? row_bytes(a.rows, a.cols, a.y_stride, ydt) : rows * 4, true);
  const BufferRef x = philox ? y : plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  auto vec = [&](const void* arr) { return arr ? plan.array(arr, rows * 4) : x; };
  const BufferRef ids = a.op == Op::apply_penalties && a.ids
                            ? plan.array(a.ids, row_bytes(a.rows, a.ids_len, a.ids_stride, DType::i32))
                            : x;

  Dispatch d;
  // philox_uniform draws float32 whatever: one host name, _f32.
  d.kernel = std::string(sampling::op_name(a.op)) + "_" + dtype_suffix(philox ? DType::f32 : a.dtype);
  if (philox) {
    d.threads[0] = SAMPLING_PHILOX_THREADS;
    d.threadgroups[0] = std::uint32_t((rows + SAMPLING_PHILOX_THREADS - 1) / SAMPLING_PHILOX_THREADS);
  } else {
    // One threadgroup per row; threads: the row's length rounded up to whole
    // simdgroups, at most SAMPLING_MAX_THREADS (each thread loops over its
    // elements tid, tid + nt, ...).
    const std::uint64_t nt = std::min<std::uint64_t>((std::uint64_t(a.cols) + 31) / 32 * 32, SAMPLING_MAX_THREADS);
    d.threads[0] = std::uint32_t(nt);
    d.threadgroups[0] = std::uint32_t(a.rows);
  }
  d.buffers = {x,  y, vec(a.temperature.arr), vec(a.top_k.arr), vec(pp.arr),
               vec(a.op == Op::sample ? a.min_p.arr : nullptr), ids};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
