// K-quant encoders: llama.cpp's reference algorithms (ggml-quants, "_ref" row
// quantizers without an importance matrix), written from their description:
//   q2_K, q4_K, q5_K: per sub-block an affine fit (scale, min >= 0 subtracted)
//     searched over nstep candidate inverse scales, each refined by weighted least
//     squares (make_qkx2); the sub-block scales and mins then quantized to 4 / 6
//     bits against the block's largest, and the elements re-rounded with those.
//   q3_K, q6_K: per sub-block a symmetric fit, q6_K searching 18 candidate
//     scales around nmax / max with x^2 weights (make_qx), q3_K refining each
//     element's level by coordinate descent (make_q3); sub-block scales to 6 / 8 bits.
//   q8_K: d = max / -127 of the signed extreme, q = round(x / d).
// BRAZE_HD, fixed-size stack arrays only, so a GPU thread can run one block.
#pragma once
#include "core/quant/kquants.h"

namespace braze::quant {

namespace kq_detail {
constexpr float kGroupEps = 1e-15f;

// Affine fit of n values to levels 0..nmax: returns the scale, sets the_min
// (>= 0, subtracted). L gets the levels; aux is scratch of n.
BRAZE_HD float fit_affine(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min,
                          uint8_t* aux, float rmin, float rdelta, int nstep, bool use_mad) {
  float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn) mn = x[i];
    if (x[i] > mx) mx = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (mn > 0) mn = 0;
  if (mx == mn) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -mn;
    return 0.f;
  }
  float iscale = nmax / (mx - mn), scale = 1 / iscale, best = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = uint8_t(clamp_int(nearest_int(iscale * (x[i] - mn)), 0, nmax));
    float diff = scale * L[i] + mn - x[i];
    diff = use_mad ? fabs_(diff) : diff * diff;
    best += w[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (mx - mn);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - mn)), 0, nmax);
      aux[i] = uint8_t(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float err = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * aux[i] + this_min - x[i];
        diff = use_mad ? fabs_(diff) : diff * diff;
        err += w[i] * diff;
      }
      if (err < best) {
        for (int i = 0; i < n; ++i) L[i] = aux[i];
        best = err;
        scale = this_scale;
        mn = this_min;
      }
    }
  }
  *the_min = -mn;
  return scale;
}

// The value of largest magnitude (first on ties) and that magnitude.
BRAZE_HD float signed_max(int n, const float* x, float& amax) {
  float mx = 0;
  amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = fabs_(x[i]);
    if (ax > amax) { amax = ax; mx = x[i]; }
  }
  return mx;
}

// Symmetric fit to levels -nmax..nmax-1 with x^2 weights, trying 18 scales
// around nmax / max; L gets level + nmax. Returns the scale.
BRAZE_HD float fit_symmetric(int n, int nmax, const float* x, uint8_t* L) {
  float amax;
  const float mx = signed_max(n, x, amax);
  if (amax < kGroupEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / mx, sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = uint8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / mx;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = uint8_t(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric fit to levels -nmax..nmax-1 refined element by element (x^2 weights);
// L gets level + nmax. Returns the scale.
BRAZE_HD float fit_symmetric_refined(int n, int nmax, const float* x, uint8_t* L) {
  float amax;
  const float mx = signed_max(n, x, amax);
  if (amax < kGroupEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / mx;
  int lv[32];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    lv[i] = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * lv[i];
    suml2 += w * lv[i] * lv[i];
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * lv[i];
      if (slx > 0) {
        float sl2 = suml2 - w * lv[i] * lv[i];
        const int nl = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (nl != lv[i]) {
          slx += w * x[i] * nl;
          sl2 += w * nl * nl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
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
  for (int i = 0; i < n; ++i) L[i] = uint8_t(lv[i] + nmax);
  return sumlx / suml2;
}

// q4_K / q5_K: eight sub-blocks of 32, levels 0..nmax.
BRAZE_HD void encode_k4(const float* x, uint8_t* b, int nmax, float rmin, int nstep, uint8_t* L) {
  float scales[8], mins[8], w[32];
  uint8_t aux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = sqrt_(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) w[l] = av_x + fabs_(xs[l]);
    scales[j] = fit_affine(32, nmax, xs, w, L + 32 * j, &mins[j], aux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* s = b + 4;
  for (int j = 0; j < 12; ++j) s[j] = 0;
  for (int j = 0; j < 8; ++j) {
    int ls = nearest_int(inv_scale * scales[j]), lm = nearest_int(inv_min * mins[j]);
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      s[j] = uint8_t(ls);
      s[j + 4] = uint8_t(lm);
    } else {
      s[j + 4] = uint8_t((ls & 15) | ((lm & 15) << 4));
      s[j - 4] |= uint8_t((ls >> 4) << 6);
      s[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  store_f16(b, max_scale / 63.f);
  store_f16(b + 2, max_min / 63.f);
  const float d16 = load_f16(b), dmin16 = load_f16(b + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    scale_min_k4(s, j, sc, m);
    const float d = d16 * sc;
    if (!(d != 0.f)) continue;
    const float dm = dmin16 * m;
    for (int ii = 0; ii < 32; ++ii) L[32 * j + ii] = uint8_t(clamp_int(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}
}  // namespace kq_detail

BRAZE_HD void Codec<QFormat::q2_K>::encode(const float* x, uint8_t* b) {
  using namespace kq_detail;
  uint8_t L[256], aux[16];
  float scales[16], mins[16], w[16], max_scale = 0, max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) w[l] = fabs_(x[16 * j + l]);
    scales[j] = fit_affine(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], aux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  uint8_t* sc = b;
  if (max_scale > 0) {
    const float iscale = 15.f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = uint8_t(nearest_int(iscale * scales[j]));
    store_f16(b + 80, max_scale / 15.f);
  } else {
    for (int j = 0; j < 16; ++j) sc[j] = 0;
    store_f16(b + 80, 0.f);
  }
  if (max_min > 0) {
    const float iscale = 15.f / max_min;
    for (int j = 0; j < 16; ++j) sc[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
    store_f16(b + 82, max_min / 15.f);
  } else {
    store_f16(b + 82, 0.f);
  }
  const float d16 = load_f16(b + 80), dmin16 = load_f16(b + 82);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * (sc[j] & 15);
    if (!(d != 0.f)) continue;
    const float dm = dmin16 * (sc[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = uint8_t(clamp_int(nearest_int((x[16 * j + ii] + dm) / d), 0, 3));
  }
  uint8_t* q = b + 16;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * h + l;
      q[32 * h + l] = uint8_t(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
    }
}

BRAZE_HD void Codec<QFormat::q3_K>::encode(const float* x, uint8_t* b) {
  using namespace kq_detail;
  uint8_t L[256];
  float scales[16], amax = 0, max_scale = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
    const float a = fabs_(scales[j]);
    if (a > amax) { amax = a; max_scale = scales[j]; }
  }
  uint8_t* s = b + 96;
  for (int j = 0; j < 12; ++j) s[j] = 0;
  if (max_scale != 0.f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int l = clamp_int(nearest_int(iscale * scales[j]), -32, 31) + 32;
      if (j < 8) s[j] = uint8_t(l & 15);
      else s[j - 8] |= uint8_t((l & 15) << 4);
      s[8 + j % 4] |= uint8_t((l >> 4) << (2 * (j / 4)));
    }
    store_f16(b + 108, 1 / iscale);
  } else {
    store_f16(b + 108, 0.f);
  }
  const float d16 = load_f16(b + 108);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * scale_q3(s, j);
    if (!(d != 0.f)) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = uint8_t(clamp_int(nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
  }
  uint8_t* hm = b;
  for (int j = 0; j < 32; ++j) hm[j] = 0;
  for (int j = 0; j < 256; ++j)
    if (L[j] > 3) {
      hm[j & 31] |= uint8_t(1 << (j >> 5));
      L[j] -= 4;
    }
  uint8_t* q = b + 32;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* Lh = L + 128 * h + l;
      q[32 * h + l] = uint8_t(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
    }
}

BRAZE_HD void Codec<QFormat::q4_K>::encode(const float* x, uint8_t* b) {
  uint8_t L[256];
  kq_detail::encode_k4(x, b, 15, -1.f, 20, L);
  uint8_t* q = b + 16;
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) q[32 * p + l] = uint8_t(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
}

BRAZE_HD void Codec<QFormat::q5_K>::encode(const float* x, uint8_t* b) {
  uint8_t L[256];
  kq_detail::encode_k4(x, b, 31, -0.5f, 15, L);
  uint8_t* qh = b + 16;
  uint8_t* q = b + 48;
  for (int j = 0; j < 32; ++j) qh[j] = 0;
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
      qh[l] |= uint8_t(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
      q[32 * p + l] = uint8_t((lo & 15) | ((hi & 15) << 4));
    }
}

BRAZE_HD void Codec<QFormat::q6_K>::encode(const float* x, uint8_t* b) {
  using namespace kq_detail;
  uint8_t L[256];
  float scales[16], max_scale = 0, max_abs = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
    const float a = fabs_(scales[j]);
    if (a > max_abs) { max_abs = a; max_scale = scales[j]; }
  }
  int8_t* sc = reinterpret_cast<int8_t*>(b + 192);
  if (max_abs < kGroupEps) {
    for (int j = 0; j < 210; ++j) b[j] = 0;
    return;
  }
  const float iscale = -128.f / max_scale;
  store_f16(b + 208, 1 / iscale);
  for (int j = 0; j < 16; ++j) {
    const int l = nearest_int(iscale * scales[j]);
    sc[j] = int8_t(l < 127 ? l : 127);
  }
  const float d16 = load_f16(b + 208);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * sc[j];
    if (!(d != 0.f)) continue;
    for (int ii = 0; ii < 16; ++ii) L[16 * j + ii] = uint8_t(clamp_int(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = b + 64 * h;
    uint8_t* qh = b + 128 + 32 * h;
    const uint8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = uint8_t((Lh[l] & 15) | ((Lh[l + 64] & 15) << 4));
      ql[l + 32] = uint8_t((Lh[l + 32] & 15) | ((Lh[l + 96] & 15) << 4));
      qh[l] = uint8_t((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

BRAZE_HD void Codec<QFormat::q8_K>::encode(const float* x, uint8_t* b) {
  float amax;
  const float mx = kq_detail::signed_max(256, x, amax);
  int8_t* q = reinterpret_cast<int8_t*>(b + 4);
  if (!(amax != 0.f)) {
    for (int j = 0; j < 292; ++j) b[j] = 0;
    return;
  }
  const float iscale = -127.f / mx;
  for (int j = 0; j < 256; ++j) {
    const int v = nearest_int(iscale * x[j]);
    q[j] = int8_t(v < 127 ? v : 127);
  }
  for (int j = 0; j < 16; ++j) {
    int16_t sum = 0;
    for (int i = 0; i < 16; ++i) sum = int16_t(sum + q[16 * j + i]);
    memcpy(b + 260 + 2 * j, &sum, 2);
  }
  const float d = 1 / iscale;
  memcpy(b, &d, 4);
}

}  // namespace braze::quant
