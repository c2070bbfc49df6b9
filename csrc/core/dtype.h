// Element types braze kernels read and write, and scalar conversions that
// compile for host and device (CUDA) code alike.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define BRAZE_HD __host__ __device__ __forceinline__
#else
#define BRAZE_HD inline
#endif

namespace braze {

enum class DType : uint8_t { f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, u32, u64, b1, other };

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i8: return "int8";
    case DType::i16: return "int16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::u32: return "uint32";
    case DType::u64: return "uint64";
    case DType::b1: return "bool";
    default: return "an unsupported dtype";
  }
}

constexpr int dtype_size(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: case DType::u64: return 8;
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: case DType::i16: case DType::u16: return 2;
    default: return 1;
  }
}

// How an array's elements are stored: a plain dtype (a block of one element),
// or a block code whose `block` logical elements take `block_bytes` bytes and
// decode together (the quant family's formats: GGML q4_0 is 32 elements in 18
// bytes, MX fp4 32 in 17). Byte counts of arrays go through bytes().
struct Format {
  DType dtype;          // the element type; uint8 for block codes
  int32_t block;        // logical elements per block
  int32_t block_bytes;  // bytes per block

  constexpr Format(DType t) : dtype(t), block(1), block_bytes(dtype_size(t)) {}  // NOLINT: implicit on purpose
  constexpr Format(int32_t elements, int32_t bytes) : dtype(DType::u8), block(elements), block_bytes(bytes) {}

  // Bytes of `elements` logical elements; -1 when they are not whole blocks.
  constexpr int64_t bytes(int64_t elements) const {
    return elements % block ? -1 : elements / block * block_bytes;
  }
};

inline bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

// bfloat16 <-> float32 by bits: round to nearest even, NaN stays a quiet NaN.
BRAZE_HD float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
BRAZE_HD uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// IEEE binary16 <-> float32 by bits (portable; SIMD code uses F16C where present).
BRAZE_HD float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112u) << 23) | (man << 13);
  } else if (man == 0) {
    u = sign;
  } else {  // subnormal: renormalize
    int e = -1;
    do { man <<= 1; ++e; } while (!(man & 0x400u));
    u = sign | (uint32_t(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}
BRAZE_HD uint16_t f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);                        // overflow -> inf
  if (a < 0x38800000u) {                                                        // subnormal or zero
    if (a < 0x33000000u) return uint16_t(sign);
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1u);  // rebias exponent, round to nearest even
  return uint16_t(sign | (r >> 13));
}

}  // namespace braze
