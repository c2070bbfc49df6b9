// The quant family's split-layout formats on the CPU (MX, nvfp4, fp8, int8,
// MLX affine: codecs in csrc/core/quant/) and quantize_activations. Rows over
// the thread pool; element codes decoded through small tables and encoded in
// W-lane vectors (encode_v below, bit-identical to mx.h's scalar encode_elem).
#include "cpu/quant_mx.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "core/quant/affine.h"
#include "core/quant/fp8.h"
#include "core/quant/int8.h"
#include "core/quant/mx.h"
#include "core/quant/nvfp4.h"
#include "cpu/quant_store.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using quant::Elem;
using quant::ElemCode;
using quant::QFormat;

typedef uint8_t vb __attribute__((vector_size(W)));

template <Elem E> struct Table {
  float v[1 << ElemCode<E>::bits];
  Table() {
    for (uint32_t c = 0; c < (1u << ElemCode<E>::bits); ++c) v[c] = quant::decode_elem<E>(c);
  }
};
template <Elem E> const float* table() {
  static const Table<E> t;
  return t.v;
}

// ------------------------------------------------------------ vector encode
// encode_elem for W lanes: |x| clamped to max (inf too), then rounded to
// nearest even at the target's quantum: normals by adding half an ulp of the
// target mantissa (plus the kept bit's parity) to the f32 bits, subnormals by
// adding 2^(emin - m + 23), whose ulp is the subnormal quantum.
template <Elem E> inline vu encode_v(vf x) {
  using C = ElemCode<E>;
  constexpr int emin = 1 - C::bias, m = C::mbits;
  const vu u = (vu)x;
  const vu sign = (u >> 31) << (C::bits - 1);
  const vu a = u & 0x7fffffffu;
  const float top = quant::decode_elem<E>(C::max_code);
  const vf ax = vmin((vf)a, splat(top));  // NaN lanes are fixed below
  const vu ab = (vu)ax;
  const vu nrm = ((ab + ((1u << (22 - m)) - 1u) + ((ab >> (23 - m)) & 1u)) >> (23 - m)) - uint32_t((127 - C::bias) << m);
  const float magic = quant::bits_f32(uint32_t(emin - m + 23 + 127) << 23);
  const vu sub = (vu)(ax + magic) - quant::f32_bits(magic);
  const vi small = (vi)(ab < uint32_t((emin + 127) << 23));
  vu code = (vu)(((vi)sub & small) | ((vi)nrm & ~small));
  const vi nan = (vi)(a > 0x7f800000u);
  code = (vu)(((vi)(sign | code) & ~nan) | ((vi)(vu{} + (C::nan_code ? C::nan_code : 0u)) & nan));
  if (C::nan_code) code |= (vu)((vi)sign & nan);
  return code;
}

// The low byte of each lane, stored as W bytes (a byte shuffle: GCC lowers a
// convertvector of u32 lanes to u8 one lane at a time).
inline void store_codes(uint8_t* p, vu c) {
  typedef uint8_t vbytes __attribute__((vector_size(4 * W)));
  const vbytes b = (vbytes)c;
#if defined(__AVX512F__)
  const vb lo = __builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
#elif defined(__AVX__)
  const vb lo = __builtin_shufflevector(b, b, 0, 4, 8, 12, 16, 20, 24, 28);
#else
  const vb lo = __builtin_shufflevector(b, b, 0, 4, 8, 12);
#endif
  memcpy(p, &lo, W);
}

inline vu abs_bits_v(vf x) { return (vu)x & 0x7fffffffu; }
inline uint32_t hmax_u(vu v) {
  uint32_t m = 0;
  for (int i = 0; i < W; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

// amax bits (NaN-propagating) of n elements of a row.
template <class D> uint32_t row_amax(const typename D::T* x, int64_t n) {
  vu m = vu{};
  lanes(n, [&](int64_t i, int64_t c) {
    const vu a = abs_bits_v(ld<D>(x, i, c));
    m = (vu)((vi)a > (vi)m ? (vi)a : (vi)m);  // |x| bits are < 2^31: signed compare is exact
  });
  return hmax_u(m);
}

// Converts a float buffer of n (a multiple of W) to the output dtype.
template <class D, bool Stream> inline void put_buf(typename D::T* dst, const float* buf, int n) {
  for (int i = 0; i < n; i += W) put<D, Stream>(dst + i, load<F32>(buf + i));
}

template <class D> inline void get(float* buf, const typename D::T* src, int n) {
  for (int i = 0; i < n; i += W) store<F32>(buf + i, load<D>(src + i));
}

// ------------------------------------------------------------ vector decode
// decode_elem for W lanes: a normal code's exponent and mantissa shifted into
// f32 position with the bias difference added; subnormal codes through an
// int -> float conversion (no reliance on denormal inputs, which a DAZ mode
// would read as 0); e4m3's NaN and e5m2's inf / NaN selected in.
template <Elem E> inline vf decode_v(vu c) {
  using C = ElemCode<E>;
  constexpr int m = C::mbits, emin = 1 - C::bias;
  const vu sign = (c >> (C::bits - 1)) << 31;
  const vu mag = c & ((1u << (C::bits - 1)) - 1u);
  const vu exp = mag >> m, man = mag & ((1u << m) - 1u);
  const vu normal = (mag + uint32_t((127 - C::bias) << m)) << (23 - m);
  const vf sub = __builtin_convertvector((vi)man, vf) * quant::bits_f32(uint32_t(emin - m + 127) << 23);
  const vi is_sub = (vi)(exp == 0u);
  vu b = (vu)(((vi)sub & is_sub) | ((vi)normal & ~is_sub));
  if constexpr (E == Elem::e4m3) {
    const vi nan = (vi)(mag == 0x7fu);
    b = (vu)(((vi)(vu{} + 0x7fc00000u) & nan) | ((vi)b & ~nan));
  } else if constexpr (E == Elem::e5m2) {
    const vi special = (vi)(exp == 31u);
    b = (vu)(((vi)(0x7f800000u | (man << 21) | ((vu)(man != 0u) & 0x400000u)) & special) | ((vi)b & ~special));
  }
  return (vf)(b | sign);
}

// decode_v<E> as a callable; e2m1 in the AVX-512 build: one vpermps from the
// codec's 16 values (decode_elem, which decode_v equals) held in a register.
template <Elem E> struct CodeDecoder {
  vf operator()(vu c) const { return decode_v<E>(c); }
};
#if defined(__AVX512F__)
template <> struct CodeDecoder<Elem::e2m1> {
  __m512 t = _mm512_loadu_ps(table<Elem::e2m1>());
  vf operator()(vu c) const { return (vf)_mm512_permutexvar_ps((__m512i)c, t); }
};
// e4m3 as decode_v with mask registers: a normal code's bits are (mag << 20) + (120 << 23);
// exponent 0 lanes get man * 2^-9 (a masked multiply), mag 0x7f the quiet NaN, then the sign.
template <> struct CodeDecoder<Elem::e4m3> {
  vf operator()(vu c) const {
    const __m512i v = (__m512i)c, mag = _mm512_and_si512(v, _mm512_set1_epi32(0x7f));
    __m512 r = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
    const __mmask16 sub = _mm512_testn_epi32_mask(v, _mm512_set1_epi32(0x78));
    r = _mm512_mask_mul_ps(r, sub, _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(7))),
                           _mm512_set1_ps(quant::bits_f32(uint32_t(-9 + 127) << 23)));
    r = _mm512_mask_mov_ps(r, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(0x7f)),
                           _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
    const __m512i sign = _mm512_slli_epi32(v, 24);  // bit 7 to bit 31; the code's other bits go above 31
    return (vf)_mm512_ternarylogic_epi32(_mm512_castps_si512(r), sign, _mm512_set1_epi32(int(0x80000000u)), 0xf8);
  }
};
#endif

// W byte codes at p.
inline vu codes8(const uint8_t* p) {
#if defined(__AVX512F__)
  return (vu)_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)
  return (vu)_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
#endif
  vb b;
  memcpy(&b, p, W);
  return __builtin_convertvector(b, vu);
}
// W nibble codes from W / 2 bytes at p (element 2i in the low nibble of byte i).
inline vu codes4(const uint8_t* p) {
#if defined(__AVX512F__)  // as the AVX2 form below, 8 bytes to 16 lanes
  const __m128i pairs = _mm_shuffle_epi8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                                         _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7));
  const __m512i v = _mm512_srlv_epi32(_mm512_cvtepu8_epi32(pairs),
                                      _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4));
  return (vu)_mm512_and_si512(v, _mm512_set1_epi32(15));
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)  // intrinsics: GCC lowers the generic form byte by byte
  int32_t w;
  memcpy(&w, p, 4);
  const __m128i pairs = _mm_shuffle_epi8(_mm_cvtsi32_si128(w), _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 0, 0, 0, 0, 0, 0));
  const __m256i v = _mm256_srlv_epi32(_mm256_cvtepu8_epi32(pairs), _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4));
  return (vu)_mm256_and_si256(v, _mm256_set1_epi32(15));
#endif
  typedef uint8_t vhalf __attribute__((vector_size(W / 2)));
  vhalf h;
  memcpy(&h, p, W / 2);
#if defined(__AVX512F__)
  const vb d = __builtin_shufflevector(h, h, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
#elif defined(__AVX__)
  const vb d = __builtin_shufflevector(h, h, 0, 0, 1, 1, 2, 2, 3, 3);
#else
  const vb d = __builtin_shufflevector(h, h, 0, 0, 1, 1);
#endif
  vu shift;
  for (int i = 0; i < W; ++i) shift[i] = (i & 1) * 4u;
  return (__builtin_convertvector(d, vu) >> shift) & 15u;
}

// ------------------------------------------------------------ dequantize
template <Elem E, class D> void deq_mx(const quant::DequantArgs& a) {
  constexpr int Bits = ElemCode<E>::bits;
  const float* t = table<E>();
  const CodeDecoder<E> dec;
  const int64_t blocks = a.cols / 32;
  const bool stream = stream_out<D>(a.out, a.rows, a.cols, a.out_stride);
  parallel_rows(a.rows, a.cols * Bits / 8 + a.cols * int64_t(sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
   with_stream(stream, [&](auto nt) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = a.data + r * a.data_stride;
      const uint8_t* sc = static_cast<const uint8_t*>(a.scales) + r * a.scales_stride;
      auto* dst = static_cast<typename D::T*>(a.out) + r * a.out_stride;
      for (int64_t b = 0; b < blocks; ++b) {
        const float x = quant::e8m0_to_f32(sc[b]);
        if constexpr (Bits == 8 || Bits == 4) {  // codes decoded in vectors, two at a time
          auto value = [&](int i) {
            return dec(Bits == 8 ? codes8(row + b * 32 + i) : codes4(row + (b * 32 + i) / 2)) * x;
          };
          for (int i = 0; i < 32; i += 2 * W) put2<D, nt>(dst + b * 32 + i, value(i), value(i + W));
          continue;
        }
        alignas(64) float buf[32];
        for (int j0 = 0; j0 < 32; j0 += 8) {
          uint32_t c[8];
          quant::unpack8<Bits>(row, b * 32 + j0, c);
          for (int j = 0; j < 8; ++j) buf[j0 + j] = t[c[j]] * x;
        }
        put_buf<D, nt>(dst + b * 32, buf, 32);
      }
    }
   });
  });
}

template <class D> void deq_nvfp4(const quant::DequantArgs& a) {
  const float* t8 = table<Elem::e4m3>();
  const float ts = *a.tensor_scale;
  const CodeDecoder<Elem::e2m1> dec;
  const int64_t blocks = a.cols / 16;
  const bool stream = stream_out<D>(a.out, a.rows, a.cols, a.out_stride);
  parallel_rows(a.rows, a.cols / 2 + a.cols * int64_t(sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
   with_stream(stream, [&](auto nt) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = a.data + r * a.data_stride;
      const uint8_t* sc = static_cast<const uint8_t*>(a.scales) + r * a.scales_stride;
      auto* dst = static_cast<typename D::T*>(a.out) + r * a.out_stride;
      // element i of block b: its code times the block's scale, times the tensor's
      auto value = [&](int64_t b, int i) { return dec(codes4(row + b * 8 + i / 2)) * t8[sc[b]] * ts; };
      int64_t b = 0;
      if constexpr (W == 16) {  // two blocks a put2
        for (; b + 2 <= blocks; b += 2) put2<D, nt>(dst + b * 16, value(b, 0), value(b + 1, 0));
      }
      for (; b < blocks; ++b)
        for (int i = 0; i < 16; i += W) put<D, nt>(dst + b * 16 + i, value(b, i));
    }
   });
  });
}

// fp8 / int8: rows of codes times a scale that is per tensor, per row or per 128 columns of a 128-row block.
template <class D, class Code, Elem E, class Dec>
void deq_scaled(const quant::DequantArgs& a, Dec dec) {
  const CodeDecoder<E> vdec;
  const float* scales = static_cast<const float*>(a.scales);
  const bool stream = stream_out<D>(a.out, a.rows, a.cols, a.out_stride);
  parallel_rows(a.rows, a.cols * int64_t(1 + sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
   with_stream(stream, [&](auto nt) {
    for (int64_t r = r0; r < r1; ++r) {
      const Code* row = reinterpret_cast<const Code*>(a.data + r * a.data_stride);
      auto* dst = static_cast<typename D::T*>(a.out) + r * a.out_stride;
      for (int64_t k0 = 0; k0 < a.cols; k0 += 128) {
        const float s = a.group == quant::kFp8GroupTensor ? scales[0]
                      : a.group == quant::kFp8GroupRow    ? scales[r]
                                                          : scales[r / 128 * a.scales_stride + k0 / 128];
        const int64_t n = std::min<int64_t>(128, a.cols - k0);
        alignas(64) float buf[128];
        int64_t j0 = 0;
        if constexpr (std::is_same_v<Code, uint8_t>) {  // fp8: whole vectors decoded in registers
          auto value = [&](int64_t j) {
            const vu c = codes8(reinterpret_cast<const uint8_t*>(row) + k0 + j);
            return vdec(c) * s;
          };
          for (; j0 + 2 * W <= n; j0 += 2 * W) put2<D, nt>(dst + k0 + j0, value(j0), value(j0 + W));
          for (; j0 + W <= n; j0 += W) put<D, nt>(dst + k0 + j0, value(j0));
        } else {  // int8: float(c) * s
          for (; j0 + 2 * W <= n; j0 += 2 * W)
            put2<D, nt>(dst + k0 + j0, levels_to_float(row + k0 + j0) * s, levels_to_float(row + k0 + j0 + W) * s);
          for (; j0 + W <= n; j0 += W) put<D, nt>(dst + k0 + j0, levels_to_float(row + k0 + j0) * s);
        }
        for (int64_t j = j0; j < n; ++j) buf[j - j0] = dec(row[k0 + j]) * s;
        lanes(n - j0, [&](int64_t i, int64_t c) { st<D>(dst + k0 + j0, i, c, load<F32>(buf + i)); });
      }
    }
   });
  });
}

template <class S> inline float load_scalar(const void* p, int64_t i) {
  if constexpr (std::is_same_v<S, F32>) return static_cast<const float*>(p)[i];
  else if constexpr (std::is_same_v<S, F16>) return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  else return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

template <int Bits, class D, class S> void deq_affine(const quant::DequantArgs& a) {
  const int64_t g = a.group;
  const bool stream = stream_out<D>(a.out, a.rows, a.cols, a.out_stride);
  parallel_rows(a.rows, a.cols * Bits / 8 + a.cols * int64_t(sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
   with_stream(stream, [&](auto nt) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = a.data + r * a.data_stride;
      auto* dst = static_cast<typename D::T*>(a.out) + r * a.out_stride;
      for (int64_t gi = 0; gi < a.cols / g; ++gi) {
        const float s = load_scalar<S>(a.scales, r * a.scales_stride + gi);
        const float b = load_scalar<S>(a.biases, r * a.biases_stride + gi);
        if constexpr (Bits == 8 || Bits == 4) {  // affine_decode8's s * c + b, whole vectors of codes
          auto value = [&](int64_t j) {
            const vu c = Bits == 8 ? codes8(row + gi * g + j) : codes4(row + (gi * g + j) / 2);
            return add_keep_nan(s * __builtin_convertvector((vi)c, vf), broadcast(b));
          };
          int64_t j = 0;
          for (; j + 2 * W <= g; j += 2 * W) put2<D, nt>(dst + gi * g + j, value(j), value(j + W));
          for (; j < g; j += W) put<D, nt>(dst + gi * g + j, value(j));
          continue;
        }
        alignas(64) float buf[128];
        for (int64_t j0 = 0; j0 < g; j0 += 8) quant::affine_decode8<Bits>(row, s, b, gi * g + j0, buf + j0);
        put_buf<D, nt>(dst + gi * g, buf, int(g));
      }
    }
   });
  });
}

template <class D, class S> void deq_affine_bits(const quant::DequantArgs& a) {
  switch (a.format) {
    case QFormat::affine2: return deq_affine<2, D, S>(a);
    case QFormat::affine3: return deq_affine<3, D, S>(a);
    case QFormat::affine4: return deq_affine<4, D, S>(a);
    case QFormat::affine5: return deq_affine<5, D, S>(a);
    case QFormat::affine6: return deq_affine<6, D, S>(a);
    default: return deq_affine<8, D, S>(a);
  }
}

// ------------------------------------------------------------ quantize
template <Elem E, class D> void q_mx(const quant::QuantArgs& a) {
  const auto rule = quant::ScaleRule(a.scale_rule);
  parallel_rows(a.rows, a.cols * int64_t(sizeof(typename D::T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const auto* src = static_cast<const typename D::T*>(a.x) + r * a.x_stride;
      uint8_t* row = a.data + r * a.data_stride;
      uint8_t* sc = static_cast<uint8_t*>(a.scales) + r * a.scales_stride;
      for (int64_t b = 0; b < a.cols / 32; ++b) {
        alignas(64) float buf[32];
        get<D>(buf, src + b * 32, 32);
        sc[b] = uint8_t(quant::mx_encode_block<E>(buf, rule, row, b * 32));
      }
    }
  });
}

// amax bits over the whole [rows, cols] input, NaN-propagating.
template <class D> uint32_t tensor_amax(const void* x, int64_t rows, int64_t cols, int64_t stride) {
  std::atomic<uint32_t> amax{0};
  parallel_rows(rows, cols * int64_t(sizeof(typename D::T)), [&](int64_t r0, int64_t r1) {
    uint32_t m = 0;
    for (int64_t r = r0; r < r1; ++r)
      m = std::max(m, row_amax<D>(static_cast<const typename D::T*>(x) + r * stride, cols));
    uint32_t cur = amax.load();
    while (m > cur && !amax.compare_exchange_weak(cur, m)) {
    }
  });
  return amax.load();
}

template <class D> void q_nvfp4(const quant::QuantArgs& a) {
  const float t = quant::nvfp4_tensor_scale(tensor_amax<D>(a.x, a.rows, a.cols, a.x_stride));
  *a.tensor_scale = t;
  parallel_rows(a.rows, a.cols * int64_t(sizeof(typename D::T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const auto* src = static_cast<const typename D::T*>(a.x) + r * a.x_stride;
      uint8_t* row = a.data + r * a.data_stride;
      uint8_t* sc = static_cast<uint8_t*>(a.scales) + r * a.scales_stride;
      for (int64_t b = 0; b < a.cols / 16; ++b) {
        alignas(64) float buf[16];
        get<D>(buf, src + b * 16, 16);
        sc[b] = uint8_t(quant::nvfp4_encode_block(buf, t, row + b * 8));
      }
    }
  });
}

// fp8 weights: scales per tensor / per row / per 128 x 128 block, then codes.
template <Elem E, class D> void q_fp8(const quant::QuantArgs& a) {
  using T = typename D::T;
  float* scales = static_cast<float*>(a.scales);
  const T* x = static_cast<const T*>(a.x);
  if (a.group == quant::kFp8GroupTensor) {
    scales[0] = quant::fp8_scale<E>(tensor_amax<D>(a.x, a.rows, a.cols, a.x_stride));
  } else if (a.group == quant::kFp8GroupBlock) {
    const int64_t kb = (a.cols + 127) / 128;
    parallel_rows((a.rows + 127) / 128, 128 * a.cols * int64_t(sizeof(T)), [&](int64_t b0, int64_t b1) {
      for (int64_t rb = b0; rb < b1; ++rb)
        for (int64_t cb = 0; cb < kb; ++cb) {
          uint32_t m = 0;
          const int64_t n = std::min<int64_t>(128, a.cols - cb * 128);
          for (int64_t r = rb * 128; r < std::min(a.rows, rb * 128 + 128); ++r)
            m = std::max(m, row_amax<D>(x + r * a.x_stride + cb * 128, n));
          scales[rb * a.scales_stride + cb] = quant::fp8_scale<E>(m);
        }
    });
  }
  parallel_rows(a.rows, a.cols * int64_t(sizeof(T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = x + r * a.x_stride;
      uint8_t* dst = a.data + r * a.data_stride;
      if (a.group == quant::kFp8GroupRow) scales[r] = quant::fp8_scale<E>(row_amax<D>(src, a.cols));
      for (int64_t k0 = 0; k0 < a.cols; k0 += 128) {
        const float s = a.group == quant::kFp8GroupTensor ? scales[0]
                      : a.group == quant::kFp8GroupRow    ? scales[r]
                                                          : scales[r / 128 * a.scales_stride + k0 / 128];
        const int64_t n = std::min<int64_t>(128, a.cols - k0);
        lanes(n, [&](int64_t i, int64_t c) {
          const vu code = s == 0.f ? vu{} : encode_v<E>(ld<D>(src + k0, i, c) / s);
          uint8_t b[W];
          store_codes(b, code);
          memcpy(dst + k0 + i, b, size_t(c));
        });
      }
    }
  });
}

// int8 rows: q = clamp(rint(x / s), +-127) as int8_encode, W lanes at a time.
inline vi int8_codes(vf x, float s) {
  if (s == 0.f) return vi{};
  vf v = x / s;
  const vi nan = (vi)(v != v);
  v = vmax(splat(-127.f), vmin(splat(127.f), v));
  v = (v + 12582912.f) - 12582912.f;
  return __builtin_convertvector(v, vi) & ~nan;
}

template <class D> void q_int8_rows(const void* xv, int64_t rows, int64_t cols, int64_t x_stride, int8_t* q,
                                    int64_t q_stride, float* scales) {
  using T = typename D::T;
  parallel_rows(rows, cols * int64_t(sizeof(T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = static_cast<const T*>(xv) + r * x_stride;
      int8_t* dst = q + r * q_stride;
      const float s = quant::int8_scale(row_amax<D>(src, cols));
      scales[r] = s;
      lanes(cols, [&](int64_t i, int64_t c) {
        typedef int8_t vc __attribute__((vector_size(W)));
        const vc b = __builtin_convertvector(int8_codes(ld<D>(src, i, c), s), vc);
        memcpy(dst + i, &b, size_t(c));
      });
    }
  });
}

template <class S> inline void store_scalar(void* p, int64_t i, float v) {
  if constexpr (std::is_same_v<S, F32>) static_cast<float*>(p)[i] = v;
  else if constexpr (std::is_same_v<S, F16>) static_cast<uint16_t*>(p)[i] = f32_to_f16(v);
  else static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
}

template <int Bits, class D> void q_affine(const quant::QuantArgs& a) {
  const int64_t g = a.group;
  parallel_rows(a.rows, a.cols * int64_t(sizeof(typename D::T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const auto* src = static_cast<const typename D::T*>(a.x) + r * a.x_stride;
      uint8_t* row = a.data + r * a.data_stride;
      for (int64_t gi = 0; gi < a.cols / g; ++gi) {
        alignas(64) float buf[128];
        get<D>(buf, src + gi * g, int(g));
        float s, b;
        quant::affine_encode_group<Bits>(buf, int(g), row, gi * g, s, b);
        store_scalar<D>(a.scales, r * a.scales_stride + gi, s);
        store_scalar<D>(a.biases, r * a.biases_stride + gi, b);
      }
    }
  });
}

template <class D> void q_affine_bits(const quant::QuantArgs& a) {
  switch (a.format) {
    case QFormat::affine2: return q_affine<2, D>(a);
    case QFormat::affine3: return q_affine<3, D>(a);
    case QFormat::affine4: return q_affine<4, D>(a);
    case QFormat::affine5: return q_affine<5, D>(a);
    case QFormat::affine6: return q_affine<6, D>(a);
    default: return q_affine<8, D>(a);
  }
}

// ------------------------------------------------------------ activations
// One read of each row from memory: its amax (per token or per block) and its
// codes from the same cache-resident data.
template <class D> void act_fp8(const quant::ActQuantArgs& a) {
  using T = typename D::T;
  float* sx = static_cast<float*>(a.sx);
  parallel_rows(a.rows, a.cols * int64_t(sizeof(T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = static_cast<const T*>(a.x) + r * a.x_stride;
      uint8_t* dst = static_cast<uint8_t*>(a.xq) + r * a.xq_stride;
      const float s = quant::fp8_scale<Elem::e4m3>(row_amax<D>(src, a.cols));
      sx[r] = s;
      lanes(a.cols, [&](int64_t i, int64_t c) {
        const vu code = s == 0.f ? vu{} : encode_v<Elem::e4m3>(ld<D>(src, i, c) / s);
        if (c == W) {
          store_codes(dst + i, code);
        } else {
          uint8_t b[W];
          store_codes(b, code);
          memcpy(dst + i, b, size_t(c));
        }
      });
    }
  });
}

template <class D> void act_mxfp8(const quant::ActQuantArgs& a) {
  using T = typename D::T;
  parallel_rows(a.rows, a.cols * int64_t(sizeof(T) + 1), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = static_cast<const T*>(a.x) + r * a.x_stride;
      uint8_t* dst = static_cast<uint8_t*>(a.xq) + r * a.xq_stride;
      uint8_t* sx = static_cast<uint8_t*>(a.sx) + r * a.sx_stride;
      for (int64_t b = 0; b < a.cols / 32; ++b) {
        vf v[32 / W];
        vu m = vu{};
        for (int i = 0; i < 32 / W; ++i) {
          v[i] = load<D>(src + b * 32 + i * W);
          const vu ab = abs_bits_v(v[i]);
          m = (vu)((vi)ab > (vi)m ? (vi)ab : (vi)m);
        }
        const uint32_t s = quant::mx_scale_code<Elem::e4m3>(hmax_u(m), quant::ScaleRule::floor);
        sx[b] = uint8_t(s);
        const float inv = s == 0xffu ? 0.f : quant::e8m0_inverse(s);
        for (int i = 0; i < 32 / W; ++i)
          store_codes(dst + b * 32 + i * W, s == 0xffu ? vu{} : encode_v<Elem::e4m3>(v[i] * inv));
      }
    }
  });
}

template <class D> void act_nvfp4(const quant::ActQuantArgs& a) {
  using T = typename D::T;
  parallel_rows(a.rows, a.cols * int64_t(sizeof(T)) * 5 / 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = static_cast<const T*>(a.x) + r * a.x_stride;
      uint8_t* dst = static_cast<uint8_t*>(a.xq) + r * a.xq_stride;
      uint8_t* sx = static_cast<uint8_t*>(a.sx) + r * a.sx_stride;
      for (int64_t b = 0; b < a.cols / 16; ++b) {
        alignas(64) uint32_t codes[16];
        vf v[16 / W > 0 ? 16 / W : 1];
        vu m = vu{};
        for (int i = 0; i < 16 / W; ++i) {
          v[i] = load<D>(src + b * 16 + i * W);
          const vu ab = abs_bits_v(v[i]);
          m = (vu)((vi)ab > (vi)m ? (vi)ab : (vi)m);
        }
        const uint32_t sb = quant::encode_elem<Elem::e4m3>(quant::bits_f32(hmax_u(m)) / 6.f);
        sx[b] = uint8_t(sb);
        const float d = quant::decode_elem<Elem::e4m3>(sb);
        for (int i = 0; i < 16 / W; ++i) {
          const vu c = d == 0.f ? vu{} : encode_v<Elem::e2m1>(v[i] / d);
          memcpy(codes + i * W, &c, sizeof c);
        }
        for (int j = 0; j < 8; ++j) dst[b * 8 + j] = uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));
      }
    }
  });
}

}  // namespace

void dequantize_split_run(const quant::DequantArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
   with_narrowing<decltype(d)>([&](auto narrow) {
    using D = decltype(narrow);
    switch (a.format) {
      case QFormat::mxfp4: return deq_mx<Elem::e2m1, D>(a);
      case QFormat::mxfp6_e2m3: return deq_mx<Elem::e2m3, D>(a);
      case QFormat::mxfp6_e3m2: return deq_mx<Elem::e3m2, D>(a);
      case QFormat::mxfp8_e4m3: return deq_mx<Elem::e4m3, D>(a);
      case QFormat::mxfp8_e5m2: return deq_mx<Elem::e5m2, D>(a);
      case QFormat::nvfp4: return deq_nvfp4<D>(a);
      case QFormat::fp8_e4m3: {
        const float* t = table<Elem::e4m3>();
        return deq_scaled<D, uint8_t, Elem::e4m3>(a, [t](uint8_t c) { return t[c]; });
      }
      case QFormat::fp8_e5m2: {
        const float* t = table<Elem::e5m2>();
        return deq_scaled<D, uint8_t, Elem::e5m2>(a, [t](uint8_t c) { return t[c]; });
      }
      case QFormat::int8: return deq_scaled<D, int8_t, Elem::e4m3>(a, [](int8_t c) { return float(c); });
      default:
        with_float_dtype(a.scales_dtype, [&](auto s) { deq_affine_bits<D, decltype(s)>(a); });
    }
   });
  });
}

void quantize_split_run(const quant::QuantArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    switch (a.format) {
      case QFormat::mxfp4: return q_mx<Elem::e2m1, D>(a);
      case QFormat::mxfp6_e2m3: return q_mx<Elem::e2m3, D>(a);
      case QFormat::mxfp6_e3m2: return q_mx<Elem::e3m2, D>(a);
      case QFormat::mxfp8_e4m3: return q_mx<Elem::e4m3, D>(a);
      case QFormat::mxfp8_e5m2: return q_mx<Elem::e5m2, D>(a);
      case QFormat::nvfp4: return q_nvfp4<D>(a);
      case QFormat::fp8_e4m3: return q_fp8<Elem::e4m3, D>(a);
      case QFormat::fp8_e5m2: return q_fp8<Elem::e5m2, D>(a);
      case QFormat::int8:
        return q_int8_rows<D>(a.x, a.rows, a.cols, a.x_stride, reinterpret_cast<int8_t*>(a.data), a.data_stride,
                              static_cast<float*>(a.scales));
      default: return q_affine_bits<D>(a);
    }
  });
}

void quantize_activations_run(const quant::ActQuantArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    switch (a.format) {
      case quant::ActFormat::fp8_e4m3: return act_fp8<D>(a);
      case quant::ActFormat::int8:
        return q_int8_rows<D>(a.x, a.rows, a.cols, a.x_stride, static_cast<int8_t*>(a.xq), a.xq_stride,
                              static_cast<float*>(a.sx));
      case quant::ActFormat::mxfp8_e4m3: return act_mxfp8<D>(a);
      case quant::ActFormat::nvfp4: return act_nvfp4<D>(a);
    }
  });
}

}  // namespace braze::cpu::BRAZE_ISA
