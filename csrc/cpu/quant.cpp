// The quant family on the CPU: block formats decoded chunk by chunk through
// their codec headers (csrc/core/quant/), the chunk converted to the output
// dtype in W-lane vectors; rows split over the thread pool.
#include "cpu/quant.h"

#include <cstring>
#include <type_traits>

#include "core/quant/ggml.h"
#include "core/quant/iquants.h"
#include "core/quant/kquants_encode.h"
#include "core/quant/gguf_fp4.h"
#include "cpu/quant_mx.h"
#include "cpu/simd.h"

namespace braze::cpu::BRAZE_ISA {
namespace {

using quant::Codec;
using quant::QFormat;

// Block-layout formats this file decodes and encodes: one line per group.
#define BRAZE_CPU_DECODE_FORMATS(X) \
  BRAZE_QUANT_GGUF_FP4_FORMATS(X)   \
  BRAZE_QUANT_GGML_FORMATS(X)       \
  BRAZE_QUANT_KQUANTS_FORMATS(X)    \
  BRAZE_QUANT_IQUANTS_FORMATS(X)
#define BRAZE_CPU_ENCODE_FORMATS(X) \
  BRAZE_QUANT_GGML_FORMATS(X)       \
  BRAZE_QUANT_KQUANTS_FORMATS(X)    \
  BRAZE_QUANT_IQUANTS_FORMATS(X)

// W levels (int8) -> W floats, in registers.
inline vf levels_to_float(const int8_t* q) {
  typedef int8_t vq __attribute__((vector_size(W)));
  vq v;
  memcpy(&v, q, sizeof v);
  return __builtin_convertvector(v, vf);
}

// a in every lane, -0.0 included (splat adds it to +0.0, which would drop the sign
// and break bit-exactness where GGML's reference computes 0 - (-0)).
inline vf broadcast(float a) {
  vf v;
  for (int i = 0; i < W; ++i) v[i] = a;
  return v;
}

// store<BF16> with AVX2 instructions (round to nearest even, NaN kept quiet):
// the generic vector-extension form lowers its u32 -> u16 narrowing lane by
// lane, which here cost as much as decoding the chunk.
template <class D> inline void store_out(typename D::T* p, vf v) {
#if defined(__AVX2__) && !defined(__AVX512F__)
  if constexpr (std::is_same_v<D, BF16>) {
    const __m256i u = (__m256i)v, one = _mm256_set1_epi32(1);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40)), nan);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    return;
  }
#endif
  store<D>(p, v);
}

// One chunk of a row into dst: the portable build runs the codec's scalar
// decode (the code CUDA and Metal share); the AVX builds take the chunk's
// levels and scale them in vectors, the same float32 operations in the same order.
template <QFormat F, class D> inline void decode_chunk(const uint8_t* src, int64_t k0, typename D::T* dst) {
  using C = Codec<F>;
  constexpr int CH = C::kChunk;
#if defined(__AVX__)
  alignas(16) int8_t q[CH];
  float d, m;
  C::levels(src, k0, q, d, m);
  const vf vd = broadcast(d), vm = broadcast(m);
  for (int i = 0; i < CH; i += W) {
    vf v = vd * levels_to_float(q + i);
    if constexpr (C::kAffine == quant::Affine::mul_add) v = v + vm;
    if constexpr (C::kAffine == quant::Affine::mul_sub) v = v - vm;
    store_out<D>(dst + i, v);
  }
#else
  alignas(64) float buf[CH];
  quant::decode<F>(src, k0, buf);
  for (int i = 0; i < CH; i += W) store<D>(dst + i, load<F32>(buf + i));
#endif
}

template <QFormat F, class D> void dequantize_blocks(const quant::DequantArgs& a) {
  using T = typename D::T;
  constexpr int CH = Codec<F>::kChunk;
  static_assert(CH % W == 0, "a chunk is whole vectors");
  const int64_t chunks = a.cols / CH;
  const int64_t row_bytes = quant::info(F).blocks.bytes(a.cols) + a.cols * int64_t(sizeof(T));
  parallel_rows(a.rows, row_bytes, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = a.data + r * a.data_stride;
      T* dst = static_cast<T*>(a.out) + r * a.out_stride;
      for (int64_t c = 0; c < chunks; ++c) decode_chunk<F, D>(src, c * CH, dst + c * CH);
    }
  });
}

template <QFormat F, class D> void quantize_blocks(const quant::QuantArgs& a) {
  using T = typename D::T;
  constexpr int B = quant::info(F).blocks.block, BB = quant::info(F).blocks.block_bytes;
  static_assert(B % W == 0, "a block is whole vectors");
  const int64_t blocks = a.cols / B;
  parallel_rows(a.rows, blocks * BB + a.cols * int64_t(sizeof(T)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* src = static_cast<const T*>(a.x) + r * a.x_stride;
      uint8_t* dst = a.data + r * a.data_stride;
      for (int64_t b = 0; b < blocks; ++b) {
        alignas(64) float buf[B];
        for (int i = 0; i < B; i += W) store<F32>(buf + i, load<D>(src + b * B + i));
        Codec<F>::encode(buf, dst + b * BB);
      }
    }
  });
}

}  // namespace

void dequantize_run(const quant::DequantArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    switch (a.format) {
#define BRAZE_CASE(name) case QFormat::name: return dequantize_blocks<QFormat::name, D>(a);
      BRAZE_CPU_DECODE_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
      default:
        if (quant::info(a.format).layout == quant::Layout::split) return dequantize_split_run(a);
        throw ValueError(std::string("dequantize: no CPU kernel for ") + quant::info(a.format).name);
    }
  });
}

void quantize_run(const quant::QuantArgs& a) {
  with_float_dtype(a.dtype, [&](auto d) {
    using D = decltype(d);
    switch (a.format) {
#define BRAZE_CASE(name) case QFormat::name: return quantize_blocks<QFormat::name, D>(a);
      BRAZE_CPU_ENCODE_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
      default:
        if (quant::info(a.format).layout == quant::Layout::split) return quantize_split_run(a);
        throw ValueError(std::string("quantize: no CPU kernel for ") + quant::info(a.format).name);
    }
  });
}

}  // namespace braze::cpu::BRAZE_ISA
