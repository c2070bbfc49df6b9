// The quant family on the CPU: block formats decoded chunk by chunk through
// their codec headers (csrc/core/quant/), the chunk converted to the output
// dtype in W-lane vectors; rows split over the thread pool.
#include "cpu/quant.h"

#include <cstring>
#include <type_traits>
#include <utility>

#include "core/quant/ggml.h"
#include "core/quant/iquants.h"
#include "core/quant/kquants_encode.h"
#include "core/quant/gguf_fp4.h"
#include "cpu/quant_mx.h"
#include "cpu/quant_store.h"
#include "cpu/quant_unpack.h"
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

#if defined(__AVX__)
// The codec's doubled e2m1 values as a byte-shuffle table (folded to a constant).
inline __m128i fp4_values() {
  alignas(16) int8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = quant::gguf_fp4_detail::kvalue(uint32_t(i));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(t));
}

// A chunk's levels: the codec's, except GGUF's fp4 blocks, whose 16 nibbles are
// looked up in one byte shuffle (the codec's per-element arithmetic stayed
// scalar, about 2.7 ns an element); the scale is still the codec's.
template <QFormat F>
__attribute__((always_inline)) inline void chunk_levels(const uint8_t* src, int64_t k0, int8_t* q, float& d, float& m) {
  const __m128i low4 = _mm_set1_epi8(15);
  if constexpr (F == QFormat::mxfp4_gguf) {  // element j in the low nibble of byte j, j + 16 in the high one
    int j;
    const uint8_t* b = quant::block_of<F>(src, k0, j);
    d = Codec<F>::scale(b);
    m = 0.f;
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 1));
    if (j >= 16) c = _mm_srli_epi16(c, 4);
    _mm_store_si128(reinterpret_cast<__m128i*>(q), _mm_shuffle_epi8(fp4_values(), _mm_and_si128(c, low4)));
  } else if constexpr (F == QFormat::nvfp4_gguf) {  // 8 bytes: elements 0-7 low nibbles, 8-15 high ones
    const uint8_t* blk = src + k0 / quant::kNvfp4GgufBlock * quant::kNvfp4GgufBytes;
    const int sub = int(k0 % quant::kNvfp4GgufBlock) / 16;
    d = Codec<F>::scale(blk, sub);
    m = 0.f;
    const __m128i p = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 4 + 8 * sub));
    const __m128i c = _mm_unpacklo_epi64(_mm_and_si128(p, low4), _mm_and_si128(_mm_srli_epi16(p, 4), low4));
    _mm_store_si128(reinterpret_cast<__m128i*>(q), _mm_shuffle_epi8(fp4_values(), c));
  } else {
    Codec<F>::levels(src, k0, q, d, m);
  }
}
#endif

// One chunk of a row into dst: the portable build runs the codec's scalar
// decode (the code CUDA and Metal share); the AVX builds take the chunk's
// levels and scale them in vectors, the same float32 operations in the same order.
template <QFormat F, class D, bool Stream>
__attribute__((always_inline)) inline void decode_chunk(const uint8_t* src, int64_t k0, typename D::T* dst) {
  using C = Codec<F>;
  constexpr int CH = C::kChunk;
#if defined(__AVX__)
  alignas(16) int8_t q[CH];
  float d, m;
  chunk_levels<F>(src, k0, q, d, m);
  const vf vd = broadcast(d), vm = broadcast(m);
  auto value = [&](int i) {
    vf v = vd * levels_to_float(q + i);
    if constexpr (C::kAffine == quant::Affine::mul_add) v = add_keep_nan(v, vm);
    if constexpr (C::kAffine == quant::Affine::mul_sub) v = v - vm;
    return v;
  };
  if constexpr (CH % (2 * W) == 0) {
    for (int i = 0; i < CH; i += 2 * W) put2<D, Stream>(dst + i, value(i), value(i + W));
  } else {
    for (int i = 0; i < CH; i += W) put<D, Stream>(dst + i, value(i));
  }
#else
  alignas(64) float buf[CH];
  quant::decode<F>(src, k0, buf);
  for (int i = 0; i < CH; i += W) put<D, Stream>(dst + i, load<F32>(buf + i));
#endif
}

// A whole block, its chunks unrolled: with the block's bytes as the "row" and
// each chunk's offset a constant, the codec inlines into straight-line code
// (sub-block scale indices, shifts and masks folded), one place per format still.
template <QFormat F, class D, bool Stream, int... J>
__attribute__((always_inline)) inline void decode_block(const uint8_t* blk, typename D::T* dst,
                                                        std::integer_sequence<int, J...>) {
  constexpr int CH = Codec<F>::kChunk;
  (decode_chunk<F, D, Stream>(blk, J * CH, dst + J * CH), ...);
}

// A row's blocks; flatten inlines every call inside (the codec's levels too,
// which GCC's size heuristics would otherwise call), noinline keeps it so.
template <QFormat F, class D, bool Stream>
__attribute__((noinline, flatten)) void decode_row(const uint8_t* src, typename D::T* dst, int64_t blocks) {
  constexpr int CH = Codec<F>::kChunk, B = quant::info(F).blocks.block, BB = quant::info(F).blocks.block_bytes;
  for (int64_t b = 0; b < blocks; ++b) {
    if constexpr (kBlockUnpack<F>)
      unpack_block<F, D, Stream>(src + b * BB, dst + b * B);
    else
      decode_block<F, D, Stream>(src + b * BB, dst + b * B, std::make_integer_sequence<int, B / CH>{});
  }
}

template <QFormat F, class D> void dequantize_blocks(const quant::DequantArgs& a) {
  using T = typename D::T;
  constexpr int CH = Codec<F>::kChunk, B = quant::info(F).blocks.block, BB = quant::info(F).blocks.block_bytes;
  static_assert(CH % W == 0 && B % CH == 0, "a block is whole chunks, a chunk whole vectors");
  const int64_t blocks = a.cols / B;
  const int64_t row_bytes = blocks * BB + a.cols * int64_t(sizeof(T));
  const bool stream = stream_out<D>(a.out, a.rows, a.cols, a.out_stride);
  parallel_rows(a.rows, row_bytes, [&](int64_t r0, int64_t r1) {
    with_stream(stream, [&](auto nt) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* src = a.data + r * a.data_stride;
        T* dst = static_cast<T*>(a.out) + r * a.out_stride;
        decode_row<F, D, decltype(nt)::value>(src, dst, blocks);
      }
    });
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
  if (quant::info(a.format).layout == quant::Layout::split) return dequantize_split_run(a);
  with_float_dtype(a.dtype, [&](auto d) {
    with_narrowing<decltype(d)>([&](auto n) {
      using D = decltype(n);
      switch (a.format) {
#define BRAZE_CASE(name) case QFormat::name: return dequantize_blocks<QFormat::name, D>(a);
        BRAZE_CPU_DECODE_FORMATS(BRAZE_CASE)
#undef BRAZE_CASE
        default:
          throw ValueError(std::string("dequantize: no CPU kernel for ") + quant::info(a.format).name);
      }
    });
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
