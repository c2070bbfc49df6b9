// Backward norms: rms_norm_vjp, layer_norm_vjp, and the column reduction that
// turns per-threadgroup f32 partials into dweight / dbias.
//
// With xhat = (x - mean) * r (mean = 0 for rms_norm) and g = dy * scale:
//   dx = r * (g - mean(g) - xhat * mean(g * xhat))   (no mean(g) term for rms)
//   dweight += dy * xhat, dbias += dy               (summed over rows)
// Threadgroup b walks rows [b * rows_per_block, ...) and writes its column sums
// to partial row b; norm_reduce_cols then adds the partial rows in a fixed
// order, so results are deterministic.
#include <metal_stdlib>

#include "../common/dtype.h"
#include "../common/reduce.h"
#include "norm_params.h"

using namespace metal;

#define NORM_FOR_OWNED(k, i) \
  for (uint k = 0, i = tid; i < p.n && (LOOPED || k < NORM_REG_ELEMS); ++k, i += nt)

template <typename T, bool LOOPED, bool LAYER>
[[kernel]] void norm_vjp(device const T* x [[buffer(0)]],
                         device const T* weight [[buffer(1)]],
                         device const T* dy [[buffer(2)]],
                         device T* dx [[buffer(3)]],
                         device float* partial [[buffer(4)]],
                         constant NormParams& p [[buffer(5)]],
                         uint block [[threadgroup_position_in_grid]],
                         uint tid [[thread_position_in_threadgroup]],
                         uint nt [[threads_per_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]],
                         uint simd_index [[simdgroup_index_in_threadgroup]],
                         uint simd_count [[simdgroups_per_threadgroup]]) {
  threadgroup float2 scratch[32];
  const bool has_weight = (p.flags & NORM_HAS_WEIGHT) != 0;
  const bool need_dw = (p.flags & NORM_NEED_DWEIGHT) != 0;
  const bool need_db = (p.flags & NORM_NEED_DBIAS) != 0;
  const float offset = LAYER ? 0.0f : p.weight_offset;
  const float inv_n = 1.0f / float(p.n);
  device float* pw = partial + ulong(block) * p.n;
  device float* pb = partial + ulong((need_dw ? p.blocks : 0u) + block) * p.n;
  const uint row0 = block * p.rows_per_block;
  const uint row1 = min(row0 + p.rows_per_block, p.rows);

  float xv[LOOPED ? 1 : NORM_REG_ELEMS];
  float gv[LOOPED ? 1 : NORM_REG_ELEMS];
  float acc_w[LOOPED ? 1 : NORM_REG_ELEMS];
  float acc_b[LOOPED ? 1 : NORM_REG_ELEMS];
  for (uint k = 0; k < (LOOPED ? 1u : uint(NORM_REG_ELEMS)); ++k) {
    acc_w[k] = 0.0f;
    acc_b[k] = 0.0f;
  }

  for (uint row = row0; row < row1; ++row) {
    device const T* xr = x + ulong(row) * p.stride_x;
    device const T* dyr = dy + ulong(row) * p.stride_aux;
    device T* dxr = dx + ulong(row) * p.stride_out;

    float sum = 0.0f;
    float sumsq = 0.0f;
    NORM_FOR_OWNED(k, i) {
      const float a = load_f32(xr, i);
      if (!LOOPED) {
        xv[k] = a;
        gv[k] = load_f32(dyr, i) * ((has_weight ? load_f32(weight, i) : 1.0f) + offset);
      }
      sum += a;
      sumsq += a * a;
    }
    float mean = 0.0f;
    if (LAYER) {
      mean = threadgroup_sum(float2(sum, 0.0f), scratch, lane, simd_index, simd_count).x * inv_n;
      sumsq = 0.0f;
      NORM_FOR_OWNED(k, i) {
        const float d = (LOOPED ? load_f32(xr, i) : xv[k]) - mean;
        sumsq += d * d;
      }
    }
    const float r = rsqrt(
        threadgroup_sum(float2(sumsq, 0.0f), scratch, lane, simd_index, simd_count).x * inv_n +
        p.eps);

    // mean(g) and mean(g * xhat) in one reduction.
    float2 gs = float2(0.0f, 0.0f);
    NORM_FOR_OWNED(k, i) {
      const float a = LOOPED ? load_f32(xr, i) : xv[k];
      const float g = LOOPED ? load_f32(dyr, i) * ((has_weight ? load_f32(weight, i) : 1.0f) + offset)
                             : gv[k];
      gs += float2(g, g * ((a - mean) * r));
    }
    const float2 gm = threadgroup_sum(gs, scratch, lane, simd_index, simd_count) * inv_n;

    NORM_FOR_OWNED(k, i) {
      const float a = LOOPED ? load_f32(xr, i) : xv[k];
      const float d = load_f32(dyr, i);
      const float g = LOOPED ? d * ((has_weight ? load_f32(weight, i) : 1.0f) + offset) : gv[k];
      const float xhat = (a - mean) * r;
      store_f32(dxr, i, r * (g - (LAYER ? gm.x : 0.0f) - xhat * gm.y));
      if (LOOPED) {
        const bool first = row == row0;
        if (need_dw) {
          pw[i] = (first ? 0.0f : pw[i]) + d * xhat;
        }
        if (need_db) {
          pb[i] = (first ? 0.0f : pb[i]) + d;
        }
      } else {
        acc_w[k] += d * xhat;
        acc_b[k] += d;
      }
    }
  }
  if (!LOOPED) {
    NORM_FOR_OWNED(k, i) {
      if (need_dw) {
        pw[i] = acc_w[k];
      }
      if (need_db) {
        pb[i] = acc_b[k];
      }
    }
  }
}

template <typename T>
[[kernel]] void norm_reduce_cols(device const float* partial [[buffer(0)]],
                                 device T* out [[buffer(1)]],
                                 constant NormReduceParams& p [[buffer(2)]],
                                 uint i [[thread_position_in_grid]]) {
  if (i >= p.n) {
    return;
  }
  float s = 0.0f;
  for (uint b = 0; b < p.blocks; ++b) {
    s += partial[ulong(b) * p.n + i];
  }
  store_f32(out, i, s);
}

#define NORM_VJP_INSTANCE(name, layer, T, suffix)                                        \
  template [[host_name(name "_" suffix)]] [[kernel]] decltype(norm_vjp<T, false, layer>) \
      norm_vjp<T, false, layer>;                                                         \
  template [[host_name(name "_looped_" suffix)]] [[kernel]]                              \
      decltype(norm_vjp<T, true, layer>) norm_vjp<T, true, layer>;

#define NORM_VJP_DTYPES(T, suffix)                                                            \
  NORM_VJP_INSTANCE("rms_norm_vjp", false, T, suffix)                                         \
  NORM_VJP_INSTANCE("layer_norm_vjp", true, T, suffix)                                        \
  template [[host_name("norm_reduce_cols_" suffix)]] [[kernel]] decltype(norm_reduce_cols<T>) \
      norm_reduce_cols<T>;

NORM_VJP_DTYPES(float, "f32")
NORM_VJP_DTYPES(half, "f16")
NORM_VJP_DTYPES(bfloat, "bf16")
