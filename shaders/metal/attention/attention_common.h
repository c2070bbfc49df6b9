// What the attention kernels share: masked scores, the sink and the final
// normalization (the contract of core/attention.h's Options).
#pragma once
#include <metal_stdlib>

#include "attention_params.h"

using namespace metal;

#define ATTN_NEG_INF as_type<float>(0xff800000u)

// c * tanh(s / c) as 1 - 2 / (e^(2 s / c) + 1): +-c at the extremes, never NaN.
inline float attn_softcap(float s, float c) {
  return c > 0.0f ? c * (1.0f - 2.0f / (exp(s * (2.0f / c)) + 1.0f)) : s;
}

// Whether key j is seen from query position pos (j < the context is the caller's).
inline bool attn_visible(uint j, uint pos, bool causal, uint window) {
  return (!causal || j <= pos) && (window == 0u || j + window > pos);
}

inline float attn_sink(device const uchar* sinks, constant AttnParams& p, uint h) {
  if (p.sinks_dtype == ATTN_SINKS_F32) return ((device const float*)sinks)[h];
  if (p.sinks_dtype == ATTN_SINKS_F16) return float(((device const half*)sinks)[h]);
  if (p.sinks_dtype == ATTN_SINKS_BF16) return float(((device const bfloat*)sinks)[h]);
  return ATTN_NEG_INF;
}

// Row (m, l) and its sink -> the factor the unnormalized output is scaled by
// and lse = log(l e^m + e^sink); 0 and -inf when nothing is visible.
inline float attn_finish(float m, float l, float sink, thread float& lse) {
  const float ms = max(m, sink);
  float denom = 0.0f, w = 0.0f;
  if (ms != ATTN_NEG_INF) {
    w = m == ATTN_NEG_INF ? 0.0f : exp(m - ms);
    denom = l * w + (sink == ATTN_NEG_INF ? 0.0f : exp(sink - ms));
  }
  lse = denom > 0.0f ? ms + log(denom) : ATTN_NEG_INF;
  return denom > 0.0f ? w / denom : 0.0f;
}

// Element offset of key j of a paged sequence (row `table` of the block
// table), or -1 when its block id is not a block of the cache.
inline long attn_paged_slot(device const int* table, uint j, uint block_size, uint num_blocks, uint stride_b,
                            uint stride_s) {
  const int blk = table[j / block_size];
  if (blk < 0 || uint(blk) >= num_blocks) return -1;
  return long(blk) * long(stride_b) + long(j % block_size) * long(stride_s);
}
