// The MSL twin of the quant codecs (csrc/core/quant/*.h): element codes
// (mx.h), e8m0 / e4m3 scales, and an 8-element decode of every format.
// Arithmetic is the C++ codecs' operation by operation in float32, with no
// fused multiply-adds (the metallib is built with -fno-fast-math; the simulator
// compiles with -ffp-contract=off), so results are bit-exact with the CPU.
#pragma once
#include <metal_stdlib>

#include "quant_params.h"

using namespace metal;

// ------------------------------------------------------------ bytes
inline uint qload_u16(device const uchar* p) { return uint(p[0]) | (uint(p[1]) << 8); }
inline uint qload_u32(device const uchar* p) {
  return uint(p[0]) | (uint(p[1]) << 8) | (uint(p[2]) << 16) | (uint(p[3]) << 24);
}
inline float qload_f16(device const uchar* p) { return float(as_type<half>(ushort(qload_u16(p)))); }
inline float qload_f32(device const uchar* p) { return as_type<float>(qload_u32(p)); }
inline void qstore_f16(device uchar* p, float v) {
  const ushort h = as_type<ushort>(half(v));
  p[0] = uchar(h & 0xffu);
  p[1] = uchar(h >> 8);
}
inline float qbits_f32(uint u) { return as_type<float>(u); }
inline uint qf32_bits(float x) { return as_type<uint>(x); }
inline uint qabs_bits(float x) { return qf32_bits(x) & 0x7fffffffu; }
inline float qfabs(float v) { return v < 0.0f ? -v : v; }

// ------------------------------------------------------------ element codes
// 0 e2m1, 1 e2m3, 2 e3m2, 3 e4m3 (e4m3fn), 4 e5m2: as mx.h's ElemCode.
#define QE_E2M1 0
#define QE_E2M3 1
#define QE_E3M2 2
#define QE_E4M3 3
#define QE_E5M2 4

template <int E> struct QElem;
template <> struct QElem<QE_E2M1> { enum { bits = 4, mbits = 1, bias = 1, emax = 2, max_code = 0x7, nan_code = 0 }; };
template <> struct QElem<QE_E2M3> { enum { bits = 6, mbits = 3, bias = 1, emax = 2, max_code = 0x1f, nan_code = 0 }; };
template <> struct QElem<QE_E3M2> { enum { bits = 6, mbits = 2, bias = 3, emax = 4, max_code = 0x1f, nan_code = 0 }; };
template <> struct QElem<QE_E4M3> { enum { bits = 8, mbits = 3, bias = 7, emax = 8, max_code = 0x7e, nan_code = 0x7f }; };
template <> struct QElem<QE_E5M2> { enum { bits = 8, mbits = 2, bias = 15, emax = 15, max_code = 0x7b, nan_code = 0x7e }; };

// x -> code: the f32 significand shifted to the target's quantum, rounded to
// nearest even, saturating; NaN -> the format's NaN (or 0), -0 keeps its sign.
template <int E> inline uint qencode_elem(float x) {
  typedef QElem<E> C;
  const int emin = 1 - int(C::bias);
  const uint u = qf32_bits(x);
  const uint sign = (u >> 31) << (uint(C::bits) - 1u);
  const uint a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint(C::nan_code) ? (sign | uint(C::nan_code)) : 0u;
  int e = int(a >> 23) - 127;
  uint m = a & 0x7fffffu;
  if (a >= 0x00800000u) m |= 0x800000u;
  else e = -126;
  const int eq = e > emin ? e : emin;
  const int sh = 23 - int(C::mbits) + (eq - e);
  uint r = 0u;
  if (sh < 32) {
    r = m >> uint(sh);
    const uint rem = m & ((1u << uint(sh)) - 1u), halfq = 1u << uint(sh - 1);
    if (rem > halfq || (rem == halfq && (r & 1u))) ++r;
  }
  uint code = (uint(eq - emin) << uint(C::mbits)) + r;
  if (code > uint(C::max_code)) code = uint(C::max_code);
  return sign | code;
}

template <int E> inline float qdecode_elem(uint c) {
  typedef QElem<E> C;
  const int emin = 1 - int(C::bias);
  const uint sign = ((c >> (uint(C::bits) - 1u)) & 1u) << 31;
  const uint mag = c & ((1u << (uint(C::bits) - 1u)) - 1u);
  const uint ex = mag >> uint(C::mbits), man = mag & ((1u << uint(C::mbits)) - 1u);
  if (E == QE_E4M3 && mag == 0x7fu) return qbits_f32(sign | 0x7fc00000u);
  if (E == QE_E5M2 && ex == 31u) return qbits_f32(sign | (man ? 0x7fc00000u : 0x7f800000u));
  if (ex == 0u) {
    const float q = qbits_f32(uint(emin - int(C::mbits) + 127) << 23);
    return qbits_f32(sign | qf32_bits(float(man) * q));
  }
  return qbits_f32(sign | (uint(int(ex) + emin - 1 + 127) << 23) | (man << (23u - uint(C::mbits))));
}

// ------------------------------------------------------------ scales
inline float qe8m0_to_f32(uint s) {
  if (s == 0xffu) return qbits_f32(0x7fc00000u);
  return qbits_f32(s ? s << 23 : 0x00400000u);
}

// mx.h's mx_scale_code: the e8m0 code of a block whose largest |x| has bits amax.
template <int E> inline uint qmx_scale_code(uint amax, uint rule) {
  typedef QElem<E> C;
  if (amax >= 0x7f800000u) return 0xffu;
  if (amax == 0u) return 0u;
  const uint max_man = (uint(C::max_code) & ((1u << uint(C::mbits)) - 1u)) << (23u - uint(C::mbits));
  uint b = amax;
  if (rule == 2u) b += 1u << (22u - uint(C::mbits));
  int e = int(b >> 23) - 127;
  if ((b >> 23) == 0u) e = -127;
  int s = e - int(C::emax);
  if (rule == 1u && (amax & 0x7fffffu) > max_man) ++s;
  s = s < -127 ? -127 : s;
  s = s > 127 ? 127 : s;
  return uint(s + 127);
}

inline float qe8m0_inverse(uint s) {
  const int e = 127 - int(s);
  return e >= -126 ? qbits_f32(uint(e + 127) << 23) : qbits_f32(0x00400000u);
}

// GGUF's unsigned e4m3 sub-scale (nvfp4.h's ue4m3_to_f32).
inline float que4m3_to_f32(uint b) {
  if (b == 0x7fu) return 0.0f;
  const uint ex = (b >> 3) & 0xfu, man = b & 7u;
  if (ex == 0u) return float(man) * qbits_f32(uint(-9 + 127) << 23);
  return qbits_f32(((ex - 7u + 127u) << 23) | (man << 20));
}
inline float qe2m1_gguf(uint q) { return qdecode_elem<QE_E2M1>(q) + 0.0f; }

// ------------------------------------------------------------ packed codes
// Eight consecutive BITS-wide codes from element k0 (a multiple of 8): BITS bytes.
template <int BITS> inline void qunpack8(device const uchar* row, ulong k0, thread uint* c) {
  device const uchar* p = row + k0 / 8ul * ulong(BITS);
  ulong v = 0ul;
  for (int j = 0; j < BITS; ++j) v |= ulong(p[j]) << ulong(8 * j);
  for (int j = 0; j < 8; ++j) c[j] = uint(v >> ulong(j * BITS)) & ((1u << uint(BITS)) - 1u);
}
template <int BITS> inline void qpack8(thread const uint* c, device uchar* row, ulong k0) {
  ulong v = 0ul;
  for (int j = 0; j < 8; ++j) v |= ulong(c[j]) << ulong(j * BITS);
  device uchar* p = row + k0 / 8ul * ulong(BITS);
  for (int j = 0; j < BITS; ++j) p[j] = uchar((v >> ulong(8 * j)) & 0xfful);
}

// ------------------------------------------------------------ GGML blocks
inline int qiq4_value(uint q) {
  const char kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return int(kv[q]);
}

// k4 scale / min j (0..7) of q4_K / q5_K.
inline void qscale_min_k4(device const uchar* s, uint j, thread int& sc, thread int& m) {
  if (j < 4u) {
    sc = int(s[j] & 63u);
    m = int(s[j + 4u] & 63u);
  } else {
    sc = int((s[j + 4u] & 15u) | ((s[j - 4u] >> 6) << 4));
    m = int((s[j + 4u] >> 4) | ((s[j] >> 6) << 4));
  }
}
inline int qscale_q3(device const uchar* s, uint i) {
  const uint lo = (s[i & 7u] >> ((i >> 3) << 2)) & 15u;
  const uint hi = (s[8u + (i & 3u)] >> ((i >> 2) << 1)) & 3u;
  return int(lo | (hi << 4)) - 32;
}

// Elements k0 .. k0 + 7 of a row of blocks-layout format F (k0 a multiple of
// 8): the C++ codec's formula with j (or e) the chunk's index in its block.
template <int F> inline void qdecode_blocks8(device const uchar* row, ulong k0, thread float* out) {
  const uint B = (F == QF_Q8_0 || F == QF_Q4_0 || F == QF_Q4_1 || F == QF_Q5_0 || F == QF_Q5_1 ||
                  F == QF_IQ4_NL || F == QF_MXFP4_GGUF) ? 32u : F == QF_NVFP4_GGUF ? 64u : 256u;
  const uint BB = F == QF_Q8_0 ? 34u : F == QF_Q4_0 ? 18u : F == QF_Q4_1 ? 20u : F == QF_Q5_0 ? 22u
                : F == QF_Q5_1 ? 24u : F == QF_Q2_K ? 84u : F == QF_Q3_K ? 110u : F == QF_Q4_K ? 144u
                : F == QF_Q5_K ? 176u : F == QF_Q6_K ? 210u : F == QF_Q8_K ? 292u : F == QF_IQ4_NL ? 18u
                : F == QF_IQ4_XS ? 136u : F == QF_MXFP4_GGUF ? 17u : 36u;
  device const uchar* b = row + (k0 / ulong(B)) * ulong(BB);
  const uint e = uint(k0 % ulong(B));
  const uint lo = e & 15u, nsh = (e >> 4) << 2;  // legacy 32-blocks: byte and nibble of element e
  if (F == QF_Q8_0) {
    const float d = qload_f16(b);
    for (uint i = 0; i < 8u; ++i) out[i] = float(char(b[2u + e + i])) * d;
  } else if (F == QF_Q4_0) {
    const float d = qload_f16(b);
    for (uint i = 0; i < 8u; ++i) out[i] = d * float(int((b[2u + lo + i] >> nsh) & 15u) - 8);
  } else if (F == QF_Q4_1) {
    const float d = qload_f16(b), m = qload_f16(b + 2);
    for (uint i = 0; i < 8u; ++i) {
      const float p = d * float((b[4u + lo + i] >> nsh) & 15u);
      out[i] = p + m;
    }
  } else if (F == QF_Q5_0) {
    const float d = qload_f16(b);
    const uint qh = qload_u32(b + 2) >> e;
    for (uint i = 0; i < 8u; ++i)
      out[i] = d * float(int(((b[6u + lo + i] >> nsh) & 15u) | (((qh >> i) & 1u) << 4)) - 16);
  } else if (F == QF_Q5_1) {
    const float d = qload_f16(b), m = qload_f16(b + 2);
    const uint qh = qload_u32(b + 4) >> e;
    for (uint i = 0; i < 8u; ++i) {
      const float p = d * float(((b[8u + lo + i] >> nsh) & 15u) | (((qh >> i) & 1u) << 4));
      out[i] = p + m;
    }
  } else if (F == QF_Q2_K) {
    const float d = qload_f16(b + 80), dmin = qload_f16(b + 82);
    const uint sc = b[e >> 4];
    const float dl = d * float(sc & 15u), ml = dmin * float(sc >> 4);
    device const uchar* q = b + 16u + ((e >> 7) << 5) + (e & 31u);
    const uint sh = ((e & 127u) >> 5) << 1;
    for (uint i = 0; i < 8u; ++i) {
      const float p = dl * float((q[i] >> sh) & 3u);
      out[i] = p - ml;
    }
  } else if (F == QF_Q3_K) {
    const float dl = qload_f16(b + 108) * float(qscale_q3(b + 96, e >> 4));
    device const uchar* q = b + 32u + ((e >> 7) << 5) + (e & 31u);
    device const uchar* h = b + (e & 31u);
    const uint sh = ((e & 127u) >> 5) << 1, hb = e >> 5;
    for (uint i = 0; i < 8u; ++i) out[i] = dl * float(int((q[i] >> sh) & 3u) - (((h[i] >> hb) & 1u) ? 0 : 4));
  } else if (F == QF_Q4_K || F == QF_Q5_K) {
    int sc, m;
    qscale_min_k4(b + 4, e >> 5, sc, m);
    const float dl = qload_f16(b) * float(sc), ml = qload_f16(b + 2) * float(m);
    const uint sh = ((e >> 5) & 1u) << 2, hb = e >> 5;
    device const uchar* q = b + (F == QF_Q4_K ? 16u : 48u) + ((e >> 6) << 5) + (e & 31u);
    device const uchar* h = b + 16u + (e & 31u);
    for (uint i = 0; i < 8u; ++i) {
      const uint v = ((q[i] >> sh) & 15u) | (F == QF_Q5_K ? (((h[i] >> hb) & 1u) << 4) : 0u);
      const float p = dl * float(v);
      out[i] = p - ml;
    }
  } else if (F == QF_Q6_K) {
    const float dl = qload_f16(b + 208) * float(char(b[192u + (e >> 4)]));
    const uint r = e & 127u;
    device const uchar* ql = b + ((e >> 7) << 6) + (r & 63u);
    device const uchar* qh = b + 128u + ((e >> 7) << 5) + (r & 31u);
    const uint shl = (r >> 6) << 2, shh = (r >> 5) << 1;
    for (uint i = 0; i < 8u; ++i) out[i] = dl * float(int(((ql[i] >> shl) & 15u) | (((qh[i] >> shh) & 3u) << 4)) - 32);
  } else if (F == QF_Q8_K) {
    const float d = qload_f32(b);
    for (uint i = 0; i < 8u; ++i) out[i] = d * float(char(b[4u + e + i]));
  } else if (F == QF_IQ4_NL) {
    const float d = qload_f16(b);
    for (uint i = 0; i < 8u; ++i) out[i] = d * float(qiq4_value((b[2u + lo + i] >> nsh) & 15u));
  } else if (F == QF_IQ4_XS) {
    const uint ib = e >> 5;
    const uint ls = ((b[4u + (ib >> 1)] >> ((ib & 1u) << 2)) & 15u) | (((qload_u16(b + 2) >> (2u * ib)) & 3u) << 4);
    const float dl = qload_f16(b) * float(int(ls) - 32);
    device const uchar* q = b + 8u + (ib << 4) + (e & 15u);
    const uint sh = ((e >> 4) & 1u) << 2;
    for (uint i = 0; i < 8u; ++i) out[i] = dl * float(qiq4_value((q[i] >> sh) & 15u));
  } else if (F == QF_MXFP4_GGUF) {
    const uint x = b[0];
    const float hf = qbits_f32(x < 2u ? 0x00200000u << x : (x - 1u) << 23);  // 2^(x - 128)
    for (uint i = 0; i < 8u; ++i) out[i] = hf * (2.0f * qe2m1_gguf((b[1u + lo + i] >> nsh) & 15u));
  } else {  // QF_NVFP4_GGUF
    const uint sub = e / 16u, high = (e % 16u) / 8u;
    const float d = que4m3_to_f32(b[sub]);
    device const uchar* q = b + 4u + 8u * sub;
    for (uint i = 0; i < 8u; ++i) out[i] = qe2m1_gguf((q[i] >> (4u * high)) & 15u) * d;
  }
}

// The MX element code of a format id.
template <int F> struct QMxElem {
  enum { e = F == QF_MXFP4 ? QE_E2M1 : F == QF_MXFP6_E2M3 ? QE_E2M3 : F == QF_MXFP6_E3M2 ? QE_E3M2
           : F == QF_MXFP8_E4M3 || F == QF_FP8_E4M3 ? QE_E4M3 : QE_E5M2 };
};

// fp8 weights: the scale index of element (n, k) (fp8.h's fp8_scale_index).
inline ulong qfp8_scale_index(uint granularity, ulong n, ulong k, ulong cols, uint stride) {
  if (granularity == QUANT_FP8_TENSOR) return 0ul;
  if (granularity == QUANT_FP8_ROW) return n;
  (void)cols;
  return n / 128ul * ulong(stride) + k / 128ul;
}

// One affine scale / bias of QUANT_SDT_* dtype, as f32.
inline float qload_sdt(device const uchar* p, ulong i, uint sdt) {
  if (sdt == QUANT_SDT_F32) return qload_f32(p + 4ul * i);
  if (sdt == QUANT_SDT_F16) return qload_f16(p + 2ul * i);
  return qbits_f32(qload_u16(p + 2ul * i) << 16);
}
