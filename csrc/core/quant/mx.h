// OCP Microscaling (MX v1.0) element codes and e8m0 block scales, written once
// for the CPU kernels and (under nvcc, through BRAZE_HD) the CUDA ones: scalar,
// no heap, no exceptions, no library calls beyond memcpy.
//
// Element codes (1 sign bit, E exponent bits, M mantissa bits, bias):
//   e2m1 (fp4, max 6), e2m3 (fp6, max 7.5), e3m2 (fp6, max 28): no inf, no NaN;
//   e4m3 (fp8, OCP "e4m3fn": max 448, S.1111.111 is NaN, no inf);
//   e5m2 (fp8, IEEE-like: max 57344, inf and NaN).
// Encoding rounds to nearest even and saturates: a finite value or an inf
// beyond the largest finite code becomes +-max (as PTX cvt .satfinite does);
// NaN becomes the format's NaN, or +0 in a format without one (MX blocks carry
// NaN in their scale instead). -0 keeps its sign.
//
// A block of 32 elements shares one e8m0 scale X = 2^(code - 127) (code 255:
// NaN). The scale exponent comes from the block's largest magnitude amax:
//   floor (OCP MX v1.0, sec. 6.3): floor(log2 amax) - emax_elem; values whose
//         ratio to X exceeds the element's max saturate;
//   ceil:  the smallest exponent with amax / X <= max_elem (nothing saturates);
//   round: floor applied to amax rounded to the element's mantissa width
//         (a block saturates only by less than half an element step).
// Clamped to [-127, 127]. A block of zeros gets code 0; a block holding an inf
// or NaN gets code 255 (it decodes to NaN throughout).
// Packing: elements LSB first, a continuous little-endian bit stream
// (fp4: element 2i in the low nibble of byte i; fp6: 4 elements in 3 bytes).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace braze::quant {

enum class Elem : uint8_t { e2m1, e2m3, e3m2, e4m3, e5m2 };

// bits: code width; emax: exponent of the largest normal; max_code: the
// largest finite magnitude; nan_code: what NaN encodes to (0: no NaN).
template <Elem E> struct ElemCode;
template <> struct ElemCode<Elem::e2m1> {
  static constexpr int bits = 4, mbits = 1, bias = 1, emax = 2;
  static constexpr uint32_t max_code = 0x7, nan_code = 0;
};
template <> struct ElemCode<Elem::e2m3> {
  static constexpr int bits = 6, mbits = 3, bias = 1, emax = 2;
  static constexpr uint32_t max_code = 0x1f, nan_code = 0;
};
template <> struct ElemCode<Elem::e3m2> {
  static constexpr int bits = 6, mbits = 2, bias = 3, emax = 4;
  static constexpr uint32_t max_code = 0x1f, nan_code = 0;
};
template <> struct ElemCode<Elem::e4m3> {
  static constexpr int bits = 8, mbits = 3, bias = 7, emax = 8;
  static constexpr uint32_t max_code = 0x7e, nan_code = 0x7f;
};
template <> struct ElemCode<Elem::e5m2> {
  static constexpr int bits = 8, mbits = 2, bias = 15, emax = 15;
  static constexpr uint32_t max_code = 0x7b, nan_code = 0x7e;
};

BRAZE_HD uint32_t f32_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
BRAZE_HD float bits_f32(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}

// x -> the element code (sign in the top bit of its `bits`), by integer steps:
// the f32 significand shifted to the target's quantum at max(exponent, emin),
// rounded to nearest even; a carry out of the mantissa moves to the exponent.
template <Elem E> BRAZE_HD uint32_t encode_elem(float x) {
  using C = ElemCode<E>;
  constexpr int emin = 1 - C::bias;
  const uint32_t u = f32_bits(x);
  const uint32_t sign = (u >> 31) << (C::bits - 1);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return C::nan_code ? (sign | C::nan_code) : 0u;
  int e = int(a >> 23) - 127;
  uint32_t m = a & 0x7fffffu;
  if (a >= 0x00800000u) m |= 0x800000u;
  else e = -126;  // f32 subnormal
  const int eq = e > emin ? e : emin;
  const int sh = 23 - C::mbits + (eq - e);
  uint32_t r = 0;
  if (sh < 32) {
    r = m >> sh;
    const uint32_t rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
  }
  uint32_t code = (uint32_t(eq - emin) << C::mbits) + r;
  if (code > C::max_code) code = C::max_code;
  return sign | code;
}

template <Elem E> BRAZE_HD float decode_elem(uint32_t c) {
  using C = ElemCode<E>;
  constexpr int emin = 1 - C::bias;
  const uint32_t sign = ((c >> (C::bits - 1)) & 1u) << 31;
  const uint32_t mag = c & ((1u << (C::bits - 1)) - 1u);
  const uint32_t exp = mag >> C::mbits, man = mag & ((1u << C::mbits) - 1u);
  if (E == Elem::e4m3 && mag == 0x7fu) return bits_f32(sign | 0x7fc00000u);
  if (E == Elem::e5m2 && exp == 31u) return bits_f32(sign | (man ? 0x7fc00000u : 0x7f800000u));
  if (exp == 0) {  // subnormal: man * 2^(emin - mbits), exact
    const float q = bits_f32(uint32_t(emin - C::mbits + 127) << 23);
    return bits_f32(sign | f32_bits(float(man) * q));
  }
  return bits_f32(sign | (uint32_t(int(exp) + emin - 1 + 127) << 23) | (man << (23 - C::mbits)));
}

// ------------------------------------------------------------------ e8m0

enum class ScaleRule : uint8_t { floor = 0, ceil = 1, round = 2 };

BRAZE_HD float e8m0_to_f32(uint32_t s) {
  if (s == 0xffu) return bits_f32(0x7fc00000u);
  return bits_f32(s ? s << 23 : 0x00400000u);  // code 0 is 2^-127, an f32 subnormal
}

// |x|'s bits; the unsigned max of these over a block is amax, and NaN (any
// payload) or inf when the block holds one, as integers order them above
// every finite magnitude.
BRAZE_HD uint32_t abs_bits(float x) { return f32_bits(x) & 0x7fffffffu; }

// The e8m0 code of a block of elements E whose largest |x| has bits amax.
template <Elem E> BRAZE_HD uint32_t mx_scale_code(uint32_t amax, ScaleRule rule) {
  using C = ElemCode<E>;
  if (amax >= 0x7f800000u) return 0xffu;
  if (amax == 0) return 0;
  // f32 mantissa field of max_elem / 2^emax (6 = 1.5 * 4 -> 0x400000).
  constexpr uint32_t max_man = (C::max_code & ((1u << C::mbits) - 1u)) << (23 - C::mbits);
  uint32_t b = amax;
  if (rule == ScaleRule::round) b += 1u << (22 - C::mbits);
  int e = int(b >> 23) - 127;
  if ((b >> 23) == 0) e = -127;  // below every representable scale: clamped anyway
  int s = e - C::emax;
  if (rule == ScaleRule::ceil && (amax & 0x7fffffu) > max_man) ++s;
  if (s < -127) s = -127;
  if (s > 127) s = 127;
  return uint32_t(s + 127);
}

// 1 / X for a finite scale code: 2^(127 - code), exact (code <= 254 gives >= 2^-127).
BRAZE_HD float e8m0_inverse(uint32_t s) {
  const int e = 127 - int(s);
  return e >= -126 ? bits_f32(uint32_t(e + 127) << 23) : bits_f32(0x00400000u);
}

// Element i of a packed row (LSB-first bit stream of `bits`-wide codes).
template <int Bits> BRAZE_HD uint32_t unpack_code(const uint8_t* row, int64_t i) {
  if (Bits == 8) return row[i];
  if (Bits == 4) return (row[i >> 1] >> ((i & 1) * 4)) & 0xfu;
  const int64_t bit = i * Bits;
  const uint32_t two = uint32_t(row[bit >> 3]) | (uint32_t(row[(bit >> 3) + 1]) << 8);
  return (two >> (bit & 7)) & ((1u << Bits) - 1u);
}

// Eight consecutive codes from element k0 (a multiple of 8): Bits bytes.
template <int Bits> BRAZE_HD void unpack8(const uint8_t* row, int64_t k0, uint32_t c[8]) {
  const uint8_t* p = row + k0 / 8 * Bits;
  uint64_t v = 0;
  for (int j = 0; j < Bits; ++j) v |= uint64_t(p[j]) << (8 * j);
  for (int j = 0; j < 8; ++j) c[j] = uint32_t(v >> (j * Bits)) & ((1u << Bits) - 1u);
}
template <int Bits> BRAZE_HD void pack8(const uint32_t c[8], uint8_t* row, int64_t k0) {
  uint64_t v = 0;
  for (int j = 0; j < 8; ++j) v |= uint64_t(c[j]) << (j * Bits);
  uint8_t* p = row + k0 / 8 * Bits;
  for (int j = 0; j < Bits; ++j) p[j] = uint8_t(v >> (8 * j));
}

constexpr int kMxBlock = 32;

// Decode API: elements k0 .. k0 + 7 (k0 a multiple of 8) of one row, from the
// row's packed codes and its e8m0 scales (one per 32 elements).
template <Elem E> BRAZE_HD void mx_decode8(const uint8_t* row, const uint8_t* scales, int64_t k0, float out[8]) {
  uint32_t c[8];
  unpack8<ElemCode<E>::bits>(row, k0, c);
  const float x = e8m0_to_f32(scales[k0 / kMxBlock]);
  for (int j = 0; j < 8; ++j) out[j] = decode_elem<E>(c[j]) * x;  // exact but for NaN
}

// Encode API: one block of 32 floats -> its packed codes (written at element
// k0 of `row`, a multiple of 32) and its scale code (returned).
template <Elem E> BRAZE_HD uint32_t mx_encode_block(const float* x, ScaleRule rule, uint8_t* row, int64_t k0) {
  uint32_t amax = 0;
  for (int j = 0; j < kMxBlock; ++j) {
    const uint32_t a = abs_bits(x[j]);
    amax = a > amax ? a : amax;
  }
  const uint32_t s = mx_scale_code<E>(amax, rule);
  const float inv = s == 0xffu ? 0.f : e8m0_inverse(s);
  for (int j0 = 0; j0 < kMxBlock; j0 += 8) {
    uint32_t c[8];
    for (int j = 0; j < 8; ++j) c[j] = s == 0xffu ? 0u : encode_elem<E>(x[j0 + j] * inv);
    pack8<ElemCode<E>::bits>(c, row, k0 + j0);
  }
  return s;
}

}  // namespace braze::quant
