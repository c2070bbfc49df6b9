// out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for many rows of x (m > 16).
//
// f16 / bf16 x: tensor cores (mma.sync m16n8k16, f32 accumulators). A CTA of
// 8 warps computes a 128 x 128 tile of out (a warp 64 rows of x by 32 of W)
// over K in steps of 32, two shared-memory stages:
//   x: cp.async 16-byte copies of its 128 x 32 tile (plain guarded loads at
//      the edges: rows past M and elements past K read as 0);
//   W: each thread decodes one 16-element chunk of the 128 x 32 tile
//      (read_chunk: decode_chunk on the bytes in global memory, or the dense
//      row) into registers while the tensor cores work on the current stage,
//      then stores it rounded to x's dtype (the mma operand type);
// fragments come from ldmatrix (rows padded to 40 elements: conflict-free).
// Products of 16-bit operands are exact in f32; W rounded to x's dtype is the
// path's one approximation beyond f32 summation.
//
// f32 x: CUDA cores, 64 x 64 tiles, each thread 4 x 4 outputs over K steps
// of 16 (one decoded chunk per W row): exact f32 products, no tf32.
#pragma once
#include "cuda/attention/mma.cuh"
#include "cuda/quant/gemv.cuh"

namespace braze::cuda::quant {

constexpr int kMmaBM = 128, kMmaBN = 128, kMmaBK = 32, kMmaThreads = 256;
constexpr int kMmaPitch = kMmaBK + 8;  // elements per staged row: 80 bytes, ldmatrix rows in distinct banks

// VecW: dense W rows 16-byte aligned.
template <class Wt, class T, bool VecW>
__global__ void __launch_bounds__(kMmaThreads) gemm_mma_kernel(const MmParams p) {
  __shared__ __align__(16) T xs[2][kMmaBM][kMmaPitch];
  __shared__ __align__(16) T ws[2][kMmaBN][kMmaPitch];
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int wm = warp >> 2, wn = warp & 3;  // 2 x 4 warps of 64 x 32
  const int64_t M = p.m, N = p.w.rows, K = p.w.cols;
  const int64_t m0 = int64_t(blockIdx.y) * kMmaBM, n0 = int64_t(blockIdx.x) * kMmaBN;
  const int64_t kt_count = (K + kMmaBK - 1) / kMmaBK;
  const T* x = static_cast<const T*>(p.x);

  auto load_x = [&](int st, int64_t kt) {
    for (int seg = tid; seg < kMmaBM * (kMmaBK / 8); seg += kMmaThreads) {
      const int row = seg >> 2, part = seg & 3;
      const int64_t m = m0 + row, k = kt * kMmaBK + part * 8;
      T* dst = &xs[st][row][part * 8];
      if (p.vec_x && m < M && k + 8 <= K) {
        cp_async16(dst, x + m * p.x_stride + k);
      } else {
#pragma unroll
        for (int i = 0; i < 8; ++i) dst[i] = (m < M && k + i < K) ? x[m * p.x_stride + k + i] : out_of<T>(0.f);
      }
    }
  };
  const int wrow = tid >> 1, whalf = tid & 1;  // this thread's W chunk in a tile
  auto decode_w = [&](int64_t kt, uint32_t (&reg)[8]) {
    const int64_t n = n0 + wrow, k = kt * kMmaBK + whalf * kChunk;
    float w[kChunk];
    if (n < N && k < K) {
      read_chunk<Wt, T, VecW>(p.w, n, k, w);
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) w[i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) reg[i] = attn::pack2<T>(w[2 * i], w[2 * i + 1]);
  };
  auto store_w = [&](int st, const uint32_t (&reg)[8]) {
    uint4* dst = reinterpret_cast<uint4*>(&ws[st][wrow][whalf * kChunk]);
    dst[0] = make_uint4(reg[0], reg[1], reg[2], reg[3]);
    dst[1] = make_uint4(reg[4], reg[5], reg[6], reg[7]);
  };

  float acc[4][4][4];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.f;

  uint32_t wreg[8];
  if (kt_count > 0) {
    load_x(0, 0);
    cp_async_commit();
    decode_w(0, wreg);
    store_w(0, wreg);
    cp_async_wait<0>();
    __syncthreads();
  }
  for (int64_t kt = 0; kt < kt_count; ++kt) {
    const int st = int(kt & 1);
    const bool next = kt + 1 < kt_count;
    if (next) {
      load_x(st ^ 1, kt + 1);
      cp_async_commit();
      decode_w(kt + 1, wreg);
    }
#pragma unroll
    for (int ks = 0; ks < kMmaBK / 16; ++ks) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const int row = wm * 64 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        attn::ldmatrix_x4(a[mt], attn::smem_addr(&xs[st][row][ks * 16 + (lane >> 4) * 8]));
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        const int row = wn * 32 + np * 16 + (lane & 7) + (lane >> 4) * 8;
        uint32_t r[4];
        attn::ldmatrix_x4(r, attn::smem_addr(&ws[st][row][ks * 16 + ((lane >> 3) & 1) * 8]));
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) attn::mma16816<T>(acc[mt][nt], a[mt], b[nt][0], b[nt][1]);
    }
    if (next) store_w(st ^ 1, wreg);
    cp_async_wait<0>();
    __syncthreads();  // stage st ^ 1 complete, stage st free for step kt + 2
  }

  const int g = lane >> 2, t = lane & 3;
  T* out = static_cast<T*>(p.out);
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int64_t n = n0 + wn * 32 + nt * 8 + 2 * t + e;
      if (n >= N) continue;
      const float bv = bias ? in_f32(bias[n]) : 0.f;
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t m = m0 + wm * 64 + mt * 16 + g + 8 * h;
          if (m < M) {
            const float v = acc[mt][nt][2 * h + e];
            out[m * p.out_stride + n] = out_of<T>(bias ? v + bv : v);
          }
        }
      }
    }
  }
}

constexpr int kSimtTile = 64, kSimtThreads = 256;

template <class Wt, class T, bool VecW>
__global__ void __launch_bounds__(kSimtThreads) gemm_simt_kernel(const MmParams p) {
  __shared__ __align__(16) float xs[kChunk][kSimtTile + 4];  // [k][m]
  __shared__ __align__(16) float ws[kChunk][kSimtTile + 4];  // [k][n]
  const int tid = int(threadIdx.x), tx = tid & 15, ty = tid >> 4;
  const int64_t M = p.m, N = p.w.rows, K = p.w.cols;
  const int64_t m0 = int64_t(blockIdx.y) * kSimtTile, n0 = int64_t(blockIdx.x) * kSimtTile;
  const T* x = static_cast<const T*>(p.x);
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
    {
      const int row = tid >> 2, q = (tid & 3) * 4;
      const int64_t m = m0 + row;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t k = k0 + q + i;
        xs[q + i][row] = (m < M && k < K) ? in_f32(x[m * p.x_stride + k]) : 0.f;
      }
    }
    if (tid < kSimtTile) {
      const int64_t n = n0 + tid;
      float w[kChunk];
      if (n < N) {
        read_chunk<Wt, T, VecW>(p.w, n, k0, w);
      } else {
#pragma unroll
        for (int i = 0; i < kChunk; ++i) w[i] = 0.f;
      }
#pragma unroll
      for (int i = 0; i < kChunk; ++i) ws[i][tid] = w[i];
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kChunk; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[kk][ty * 4]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  T* out = static_cast<T*>(p.out);
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t n = n0 + tx * 4 + j;
    if (n >= N) continue;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t m = m0 + ty * 4 + i;
      if (m < M) out[m * p.out_stride + n] = out_of<T>(bias ? acc[i][j] + in_f32(bias[n]) : acc[i][j]);
    }
  }
}

}  // namespace braze::cuda::quant
