#include "rope.h"

#include <algorithm>
#include <string>

#include "rope/rope_params.h"

namespace braze::metal {
namespace {

constexpr std::uint64_t kU32 = 0xffffffffull;

BufferRef role(int r) { return BufferRef{r, -1, 0}; }

bool fits_u32(std::int64_t v) { return v >= 0 && std::uint64_t(v) <= kU32; }

// "" or why no kernel handles `a`.
std::string validate(const RopeArgs& a) {
  if (a.rot % 2 != 0) return "rotary_dim must be even";
  if (a.rot > a.dim) return "rotary_dim exceeds head_dim";
  if (a.dim > kU32 || a.tokens > kU32) return "head_dim or token count exceeds 2^32 - 1";
  if (a.q_heads + a.k_heads > kU32) return "too many heads";
  if (!a.qk && a.k_heads != 0) return "rope takes no k";
  if (!fits_u32(a.pos_stride)) return "positions stride out of range";
  const std::int64_t strides[] = {a.q_tok, a.q_head, a.q_out_tok, a.q_out_head,
                                  a.k_tok, a.k_head, a.k_out_tok, a.k_out_head};
  for (std::int64_t s : strides)
    if (!fits_u32(s)) return "stride out of range";
  return "";
}

RopePart part(std::uint64_t heads, std::int64_t x_tok, std::int64_t x_head, std::int64_t y_tok,
              std::int64_t y_head) {
  RopePart p{};
  p.heads = std::uint32_t(heads);
  p.x_tok = std::uint32_t(x_tok);
  p.x_head = std::uint32_t(x_head);
  p.y_tok = std::uint32_t(y_tok);
  p.y_head = std::uint32_t(y_head);
  return p;
}

}  // namespace

Plan plan_rope(const RopeArgs& a) {
  Plan plan;
  plan.error = validate(a);
  if (!plan.error.empty()) return plan;
  const std::uint64_t heads = a.q_heads + (a.qk ? a.k_heads : 0);
  if (a.tokens == 0 || a.dim == 0 || heads == 0) return plan;

  RopeParams p{};
  p.tokens = std::uint32_t(a.tokens);
  p.dim = std::uint32_t(a.dim);
  p.half = std::uint32_t(a.rot / 2);
  p.pos_stride = a.tokens > 1 ? std::uint32_t(a.pos_stride) : 0u;
  const bool copy_rest = a.rot < a.dim && !(a.in_place_q && (!a.qk || a.k_heads == 0 || a.in_place_k));
  p.flags = (a.interleaved ? ROPE_INTERLEAVED : 0u) | (copy_rest ? ROPE_COPY_REST : 0u);
  p.scale = a.scale;
  p.sin_sign = a.inverse ? -1.0f : 1.0f;
  p.q = part(a.q_heads, a.q_tok, a.q_head, a.q_out_tok, a.q_out_head);
  p.k = a.qk ? part(a.k_heads, a.k_tok, a.k_head, a.k_out_tok, a.k_out_head) : RopePart{};

  // x: pairs (the copied tail is short or absent), a whole number of
  // simdgroups up to ROPE_MAX_THREADS; y: heads, filling the threadgroup up to
  // ROPE_MAX_THREADS. Each thread rotates up to ROPE_HEADS_PER_THREAD heads
  // with one cos / sin; grid = tokens x head blocks.
  std::uint64_t tx = (std::max<std::uint64_t>(p.half, 1) + 31) / 32 * 32;
  tx = std::min<std::uint64_t>(tx, ROPE_MAX_THREADS);
  const std::uint64_t ty = std::max<std::uint64_t>(1, std::min<std::uint64_t>(ROPE_MAX_THREADS / tx, heads));
  const std::uint64_t per_group = std::min<std::uint64_t>(heads, ty * ROPE_HEADS_PER_THREAD);
  p.heads_per_group = std::uint32_t(per_group);

  Dispatch d;
  d.kernel = std::string(a.qk ? "rope_qk_" : "rope_") + (a.pos64 ? "p64_" : "") + dtype_suffix(a.dtype);
  d.threads[0] = std::uint32_t(tx);
  d.threads[1] = std::uint32_t(ty);
  d.threadgroups[0] = std::uint32_t(a.tokens);
  d.threadgroups[1] = std::uint32_t((heads + per_group - 1) / per_group);
  // rope: k and k_out are bound to x and out (never read or written: k.heads = 0).
  d.buffers = {role(kRopeQ), role(a.qk ? kRopeK : kRopeQ), role(kRopePos), role(kRopeInvFreq),
               role(kRopeQOut), role(a.qk ? kRopeKOut : kRopeQOut)};
  d.params = param_bytes(p);
  plan.dispatches.push_back(d);
  return plan;
}

}  // namespace braze::metal
