// How the matmul kernels read W [N, K]: 16-element chunks as float32, either
// a dense array of the activations' type or a quantized weight decoded by
// dequant.cuh's decode_chunk (the one format dispatch, the codecs' own
// arithmetic). Shared by the GEMV (gemv.cuh) and the GEMMs (gemm.cuh).
#pragma once
#include "cuda/quant/dequant.cuh"

namespace braze::cuda::quant {

// The weight kinds, as kernel template arguments.
struct Dense {
  static constexpr bool dense = true;
  static constexpr int block = 1;
};
template <QFormat F> struct Quant {
  static constexpr bool dense = false;
  static constexpr QFormat format = F;
  static constexpr int block = info(F).blocks.block;
  static constexpr int block_bytes = info(F).blocks.block_bytes;
};

constexpr int kChunk = 16;  // elements a decode step yields (decode_chunk's unit)

// Chunk [k0, k0 + 16) of row r (k0 a multiple of 16, < K) straight from
// global memory; elements at or past K read as 0. Quantized rows: the codec
// reads its bytes where they lie (L1-cached); only fp8 / int8 (1-element
// blocks) have K that is no multiple of 16, and their tail chunk is copied
// into a zero-padded buffer first so no byte past the row is read.
template <class Wt, class T, bool Vec>
__device__ __forceinline__ void read_chunk(const DeqParams& p, int64_t r, int64_t k0, float (&w)[kChunk]) {
  const uint8_t* row = p.data + r * p.data_stride;
  const int64_t left = p.cols - k0;
  if constexpr (Wt::dense) {
    load_n<T, kChunk, Vec>(reinterpret_cast<const T*>(row) + k0, w, left < kChunk ? int(left) : kChunk);
  } else {
    if constexpr (Wt::block == 1) {
      if (left < kChunk) {
        uint8_t buf[kChunk];
#pragma unroll
        for (int i = 0; i < kChunk; ++i) buf[i] = i < left ? row[k0 + i] : 0;
        decode_chunk<Wt::format>(buf, 0, r, k0, p, w);
#pragma unroll
        for (int i = 0; i < kChunk; ++i)
          if (i >= left) w[i] = 0.f;  // a non-finite scale times code 0 would not be 0
        return;
      }
    }
    decode_chunk<Wt::format>(row, int(k0), r, 0, p, w);
  }
}


}  // namespace braze::cuda::quant
