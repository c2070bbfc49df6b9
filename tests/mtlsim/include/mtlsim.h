// MSL -> C++ shim for the Metal simulator. Included first by every rewritten
// shader (see rewrite.py); maps the subset of MSL documented in docs/metal.md.
// Plain C++14: the shader translation units are compiled with -std=c++14,
// the C++ dialect MSL is based on.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "mtlsim_abi.h"

namespace mtlsim {

// ---- 16-bit floats ----------------------------------------------------------
inline float bits_to_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline uint16_t float_to_half_bits(float f) {  // round to nearest even
  uint32_t x = float_to_bits(f), sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);          // rounds to inf
  if (ax < 0x38800000u) {                                            // subnormal / zero
    float m = bits_to_float(ax) * 16777216.0f;                      // * 2^24: exact
    uint32_t q = uint32_t(m);                                        // truncation
    float rem = m - float(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t mant = ax & 0x7fffffu, e = (ax >> 23) - 112u;
  uint32_t h = (e << 10) | (mant >> 13), rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}
inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) { float f = float(m) * (1.0f / 16777216.0f); return sign ? -f : f; }
  if (e == 31) return bits_to_float(sign | 0x7f800000u | (m << 13));
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}
inline uint16_t float_to_bfloat_bits(float f) {
  uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

// Storage is the IEEE bit pattern; arithmetic happens in float and is rounded
// back, which is exact for a single +,-,*,/ (float holds > 2p+2 bits).
template <int KIND> struct f16_t {
  uint16_t bits;
  f16_t() = default;
  explicit f16_t(float f) : bits(KIND == 0 ? float_to_half_bits(f) : float_to_bfloat_bits(f)) {}
  explicit f16_t(double d) : f16_t(float(d)) {}
  explicit f16_t(int i) : f16_t(float(i)) {}
  explicit f16_t(unsigned i) : f16_t(float(i)) {}
  operator float() const {
    return KIND == 0 ? half_bits_to_float(bits) : bits_to_float(uint32_t(bits) << 16);
  }
  f16_t& operator+=(f16_t o) { return *this = f16_t(float(*this) + float(o)); }
  f16_t& operator-=(f16_t o) { return *this = f16_t(float(*this) - float(o)); }
  f16_t& operator*=(f16_t o) { return *this = f16_t(float(*this) * float(o)); }
  f16_t& operator/=(f16_t o) { return *this = f16_t(float(*this) / float(o)); }
  f16_t operator-() const { f16_t r; r.bits = uint16_t(bits ^ 0x8000u); return r; }
};
#define MTLSIM_F16_OP(op)                                                           \
  template <int K> f16_t<K> operator op(f16_t<K> a, f16_t<K> b) {                   \
    return f16_t<K>(float(a) op float(b));                                          \
  }
MTLSIM_F16_OP(+) MTLSIM_F16_OP(-) MTLSIM_F16_OP(*) MTLSIM_F16_OP(/)
#undef MTLSIM_F16_OP

}  // namespace mtlsim

typedef mtlsim::f16_t<0> half;
typedef mtlsim::f16_t<1> bfloat;
static_assert(sizeof(half) == 2 && std::is_trivially_copyable<half>::value, "half layout");
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

#include "mtlsim_vec.h"
#include "mtlsim_lib.h"

// Address-space and function qualifiers carry no meaning on the host; the
// rewriter has already turned kernel-scope `threadgroup` arrays into tg_alloc.
#define device
#define constant
#define threadgroup
#define thread
#define kernel
