// merge_states: (o, lse) of two partial attentions over disjoint keys. One
// simdgroup per (token, head) row, lanes over head_dim; the weights are the
// CPU kernel's (core/attention.h's MergeArgs).
#include "attention_common.h"

template <typename T>
[[kernel]] void merge_states_kernel(device const T* oa [[buffer(0)]],
                                    device const float* la [[buffer(1)]],
                                    device const T* ob [[buffer(2)]],
                                    device const float* lb [[buffer(3)]],
                                    device T* out [[buffer(4)]],
                                    device float* lse [[buffer(5)]],
                                    constant AttnMergeParams& p [[buffer(6)]],
                                    uint group [[threadgroup_position_in_grid]],
                                    uint lane [[thread_index_in_simdgroup]]) {
  const uint t = group / p.heads, h = group % p.heads;
  const float a = la[ulong(t) * p.la_st + ulong(h) * p.la_sh], b = lb[ulong(t) * p.lb_st + ulong(h) * p.lb_sh];
  const float m = max(a, b);
  float wa = 0.0f, wb = 0.0f;
  if (m != ATTN_NEG_INF) {
    wa = a == ATTN_NEG_INF ? 0.0f : exp(a - m);
    wb = b == ATTN_NEG_INF ? 0.0f : exp(b - m);
  }
  const float s = wa + wb, fa = s > 0.0f ? wa / s : 0.0f, fb = s > 0.0f ? wb / s : 0.0f;
  device const T* xa = oa + ulong(t) * p.a_st + ulong(h) * p.a_sh;
  device const T* xb = ob + ulong(t) * p.b_st + ulong(h) * p.b_sh;
  device T* o = out + ulong(t) * p.o_st + ulong(h) * p.o_sh;
  for (uint d = lane; d < p.dim; d += ATTN_THREADS) o[d] = T(float(xa[d]) * fa + float(xb[d]) * fb);
  if (p.has_lse != 0u && lane == 0u) lse[ulong(t) * p.l_st + ulong(h) * p.l_sh] = s > 0.0f ? m + log(s) : ATTN_NEG_INF;
}

#define MERGE_INSTANCE(T, suffix)                                                           \
  template [[host_name("merge_states_" suffix)]] [[kernel]] decltype(merge_states_kernel<T>) \
      merge_states_kernel<T>;
MERGE_INSTANCE(float, "f32")
MERGE_INSTANCE(half, "f16")
MERGE_INSTANCE(bfloat, "bf16")
