// The activations of the ops family in f32 (core/ops.h gives the formulas),
// written with exp and fma only: MSL has no erf, and the simulator runs the
// very same code.
#pragma once
#include <metal_stdlib>

// Values of braze::ops::Act (core/ops.h).
#define OPS_ACT_SILU 0
#define OPS_ACT_GELU_ERF 1
#define OPS_ACT_GELU_TANH 2
#define OPS_ACT_SWIGLU_CLAMPED 3

inline float ops_sigmoid(float v) { return 1.0f / (1.0f + metal::exp(-v)); }

// erfc(z) for z >= 0 with a relative error below 1.2e-7 (before f32
// rounding) over the whole range: the Chebyshev fit of Numerical Recipes'
// erfcc, t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2). A relative bound keeps
// gelu accurate in its negative tail, where 1 + erf underflows toward 0.
inline float ops_erfc_pos(float z) {
  const float t = 1.0f / metal::fma(0.5f, z, 1.0f);
  float poly = metal::fma(t, 0.17087277f, -0.82215223f);
  poly = metal::fma(t, poly, 1.48851587f);
  poly = metal::fma(t, poly, -1.13520398f);
  poly = metal::fma(t, poly, 0.27886807f);
  poly = metal::fma(t, poly, -0.18628806f);
  poly = metal::fma(t, poly, 0.09678418f);
  poly = metal::fma(t, poly, 0.37409196f);
  poly = metal::fma(t, poly, 1.00002368f);
  poly = metal::fma(t, poly, -1.26551223f);
  return t * metal::exp(metal::fma(-z, z, poly));
}

// The standard normal CDF: (1 + erf(g / sqrt 2)) / 2 = erfc(-g / sqrt 2) / 2.
// NaN stays NaN (both branches carry it).
inline float ops_normal_cdf(float g) {
  const float half_tail = 0.5f * ops_erfc_pos(metal::fabs(g) * 0.707106781f);
  return g > 0.0f ? 1.0f - half_tail : half_tail;
}

// act(g) of the ungated kernels and of the gate of the gated ones.
template <int ACT>
inline float ops_act(float g) {
  if (ACT == OPS_ACT_SILU) return g * ops_sigmoid(g);
  if (ACT == OPS_ACT_GELU_ERF) return g * ops_normal_cdf(g);
  // gelu_tanh: g/2 (1 + tanh(w)) = g * sigmoid(2w), with no cancellation as
  // tanh(w) -> -1.
  const float w = 0.797884561f * metal::fma(0.044715f * g, g * g, g);
  return g * ops_sigmoid(2.0f * w);
}

// y of a gated kernel from its gate g and up u. The clamps are comparisons,
// not metal::min / clamp, so a NaN input gives NaN (fmin would drop it).
template <int ACT>
inline float ops_gated(float g, float u, float alpha, float limit) {
  if (ACT != OPS_ACT_SWIGLU_CLAMPED) return ops_act<ACT>(g) * u;
  const float gc = g > limit ? limit : g;
  const float uc = u > limit ? limit : (u < -limit ? -limit : u);
  return gc * ops_sigmoid(alpha * gc) * (uc + 1.0f);
}

// The VJP kernels: returns act(g) and sets df = act'(g), the formulas of
// python/braze/integrations/_grads.py (erf gelu: Phi + g * phi; tanh gelu
// through s = sigmoid(2w): (1 + tanh w) / 2 = s, (1 - tanh^2 w) / 2 = 2 s (1 - s)).
// swiglu_clamped: on gc = min(g, limit), df times [g < limit] (a NaN gate stays NaN).
template <int ACT>
inline float ops_act_d(float g, float alpha, float limit, thread float& df) {
  if (ACT == OPS_ACT_GELU_ERF) {
    const float cdf = ops_normal_cdf(g);
    df = cdf + g * metal::exp(-0.5f * g * g) * 0.398942280f;  // 1 / sqrt(2 pi)
    return g * cdf;
  }
  if (ACT == OPS_ACT_GELU_TANH) {
    const float s = ops_sigmoid(1.595769122f * metal::fma(0.044715f * g, g * g, g));  // 2 sqrt(2/pi)
    df = s + g * s * (1.0f - s) * 1.595769122f * metal::fma(0.134145f * g, g, 1.0f);  // 3 * 0.044715
    return g * s;
  }
  const bool clamped = ACT == OPS_ACT_SWIGLU_CLAMPED;
  const float gc = clamped && g > limit ? limit : g;
  const float al = clamped ? alpha : 1.0f;
  const float s = ops_sigmoid(al * gc);
  df = s * (1.0f + al * gc * (1.0f - s)) * (clamped && !(g < limit) ? 0.0f : 1.0f);
  return gc * s;
}

// dg and du of a gated kernel (du unused when not gated: u = 1) from dy.
template <int ACT>
inline float ops_gated_vjp(float g, float u, float dy, float alpha, float limit, thread float& du) {
  float df;
  const float f = ops_act_d<ACT>(g, alpha, limit, df);
  if (ACT != OPS_ACT_SWIGLU_CLAMPED) {
    du = dy * f;
    return dy * u * df;
  }
  du = dy * f * (u > -limit && u < limit ? 1.0f : 0.0f);
  const float uc = u > limit ? limit : (u < -limit ? -limit : u);
  return dy * (uc + 1.0f) * df;
}
