#include "rope.h"

#include <algorithm>
#include <string>

#include "rope/rope_params.h"

namespace braze::metal {
namespace {

bool qk(const rope::Args& a) { return a.k.x != nullptr; }

// "" or why no kernel handles `a` (the core has checked everything else).
std::string validate(const rope::Args& a) {
  if (std::uint64_t(a.dim) > kU32 || std::uint64_t(a.tokens) > kU32) return "head_dim or token count exceeds 2^32 - 1";
  if (std::uint64_t(a.q.heads) + std::uint64_t(a.k.heads) > kU32) return "too many heads";
  if (a.tokens > 1 && !fits_u32(a.pos_stride)) return "positions stride out of range";
  for (const rope::Part* p : {&a.q, &a.k})
    for (std::int64_t s : {p->x_tok, p->x_head, p->y_tok, p->y_head})
      if (!fits_u32(s)) return "stride out of range (the Metal kernels take strides in [0, 2^32))";
  return "";
}

RopePart params_of(const rope::Part& p) {
  RopePart r{};
  r.heads = std::uint32_t(p.heads);
  r.x_tok = std::uint32_t(p.x_tok);
  r.x_head = std::uint32_t(p.x_head);
  r.y_tok = std::uint32_t(p.y_tok);
  r.y_head = std::uint32_t(p.y_head);
  return r;
}

// Bytes one part's rows span from its first element.
std::uint64_t part_bytes(const rope::Args& a, std::int64_t tok, std::int64_t head, std::int64_t heads) {
  if (a.tokens == 0 || heads == 0 || a.dim == 0) return 0;
  return (std::uint64_t(a.tokens - 1) * std::uint64_t(tok) + std::uint64_t(heads - 1) * std::uint64_t(head) +
          std::uint64_t(a.dim)) * dtype_size(a.dtype);
}

bool in_place(const rope::Part& p) { return p.y == p.x && p.y_tok == p.x_tok && p.y_head == p.x_head; }

}  // namespace

Plan plan_rope(const rope::Args& a) {
  Plan plan;
  plan.error = validate(a);
  if (!plan.error.empty()) return plan;
  const bool is_qk = qk(a);
  const std::uint64_t heads = std::uint64_t(a.q.heads) + std::uint64_t(is_qk ? a.k.heads : 0);
  if (a.tokens == 0 || a.dim == 0 || heads == 0) return plan;

  RopeParams p{};
  p.tokens = std::uint32_t(a.tokens);
  p.dim = std::uint32_t(a.dim);
  p.half = std::uint32_t(a.rot / 2);
  p.pos_stride = a.tokens > 1 ? std::uint32_t(a.pos_stride) : 0u;
  const bool copy_rest = a.rot < a.dim && !(in_place(a.q) && (!is_qk || a.k.heads == 0 || in_place(a.k)));
  p.flags = (a.interleaved ? ROPE_INTERLEAVED : 0u) | (copy_rest ? ROPE_COPY_REST : 0u);
  p.scale = a.scale;
  p.sin_sign = a.inverse ? -1.0f : 1.0f;
  p.q = params_of(a.q);
  p.k = is_qk ? params_of(a.k) : RopePart{};

  // x: pairs (the copied tail is short or absent), a whole number of
  // simdgroups up to ROPE_MAX_THREADS; y: heads, filling the threadgroup up to
  // ROPE_MAX_THREADS. Each thread rotates up to ROPE_HEADS_PER_THREAD heads
  // with one cos / sin; grid = tokens x head blocks.
  std::uint64_t tx = (std::max<std::uint64_t>(p.half, 1) + 31) / 32 * 32;
  tx = std::min<std::uint64_t>(tx, ROPE_MAX_THREADS);
  const std::uint64_t ty = std::max<std::uint64_t>(1, std::min<std::uint64_t>(ROPE_MAX_THREADS / tx, heads));
  const std::uint64_t per_group = std::min<std::uint64_t>(heads, ty * ROPE_HEADS_PER_THREAD);
  p.heads_per_group = std::uint32_t(per_group);

  const BufferRef q = plan.array(a.q.x, part_bytes(a, a.q.x_tok, a.q.x_head, a.q.heads));
  const BufferRef q_out = plan.array(a.q.y, part_bytes(a, a.q.y_tok, a.q.y_head, a.q.heads), true);
  const std::uint64_t pos_bytes = (std::uint64_t(a.tokens - 1) * std::uint64_t(a.tokens > 1 ? a.pos_stride : 0) + 1) *
                                  dtype_size(a.pos_dtype);
  const BufferRef pos = plan.array(a.pos, pos_bytes);
  BufferRef inv_freq;
  if (a.inv_freq) {
    inv_freq = plan.array(a.inv_freq, std::uint64_t(a.rot / 2) * sizeof(float));
  } else {  // the default table, bit-identical to the CPU's (core/rope.h)
    std::vector<float> t(std::size_t(std::max<std::int64_t>(a.rot / 2, 1)), 0.0f);
    for (std::int64_t i = 0; i < a.rot / 2; ++i) t[std::size_t(i)] = rope::default_inv_freq(a.base, i, a.rot);
    const auto* b = reinterpret_cast<const std::uint8_t*>(t.data());
    plan.constants.emplace_back(b, b + t.size() * sizeof(float));
    inv_freq = BufferRef{-1, -1, int(plan.constants.size() - 1), 0};
  }
  // rope: k and k_out are bound to x and out (never read or written: k.heads = 0).
  const BufferRef k = is_qk ? plan.array(a.k.x, part_bytes(a, a.k.x_tok, a.k.x_head, a.k.heads)) : q;
  const BufferRef k_out =
      is_qk ? plan.array(a.k.y, part_bytes(a, a.k.y_tok, a.k.y_head, a.k.heads), true) : q_out;

  Dispatch d;
  d.kernel = std::string(is_qk ? "rope_qk_" : "rope_") + (a.pos_dtype == DType::i64 ? "p64_" : "") +
             dtype_suffix(a.dtype);
  d.threads[0] = std::uint32_t(tx);
  d.threads[1] = std::uint32_t(ty);
  d.threadgroups[0] = std::uint32_t(a.tokens);
  d.threadgroups[1] = std::uint32_t((heads + per_group - 1) / per_group);
  d.buffers = {q, k, pos, inv_freq, q_out, k_out};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
