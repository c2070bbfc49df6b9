// dequantize on CUDA: one kernel over QFormat. A CTA owns tiles of
// kDeqSpan = 2 * kDeqThreads * 16 consecutive elements of one row (tiles start
// on block boundaries) and walks them with two buffers: it stages tile i + 1's
// packed bytes in shared memory by 16-byte cp.async (each byte read from memory
// once, fully coalesced; a split format's scales and biases of tile i + 1 into
// registers) before it decodes tile i, so its loads stay in flight while it
// decodes and stores. Each thread decodes a 16-element chunk of each half of a
// tile by the arithmetic of the format's codec (csrc/core/quant/, the CPU's
// code), four codes a word (decode_staged below, bit-identical to the codecs:
// scripts/cuda_dequant_bw.cu checks it).
// fp8 codes go through the hardware's exact fp8x2 -> f16x2 conversion. A warp's
// 32 chunks leave as 16-bit values in two stores of 512 contiguous bytes
// (halves exchanged by shuffles), not 32-byte pieces 32 bytes apart: on an H100
// that store pattern and the second buffer together took every format from
// 69-85% to 83-94% of the copy (docs/performance.md, 2026-12-06 21:48). CTAs loop over
// the tiles of all rows (grid: up to four waves of resident CTAs).
#pragma once
#include "core/quant/affine.h"
#include "core/quant/fp8.h"
#include "core/quant/ggml.h"
#include "core/quant/gguf_fp4.h"
#include "core/quant/int8.h"
#include "core/quant/iquants.h"
#include "core/quant/kquants.h"
#include "core/quant/mx.h"
#include "core/quant/nvfp4.h"
#include "core/quant_mx.h"
#include <cuda_fp8.h>
#include "cuda/quant/io.cuh"

namespace braze::cuda::quant {

using namespace braze::quant;

constexpr int kDeqThreads = 256;
constexpr int kDeqChunk = 16;
constexpr int kDeqTile = kDeqThreads * kDeqChunk;  // elements; a multiple of every block (<= 256)
constexpr int kDeqSpan = 2 * kDeqTile;  // elements of a tile, two halves (H100, one buffer: q8_0 84 -> 91% of the copy against one half)

struct DeqParams {
  const uint8_t* data;
  int64_t data_stride;  // bytes
  const void* scales;
  int64_t scales_stride;  // elements
  DType scales_dtype;
  const void* biases;
  int64_t biases_stride;
  const float* tensor_scale;
  int64_t group;
  void* out;
  int64_t out_stride;  // elements
  int64_t rows, cols, tiles;  // tiles (kDeqSpan) per row
  bool vec_out;               // out and its row stride are 16-byte aligned
};

template <QFormat F> struct MxElem;
template <> struct MxElem<QFormat::mxfp4> { static constexpr Elem e = Elem::e2m1; };
template <> struct MxElem<QFormat::mxfp6_e2m3> { static constexpr Elem e = Elem::e2m3; };
template <> struct MxElem<QFormat::mxfp6_e3m2> { static constexpr Elem e = Elem::e3m2; };
template <> struct MxElem<QFormat::mxfp8_e4m3> { static constexpr Elem e = Elem::e4m3; };
template <> struct MxElem<QFormat::mxfp8_e5m2> { static constexpr Elem e = Elem::e5m2; };
template <> struct MxElem<QFormat::fp8_e4m3> { static constexpr Elem e = Elem::e4m3; };
template <> struct MxElem<QFormat::fp8_e5m2> { static constexpr Elem e = Elem::e5m2; };

template <QFormat F> constexpr int affine_bits() {
  return F == QFormat::affine2 ? 2 : F == QFormat::affine3 ? 3 : F == QFormat::affine4 ? 4
       : F == QFormat::affine5 ? 5 : F == QFormat::affine6 ? 6 : 8;
}

__device__ __forceinline__ float scalar_at(const void* p, DType t, int64_t i) {
  if (t == DType::f32) return static_cast<const float*>(p)[i];
  if (t == DType::f16) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

// The float scale of element (r, k) of an fp8 / int8 weight: per tensor, row or 128 x 128 block.
__device__ __forceinline__ float scaled_scale(const DeqParams& p, int64_t r, int64_t k) {
  const float* s = static_cast<const float*>(p.scales);
  return p.group == kFp8GroupTensor ? s[0] : p.group == kFp8GroupRow ? s[r] : s[r / 128 * p.scales_stride + k / 128];
}

// 16 fp8 codes (src 16-byte aligned) times s, through the hardware's fp8x2 ->
// f16x2 conversion: exact for every code (f16 holds every e4m3 / e5m2 value),
// a NaN code gives a NaN, and the multiply makes every NaN the canonical one,
// as decode_elem(c) * s does on the GPU.
template <Elem E> __device__ __forceinline__ void fp8x16_times(const uint8_t* src, float s, float* out) {
  static_assert(E == Elem::e4m3 || E == Elem::e5m2, "an fp8 element");
  const uint4 w = *reinterpret_cast<const uint4*>(src);
  const uint32_t x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(x[j / 2] >> (16 * (j % 2))),
                                                     E == Elem::e4m3 ? __NV_E4M3 : __NV_E5M2);
    out[2 * j] = __half2float(__half(__half_raw{h.x})) * s;
    out[2 * j + 1] = __half2float(__half(__half_raw{h.y})) * s;
  }
}

// Elements [krel, krel + 16) of the tile starting at element k_tile of row r,
// from the tile's staged bytes; the arithmetic of the CPU kernels, step by step.
template <QFormat F>
__device__ __forceinline__ void decode_chunk(const uint8_t* tile, int krel, int64_t r, int64_t k_tile,
                                             const DeqParams& p, float* out) {
  constexpr Group G = info(F).group;
  if constexpr (info(F).layout == Layout::blocks) {
    static_assert(Codec<F>::kChunk == kDeqChunk, "a thread decodes one codec chunk");
    braze::quant::decode<F>(tile, krel, out);
  } else if constexpr (G == Group::mx) {
    const uint8_t* sc = static_cast<const uint8_t*>(p.scales) + r * p.scales_stride + k_tile / kMxBlock;
    mx_decode8<MxElem<F>::e>(tile, sc, krel, out);
    mx_decode8<MxElem<F>::e>(tile, sc, krel + 8, out + 8);
  } else if constexpr (G == Group::nvfp4) {
    const uint8_t* sc = static_cast<const uint8_t*>(p.scales) + r * p.scales_stride + k_tile / kNvfp4Block;
    const float t = *p.tensor_scale;
    // nvfp4_decode8's (e2m1 * s) * t, as the CPU's two steps
    nvfp4_decode8(tile, sc, t, krel, out);
    nvfp4_decode8(tile, sc, t, krel + 8, out + 8);
  } else if constexpr (G == Group::fp8) {
    const float s = scaled_scale(p, r, k_tile + krel);
#pragma unroll
    for (int j = 0; j < kDeqChunk; ++j) out[j] = decode_elem<MxElem<F>::e>(tile[krel + j]) * s;
  } else if constexpr (G == Group::int8) {
    const float s = scaled_scale(p, r, k_tile + krel);
#pragma unroll
    for (int j = 0; j < kDeqChunk; ++j) out[j] = float(int8_t(tile[krel + j])) * s;
  } else {
    static_assert(G == Group::affine, "every group decodes");
    const int64_t gi = (k_tile + krel) / p.group;
    const float s = scalar_at(p.scales, p.scales_dtype, r * p.scales_stride + gi);
    const float b = scalar_at(p.biases, p.scales_dtype, r * p.biases_stride + gi);
    affine_decode8<affine_bits<F>()>(tile, s, b, krel, out);
    affine_decode8<affine_bits<F>()>(tile, s, b, krel + 8, out + 8);
  }
}

// ---------------------------------------------------------------- dequantize only
// What decode_staged adds to decode_chunk for the dequantize kernel: the same
// floats bit for bit, with fewer instructions and no memory latency after the
// barrier. (1) A split format's scale (and bias) of each of a thread's chunks
// is loaded into registers (DeqPre) before the tile's barrier, beside the
// staging loads, not read from memory after it. (2) Codes come out of 32-bit
// words of the staged tile four at a time (shifts by a run-time amount, masks
// and byte permutes), not byte by byte through the codecs' switches on the
// shift, which diverge in a warp whose lanes sit at different shifts (q3_K /
// q5_K: eight ways). (3) A level is widened to f32 as (2^23 + byte) - (2^23 +
// bias) (exact: the same float as float(q)), 16-entry tables (iq4, GGUF
// fp4) are byte permutes of registers, not indexed local arrays, and fp4 / fp6
// element codes become f16 bit patterns converted by the hardware (exact);
// mxfp8 goes through fp8x16_times as fp8 does. (4) The
// products and sums are the codecs' (d q, d q - m, d q + m; e2m1 times the
// scale(s)), each rounded on its own (__fmul_rn / __fadd_rn / __fsub_rn), from
// the same d and m: f16 scales through the hardware's exact conversion, whose
// result differs from the codec's f16_to_f32 only in a NaN's payload, and
// every such value is multiplied or added, which gives the canonical NaN either way.

// A chunk's split-format scale, bias or scale code, loaded before the barrier
// and turned into floats after it (no wait on the load before the barrier).
struct DeqPre {
  uint32_t s, b;  // raw bits: an f32 / f16 / bf16 scalar, or a scale byte
  float t;        // nvfp4's tensor scale
};

__device__ __forceinline__ uint32_t scalar_bits(const void* p, DType t, int64_t i) {
  if (t == DType::f32) return __ldg(static_cast<const unsigned int*>(p) + i);
  return __ldg(static_cast<const unsigned short*>(p) + i);
}
// scalar_at's value from scalar_bits' bits.
__device__ __forceinline__ float bits_scalar(uint32_t v, DType t) {
  if (t == DType::f32) return __uint_as_float(v);
  if (t == DType::f16) return __half2float(__ushort_as_half(uint16_t(v)));
  return __uint_as_float(v << 16);
}

// The loads decode_chunk would do from memory for chunk [k, k + 16) of row r.
template <QFormat F> __device__ __forceinline__ DeqPre deq_prefetch(const DeqParams& p, int64_t r, int64_t k) {
  constexpr Group G = info(F).group;
  DeqPre q{0u, 0u, 0.f};
  if constexpr (info(F).layout == Layout::split) {
    if constexpr (G == Group::mx) {
      q.s = __ldg(static_cast<const uint8_t*>(p.scales) + r * p.scales_stride + k / kMxBlock);
    } else if constexpr (G == Group::nvfp4) {
      q.s = __ldg(static_cast<const uint8_t*>(p.scales) + r * p.scales_stride + k / kNvfp4Block);
      q.t = __ldg(p.tensor_scale);
    } else if constexpr (G == Group::fp8 || G == Group::int8) {
      const float* s = static_cast<const float*>(p.scales);
      const int64_t i = p.group == kFp8GroupTensor ? 0 : p.group == kFp8GroupRow ? r : r / 128 * p.scales_stride + k / 128;
      q.s = __ldg(reinterpret_cast<const unsigned int*>(s) + i);
    } else {
      const int64_t gi = k / p.group;
      q.s = scalar_bits(p.scales, p.scales_dtype, r * p.scales_stride + gi);
      q.b = scalar_bits(p.biases, p.scales_dtype, r * p.biases_stride + gi);
    }
  }
  return q;
}

// 16 bytes of shared memory from p (A-byte aligned, A in 2, 4, 8, 16; A < 4
// means any alignment) as four little-endian words; A < 4 reads the aligned
// words around them (up to 3 bytes either side: the tile is padded).
template <int A> __device__ __forceinline__ void words16(const uint8_t* p, uint32_t (&w)[4]) {
  if constexpr (A >= 16) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (A >= 8) {
    const uint2 a = reinterpret_cast<const uint2*>(p)[0], b = reinterpret_cast<const uint2*>(p)[1];
    w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y;
  } else if constexpr (A >= 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = reinterpret_cast<const uint32_t*>(p)[i];
  } else {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    const uint32_t* base = reinterpret_cast<const uint32_t*>(a & ~uintptr_t(3));
    const uint32_t sh = uint32_t(a & 3u) * 8u;
    uint32_t x[5];
#pragma unroll
    for (int i = 0; i < 5; ++i) x[i] = base[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = __funnelshift_r(x[i], x[i + 1], sh);
  }
}

__device__ __forceinline__ float f16_at(const uint8_t* p) {  // p 2-byte aligned
  return __half2float(*reinterpret_cast<const __half*>(p));
}

// float(byte i of w) - bias, exactly, as 2^23 + byte - (2^23 + bias): magic = 2^23 + bias.
__device__ __forceinline__ float level_f(uint32_t w, int i, float magic) {
  return __fsub_rn(__uint_as_float(__byte_perm(w, 0x4b000000u, 0x7440u | unsigned(i))), magic);
}

// out[i] = affine<A>(d, m, float(byte i of w) - bias), each product and sum rounded on its own.
template <Affine A> __device__ __forceinline__ void affine16(const uint32_t (&w)[4], float magic, float d, float m,
                                                            float* out) {
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float q = level_f(w[i / 4], i % 4, magic);
    const float dq = __fmul_rn(d, q);
    out[i] = A == Affine::mul ? dq : A == Affine::mul_add ? __fadd_rn(dq, m) : __fsub_rn(dq, m);
  }
}

// A 16-entry int8 table as four words, for table16.
struct Table16 {
  uint32_t w[4];
};
constexpr Table16 table16_of(const int8_t (&v)[16]) {
  Table16 t{{0u, 0u, 0u, 0u}};
  for (int i = 0; i < 16; ++i) t.w[i / 4] |= uint32_t(uint8_t(v[i])) << (8 * (i % 4));
  return t;
}
// The GGUF fp4 layouts' 16 values (gguf_fp4_detail::kvalue) as a table.
constexpr Table16 gguf_fp4_table() {
  int8_t v[16] = {};
  for (int i = 0; i < 16; ++i) v[i] = gguf_fp4_detail::kvalue(uint32_t(i));
  return table16_of(v);
}
// The table's entries at the four indices (bytes 0..15) of x, as four bytes.
__device__ __forceinline__ uint32_t table16(const Table16& t, uint32_t x) {
  const uint32_t y = x & 0x07070707u;  // the index within a half; bit 3 picks the half
  const uint32_t sel = (y & 0x7u) | ((y >> 4) & 0x70u) | ((y >> 8) & 0x700u) | ((y >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(t.w[0], t.w[1], sel), hi = __byte_perm(t.w[2], t.w[3], sel);
  const uint32_t mask = ((x >> 3) & 0x01010101u) * 0xffu;
  return (lo & ~mask) | (hi & mask);
}
constexpr int8_t kIq4Values[16] = BRAZE_IQ4_VALUES;

// Eight e2m1 codes (a word, LSB first) as floats: exact (every e2m1 value is an
// f16; decode_elem<e2m1>'s values, -0 for the code 8 included), through f16
// pairs whose high bytes come from a byte permute of the 8 magnitudes.
__device__ __forceinline__ void e2m1x8(uint32_t w, float* out) {
  constexpr uint32_t lo = 0x3e3c3800u, hi = 0x46444240u;  // f16 high bytes of 0, .5, 1, 1.5 | 2, 3, 4, 6
  const uint32_t hb[2] = {__byte_perm(lo, hi, w & 0x7777u), __byte_perm(lo, hi, (w >> 16) & 0x7777u)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t c = w >> (8 * i);  // codes 2i, 2i + 1 in its low byte
    const uint32_t h2 = __byte_perm(hb[i / 2], 0u, i % 2 ? 0x3424u : 0x1404u) | ((c & 0x8u) << 12) | ((c & 0x80u) << 24);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// Sixteen 6-bit codes E (e2m3 / e3m2, the LSB-first bit stream of 12 bytes at
// src, 4-byte aligned) as floats, exactly decode_elem<E>'s: a code's
// magnitude bits moved to f16's exponent and mantissa fields (its sign to bit
// 15) read as an f16 are the value times 2^(bias - 15), subnormals included,
// and the f32 product by 2^(15 - bias) is exact.
template <Elem E> __device__ __forceinline__ void fp6x16(const uint8_t* src, float* out) {
  static_assert(E == Elem::e2m3 || E == Elem::e3m2, "an fp6 element");
  constexpr int kShift = 10 - ElemCode<E>::mbits;
  constexpr float kUp = E == Elem::e2m3 ? 16384.f : 4096.f;  // 2^(15 - bias)
  const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
  const uint32_t w[4] = {s[0], s[1], s[2], 0u};
#pragma unroll
  for (int j = 0; j < 16; j += 2) {
    const int bit = 6 * j, k = bit / 32, o = bit % 32;
    const uint32_t v = __funnelshift_r(w[k], w[k + 1], o);  // codes j, j + 1 in bits 0..11
    const uint32_t mag = (v & 0x1fu) | ((v & 0x7c0u) << 10);
    const uint32_t h2 = (mag << kShift) | ((v & 0x20u) << 10) | ((v & 0x800u) << 20);
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
    out[j] = __fmul_rn(f.x, kUp);
    out[j + 1] = __fmul_rn(f.y, kUp);
  }
}

// Sixteen Bits-wide codes (the LSB-first bit stream at src) as s * float(c) + bias,
// each product and sum rounded on its own (affine_decode8's), float(c) as (2^23 + c) - 2^23.
template <int Bits> __device__ __forceinline__ void affine_codes16(const uint8_t* src, float s, float bias, float* out) {
  // src is 2 Bits-byte aligned (a chunk's codes take 2 Bits bytes)
  constexpr int A = Bits == 8 ? 16 : Bits == 4 ? 8 : Bits % 2 == 0 ? 4 : 2;
  uint32_t w[4];
  words16<A>(src, w);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int bit = Bits * j, k = bit / 32, o = bit % 32;
    const uint32_t v = o + Bits <= 32 ? w[k] >> o : __funnelshift_r(w[k], w[k < 3 ? k + 1 : 3], o);
    const uint32_t c = v & ((1u << Bits) - 1u);
    out[j] = __fadd_rn(__fmul_rn(s, __fsub_rn(__uint_as_float(0x4b000000u | c), 8388608.f)), bias);
  }
}

// Scale and min j (0..7) of q4_K / q5_K: kq_detail::scale_min_k4 without its branch.
__device__ __forceinline__ void scale_min_k4_sel(const uint8_t* s, int j, int& sc, int& m) {
  const int a = s[j], c = s[j + 4], z = s[j & 3];
  const bool low = j < 4;
  sc = low ? a & 63 : (c & 15) | ((z >> 6) << 4);
  m = low ? c & 63 : (c >> 4) | ((a >> 6) << 4);
}

// The bits of qh from bit 4 i, four at a time spread to the low bit of four bytes, << 4.
__device__ __forceinline__ uint32_t high_bits4(uint32_t qh, int i) {
  return ((((qh >> (4 * i)) & 15u) * 0x00204081u) & 0x01010101u) << 4;
}

// decode_staged's W: the word path (true, every format's default) or, for a
// block format, the codecs' decode_chunk (false; scripts/cuda_dequant_bw.cu
// times it). On the double-buffered kernel the word path is faster for every
// format (H100, 4096 x 14336 -> bf16, % of the copy, 2026-12-08 00:22,
// docs/performance.md): q8_0 93.2 -> 94.4, q4_0 89.4 -> 92.0, q4_1 88.6 ->
// 92.2, q5_0 90.3 -> 92.0, q5_1 88.5 -> 92.6, q4_K 87.0 -> 91.6, q8_K 93.7 ->
// 94.4, iq4_xs 84.9 -> 90.8, mxfp4_gguf 89.5 -> 90.8, nvfp4_gguf 87.4 -> 91.4,
// bit for bit the same output. (On the one-buffer kernel of cc28b5d the codec
// path had been the faster one for those ten formats.)

// decode_chunk of a chunk of a staged tile (16-byte aligned; the tile padded
// by 16 bytes), the loads of a split format's scales done by deq_prefetch.
template <QFormat F, bool W = true>
__device__ __forceinline__ void decode_staged(const uint8_t* tile, int krel, int64_t r, int64_t k_tile,
                                              const DeqParams& p, const DeqPre& pre, float* out) {
  constexpr Group G = info(F).group;
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  const uint8_t* b = tile + krel / B * BB;  // blocks: the chunk's block
  const int e = krel % B;                   // its first element in the block
  uint32_t w[4];
  if constexpr (!W && info(F).layout == Layout::blocks) {
    decode_chunk<F>(tile, krel, r, k_tile, p, out);
  } else if constexpr (F == QFormat::q2_K) {
    const int sc = b[e >> 4];
    const float d = __fmul_rn(f16_at(b + 80), float(sc & 15)), m = __fmul_rn(f16_at(b + 82), float(sc >> 4));
    words16<4>(b + 16 + ((e >> 7) << 5) + (e & 31), w);
    const int sh = ((e & 127) >> 5) << 1;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (w[i] >> sh) & 0x03030303u;
    affine16<Affine::mul_sub>(w, 8388608.f, d, m, out);
  } else if constexpr (F == QFormat::q3_K) {
    const float d = __fmul_rn(f16_at(b + 108), float(kq_detail::scale_q3(b + 96, e >> 4)));
    uint32_t h[4];
    words16<2>(b + 32 + ((e >> 7) << 5) + (e & 31), w);
    words16<2>(b + (e & 31), h);
    const int sh = ((e & 127) >> 5) << 1, hb = e >> 5;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = ((w[i] >> sh) & 0x03030303u) | (((h[i] >> hb) & 0x01010101u) << 2);
    affine16<Affine::mul>(w, 8388612.f, d, 0.f, out);  // q - 4
  } else if constexpr (F == QFormat::q4_K || F == QFormat::q5_K) {
    int sc, mn;
    scale_min_k4_sel(b + 4, e >> 5, sc, mn);
    const float d = __fmul_rn(f16_at(b), float(sc)), m = __fmul_rn(f16_at(b + 2), float(mn));
    const int sh = ((e >> 5) & 1) << 2;
    if constexpr (F == QFormat::q4_K) {
      words16<16>(b + 16 + ((e >> 6) << 5) + (e & 31), w);
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = (w[i] >> sh) & 0x0f0f0f0fu;
    } else {
      uint32_t h[4];
      words16<16>(b + 48 + ((e >> 6) << 5) + (e & 31), w);
      words16<16>(b + 16 + (e & 31), h);
      const int hb = e >> 5;
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = ((w[i] >> sh) & 0x0f0f0f0fu) | (((h[i] >> hb) & 0x01010101u) << 4);
    }
    affine16<Affine::mul_sub>(w, 8388608.f, d, m, out);
  } else if constexpr (F == QFormat::q6_K) {
    const float d = __fmul_rn(f16_at(b + 208), float(int8_t(b[192 + (e >> 4)])));
    const int rr = e & 127;
    uint32_t h[4];
    words16<2>(b + ((e >> 7) << 6) + (rr & 63), w);
    words16<2>(b + 128 + ((e >> 7) << 5) + (rr & 31), h);
    const int shl = (rr >> 6) << 2, shh = (rr >> 5) << 1;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = ((w[i] >> shl) & 0x0f0f0f0fu) | (((h[i] >> shh) & 0x03030303u) << 4);
    affine16<Affine::mul>(w, 8388640.f, d, 0.f, out);  // q - 32
  } else if constexpr (F == QFormat::q8_0 || F == QFormat::q8_K) {
    float d;
    if constexpr (F == QFormat::q8_0) {
      d = f16_at(b);
      words16<2>(b + 2 + e, w);
    } else {
      d = load_f32(b);
      words16<4>(b + 4 + e, w);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] ^= 0x80808080u;  // int8 + 128
    affine16<Codec<F>::kAffine>(w, 8388736.f, d, 0.f, out);
  } else if constexpr (F == QFormat::q4_0 || F == QFormat::q4_1) {
    constexpr int o = F == QFormat::q4_0 ? 2 : 4;  // the nibbles' offset
    const float d = f16_at(b), m = F == QFormat::q4_0 ? 0.f : f16_at(b + 2);
    words16<o>(b + o, w);
    const int sh = (e >> 4) << 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = (w[i] >> sh) & 0x0f0f0f0fu;
    affine16<Codec<F>::kAffine>(w, F == QFormat::q4_0 ? 8388616.f : 8388608.f, d, m, out);  // q4_0: q - 8
  } else if constexpr (F == QFormat::q5_0 || F == QFormat::q5_1) {
    constexpr int o = F == QFormat::q5_0 ? 2 : 4;  // qh's offset; the nibbles follow it
    const float d = f16_at(b);
    const uint32_t qh = (uint32_t(load_u16(b + o)) | (uint32_t(load_u16(b + o + 2)) << 16)) >> e;
    words16<F == QFormat::q5_0 ? 2 : 8>(b + o + 4, w);
    const int sh = (e >> 4) << 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = ((w[i] >> sh) & 0x0f0f0f0fu) | high_bits4(qh, i);
    if constexpr (F == QFormat::q5_0) {
      affine16<Affine::mul>(w, 8388624.f, d, 0.f, out);  // q - 16
    } else {
      affine16<Affine::mul_add>(w, 8388608.f, d, f16_at(b + 2), out);
    }
  } else if constexpr (F == QFormat::iq4_nl || F == QFormat::iq4_xs) {
    constexpr Table16 kv = table16_of(kIq4Values);
    float d;
    if constexpr (F == QFormat::iq4_nl) {
      d = f16_at(b);
      words16<2>(b + 2, w);
    } else {
      const int ib = e >> 5;
      const int ls = ((b[4 + (ib >> 1)] >> ((ib & 1) << 2)) & 15) | (((load_u16(b + 2) >> (2 * ib)) & 3) << 4);
      d = __fmul_rn(f16_at(b), float(ls - 32));
      words16<8>(b + 8 + (ib << 4), w);
    }
    const int sh = ((e >> 4) & 1) << 2;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = table16(kv, (w[i] >> sh) & 0x0f0f0f0fu) ^ 0x80808080u;  // int8 + 128
    affine16<Affine::mul>(w, 8388736.f, d, 0.f, out);
  } else if constexpr (F == QFormat::mxfp4_gguf || F == QFormat::nvfp4_gguf) {
    constexpr Table16 kv = gguf_fp4_table();
    float d;
    if constexpr (F == QFormat::mxfp4_gguf) {
      d = Codec<F>::scale(b);
      words16<1>(b + 1, w);
      const int sh = e >= 16 ? 4 : 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = (w[i] >> sh) & 0x0f0f0f0fu;
    } else {
      const int sub = e / 16;
      d = Codec<F>::scale(b, sub);
      const uint32_t v0 = reinterpret_cast<const uint32_t*>(b + 4 + 8 * sub)[0];  // 4-byte aligned
      const uint32_t v1 = reinterpret_cast<const uint32_t*>(b + 4 + 8 * sub)[1];
      w[0] = v0 & 0x0f0f0f0fu, w[1] = v1 & 0x0f0f0f0fu, w[2] = (v0 >> 4) & 0x0f0f0f0fu, w[3] = (v1 >> 4) & 0x0f0f0f0fu;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = table16(kv, w[i]) ^ 0x80808080u;
    affine16<Affine::mul>(w, 8388736.f, d, 0.f, out);
  } else if constexpr (G == Group::fp8) {
    fp8x16_times<MxElem<F>::e>(tile + krel, __uint_as_float(pre.s), out);
  } else if constexpr (G == Group::int8) {
    const float s = __uint_as_float(pre.s);
    words16<16>(tile + krel, w);
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = __fmul_rn(level_f(w[i / 4] ^ 0x80808080u, i % 4, 8388736.f), s);
  } else if constexpr (G == Group::mx && info(F).layout == Layout::split) {
    constexpr Elem E = MxElem<F>::e;
    const float x = e8m0_to_f32(pre.s);
    if constexpr (E == Elem::e4m3 || E == Elem::e5m2) {
      fp8x16_times<E>(tile + krel, x, out);  // decode_elem(c) * x, as for fp8
    } else if constexpr (E == Elem::e2m1) {
      const uint2 v = *reinterpret_cast<const uint2*>(tile + krel / 2);
      e2m1x8(v.x, out);
      e2m1x8(v.y, out + 8);
#pragma unroll
      for (int i = 0; i < 16; ++i) out[i] = __fmul_rn(out[i], x);
    } else {
      fp6x16<E>(tile + krel / 8 * 6, out);  // decode_elem(c), exactly
#pragma unroll
      for (int i = 0; i < 16; ++i) out[i] = __fmul_rn(out[i], x);
    }
  } else if constexpr (F == QFormat::nvfp4) {
    const float s = decode_elem<Elem::e4m3>(pre.s);
    const uint2 v = *reinterpret_cast<const uint2*>(tile + krel / 2);
    e2m1x8(v.x, out);
    e2m1x8(v.y, out + 8);
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = __fmul_rn(__fmul_rn(out[i], s), pre.t);  // (e2m1 * s) * t
  } else if constexpr (G == Group::affine) {
    const float s = bits_scalar(pre.s, p.scales_dtype), bias = bits_scalar(pre.b, p.scales_dtype);
    constexpr int kBits = affine_bits<F>();
    affine_codes16<kBits>(tile + krel / 8 * kBits, s, bias, out);
  } else {
    static_assert(G != G, "every format has a dequantize path");
  }
}

// decode_staged that loads the split scales itself (no prefetch).
template <QFormat F>
__device__ __forceinline__ void decode_staged(const uint8_t* tile, int krel, int64_t r, int64_t k_tile,
                                              const DeqParams& p, float* out) {
  decode_staged<F>(tile, krel, r, k_tile, p, deq_prefetch<F>(p, r, k_tile + krel), out);
}

// The 16-element chunks of a warp's 32 lanes (lane l: elements [16 l, 16 l + 16)
// of a 512-element span at dst, 16-byte aligned) stored as 16-bit T, each
// store instruction 512 contiguous bytes (lane l writes half l % 2 of chunk
// l / 2, then of chunk 16 + l / 2: the halves come by shuffles), not 32-byte
// pieces 32 bytes apart. The values and roundings are store_arith_n's.
template <class T>
__device__ __forceinline__ void store_warp_span16(T* dst, const float* v, int lane) {
  static_assert(sizeof(T) == 2, "16-bit outputs");
  uint32_t u[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if constexpr (std::is_same_v<T, __half>) {
      const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
      u[i] = *reinterpret_cast<const uint32_t*>(&h);
    } else {
      const __nv_bfloat162 b = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
      u[i] = *reinterpret_cast<const uint32_t*>(&b);
    }
  }
  const bool odd = lane & 1;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int src = 16 * s + (lane >> 1);
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t lo = __shfl_sync(0xffffffffu, u[j], src), hi = __shfl_sync(0xffffffffu, u[4 + j], src);
      w[j] = odd ? hi : lo;
    }
    reinterpret_cast<uint4*>(dst)[32 * s + lane] = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// A thread's decoded chunk krel (of n in the tile) to row_tile + krel: by
// store_warp_span16 where T is 16-bit, the output vector-aligned and the
// warp's 32 chunks all whole (uniform over the warp), else by store_arith_n.
template <class T>
__device__ __forceinline__ void store_chunk(T* row_tile, int krel, int n, const float* v, bool vec) {
  if constexpr (sizeof(T) == 2) {
    const int span = krel - (int(threadIdx.x) % 32) * kDeqChunk;  // the warp's first element
    if (vec && span + 32 * kDeqChunk <= n) {
      store_warp_span16<T>(row_tile + span, v, int(threadIdx.x) % 32);
      return;
    }
  }
  if (krel < n) {
    const int m = n - krel < kDeqChunk ? n - krel : kDeqChunk;  // short only in fp8 / int8 rows
    store_arith_n<T, kDeqChunk>(row_tile + krel, v, m, vec);
  }
}

// The kernel (see the top of this file): two tile buffers, tile i + 1 staged
// by cp.async (its split scales loaded into registers) before tile i is
// decoded and stored, so a CTA's loads are in flight while it decodes.
// W: decode_staged's path (true: words); H: kDeqTile parts a tile (p.tiles counts tiles of H * kDeqTile).
template <QFormat F, class T, bool W = true, int H = kDeqSpan / kDeqTile>
__global__ void __launch_bounds__(kDeqThreads) dequantize_kernel(const DeqParams p) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  static_assert(kDeqTile % B == 0, "tiles start on block boundaries");
  constexpr int kSpan = H * kDeqTile;
  constexpr int kTileBytes = kSpan / B * BB;
  constexpr int kBufBytes = (kTileBytes + 16 + 15) / 16 * 16;  // + 16: words16's reads around unaligned bytes
  constexpr int kHalves = H;
  __shared__ __align__(16) uint8_t buf[2 * kBufBytes];
  struct Tile {
    int64_t r, k;
    int n;
  };
  auto tile_at = [&](int64_t t) {
    Tile x;
    x.r = t / p.tiles;
    x.k = (t - x.r * p.tiles) * kSpan;
    const int64_t left = p.cols - x.k;
    x.n = left < kSpan ? int(left) : kSpan;  // a multiple of B
    return x;
  };
  auto issue = [&](const Tile& x, uint8_t* dst, DeqPre (&pre)[kHalves]) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int krel = (h * kDeqThreads + int(threadIdx.x)) * kDeqChunk;
      pre[h] = DeqPre{0u, 0u, 0.f};
      if (krel < x.n) pre[h] = deq_prefetch<F>(p, x.r, x.k + krel);
    }
    stage_async(dst, p.data + x.r * p.data_stride + x.k / B * BB, x.n / B * BB, int(threadIdx.x), kDeqThreads);
  };
  const int64_t total = p.rows * p.tiles;
  int64_t t = blockIdx.x;
  if (t >= total) return;
  Tile cur = tile_at(t);
  DeqPre pre[kHalves];
  issue(cur, buf, pre);
  cp_async_commit();
  for (int i = 0;; ++i) {
    const int64_t t_next = t + gridDim.x;
    Tile next{0, 0, 0};
    DeqPre pre_next[kHalves];
    if (t_next < total) {
      next = tile_at(t_next);
      issue(next, buf + ((i + 1) & 1) * kBufBytes, pre_next);
    }
    cp_async_commit();
    cp_async_wait<1>();  // tile i landed (tile i + 1 may be in flight)
    __syncthreads();
    const uint8_t* tile = buf + (i & 1) * kBufBytes;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int krel = (h * kDeqThreads + int(threadIdx.x)) * kDeqChunk;
      float v[kDeqChunk];
      if (krel < cur.n) decode_staged<F, W>(tile, krel, cur.r, cur.k, p, pre[h], v);
      store_chunk<T>(static_cast<T*>(p.out) + cur.r * p.out_stride + cur.k, krel, cur.n, v, p.vec_out);
    }
    if (t_next >= total) break;
    __syncthreads();  // tile i is read before iteration i + 1 stages tile i + 2 over it
    cur = next;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) pre[h] = pre_next[h];
    t = t_next;
  }
}

}  // namespace braze::cuda::quant
