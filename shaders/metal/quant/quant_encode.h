// The MSL twin of the quant encoders (csrc/core/quant/ggml.h, mx.h, nvfp4.h,
// fp8.h, int8.h, affine.h): one block (or group) of floats in thread memory
// -> its bytes in device memory. The C++ code operation by operation, f32.
#pragma once
#include <metal_stdlib>

#include "quant_codec.h"

using namespace metal;

// ------------------------------------------------------------ rounding
// C's roundf (halves away from zero) for |v| < 2^23 (codec.h's round_away).
inline int qround_away(float v) {
  const float a = v < 0.0f ? -v : v;
  const int i = int(a);
  const int r = i + (a - float(i) >= 0.5f ? 1 : 0);
  return v < 0.0f ? -r : r;
}
// Round half to even for |v| < 2^22 (int8.h's rint_small).
inline float qrint_small(float v) {
  const float t = v + 12582912.0f;
  return t - 12582912.0f;
}
inline float qrint_any(float v) {
  const float a = v < 0.0f ? -v : v;
  if (!(a < 8388608.0f)) return v;
  const float t = a + 8388608.0f;
  const float r = t - 8388608.0f;
  return v < 0.0f ? -r : r;
}

// ------------------------------------------------------------ GGML legacy
// numpy's trunc(v).astype(uint8).clip(0, hi) for v >= 0 (ggml.h's to_level).
inline int qto_level(float v, int hi) {
  if (!(v >= 0.0f)) return 0;
  if (v >= float(hi)) return hi;
  return int(v);
}
inline float qsigned_absmax32(thread const float* x) {
  float amax = 0.0f, mx = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = qfabs(x[j]);
    if (a > amax) { amax = a; mx = x[j]; }
  }
  return mx;
}
inline void qmin_max32(thread const float* x, thread float& mn, thread float& mx) {
  mn = x[0];
  mx = x[0];
  for (int j = 1; j < 32; ++j) {
    mn = x[j] < mn ? x[j] : mn;
    mx = x[j] > mx ? x[j] : mx;
  }
}
inline void qpack_nibbles(thread const int* q, device uchar* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uchar((q[j] & 15) | ((q[j + 16] & 15) << 4));
}
inline void qstore_high_bits(thread const int* q, device uchar* p) {
  uint h = 0u;
  for (int j = 0; j < 32; ++j) h |= uint((q[j] >> 4) & 1) << uint(j);
  for (int j = 0; j < 4; ++j) p[j] = uchar((h >> uint(8 * j)) & 0xffu);
}

// One 32-element block of q8_0 / q4_0 / q4_1 / q5_0 / q5_1 at b.
template <int F> inline void qencode_ggml(thread const float* x, device uchar* b) {
  int q[32];
  if (F == QF_Q8_0) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = qfabs(x[j]) > amax ? qfabs(x[j]) : amax;
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    qstore_f16(b, d);
    for (int j = 0; j < 32; ++j) b[2 + j] = uchar(qround_away(x[j] * id) & 0xff);
  } else if (F == QF_Q4_0 || F == QF_Q5_0) {
    const float lev = F == QF_Q4_0 ? 8.0f : 16.0f;
    const float d = qsigned_absmax32(x) / -lev, id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float t = x[j] * id;
      q[j] = qto_level(t + (lev + 0.5f), F == QF_Q4_0 ? 15 : 31);
    }
    qstore_f16(b, d);
    if (F == QF_Q5_0) qstore_high_bits(q, b + 2);
    qpack_nibbles(q, b + (F == QF_Q4_0 ? 2 : 6));
  } else {  // q4_1, q5_1
    float mn, mx;
    qmin_max32(x, mn, mx);
    const float d = (mx - mn) / (F == QF_Q4_1 ? 15.0f : 31.0f), id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float t = (x[j] - mn) * id;
      q[j] = qto_level(t + 0.5f, F == QF_Q4_1 ? 15 : 31);
    }
    qstore_f16(b, d);
    qstore_f16(b + 2, mn);
    if (F == QF_Q5_1) qstore_high_bits(q, b + 4);
    qpack_nibbles(q, b + (F == QF_Q4_1 ? 4 : 8));
  }
}

// ------------------------------------------------------------ MX, nvfp4
// mx.h's mx_encode_block: 32 floats -> packed codes at element k0 of row; returns the e8m0 code.
template <int E> inline uint qmx_encode_block(thread const float* x, uint rule, device uchar* row, ulong k0) {
  uint amax = 0u;
  for (int j = 0; j < 32; ++j) {
    const uint a = qabs_bits(x[j]);
    amax = a > amax ? a : amax;
  }
  const uint s = qmx_scale_code<E>(amax, rule);
  const float inv = s == 0xffu ? 0.0f : qe8m0_inverse(s);
  for (int j0 = 0; j0 < 32; j0 += 8) {
    uint c[8];
    for (int j = 0; j < 8; ++j) c[j] = s == 0xffu ? 0u : qencode_elem<E>(x[j0 + j] * inv);
    qpack8<QElem<E>::bits>(c, row, k0 + ulong(j0));
  }
  return s;
}

// nvfp4.h's nvfp4_encode_block: 16 floats -> 8 bytes at out; returns the e4m3 code.
inline uint qnvfp4_encode_block(thread const float* x, float t, device uchar* out) {
  uint amax = 0u;
  for (int j = 0; j < 16; ++j) {
    const uint a = qabs_bits(x[j]);
    amax = a > amax ? a : amax;
  }
  const uint sb = qencode_elem<QE_E4M3>(qbits_f32(amax) / (6.0f * t));
  const float d = qdecode_elem<QE_E4M3>(sb) * t;
  for (int j = 0; j < 16; j += 2) {
    const uint lo = d == 0.0f ? 0u : qencode_elem<QE_E2M1>(x[j] / d);
    const uint hi = d == 0.0f ? 0u : qencode_elem<QE_E2M1>(x[j + 1] / d);
    out[j / 2] = uchar(lo | (hi << 4));
  }
  return sb;
}

// ------------------------------------------------------------ scaled codes
inline float qscale_of(uint amax, uint mode) {
  const float a = qbits_f32(amax);
  if (mode == QUANT_SCALE_FP8_E4M3) return a / 448.0f;
  if (mode == QUANT_SCALE_FP8_E5M2) return a / 57344.0f;
  if (mode == QUANT_SCALE_INT8) return a / 127.0f;
  const float t = a / (448.0f * 6.0f);
  return t == 0.0f ? 1.0f : t;
}

// fp8.h's fp8_encode / int8.h's int8_encode, as a byte.
template <int MODE> inline uchar qscaled_code(float x, float scale) {
  if (scale == 0.0f) return uchar(0);
  if (MODE == QUANT_SCALE_INT8) {
    float v = x / scale;
    if (!(v == v)) return uchar(0);
    v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
    return uchar(int(qrint_small(v)) & 0xff);
  }
  return uchar(qencode_elem<MODE == QUANT_SCALE_FP8_E4M3 ? QE_E4M3 : QE_E5M2>(x / scale));
}

// ------------------------------------------------------------ affine
template <int BITS> inline void qaffine_group_params(float lo, float hi, thread float& s, thread float& bias) {
  const float n = float((1 << BITS) - 1);
  const bool low_edge = qfabs(lo) > qfabs(hi);
  float d = (hi - lo) / n;
  d = d > 1e-7f ? d : 1e-7f;
  s = low_edge ? d : -d;
  const float edge = low_edge ? lo : hi;
  const float q0 = qrint_any(edge / s);
  bias = 0.0f;
  if (q0 != 0.0f) {
    s = edge / q0;
    bias = edge;
  }
}

template <int BITS> inline uint qaffine_code(float x, float s, float bias) {
  const float n = float((1 << BITS) - 1);
  float v = (x - bias) / s;
  v = v > 0.0f ? v : 0.0f;
  v = v < n ? v : n;
  return uint(qrint_small(v));
}

// Threadgroup max of a uint over nt (a power of two) threads, returned to all.
inline uint qtg_max(uint v, threadgroup uint* buf, uint tid, uint nt) {
  buf[tid] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = nt / 2u; s > 0u; s >>= 1) {
    if (tid < s) buf[tid] = buf[tid + s] > buf[tid] ? buf[tid + s] : buf[tid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const uint r = buf[0];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return r;
}
