#include "sampling.h"

#include <algorithm>
#include <string>

#include "sampling/sampling_params.h"

namespace braze::metal {
namespace {

using namespace braze::sampling;

// "" or why no kernel handles these logits (the core has checked everything
// else). out_stride: of a [rows, cols] output, or < 0 for none.
std::string validate(const Logits& a, std::int64_t out_stride) {
  if (std::uint64_t(a.rows) > kU32) return "row count exceeds 2^32 - 1";
  // cols < 2^32 - 1: SAMPLING_NONE (2^32 - 1) never names an index.
  if (std::uint64_t(a.cols) >= kU32) return "vocabulary exceeds 2^32 - 2";
  if (a.rows > 1 && (!fits_u32(a.x_stride) || (out_stride >= 0 && !fits_u32(out_stride))))
    return "row stride out of range";
  return "";
}

// The parameters every logits kernel takes; the op's own are filled in by its plan.
SamplingParams logits_params(const Logits& a, std::int64_t out_stride) {
  SamplingParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = a.rows > 1 ? std::uint32_t(a.x_stride) : 0u;
  p.y_stride = out_stride >= 0 && a.rows > 1 ? std::uint32_t(out_stride) : 0u;
  return p;
}

void set_seed(SamplingParams& p, std::uint64_t seed, std::uint64_t offset) {
  p.seed_lo = std::uint32_t(seed);
  p.seed_hi = std::uint32_t(seed >> 32);
  p.offset_lo = std::uint32_t(offset);
  p.offset_hi = std::uint32_t(offset >> 32);
}

// The per-row arrays a dispatch binds (sampling_params.h's order); absent ones null.
struct RowArrays {
  const void* temperature = nullptr;
  const void* top_k = nullptr;
  const void* p = nullptr;
  const void* min_p = nullptr;
  const void* ids = nullptr;
  std::uint64_t ids_bytes = 0;
};

// One threadgroup per row; threads: the row's length rounded up to whole
// simdgroups, at most SAMPLING_MAX_THREADS (each thread loops over its
// elements tid, tid + nt, ...). An absent array is bound to x and never read.
// out_bytes: the extent of out.
Plan plan_rows(const Logits& a, const char* op, const void* out, std::uint64_t out_bytes, const SamplingParams& p,
               const RowArrays& ra) {
  Plan plan;
  if (a.rows == 0 || a.cols == 0) return plan;
  const std::uint64_t rows = std::uint64_t(a.rows);
  const BufferRef y = plan.array(out, out_bytes, true);
  const BufferRef x = plan.array(a.x, row_bytes(a.rows, a.cols, a.x_stride, a.dtype));
  auto vec = [&](const void* arr) { return arr ? plan.array(arr, rows * 4) : x; };
  const BufferRef ids = ra.ids ? plan.array(ra.ids, ra.ids_bytes) : x;
  Dispatch d;
  d.kernel = std::string(op) + "_" + dtype_suffix(a.dtype);
  const std::uint64_t nt = std::min<std::uint64_t>((std::uint64_t(a.cols) + 31) / 32 * 32, SAMPLING_MAX_THREADS);
  d.threads[0] = std::uint32_t(nt);
  d.threadgroups[0] = std::uint32_t(a.rows);
  d.buffers = {x, y, vec(ra.temperature), vec(ra.top_k), vec(ra.p), vec(ra.min_p), ids};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

Plan rejected(std::string why) {
  Plan plan;
  plan.error = std::move(why);
  return plan;
}

std::uint32_t row_flag(const void* arr, std::uint32_t flag) { return arr ? flag : 0u; }

}  // namespace

Plan plan_normalize(const NormalizeArgs& a) {
  const bool rows_out = a.op != Op::logsumexp;
  const std::int64_t out_stride = rows_out ? a.out_stride : -1;
  std::string why = validate(a, out_stride);
  if (!why.empty()) return rejected(why);
  SamplingParams p = logits_params(a, out_stride);
  p.flags = row_flag(a.temperature.arr, SAMPLING_ROW_TEMPERATURE);
  p.temperature = a.temperature.value;
  const std::uint64_t out_bytes =
      rows_out ? row_bytes(a.rows, a.cols, a.out_stride, DType::f32) : std::uint64_t(a.rows) * 4;
  RowArrays ra;
  ra.temperature = a.temperature.arr;
  return plan_rows(a, op_name(a.op), a.out, out_bytes, p, ra);
}

Plan plan_argmax(const ArgmaxArgs& a) {
  std::string why = validate(a, -1);
  if (!why.empty()) return rejected(why);
  return plan_rows(a, "argmax", a.out, std::uint64_t(a.rows) * 4, logits_params(a, -1), RowArrays{});
}

// The kernels' `p` is top_p, or the p of min_p_mask.
Plan plan_mask(const MaskArgs& a) {
  std::string why = validate(a, a.out_stride);
  if (!why.empty()) return rejected(why);
  const RowParam<float>& pp = a.op == Op::min_p_mask ? a.min_p : a.top_p;
  SamplingParams p = logits_params(a, a.out_stride);
  p.flags = row_flag(a.temperature.arr, SAMPLING_ROW_TEMPERATURE) | row_flag(a.top_k.arr, SAMPLING_ROW_K) |
            row_flag(pp.arr, SAMPLING_ROW_P) | (a.in_place ? SAMPLING_IN_PLACE : 0u);
  p.temperature = a.temperature.value;
  p.top_k = a.top_k.value;
  p.p = pp.value;
  RowArrays ra;
  ra.temperature = a.temperature.arr;
  ra.top_k = a.top_k.arr;
  ra.p = pp.arr;
  return plan_rows(a, op_name(a.op), a.out, row_bytes(a.rows, a.cols, a.out_stride, a.dtype), p, ra);
}

Plan plan_penalties(const PenaltyArgs& a) {
  std::string why = validate(a, a.out_stride);
  if (why.empty() && (std::uint64_t(a.ids_len) > kU32 || !fits_u32(a.ids_stride))) why = "token_ids too long";
  if (!why.empty()) return rejected(why);
  SamplingParams p = logits_params(a, a.out_stride);
  p.flags = a.in_place ? SAMPLING_IN_PLACE : 0u;
  p.ids_len = std::uint32_t(a.ids_len);
  p.ids_stride = std::uint32_t(a.ids_stride);
  p.repetition = a.repetition;
  p.frequency = a.frequency;
  p.presence = a.presence;
  RowArrays ra;
  ra.ids = a.token_ids;
  ra.ids_bytes = row_bytes(a.rows, a.ids_len, a.ids_stride, DType::i32);
  return plan_rows(a, "apply_penalties", a.out, row_bytes(a.rows, a.cols, a.out_stride, a.dtype), p, ra);
}

Plan plan_sample(const SampleArgs& a) {
  std::string why = validate(a, -1);
  if (!why.empty()) return rejected(why);
  SamplingParams p = logits_params(a, -1);
  p.flags = row_flag(a.temperature.arr, SAMPLING_ROW_TEMPERATURE) | row_flag(a.top_k.arr, SAMPLING_ROW_K) |
            row_flag(a.top_p.arr, SAMPLING_ROW_P) | row_flag(a.min_p.arr, SAMPLING_ROW_MIN_P);
  p.temperature = a.temperature.value;
  p.top_k = a.top_k.value;
  p.p = a.top_p.value;
  p.min_p = a.min_p.value;
  set_seed(p, a.seed, a.offset);
  RowArrays ra;
  ra.temperature = a.temperature.arr;
  ra.top_k = a.top_k.arr;
  ra.p = a.top_p.arr;
  ra.min_p = a.min_p.arr;
  return plan_rows(a, "sample", a.out, std::uint64_t(a.rows) * 4, p, ra);
}

// philox_uniform draws float32 whatever: one host name, _f32; every buffer is out.
Plan plan_philox(const PhiloxArgs& a) {
  if (std::uint64_t(a.n) > kU32) return rejected("row count exceeds 2^32 - 1");
  Plan plan;
  if (a.n == 0) return plan;
  SamplingParams p{};
  p.rows = std::uint32_t(a.n);
  set_seed(p, a.seed, a.offset);
  const BufferRef y = plan.array(a.out, std::uint64_t(a.n) * 4, true);
  Dispatch d;
  d.kernel = std::string("philox_uniform_") + dtype_suffix(DType::f32);
  d.threads[0] = SAMPLING_PHILOX_THREADS;
  d.threadgroups[0] = std::uint32_t((std::uint64_t(a.n) + SAMPLING_PHILOX_THREADS - 1) / SAMPLING_PHILOX_THREADS);
  d.buffers = {y, y, y, y, y, y, y};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
