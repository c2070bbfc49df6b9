// dequantize on CUDA: one kernel over QFormat. A CTA owns a tile of
// kDeqSpan = 2 * kDeqThreads * 16 consecutive elements of one row (tiles start
// on block boundaries): it stages the tile's packed bytes in shared memory with
// 16-byte loads (each byte read from memory once, fully coalesced; two passes'
// bytes in flight a barrier), then each thread decodes a 16-element chunk of
// each half through the format's codec (csrc/core/quant/, the CPU's code) and
// stores it as 16-byte vectors, consecutive threads on consecutive chunks,
// converted to 16-bit types two at a time. fp8 codes go
// through the hardware's exact fp8x2 -> f16x2 conversion instead of the codec's
// bit arithmetic (the same values). Sub-block scales scattered in a K-quant
// block are read from shared memory, not memory. CTAs loop over the tiles of
// all rows (grid: up to four waves of resident CTAs). The frame alone (bytes
// widened, no decode) runs at ~91% of the copy on an H100, so the decode's
// instructions are what separates a format from that: scripts/cuda_dequant_bw.cu.
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
constexpr int kDeqSpan = 2 * kDeqTile;  // elements a dequantize CTA stages a barrier (H100: q8_0 84 -> 91% of the copy)

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

// decode_chunk of a chunk of a staged tile (16-byte aligned), fp8 through
// fp8x16_times; the matmuls read unaligned rows and keep decode_chunk.
template <QFormat F>
__device__ __forceinline__ void decode_staged(const uint8_t* tile, int krel, int64_t r, int64_t k_tile,
                                              const DeqParams& p, float* out) {
  if constexpr (info(F).group == Group::fp8) {
    fp8x16_times<MxElem<F>::e>(tile + krel, scaled_scale(p, r, k_tile + krel), out);
  } else {
    decode_chunk<F>(tile, krel, r, k_tile, p, out);
  }
}

template <QFormat F, class T>
__global__ void __launch_bounds__(kDeqThreads) dequantize_kernel(const DeqParams p) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  static_assert(kDeqTile % B == 0, "tiles start on block boundaries");
  constexpr int kTileBytes = kDeqSpan / B * BB;
  __shared__ __align__(16) uint8_t tile[kTileBytes];
  const int64_t total = p.rows * p.tiles;
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t r = t / p.tiles, k_tile = (t - r * p.tiles) * kDeqSpan;
    const int64_t left = p.cols - k_tile;
    const int n = left < kDeqSpan ? int(left) : kDeqSpan;  // a multiple of B
    stage_bytes(tile, p.data + r * p.data_stride + k_tile / B * BB, n / B * BB);
    __syncthreads();
#pragma unroll
    for (int h = 0; h < kDeqSpan / kDeqTile; ++h) {
      const int krel = (h * kDeqThreads + int(threadIdx.x)) * kDeqChunk;
      if (krel < n) {
        float v[kDeqChunk];
        decode_staged<F>(tile, krel, r, k_tile, p, v);
        T* dst = static_cast<T*>(p.out) + r * p.out_stride + k_tile + krel;
        const int m = n - krel < kDeqChunk ? n - krel : kDeqChunk;  // short only in fp8 / int8 rows
        store_arith_n<T, kDeqChunk>(dst, v, m, p.vec_out);
      }
    }
    __syncthreads();  // the tile is read before the next one overwrites it
  }
}

}  // namespace braze::cuda::quant
