// The MSL twin of the K-quant encoders (csrc/core/quant/kquants_encode.h:
// encode_k4 and the q2_K..q8_K encoders): one super-block of 256 floats in
// thread memory -> its bytes in device memory, on quant_fit.h's searches.
// Levels, scales and packed bytes are built in thread arrays as the C++ builds
// them in the block, then stored; f16 scales re-read as their f16 rounding.
#pragma once
#include <metal_stdlib>

#include "quant_fit.h"

using namespace metal;

// Scale and min j (0..7) of the packed q4_K / q5_K scales (kq_detail::scale_min_k4).
inline void qk_scale_min_k4(thread const uchar* s, int j, thread int& sc, thread int& m) {
  if (j < 4) {
    sc = int(s[j] & 63u);
    m = int(s[j + 4] & 63u);
  } else {
    sc = int((s[j + 4] & 15u) | ((s[j - 4] >> 6) << 4));
    m = int((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// encode_k4: q4_K / q5_K's d, dmin and 12 scale bytes at b; L gets the 256 levels 0..nmax.
inline void qk_encode_k4(thread const float* x, device uchar* b, int nmax, float rmin, int nstep, thread uchar* L) {
  float scales[8], mins[8], w[32];
  uchar aux[32], s[12];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    thread const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) {
      const float sq = xs[l] * xs[l];
      sum_x2 += sq;
    }
    const float av_x = precise::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) w[l] = av_x + qfabs(xs[l]);
    scales[j] = qk_fit_affine(32, nmax, xs, w, L + 32 * j, mins[j], aux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int j = 0; j < 12; ++j) s[j] = uchar(0);
  for (int j = 0; j < 8; ++j) {
    int ls = qnearest_int(inv_scale * scales[j]), lm = qnearest_int(inv_min * mins[j]);
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      s[j] = qbyte(ls);
      s[j + 4] = qbyte(lm);
    } else {
      s[j + 4] = qbyte((ls & 15) | ((lm & 15) << 4));
      s[j - 4] |= uchar(((uint(ls) >> 4) << 6) & 0xffu);
      s[j] |= uchar(((uint(lm) >> 4) << 6) & 0xffu);
    }
  }
  qcopy_bytes(s, b + 4, 12);
  const float d16 = qf16_round(max_scale / 63.0f), dmin16 = qf16_round(max_min / 63.0f);
  qstore_f16(b, d16);
  qstore_f16(b + 2, dmin16);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    qk_scale_min_k4(s, j, sc, m);
    const float d = d16 * float(sc);
    if (!(d != 0.0f)) continue;
    const float dm = dmin16 * float(m);
    for (int ii = 0; ii < 32; ++ii)
      L[32 * j + ii] = uchar(qclamp_int(qnearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
  }
}

// Four 2-bit planes of 128 levels per half (q2_K's and q3_K's qs): 64 bytes at q.
inline void qk_pack_2bit(thread const uchar* L, device uchar* q) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      thread const uchar* Lh = L + 128 * h + l;
      q[32 * h + l] = uchar(Lh[0] | (Lh[32] << 2) | (Lh[64] << 4) | (Lh[96] << 6));
    }
}

inline void qencode_q2_k(thread const float* x, device uchar* b) {
  uchar L[256], aux[16], sc[16];
  float scales[16], mins[16], w[16], max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) w[l] = qfabs(x[16 * j + l]);
    scales[j] = qk_fit_affine(16, 3, x + 16 * j, w, L + 16 * j, mins[j], aux, -0.5f, 0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  float d16 = 0.0f, dmin16 = 0.0f;
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int j = 0; j < 16; ++j) sc[j] = qbyte(qnearest_int(iscale * scales[j]));
    d16 = qf16_round(max_scale / 15.0f);
  } else {
    for (int j = 0; j < 16; ++j) sc[j] = uchar(0);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int j = 0; j < 16; ++j) sc[j] |= uchar((uint(qnearest_int(iscale * mins[j])) << 4) & 0xffu);
    dmin16 = qf16_round(max_min / 15.0f);
  }
  qcopy_bytes(sc, b, 16);
  qstore_f16(b + 80, d16);
  qstore_f16(b + 82, dmin16);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * float(sc[j] & 15u);
    if (!(d != 0.0f)) continue;
    const float dm = dmin16 * float(sc[j] >> 4);
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = uchar(qclamp_int(qnearest_int((x[16 * j + ii] + dm) / d), 0, 3));
  }
  qk_pack_2bit(L, b + 16);
}

// Scale i (0..15) of the packed q3_K scales (kq_detail::scale_q3).
inline int qk_scale_q3(thread const uchar* s, int i) {
  const int lo = (int(s[i & 7]) >> ((i >> 3) << 2)) & 15;
  const int hi = (int(s[8 + (i & 3)]) >> ((i >> 2) << 1)) & 3;
  return (lo | (hi << 4)) - 32;
}

inline void qencode_q3_k(thread const float* x, device uchar* b) {
  uchar L[256], s[12], hm[32];
  float scales[16], amax = 0.0f, max_scale = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = qk_fit_symmetric_refined(16, 4, x + 16 * j, L + 16 * j);
    const float a = qfabs(scales[j]);
    if (a > amax) {
      amax = a;
      max_scale = scales[j];
    }
  }
  for (int j = 0; j < 12; ++j) s[j] = uchar(0);
  float d16 = 0.0f;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int j = 0; j < 16; ++j) {
      const int l = qclamp_int(qnearest_int(iscale * scales[j]), -32, 31) + 32;
      if (j < 8) s[j] = qbyte(l & 15);
      else s[j - 8] |= qbyte((l & 15) << 4);
      s[8 + j % 4] |= qbyte((l >> 4) << (2 * (j / 4)));
    }
    d16 = qf16_round(1.0f / iscale);
  }
  qcopy_bytes(s, b + 96, 12);
  qstore_f16(b + 108, d16);
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * float(qk_scale_q3(s, j));
    if (!(d != 0.0f)) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = uchar(qclamp_int(qnearest_int(x[16 * j + ii] / d), -4, 3) + 4);
  }
  for (int j = 0; j < 32; ++j) hm[j] = uchar(0);
  for (int j = 0; j < 256; ++j)
    if (L[j] > 3u) {
      hm[j & 31] |= uchar(1u << uint(j >> 5));
      L[j] -= uchar(4);
    }
  qcopy_bytes(hm, b, 32);
  qk_pack_2bit(L, b + 32);
}

inline void qencode_q4_k(thread const float* x, device uchar* b) {
  uchar L[256];
  qk_encode_k4(x, b, 15, -1.0f, 20, L);
  device uchar* q = b + 16;
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) q[32 * p + l] = uchar(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
}

inline void qencode_q5_k(thread const float* x, device uchar* b) {
  uchar L[256], qh[32];
  qk_encode_k4(x, b, 31, -0.5f, 15, L);
  device uchar* q = b + 48;
  for (int j = 0; j < 32; ++j) qh[j] = uchar(0);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const uint lo = L[64 * p + l], hi = L[64 * p + 32 + l];
      qh[l] |= uchar(((lo >> 4) << uint(2 * p)) | ((hi >> 4) << uint(2 * p + 1)));
      q[32 * p + l] = uchar((lo & 15u) | ((hi & 15u) << 4));
    }
  qcopy_bytes(qh, b + 16, 32);
}

inline void qencode_q6_k(thread const float* x, device uchar* b) {
  uchar L[256];
  int sc[16];
  float scales[16], max_scale = 0.0f, max_abs = 0.0f;
  for (int j = 0; j < 16; ++j) {
    scales[j] = qk_fit_symmetric(16, 32, x + 16 * j, L + 16 * j);
    const float a = qfabs(scales[j]);
    if (a > max_abs) {
      max_abs = a;
      max_scale = scales[j];
    }
  }
  if (max_abs < 1e-15f) {
    for (int j = 0; j < 210; ++j) b[j] = uchar(0);
    return;
  }
  const float iscale = -128.0f / max_scale;
  const float d16 = qf16_round(1.0f / iscale);
  qstore_f16(b + 208, d16);
  for (int j = 0; j < 16; ++j) {
    const int l = qnearest_int(iscale * scales[j]);
    sc[j] = qwrap_i8(l < 127 ? l : 127);
    b[192 + j] = qbyte(sc[j]);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = d16 * float(sc[j]);
    if (!(d != 0.0f)) continue;
    for (int ii = 0; ii < 16; ++ii)
      L[16 * j + ii] = uchar(qclamp_int(qnearest_int(x[16 * j + ii] / d), -32, 31) + 32);
  }
  for (int h = 0; h < 2; ++h) {
    device uchar* ql = b + 64 * h;
    device uchar* qh = b + 128 + 32 * h;
    thread const uchar* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = uchar((Lh[l] & 15u) | ((Lh[l + 64] & 15u) << 4));
      ql[l + 32] = uchar((Lh[l + 32] & 15u) | ((Lh[l + 96] & 15u) << 4));
      qh[l] = uchar((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

inline void qencode_q8_k(thread const float* x, device uchar* b) {
  float amax;
  const float mx = qk_signed_max(256, x, amax);
  if (!(amax != 0.0f)) {
    for (int j = 0; j < 292; ++j) b[j] = uchar(0);
    return;
  }
  const float iscale = -127.0f / mx;
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) {
      const int v = qnearest_int(iscale * x[16 * j + i]);
      const int q = qwrap_i8(v < 127 ? v : 127);
      b[4 + 16 * j + i] = qbyte(q);
      sum = qwrap_i16(sum + q);
    }
    b[260 + 2 * j] = qbyte(sum);
    b[261 + 2 * j] = qbyte(sum >> 8);
  }
  const uint d = as_type<uint>(1.0f / iscale);
  for (int j = 0; j < 4; ++j) b[j] = uchar((d >> uint(8 * j)) & 0xffu);
}
