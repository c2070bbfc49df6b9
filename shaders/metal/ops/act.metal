// Elementwise activations: silu, gelu (erf / tanh) and the gated
// silu_and_mul, gelu_and_mul, swiglu_clamped, from one template
// act_kernel<T, ACT, GATED>, and their VJPs from act_vjp_kernel<T, ACT, GATED>.
//
// Threadgroup (column block b, row r): thread t computes columns
// b * ACT_ELEMS * nt + t + i * nt, i < ACT_ELEMS (coalesced scalar loads, so
// rows at any alignment work). Gated rows hold 2 * cols inputs: the gate and
// up halves, or (interleaved) pairs. f32 math, one cast per store. Ungated
// kernels may run in place (y == x): each element is read and then written by
// the same thread. No barriers, no threadgroup memory.
#include <metal_stdlib>

#include "../common/dtype.h"
#include "act_math.h"
#include "ops_params.h"

using namespace metal;

template <typename T, int ACT, bool GATED>
[[kernel]] void act_kernel(device const T* x [[buffer(0)]],
                           device T* y [[buffer(1)]],
                           constant ActParams& p [[buffer(2)]],
                           uint2 group [[threadgroup_position_in_grid]],
                           uint tid [[thread_index_in_threadgroup]],
                           uint nt [[threads_per_threadgroup]]) {
  device const T* xr = x + ulong(group.y) * p.x_stride;
  device T* yr = y + ulong(group.y) * p.y_stride;
  const bool interleaved = (p.flags & ACT_INTERLEAVED) != 0;
  const uint base = group.x * (nt * ACT_ELEMS) + tid;
  for (uint i = 0; i < ACT_ELEMS; ++i) {
    const uint c = base + i * nt;
    if (c >= p.cols) return;
    float v;
    if (GATED) {
      // the plan keeps 2 * cols below 2^32, so these indices never wrap
      const float g = load_f32(xr, interleaved ? 2u * c : c);
      const float u = load_f32(xr, interleaved ? 2u * c + 1u : p.cols + c);
      v = ops_gated<ACT>(g, u, p.alpha, p.limit);
    } else {
      v = ops_act<ACT>(load_f32(xr, c));
    }
    store_f32(yr, c, v);
  }
}

// The VJPs (act_vjp_kernel, the same tiling over dy's columns): dx from x and
// dy, dg and du written where g and u were read.
template <typename T, int ACT, bool GATED>
[[kernel]] void act_vjp_kernel(device const T* x [[buffer(0)]],
                               device const T* dy [[buffer(1)]],
                               device T* dx [[buffer(2)]],
                               constant ActParams& p [[buffer(3)]],
                               uint2 group [[threadgroup_position_in_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint nt [[threads_per_threadgroup]]) {
  device const T* xr = x + ulong(group.y) * p.x_stride;
  device const T* dyr = dy + ulong(group.y) * p.dy_stride;
  device T* dxr = dx + ulong(group.y) * p.y_stride;
  const bool interleaved = (p.flags & ACT_INTERLEAVED) != 0;
  const uint base = group.x * (nt * ACT_ELEMS) + tid;
  for (uint i = 0; i < ACT_ELEMS; ++i) {
    const uint c = base + i * nt;
    if (c >= p.cols) return;
    const float d = load_f32(dyr, c);
    if (GATED) {
      const uint gi = interleaved ? 2u * c : c, ui = interleaved ? 2u * c + 1u : p.cols + c;
      float du;
      const float dg = ops_gated_vjp<ACT>(load_f32(xr, gi), load_f32(xr, ui), d, p.alpha, p.limit, du);
      store_f32(dxr, gi, dg);
      store_f32(dxr, ui, du);
    } else {
      float du;
      store_f32(dxr, c, ops_gated_vjp<ACT>(load_f32(xr, c), 1.0f, d, p.alpha, p.limit, du));
    }
  }
}

// Host names: <op>_<dtype>; the tanh forms of gelu add `_tanh`.
#define ACT_INSTANCE(name, T, ACT, GATED) \
  template [[host_name(name)]] [[kernel]] decltype(act_kernel<T, ACT, GATED>) act_kernel<T, ACT, GATED>;
#define VJP_INSTANCE(name, T, ACT, GATED) \
  template [[host_name(name)]] [[kernel]] decltype(act_vjp_kernel<T, ACT, GATED>) act_vjp_kernel<T, ACT, GATED>;
#define ACT_DTYPE(T, suffix)                                                     \
  ACT_INSTANCE("silu_" suffix, T, OPS_ACT_SILU, false)                           \
  ACT_INSTANCE("gelu_" suffix, T, OPS_ACT_GELU_ERF, false)                       \
  ACT_INSTANCE("gelu_tanh_" suffix, T, OPS_ACT_GELU_TANH, false)                 \
  ACT_INSTANCE("silu_and_mul_" suffix, T, OPS_ACT_SILU, true)                    \
  ACT_INSTANCE("gelu_and_mul_" suffix, T, OPS_ACT_GELU_ERF, true)                \
  ACT_INSTANCE("gelu_and_mul_tanh_" suffix, T, OPS_ACT_GELU_TANH, true)          \
  ACT_INSTANCE("swiglu_clamped_" suffix, T, OPS_ACT_SWIGLU_CLAMPED, true)          \
  VJP_INSTANCE("silu_vjp_" suffix, T, OPS_ACT_SILU, false)                         \
  VJP_INSTANCE("gelu_vjp_" suffix, T, OPS_ACT_GELU_ERF, false)                     \
  VJP_INSTANCE("gelu_vjp_tanh_" suffix, T, OPS_ACT_GELU_TANH, false)               \
  VJP_INSTANCE("silu_and_mul_vjp_" suffix, T, OPS_ACT_SILU, true)                  \
  VJP_INSTANCE("gelu_and_mul_vjp_" suffix, T, OPS_ACT_GELU_ERF, true)              \
  VJP_INSTANCE("gelu_and_mul_vjp_tanh_" suffix, T, OPS_ACT_GELU_TANH, true)        \
  VJP_INSTANCE("swiglu_clamped_vjp_" suffix, T, OPS_ACT_SWIGLU_CLAMPED, true)

ACT_DTYPE(float, "f32")
ACT_DTYPE(half, "f16")
ACT_DTYPE(bfloat, "bf16")
