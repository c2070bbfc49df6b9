// decode: one query token per sequence against its paged keys. One simdgroup
// per (q head, sequence): keys go 32 at a time, one per lane (a full dot
// product over head_dim against q, staged scaled in threadgroup memory), the
// online softmax's max and sum are simd reductions, then every lane
// accumulates P V for its head_dim columns d = lane + 32 i. Any GQA ratio:
// q head h reads kv head h / (Hq / Hkv).
#include "attention_common.h"

template <typename T>
[[kernel]] void decode_kernel(device const T* q [[buffer(0)]],
                              device const T* kc [[buffer(1)]],
                              device const T* vc [[buffer(2)]],
                              device const int* table [[buffer(3)]],
                              device const int* kv_lens [[buffer(4)]],
                              device const uchar* sinks [[buffer(5)]],
                              device T* out [[buffer(6)]],
                              device float* lse_out [[buffer(7)]],
                              constant AttnParams& p [[buffer(8)]],
                              uint2 group [[threadgroup_position_in_grid]],
                              uint lane [[thread_index_in_simdgroup]]) {
  threadgroup float qs[ATTN_MAX_DIM];
  threadgroup float ps[ATTN_THREADS];
  threadgroup long vo[ATTN_THREADS];
  const uint h = group.x, b = group.y, D = p.dim;
  const uint hk = h / (p.q_heads / p.kv_heads);
  device const T* qrow = q + ulong(b) * p.q_st + ulong(h) * p.q_sh;
  for (uint d = lane; d < D; d += ATTN_THREADS) qs[d] = float(qrow[d]) * p.scale;
  // A GPU kernel never trusts kv_lens past the block table (the host checked it too).
  const uint len = min(uint(max(kv_lens[b], 0)), p.max_blocks * p.block_size);
  const uint lo = p.window != 0u && len > p.window ? len - p.window : 0u;
  device const int* row = table + ulong(b) * p.bt_stride;
  threadgroup_barrier(mem_flags::mem_threadgroup);

  float m = ATTN_NEG_INF, l = 0.0f;
  float o[ATTN_MAX_DIM / ATTN_THREADS];
  for (uint i = 0; i < ATTN_MAX_DIM / ATTN_THREADS; ++i) o[i] = 0.0f;
  for (uint c = lo; c < len; c += ATTN_THREADS) {
    const uint j = c + lane;
    float s = ATTN_NEG_INF;
    long voff = -1;
    if (j < len) {
      const long ks = attn_paged_slot(row, j, p.block_size, p.num_blocks, p.k_sb, p.k_st);
      if (ks >= 0) {
        device const T* kr = kc + ks + long(hk) * p.k_sh;
        float dot = 0.0f;
        for (uint d = 0; d < D; ++d) dot += qs[d] * float(kr[d]);
        s = attn_softcap(dot, p.softcap);
        voff = attn_paged_slot(row, j, p.block_size, p.num_blocks, p.v_sb, p.v_st) + long(hk) * p.v_sh;
      }
    }
    const float mn = max(m, simd_max(s));
    const float pj = s == ATTN_NEG_INF ? 0.0f : exp(s - mn);
    const float alpha = m == ATTN_NEG_INF ? 0.0f : exp(m - mn);
    l = l * alpha + simd_sum(pj);
    m = mn;
    ps[lane] = pj;
    vo[lane] = voff;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const uint n = min(len - c, uint(ATTN_THREADS));
    for (uint i = 0; i * ATTN_THREADS + lane < D; ++i) {
      const uint d = i * ATTN_THREADS + lane;
      float acc = o[i] * alpha;
      for (uint jj = 0; jj < n; ++jj)
        if (vo[jj] >= 0) acc += ps[jj] * float(vc[vo[jj] + d]);
      o[i] = acc;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }

  float lse;
  const float f = attn_finish(m, l, attn_sink(sinks, p, h), lse);
  device T* orow = out + ulong(b) * p.o_st + ulong(h) * p.o_sh;
  for (uint i = 0; i * ATTN_THREADS + lane < D; ++i) orow[i * ATTN_THREADS + lane] = T(o[i] * f);
  if (p.has_lse != 0u && lane == 0u) lse_out[ulong(b) * p.l_st + ulong(h) * p.l_sh] = lse;
}

#define DECODE_INSTANCE(T, suffix) \
  template [[host_name("decode_" suffix)]] [[kernel]] decltype(decode_kernel<T>) decode_kernel<T>;
DECODE_INSTANCE(float, "f32")
DECODE_INSTANCE(half, "f16")
DECODE_INSTANCE(bfloat, "bf16")
