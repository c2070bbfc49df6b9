// The searches of the K-quant and i-quant encoders, the MSL twin of
// csrc/core/quant/kquants_encode.h's kq_detail (fit_affine, fit_symmetric,
// fit_symmetric_refined, signed_max) and codec.h's nearest_int: the C++ code
// operation by operation in f32, with every product that feeds a sum or
// difference its own statement, so that no multiply-add can be contracted
// into an fma (the C++ is built with -ffp-contract=off).
#pragma once
#include <metal_stdlib>

#include "quant_codec.h"

using namespace metal;

// ------------------------------------------------------------ helpers
// codec.h's nearest_int: ties to even for |v| < 2^22 (1.5 * 2^23 added, low mantissa bits read).
inline int qnearest_int(float v) {
  const float big = v + 12582912.0f;
  return (as_type<int>(big) & 0x007fffff) - 0x00400000;
}
inline int qclamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
// int -> int8_t / int16_t as C++ converts (modulo 2^8 / 2^16), in int arithmetic.
inline int qwrap_i8(int v) { return ((v & 0xff) ^ 0x80) - 0x80; }
inline int qwrap_i16(int v) { return ((v & 0xffff) ^ 0x8000) - 0x8000; }
// int -> uint8_t as C++ converts it (the low byte; shifts of negative values done unsigned).
inline uchar qbyte(int v) { return uchar(uint(v) & 0xffu); }
// store_f16 then load_f16: the f16 rounding of v, as f32.
inline float qf16_round(float v) { return float(half(v)); }
inline void qcopy_bytes(thread const uchar* s, device uchar* d, int n) {
  for (int j = 0; j < n; ++j) d[j] = s[j];
}
// The value of largest magnitude (first on ties) and that magnitude (kq_detail::signed_max).
inline float qk_signed_max(int n, thread const float* x, thread float& amax) {
  float mx = 0.0f;
  amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = qfabs(x[i]);
    if (ax > amax) {
      amax = ax;
      mx = x[i];
    }
  }
  return mx;
}

// ------------------------------------------------------------ fits
// fit_affine: n values to levels 0..nmax, min (>= 0) subtracted; returns the scale.
inline float qk_fit_affine(int n, int nmax, thread const float* x, thread const float* w, thread uchar* L,
                           thread float& the_min, thread uchar* aux, float rmin, float rdelta, int nstep,
                           bool use_mad) {
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
    sum_w += w[i];
    const float wx = w[i] * x[i];
    sum_x += wx;
  }
  if (mn > 0.0f) mn = 0.0f;
  if (mx == mn) {
    for (int i = 0; i < n; ++i) L[i] = uchar(0);
    the_min = -mn;
    return 0.0f;
  }
  float iscale = float(nmax) / (mx - mn), scale = 1.0f / iscale, best = 0.0f;
  for (int i = 0; i < n; ++i) {
    L[i] = uchar(qclamp_int(qnearest_int(iscale * (x[i] - mn)), 0, nmax));
    const float sl = scale * float(L[i]);
    const float y = sl + mn;
    float diff = y - x[i];
    diff = use_mad ? qfabs(diff) : diff * diff;
    const float wd = w[i] * diff;
    best += wd;
  }
  for (int is = 0; is <= nstep; ++is) {
    const float step = rdelta * float(is);
    const float r = rmin + step;
    iscale = (r + float(nmax)) / (mx - mn);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = qclamp_int(qnearest_int(iscale * (x[i] - mn)), 0, nmax);
      aux[i] = uchar(l);
      const float wl = w[i] * float(l);
      sum_l += wl;
      const float wll = wl * float(l);
      sum_l2 += wll;
      const float wlx = wl * x[i];
      sum_xl += wlx;
    }
    const float p1 = sum_w * sum_l2;
    const float p2 = sum_l * sum_l;
    const float D = p1 - p2;
    if (D > 0.0f) {
      const float a1 = sum_w * sum_xl;
      const float a2 = sum_x * sum_l;
      const float b1 = sum_l2 * sum_x;
      const float b2 = sum_l * sum_xl;
      float this_scale = (a1 - a2) / D;
      float this_min = (b1 - b2) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float err = 0.0f;
      for (int i = 0; i < n; ++i) {
        const float sl = this_scale * float(aux[i]);
        const float y = sl + this_min;
        float diff = y - x[i];
        diff = use_mad ? qfabs(diff) : diff * diff;
        const float wd = w[i] * diff;
        err += wd;
      }
      if (err < best) {
        for (int i = 0; i < n; ++i) L[i] = aux[i];
        best = err;
        scale = this_scale;
        mn = this_min;
      }
    }
  }
  the_min = -mn;
  return scale;
}

// fit_symmetric's sums for inverse scale iscale: sum w x l, sum w l^2 (w = x^2).
inline void qk_symmetric_sums(int n, int nmax, thread const float* x, float iscale, thread float& sumlx,
                              thread float& suml2) {
  sumlx = 0.0f;
  suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = qclamp_int(qnearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    const float wxl = w * x[i] * float(l);
    sumlx += wxl;
    const float wll = w * float(l) * float(l);
    suml2 += wll;
  }
}

// fit_symmetric: levels -nmax..nmax-1 (L gets level + nmax), 18 scales tried around nmax / max.
inline float qk_fit_symmetric(int n, int nmax, thread const float* x, thread uchar* L) {
  float amax;
  const float mx = qk_signed_max(n, x, amax);
  if (amax < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = uchar(0);
    return 0.0f;
  }
  float iscale = float(-nmax) / mx, sumlx, suml2;
  for (int i = 0; i < n; ++i) L[i] = uchar(qclamp_int(qnearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
  qk_symmetric_sums(n, nmax, x, iscale, sumlx, suml2);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float step = 0.1f * float(is);
    const float t = float(nmax) + step;
    iscale = -t / mx;
    qk_symmetric_sums(n, nmax, x, iscale, sumlx, suml2);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = uchar(nmax + qclamp_int(qnearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// fit_symmetric_refined: levels -nmax..nmax-1 refined element by element (n <= 16 here).
inline float qk_fit_symmetric_refined(int n, int nmax, thread const float* x, thread uchar* L) {
  float amax;
  const float mx = qk_signed_max(n, x, amax);
  if (amax < 1e-15f) {
    for (int i = 0; i < n; ++i) L[i] = uchar(0);
    return 0.0f;
  }
  const float iscale = float(-nmax) / mx;
  int lv[32];
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    lv[i] = qclamp_int(qnearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    const float wxl = w * x[i] * float(lv[i]);
    sumlx += wxl;
    const float wll = w * float(lv[i]) * float(lv[i]);
    suml2 += wll;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float wxl = w * x[i] * float(lv[i]);
      float slx = sumlx - wxl;
      if (slx > 0.0f) {
        const float wll = w * float(lv[i]) * float(lv[i]);
        float sl2 = suml2 - wll;
        const int nl = qclamp_int(qnearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (nl != lv[i]) {
          const float wxn = w * x[i] * float(nl);
          slx += wxn;
          const float wnn = w * float(nl) * float(nl);
          sl2 += wnn;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            lv[i] = nl;
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (!changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = uchar(lv[i] + nmax);
  return sumlx / suml2;
}
