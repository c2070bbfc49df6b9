// Rotary position embedding: rope (one array) and rope_qk (q and k, different
// head counts, in one launch), from one template rope_kernel<T, P, QK>.
//
// Threadgroup (token t, head block g): thread (tx, ty) owns pairs
// i = tx, tx + ntx, ... of the token; it computes cos / sin of each owned
// pair's angle once and rotates that pair in heads g * heads_per_group + ty,
// + nty, ... (q heads first, then k heads). The angle is the f32 product
// float(position) * inv_freq[i], as on every backend; cos and sin come from
// rope_sincos below (f32 only, no fast-math approximations). f32 math, one
// cast per stored element. In place (y == x) is allowed: each element is read
// and written by the same thread, reads before writes. No barriers, no
// threadgroup memory.
//
// Template axes: T (float / half / bfloat), P (int / long: the positions'
// type), QK (false: only part q exists; true: parts q and k).
#include <metal_stdlib>

#include "../common/dtype.h"
#include "rope_params.h"

using namespace metal;

// pi / 2 = ROPE_PIO2_1 + ROPE_PIO2_2 + ROPE_PIO2_3 (each the f32 rounding of
// what the previous ones leave).
#define ROPE_PIO2_1 1.57079637e+00f
#define ROPE_PIO2_2 -4.37113883e-08f
#define ROPE_PIO2_3 -1.71512451e-15f
#define ROPE_2_OVER_PI 0.636619772f

// Nearest integer of a float, as int (|v| is clamped to 2^30 first, so the
// conversion is always defined; NaN becomes -2^30 through clamp).
inline int rope_round(float v) {
  const float c = clamp(v, -1073741824.0f, 1073741824.0f);
  return int(c + (c < 0.0f ? -0.5f : 0.5f));
}

// sin and cos of a float angle, to a few f32 ulps of 1 for |a| < 2^25
// (positions up to 2^24 with inv_freq <= 1); finite (not accurate) beyond.
// a is reduced by k * pi/2 with fma against a three-piece pi/2 (the first
// step is exact up to one rounding), then once more by the small k2 left by
// the rounding of a * 2/pi, so |r| <= pi/4 (+ a rounding); Taylor polynomials
// of degree 11 / 12 on that range (truncation < 1e-10).
inline void rope_sincos(float a, thread float& s_out, thread float& c_out) {
  int k = rope_round(a * ROPE_2_OVER_PI);
  float kf = float(k);
  k = int(kf);  // float(k) may have rounded (|k| > 2^24)
  float r = fma(-kf, ROPE_PIO2_1, a);
  r = fma(-kf, ROPE_PIO2_2, r);
  r = fma(-kf, ROPE_PIO2_3, r);
  const int k2 = rope_round(r * ROPE_2_OVER_PI);
  const float k2f = float(k2);
  r = fma(-k2f, ROPE_PIO2_1, r);
  r = fma(-k2f, ROPE_PIO2_2, r);
  const float r2 = r * r;
  const float sp = fma(r * r2, fma(r2, fma(r2, fma(r2, fma(r2, -2.50521084e-08f, 2.75573192e-06f),
                                                   -1.98412698e-04f), 8.33333333e-03f),
                                   -1.66666667e-01f), r);
  const float cp = fma(r2, fma(r2, fma(r2, fma(r2, fma(r2, fma(r2, 2.08767570e-09f, -2.75573192e-07f),
                                                       2.48015873e-05f), -1.38888889e-03f),
                                       4.16666667e-02f), -0.5f), 1.0f);
  const uint q = uint(k + k2) & 3u;
  float sn = (q & 1u) ? cp : sp;
  float cs = (q & 1u) ? sp : cp;
  s_out = (q & 2u) ? -sn : sn;
  c_out = ((q + 1u) & 2u) ? -cs : cs;
}

template <typename T, typename P, bool QK>
[[kernel]] void rope_kernel(device const T* x0 [[buffer(0)]],   // x, or q
                            device const T* x1 [[buffer(1)]],   // k (rope: bound to x, unread)
                            device const P* pos [[buffer(2)]],
                            device const float* inv_freq [[buffer(3)]],
                            device T* y0 [[buffer(4)]],         // out, or q_out (may be x0)
                            device T* y1 [[buffer(5)]],         // k_out (may be x1)
                            constant RopeParams& p [[buffer(6)]],
                            uint2 group [[threadgroup_position_in_grid]],
                            uint2 tid [[thread_position_in_threadgroup]],
                            uint2 nt [[threads_per_threadgroup]]) {
  const uint t = group.x;
  const uint hq = p.q.heads;
  const uint hk = QK ? p.k.heads : 0u;
  const uint h_begin = group.y * p.heads_per_group;
  const uint h_end = min(hq + hk, h_begin + p.heads_per_group);
  const bool interleaved = (p.flags & ROPE_INTERLEAVED) != 0;
  const float position = float(pos[ulong(t) * p.pos_stride]);

  for (uint i = tid.x; i < p.half; i += nt.x) {
    float s;
    float c;
    rope_sincos(position * inv_freq[i], s, c);  // the f32 product, then cos / sin
    c *= p.scale;
    s *= p.scale * p.sin_sign;
    const uint e1 = interleaved ? 2u * i : i;
    const uint e2 = interleaved ? 2u * i + 1u : i + p.half;
    for (uint h = h_begin + tid.y; h < h_end; h += nt.y) {
      const bool in_q = h < hq;
      const RopePart part = in_q ? p.q : p.k;
      const uint hh = in_q ? h : h - hq;
      device const T* xr = (in_q ? x0 : x1) + (ulong(t) * part.x_tok + ulong(hh) * part.x_head);
      device T* yr = (in_q ? y0 : y1) + (ulong(t) * part.y_tok + ulong(hh) * part.y_head);
      const float a = load_f32(xr, e1);
      const float b = load_f32(xr, e2);
      store_f32(yr, e1, a * c - b * s);
      store_f32(yr, e2, b * c + a * s);
    }
  }
  if ((p.flags & ROPE_COPY_REST) == 0) return;
  for (uint j = 2u * p.half + tid.x; j < p.dim; j += nt.x) {
    for (uint h = h_begin + tid.y; h < h_end; h += nt.y) {
      const bool in_q = h < hq;
      const RopePart part = in_q ? p.q : p.k;
      const uint hh = in_q ? h : h - hq;
      device const T* xr = (in_q ? x0 : x1) + (ulong(t) * part.x_tok + ulong(hh) * part.x_head);
      device T* yr = (in_q ? y0 : y1) + (ulong(t) * part.y_tok + ulong(hh) * part.y_head);
      yr[j] = xr[j];
    }
  }
}

// Host names: rope_<dtype>, rope_qk_<dtype> (int32 positions) and
// rope_p64_<dtype>, rope_qk_p64_<dtype> (int64 positions).
#define ROPE_INSTANCE(name, T, P, QK) \
  template [[host_name(name)]] [[kernel]] decltype(rope_kernel<T, P, QK>) rope_kernel<T, P, QK>;
#define ROPE_DTYPE(T, suffix)                                \
  ROPE_INSTANCE("rope_" suffix, T, int, false)               \
  ROPE_INSTANCE("rope_p64_" suffix, T, long, false)          \
  ROPE_INSTANCE("rope_qk_" suffix, T, int, true)             \
  ROPE_INSTANCE("rope_qk_p64_" suffix, T, long, true)

ROPE_DTYPE(float, "f32")
ROPE_DTYPE(half, "f16")
ROPE_DTYPE(bfloat, "bf16")
