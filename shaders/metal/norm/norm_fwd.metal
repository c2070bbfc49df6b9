// Forward norms: rms_norm, add_rms_norm, rms_norm_gated, layer_norm.
// One threadgroup normalizes one segment (a row, or a group of a row for
// rms_norm_gated). Thread t owns elements t, t + nt, t + 2 nt, ... (coalesced).
// LOOPED = false keeps the segment in registers (NORM_REG_ELEMS per thread) and
// reads it once; LOOPED = true re-reads it from memory for each pass, so any
// length works. f32 math throughout, one cast per stored element.
#include <metal_stdlib>

#include "../common/dtype.h"
#include "../common/reduce.h"
#include "norm_params.h"

using namespace metal;

#define NORM_RMS 0
#define NORM_ADD_RMS 1
#define NORM_GATED_RMS 2
#define NORM_LAYER 3

// for each owned element i (k counts them; bounded by the register count
// unless LOOPED)
#define NORM_FOR_OWNED(k, i) \
  for (uint k = 0, i = tid; i < p.n && (LOOPED || k < NORM_REG_ELEMS); ++k, i += nt)

template <typename T, bool LOOPED, int MODE>
[[kernel]] void norm_fwd(device const T* x [[buffer(0)]],
                         device const T* weight [[buffer(1)]],
                         device const T* bias [[buffer(2)]],
                         device const T* aux [[buffer(3)]],  // residual or gate
                         device T* out [[buffer(4)]],
                         device T* aux_out [[buffer(5)]],  // residual_out (may be aux)
                         constant NormParams& p [[buffer(6)]],
                         uint seg [[threadgroup_position_in_grid]],
                         uint tid [[thread_position_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]],
                         uint simd_index [[simdgroup_index_in_threadgroup]],
                         uint simd_count [[simdgroups_per_threadgroup]]) {
  threadgroup float2 scratch[32];
  const uint row = seg / p.segments;
  const uint col0 = (seg % p.segments) * p.n;
  device const T* xr = x + ulong(row) * p.stride_x + col0;
  device const T* ar = aux + ulong(row) * p.stride_aux + col0;
  device T* yr = out + ulong(row) * p.stride_out + col0;
  device T* hr = aux_out + ulong(row) * p.stride_aux_out + col0;
  device const T* wr = weight + col0;
  const bool has_weight = (p.flags & NORM_HAS_WEIGHT) != 0;
  const bool has_bias = (p.flags & NORM_HAS_BIAS) != 0;
  const float inv_n = 1.0f / float(p.n);

  // Pass 1: load (add_rms_norm: h = x + residual, stored rounded, then used
  // as stored), sum and sum of squares.
  float v[LOOPED ? 1 : NORM_REG_ELEMS];
  float sum = 0.0f;
  float sumsq = 0.0f;
  NORM_FOR_OWNED(k, i) {
    float a;
    if (MODE == NORM_ADD_RMS) {
      const T h = static_cast<T>(load_f32(xr, i) + load_f32(ar, i));
      hr[i] = h;
      a = static_cast<float>(h);
    } else {
      a = load_f32(xr, i);
    }
    if (!LOOPED) {
      v[k] = a;
    }
    sum += a;
    sumsq += a * a;
  }

  // layer_norm: second pass over the centred values (two-pass variance).
  float mean = 0.0f;
  if (MODE == NORM_LAYER) {
    mean = threadgroup_sum(float2(sum, 0.0f), scratch, lane, simd_index, simd_count).x * inv_n;
    sumsq = 0.0f;
    NORM_FOR_OWNED(k, i) {
      const float d = (LOOPED ? load_f32(xr, i) : v[k]) - mean;
      sumsq += d * d;
    }
  }
  const float total = threadgroup_sum(float2(sumsq, 0.0f), scratch, lane, simd_index, simd_count).x;
  const float r = rsqrt(total * inv_n + p.eps);

  NORM_FOR_OWNED(k, i) {
    float a;
    if (LOOPED) {
      a = MODE == NORM_ADD_RMS ? load_f32(static_cast<device const T*>(hr), i) : load_f32(xr, i);
    } else {
      a = v[k];
    }
    float y = (a - mean) * r;
    if (MODE == NORM_LAYER) {
      y *= has_weight ? load_f32(wr, i) : 1.0f;
      y += has_bias ? load_f32(bias + col0, i) : 0.0f;
    } else {
      y *= (has_weight ? load_f32(wr, i) : 1.0f) + p.weight_offset;
    }
    if (MODE == NORM_GATED_RMS) {
      const float g = load_f32(ar, i);
      y *= g / (1.0f + exp(-g));
    }
    store_f32(yr, i, y);
  }
}

#define NORM_FWD_INSTANCE(name, mode, T, suffix)                                     \
  template [[host_name(name "_" suffix)]] [[kernel]] decltype(norm_fwd<T, false, mode>) \
      norm_fwd<T, false, mode>;                                                      \
  template [[host_name(name "_looped_" suffix)]] [[kernel]]                          \
      decltype(norm_fwd<T, true, mode>) norm_fwd<T, true, mode>;

#define NORM_FWD_DTYPES(name, mode)                 \
  NORM_FWD_INSTANCE(name, mode, float, "f32")       \
  NORM_FWD_INSTANCE(name, mode, half, "f16")        \
  NORM_FWD_INSTANCE(name, mode, bfloat, "bf16")

NORM_FWD_DTYPES("rms_norm", NORM_RMS)
NORM_FWD_DTYPES("add_rms_norm", NORM_ADD_RMS)
NORM_FWD_DTYPES("rms_norm_gated", NORM_GATED_RMS)
NORM_FWD_DTYPES("layer_norm", NORM_LAYER)
