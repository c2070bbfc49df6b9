#include "sampling.h"

#include <algorithm>
#include <string>

#include "sampling/sampling_params.h"

namespace braze::metal {
namespace {

constexpr std::uint64_t kU32 = 0xffffffffull;

BufferRef role(int r) { return BufferRef{r, -1, 0}; }

bool fits_u32(std::int64_t v) { return v >= 0 && std::uint64_t(v) <= kU32; }

bool row_op(SamplingOp op) {  // ops whose out is [rows, cols]
  return op == SamplingOp::softmax || op == SamplingOp::log_softmax || op == SamplingOp::top_k_mask ||
         op == SamplingOp::top_p_mask || op == SamplingOp::min_p_mask || op == SamplingOp::apply_penalties;
}

std::string validate(const SamplingArgs& a) {
  if (int(a.op) < 0 || int(a.op) > int(SamplingOp::philox_uniform)) return "unknown sampling op";
  if (a.rows > kU32) return "row count exceeds 2^32 - 1";
  if (a.op == SamplingOp::philox_uniform) return "";
  // cols < 2^32 - 1: SAMPLING_NONE (2^32 - 1) never names an index.
  if (a.cols >= kU32) return "vocabulary exceeds 2^32 - 2";
  if (a.rows > 0 && a.cols == 0) return "logits must have at least one column";
  if (!fits_u32(a.x_stride) || (row_op(a.op) && !fits_u32(a.y_stride))) return "row stride out of range";
  if (a.op == SamplingOp::apply_penalties && (a.ids_len > kU32 || !fits_u32(a.ids_stride)))
    return "token_ids too long";
  if (a.in_place && !row_op(a.op)) return "only masks and penalties run in place";
  return "";
}

}  // namespace

const char* sampling_op_name(SamplingOp op) {
  switch (op) {
    case SamplingOp::softmax: return "softmax";
    case SamplingOp::log_softmax: return "log_softmax";
    case SamplingOp::logsumexp: return "logsumexp";
    case SamplingOp::argmax: return "argmax";
    case SamplingOp::top_k_mask: return "top_k_mask";
    case SamplingOp::top_p_mask: return "top_p_mask";
    case SamplingOp::min_p_mask: return "min_p_mask";
    case SamplingOp::apply_penalties: return "apply_penalties";
    case SamplingOp::sample: return "sample";
    case SamplingOp::philox_uniform: return "philox_uniform";
  }
  return "?";
}

Plan plan_sampling(const SamplingArgs& a) {
  Plan plan;
  plan.error = validate(a);
  if (!plan.error.empty() || a.rows == 0) return plan;

  SamplingParams p{};
  p.rows = std::uint32_t(a.rows);
  p.cols = std::uint32_t(a.cols);
  p.x_stride = a.rows > 1 ? std::uint32_t(a.x_stride) : 0u;
  p.y_stride = row_op(a.op) && a.rows > 1 ? std::uint32_t(a.y_stride) : 0u;
  p.flags = (a.row_temperature ? SAMPLING_ROW_TEMPERATURE : 0u) | (a.row_k ? SAMPLING_ROW_K : 0u) |
            (a.row_p ? SAMPLING_ROW_P : 0u) | (a.row_min_p ? SAMPLING_ROW_MIN_P : 0u) |
            (a.in_place ? SAMPLING_IN_PLACE : 0u);
  p.temperature = a.temperature;
  p.top_k = a.top_k;
  p.p = a.p;
  p.min_p = a.min_p;
  p.ids_len = std::uint32_t(a.ids_len);
  p.ids_stride = std::uint32_t(a.ids_stride);
  p.repetition = a.repetition;
  p.frequency = a.frequency;
  p.presence = a.presence;
  p.seed_lo = std::uint32_t(a.seed);
  p.seed_hi = std::uint32_t(a.seed >> 32);
  p.offset_lo = std::uint32_t(a.offset);
  p.offset_hi = std::uint32_t(a.offset >> 32);

  Dispatch d;
  const bool philox = a.op == SamplingOp::philox_uniform;
  // philox_uniform draws float32 whatever: one host name, _f32.
  d.kernel = std::string(sampling_op_name(a.op)) + "_" + dtype_suffix(philox ? DType::f32 : a.dtype);
  if (philox) {
    d.threads[0] = SAMPLING_PHILOX_THREADS;
    d.threadgroups[0] = std::uint32_t((a.rows + SAMPLING_PHILOX_THREADS - 1) / SAMPLING_PHILOX_THREADS);
  } else {
    // One threadgroup per row; threads: the row's length rounded up to whole
    // simdgroups, at most SAMPLING_MAX_THREADS (each thread loops over its
    // elements tid, tid + nt, ...).
    const std::uint64_t nt = std::min<std::uint64_t>((a.cols + 31) / 32 * 32, SAMPLING_MAX_THREADS);
    d.threads[0] = std::uint32_t(nt);
    d.threadgroups[0] = std::uint32_t(a.rows);
  }
  // Absent arrays are bound to a present one (x, or y for philox_uniform) and never read.
  const int fill = philox ? kSampY : kSampX;
  auto opt = [&](bool present, int r) { return role(present ? r : fill); };
  d.buffers = {role(fill), role(kSampY), opt(a.row_temperature, kSampTemperature), opt(a.row_k, kSampTopK),
               opt(a.row_p, kSampP), opt(a.row_min_p, kSampMinP),
               opt(a.op == SamplingOp::apply_penalties, kSampIds)};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
