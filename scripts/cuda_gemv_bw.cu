// What limits the CUDA GEMV (quant.matmul with 1-8 rows of x): the library's
// kernel (shaders/cuda/quant/gemv.cuh) beside the tensor-core variants (mma), in one process, against
// cudaMemcpy of the weight's bytes (no braze build needed).
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders -I scripts \
//     scripts/cuda_gemv_bw.cu -o /tmp/gemvbw && /tmp/gemvbw
// (no -fmad=false: the matmul units keep fused multiply-adds, as CMake builds them.)
// Each row: median of 7 timings of 20 launches rotating over 3 weight sets
// (each larger than the L2); bytes = the packed weight read once (x and out
// are noise); % against the bytes a second cudaMemcpyAsync moves (read +
// written), the rate braze bench's copy ceiling also counts. The mma variants
// are compared with the library's output by their largest difference.
// GEMVBW_ONLY=name runs one case (scripts/ncu_gemv.sh); GEMVBW_DUMP=dir writes
// each library output, so two builds (two commits) can be compared with cmp.
// Knobs timed at 467ff6e / 5a4d060 and removed (docs/performance.md, 2026-12-07 07:38-08:11): warp groups a CTA,
// the staging alone (no dot), 3-4 slabs in the pipeline, K split over 2 / 4 CTAs.
// Tried and dropped (docs/performance.md, history): a cp.async ring a warp ("pipe", 20274e9), a
// 4096-element slab at one row (a260282), 3 CTAs an SM and W by the copy engine (2026-12-06), and
// once more a ring a warp with x staged once for all of K, 16 warps a CTA (1024 / 2048 / 3072-element
// slabs, 2-4 stages: at best 4% faster for q4_0, slower for others; 2026-12-07, docs/performance.md), and
// "regx": x in registers a lane, W's units loaded from global memory into registers, no shared staging
// (ff15fd4: q4_0 41% of the copy at best against the library's 58% on an H100; 2026-12-08).
#include <cuda_runtime.h>

#include "cuda_bw.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/attention/mma.cuh"
#include "cuda/quant/gemv.cuh"


using namespace braze::cuda::quant;
using braze::cuda::cp_async_commit;
using braze::cuda::cp_async_wait;
using braze::quant::QFormat;



constexpr int kMmaRows = 16, kMmaWarps = 8;

// bytes n0, n1 (bits 0-3 of each byte of v16) -> bf16x2 (n0 - off, n1 - off)
template <int Off> __device__ __forceinline__ uint32_t nib_pair(uint32_t v16) {
  const uint32_t u = __byte_perm(v16 & 0x0F0Fu, 0x43u, 0x4140u);
  __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&u);
  h = __hsub2(h, __floats2bfloat162_rn(128.f + Off, 128.f + Off));
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ uint32_t u16_at(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// x's B fragments of a 32-element group at kb: k 2t, 2t + 8, 16 + 2t, 24 + 2t of row g (zeros past m)
__device__ __forceinline__ void x_frags(const __nv_bfloat16* xg, bool xrow, int64_t kb, int t, uint32_t (&bx)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
    bx[i] = xrow ? __ldg(reinterpret_cast<const unsigned int*>(xg + kb + 8 * i + 2 * t)) : 0u;
}

struct MmaQ4_0 {
  static constexpr int kElems = 32, kBytes = 18;
  // one block of rows g (pg) and g + 8 (ph) at element kb
  static __device__ __forceinline__ void block(const uint8_t* pg, const uint8_t* ph, const __nv_bfloat16* xg,
                                               bool xrow, int64_t kb, int t, float (&acc)[4]) {
    const float dg = __half2float(*reinterpret_cast<const __half*>(pg));
    const float dh = __half2float(*reinterpret_cast<const __half*>(ph));
    const uint32_t ga = u16_at(pg + 2 + 2 * t), gb = u16_at(pg + 10 + 2 * t);
    const uint32_t ha = u16_at(ph + 2 + 2 * t), hb = u16_at(ph + 10 + 2 * t);
    uint32_t bx[4];
    x_frags(xg, xrow, kb, t, bx);
    const uint32_t a0[4] = {nib_pair<8>(ga), nib_pair<8>(ha), nib_pair<8>(gb), nib_pair<8>(hb)};
    const uint32_t a1[4] = {nib_pair<8>(ga >> 4), nib_pair<8>(ha >> 4), nib_pair<8>(gb >> 4), nib_pair<8>(hb >> 4)};
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    braze::cuda::attn::mma16816<__nv_bfloat16>(c, a0, bx[0], bx[1]);
    braze::cuda::attn::mma16816<__nv_bfloat16>(c, a1, bx[2], bx[3]);
    acc[0] = fmaf(dg, c[0], acc[0]);
    acc[1] = fmaf(dg, c[1], acc[1]);
    acc[2] = fmaf(dh, c[2], acc[2]);
    acc[3] = fmaf(dh, c[3], acc[3]);
  }
};

struct MmaQ4_K {
  static constexpr int kElems = 256, kBytes = 144;
  static __device__ __forceinline__ void block(const uint8_t* pg, const uint8_t* ph, const __nv_bfloat16* xg,
                                               bool xrow, int64_t kb, int t, float (&acc)[4]) {
    const float dg = __half2float(*reinterpret_cast<const __half*>(pg));
    const float mg = __half2float(*reinterpret_cast<const __half*>(pg + 2));
    const float dh = __half2float(*reinterpret_cast<const __half*>(ph));
    const float mh = __half2float(*reinterpret_cast<const __half*>(ph + 2));
    constexpr uint32_t kOnes = 0x3F803F80u;  // bf16 1.0, 1.0
    const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
    for (int pr = 0; pr < 4; ++pr) {  // sub-blocks 2 pr (low nibbles) and 2 pr + 1 (high) share 32 bytes
      const uint8_t* qg = pg + 16 + 32 * pr;
      const uint8_t* qh = ph + 16 + 32 * pr;
      uint32_t w[2][4];  // [j: elements 16 j ..][row g lo, row g hi (+8), row h lo, row h hi]
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        w[j][0] = u16_at(qg + 16 * j + 2 * t);
        w[j][1] = u16_at(qg + 16 * j + 8 + 2 * t);
        w[j][2] = u16_at(qh + 16 * j + 2 * t);
        w[j][3] = u16_at(qh + 16 * j + 8 + 2 * t);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // sub-block s = 2 pr + h: nibble h of each byte
        const int sub = 2 * pr + h;
        int scg, mng, sch, mnh;
        braze::quant::kq_detail::scale_min_k4(pg + 4, sub, scg, mng);
        braze::quant::kq_detail::scale_min_k4(ph + 4, sub, sch, mnh);
        const int64_t k0 = kb + 32 * sub;
        uint32_t bx[4];
        x_frags(xg, xrow, k0, t, bx);
        float c[4] = {0.f, 0.f, 0.f, 0.f}, sx[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int sh = 4 * h;
          const uint32_t a[4] = {nib_pair<0>(w[j][0] >> sh), nib_pair<0>(w[j][2] >> sh), nib_pair<0>(w[j][1] >> sh),
                                 nib_pair<0>(w[j][3] >> sh)};
          braze::cuda::attn::mma16816<__nv_bfloat16>(c, a, bx[2 * j], bx[2 * j + 1]);
          braze::cuda::attn::mma16816<__nv_bfloat16>(sx, ones, bx[2 * j], bx[2 * j + 1]);
        }
        const float ag = dg * float(scg), bg = mg * float(mng), ah = dh * float(sch), bh = mh * float(mnh);
        acc[0] = fmaf(ag, c[0], fmaf(-bg, sx[0], acc[0]));
        acc[1] = fmaf(ag, c[1], fmaf(-bg, sx[1], acc[1]));
        acc[2] = fmaf(ah, c[2], fmaf(-bh, sx[2], acc[2]));
        acc[3] = fmaf(ah, c[3], fmaf(-bh, sx[3], acc[3]));
      }
    }
  }
};

template <class Fm, int S, int WKB> struct MmaGeo {
  static constexpr int RP = (WKB * Fm::kBytes + 15) / 16 * 16;  // bytes a staged row
  static constexpr int ring = S * kMmaRows * RP;                // bytes a warp
  static constexpr int smem = kMmaWarps * ring + kMmaWarps * kMmaRows * 8 * 4;
};

template <class Fm, int S, int WKB>
__global__ void __launch_bounds__(256, 2) gemv_mma(const MmParams p) {
  using G = MmaGeo<Fm, S, WKB>;
  constexpr int BE = Fm::kElems, BB = Fm::kBytes;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  uint8_t* ring = smem + warp * G::ring;
  float* red = reinterpret_cast<float*>(smem + kMmaWarps * G::ring);  // [warps][16 rows][8 n]
  const int64_t N = p.w.rows, nb = p.w.cols / BE, r0 = int64_t(blockIdx.x) * kMmaRows;
  const int64_t per = (nb + kMmaWarps - 1) / kMmaWarps, b_lo = warp * per < nb ? warp * per : nb;
  const int64_t b_hi = b_lo + per < nb ? b_lo + per : nb;
  const int64_t nst = (b_hi - b_lo + WKB - 1) / WKB;
  auto stage = [&](int64_t s) {
    if (s < nst) {
      const int64_t b0 = b_lo + s * WKB;
      const int nblk = int(b_hi - b0 < WKB ? b_hi - b0 : WKB);
      for (int j = 0; j < kMmaRows; ++j)
        if (r0 + j < N)
          stage_async(ring + (int(s % S) * kMmaRows + j) * G::RP, p.w.data + (r0 + j) * p.w.data_stride + b0 * BB,
                      nblk * BB, lane, 32);
    }
    cp_async_commit();
  };
  const bool xrow = g < p.m;
  const __nv_bfloat16* xg = static_cast<const __nv_bfloat16*>(p.x) + (xrow ? g : 0) * p.x_stride;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < S - 1; ++s) stage(s);
  for (int64_t s = 0; s < nst; ++s) {
    stage(s + S - 1);
    cp_async_wait<S - 1>();
    __syncwarp();
    const int64_t b0 = b_lo + s * WKB;
    const int nblk = int(b_hi - b0 < WKB ? b_hi - b0 : WKB);
    const uint8_t* st = ring + int(s % S) * kMmaRows * G::RP;
    for (int b = 0; b < nblk; ++b)  // rows past N read stale bytes; their outputs are dropped
      Fm::block(st + g * G::RP + b * BB, st + (g + 8) * G::RP + b * BB, xg, xrow, (b0 + b) * BE, t, acc);
    __syncwarp();
  }
  // c0, c1: row g, n 2t, 2t + 1; c2, c3: row g + 8
  float* rw = red + warp * kMmaRows * 8;
  rw[g * 8 + 2 * t] = acc[0];
  rw[g * 8 + 2 * t + 1] = acc[1];
  rw[(g + 8) * 8 + 2 * t] = acc[2];
  rw[(g + 8) * 8 + 2 * t + 1] = acc[3];
  __syncthreads();
  if (threadIdx.x < kMmaRows * 8) {
    const int j = int(threadIdx.x) >> 3, n = int(threadIdx.x) & 7;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kMmaWarps; ++w) v += red[(w * kMmaRows + j) * 8 + n];
    if (n < p.m && r0 + j < N) {
      if (p.bias) v += in_f32(static_cast<const __nv_bfloat16*>(p.bias)[r0 + j]);
      static_cast<__nv_bfloat16*>(p.out)[n * p.out_stride + r0 + j] = out_of<__nv_bfloat16>(v);
    }
  }
}

__global__ void fill_x(__nv_bfloat16* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(float(int((i * 7919) % 2001) - 1000) / 1000.f);
}


// Variant "q8x" (one row; a candidate for issue 15, not in the library): x quantized to int8 a
// 32-element block as the CPU matmul's default does (csrc/cpu/quant_dot.h, quantize_x_block: d =
// max|x| / 127, q = x / d rounded to nearest even; NaN not handled here), then each lane's q4_0 /
// q8_0 block times the x block by dp4a (4 exact products an instruction, int32), the scales on the
// block's sum (q4_0: d_w d_x (sum u q_x - 8 sum q_x)). quantize_x32 is its own launch here (timed
// alone and with the GEMV); the GEMV stages all of x's levels once per CTA and W as the library does.
__global__ void quantize_x32(const __nv_bfloat16* x, int64_t k, int8_t* q, float* d, int* sum) {
  const int64_t blk = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = int(threadIdx.x) & 31;
  if (blk * 32 >= k) return;  // whole warps
  const float v = __bfloat162float(x[blk * 32 + lane]);
  float a = fabsf(v);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  const float dd = a / 127.f, id = dd != 0.f ? 1.f / dd : 0.f;
  const int qi = int(fminf(fmaxf(rintf(v * id), -127.f), 127.f));
  q[blk * 32 + lane] = int8_t(qi);
  int t = qi;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  if (lane == 0) {
    d[blk] = dd;
    sum[blk] = t;
  }
}

template <QFormat F> struct Q8x;
template <> struct Q8x<QFormat::q4_0> {
  static constexpr int kBytes = 18;
  static __device__ __forceinline__ int dot(const uint8_t* b, const int* xq, int xs) {
    uint32_t w[4];
    braze::cuda::quant::dot_detail::words<4>(b + 2, 0, w);
    int acc = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      acc = __dp4a(int(w[i] & 0x0F0F0F0Fu), xq[i], acc);
      acc = __dp4a(int((w[i] >> 4) & 0x0F0F0F0Fu), xq[4 + i], acc);
    }
    return acc - 8 * xs;
  }
};
template <> struct Q8x<QFormat::q8_0> {
  static constexpr int kBytes = 34;
  static __device__ __forceinline__ int dot(const uint8_t* b, const int* xq, int) {
    uint32_t w[8];
    braze::cuda::quant::dot_detail::words<8>(b + 2, 0, w);
    int acc = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) acc = __dp4a(int(w[i]), xq[i], acc);
    return acc;
  }
};

constexpr int kQ8xSlab = 2048;
template <QFormat F> constexpr int q8x_pitch() { return (kQ8xSlab / 32 * Q8x<F>::kBytes + 15) / 16 * 16; }
template <QFormat F> constexpr int q8x_smem(int64_t k) {
  return int(k + k / 32 * 8) + 2 * kGemvRows * q8x_pitch<F>();
}

template <QFormat F>
__global__ void __launch_bounds__(256, 2) gemv_q8x(const MmParams p, const int8_t* qx, const float* dx, const int* sx) {
  constexpr int BB = Q8x<F>::kBytes, WP = q8x_pitch<F>();
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t K = p.w.cols, N = p.w.rows, nb = K / 32;
  int8_t* xq = reinterpret_cast<int8_t*>(smem);           // [K]
  float* xd = reinterpret_cast<float*>(smem + K);         // [K / 32]
  int* xs = reinterpret_cast<int*>(smem + K + 4 * nb);    // [K / 32]
  uint8_t* wbuf = smem + K + 8 * nb;                      // [2][kGemvRows][WP]
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int64_t r0 = int64_t(blockIdx.x) * kGemvRows + warp * kGemvRowsPerWarp;
  const int64_t nslab = (K + kQ8xSlab - 1) / kQ8xSlab;
  auto stage_w = [&](int64_t s, int buf) {
    const int64_t k0 = s * kQ8xSlab;
    const int kn = int(K - k0 < kQ8xSlab ? K - k0 : kQ8xSlab);
#pragma unroll
    for (int j = 0; j < kGemvRowsPerWarp; ++j)
      if (r0 + j < N)
        stage_async(wbuf + (buf * kGemvRows + warp * kGemvRowsPerWarp + j) * WP,
                    p.w.data + (r0 + j) * p.w.data_stride + k0 / 32 * BB, kn / 32 * BB, lane, 32);
    cp_async_commit();
  };
  stage_w(0, 0);
  for (int64_t i = threadIdx.x; i < K / 16; i += blockDim.x)  // K a multiple of 32: 16-byte copies
    reinterpret_cast<int4*>(xq)[i] = __ldg(reinterpret_cast<const int4*>(qx) + i);
  for (int64_t i = threadIdx.x; i < nb; i += blockDim.x) {
    xd[i] = dx[i];
    xs[i] = sx[i];
  }
  float acc[kGemvRowsPerWarp] = {0.f, 0.f};
  for (int64_t s = 0; s < nslab; ++s) {
    const int buf = int(s & 1);
    if (s + 1 < nslab) stage_w(s + 1, buf ^ 1);
    if (s + 1 < nslab) cp_async_wait<1>();
    else cp_async_wait<0>();
    __syncthreads();
    const int64_t k0 = s * kQ8xSlab;
    const int kn = int(K - k0 < kQ8xSlab ? K - k0 : kQ8xSlab);
    const uint8_t* rows = wbuf + (buf * kGemvRows + warp * kGemvRowsPerWarp) * WP;
    for (int u = lane; u * 32 < kn; u += 32) {
      const int64_t blk = k0 / 32 + u;
      const int4 xa = reinterpret_cast<const int4*>(xq + blk * 32)[0], xb = reinterpret_cast<const int4*>(xq + blk * 32)[1];
      const int xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
      const float dxb = xd[blk];
      const int sxb = xs[blk];
#pragma unroll
      for (int j = 0; j < kGemvRowsPerWarp; ++j) {
        const uint8_t* b = rows + j * WP + u * BB;
        const float dw = braze::cuda::quant::dot_detail::half_at(b);
        acc[j] = fmaf(dw * dxb, float(Q8x<F>::dot(b, xv, sxb)), acc[j]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < kGemvRowsPerWarp; ++j) {
    const float v = warp_sum(acc[j]);
    if (lane == 0 && r0 + j < N) static_cast<__nv_bfloat16*>(p.out)[r0 + j] = __float2bfloat16(v);
  }
}

static double g_copy_gbs = 0;  // bytes moved a second by cudaMemcpy (read + write): the ceiling of a read
using T = __nv_bfloat16;

template <class K> int per_sm(K k, int smem) {
  int per;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, reinterpret_cast<const void*>(k), 256, smem));
  return per;
}

struct Case {
  const char* name;
  int64_t n, k, m, w_bytes, stride;
  uint8_t* w[kSets];
  T *x, *out;
  std::vector<uint16_t> ref;
  MmParams params(int s) const {
    MmParams p{};
    p.w = DeqParams{w[s], stride, nullptr, 0, braze::DType::f32, nullptr, 0, nullptr, 0, nullptr, 0, n, k, 0, false};
    p.x = x; p.x_stride = k; p.bias = nullptr; p.out = out; p.out_stride = n; p.m = m; p.vec_x = true;
    return p;
  }
  void report(const char* what, float us) const {
    printf("%-6s m=%lld %-34s %7.1f us %6.0f GB/s %5.1f%%\n", name, (long long)m, what, us, w_bytes / us / 1e3,
           100.0 * (w_bytes / g_copy_gbs / 1e3) / us);
  }
  // largest |out - library| over the largest |library|
  void near(const char* what) const {
    std::vector<uint16_t> got(m * n);
    CK(cudaMemcpy(got.data(), out, 2 * m * n, cudaMemcpyDeviceToHost));
    auto f = [](uint16_t h) { uint32_t u = uint32_t(h) << 16; float v; memcpy(&v, &u, 4); return v; };
    double dmax = 0, rmax = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      dmax = std::max(dmax, double(std::fabs(f(got[i]) - f(ref[i]))));
      rmax = std::max(rmax, double(std::fabs(f(ref[i]))));
    }
    printf("  %s: max |diff| %.3g, max |library| %.3g (%.2g)\n", what, dmax, rmax, rmax > 0 ? dmax / rmax : dmax);
  }
};

template <class Fm, int S, int WKB> void mma(Case& c) {
  using G = MmaGeo<Fm, S, WKB>;
  auto k = gemv_mma<Fm, S, WKB>;
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, G::smem));
  char what[80];
  snprintf(what, sizeof what, "mma S%d WKB%d (%dKB, %d/SM)", S, WKB, G::smem / 1024, per_sm(k, G::smem));
  const unsigned grid = unsigned((c.n + kMmaRows - 1) / kMmaRows);
  c.report(what, time_it([&](int s) { k<<<grid, 256, G::smem>>>(c.params(s)); }));
  c.near(what);
}
// the mma variants of a format (none where there is no policy)
template <QFormat F> void mmas(Case& c) {
  if constexpr (F == QFormat::q4_0) { mma<MmaQ4_0, 4, 8>(c); mma<MmaQ4_0, 3, 16>(c); }
  if constexpr (F == QFormat::q4_K) { mma<MmaQ4_K, 4, 1>(c); mma<MmaQ4_K, 3, 2>(c); }
}

// The library's kernel; its output is the reference of the other variants, and with
// GEMVBW_DUMP=dir it is written to dir/<name>_<n>_m<m>.bin (to compare two builds).
template <class Wt, int MT> void library(Case& c) {
  auto k = gemv_kernel<Wt, T, MT>;
  constexpr int bytes = gemv_smem_bytes<Wt, T, MT>();
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  char what[80];
  snprintf(what, sizeof what, "library (%dKB, %d/SM)", bytes / 1024, per_sm(k, bytes));
  const unsigned grid = unsigned((c.n + kGemvRows - 1) / kGemvRows);
  c.report(what, time_it([&](int s) { k<<<grid, kGemvThreads, bytes>>>(c.params(s)); }));
  c.ref.resize(c.m * c.n);
  CK(cudaMemcpy(c.ref.data(), c.out, 2 * c.m * c.n, cudaMemcpyDeviceToHost));
  if (const char* dir = getenv("GEMVBW_DUMP")) {
    const std::string f = std::string(dir) + "/" + c.name + "_" + std::to_string(c.n) + "_m" + std::to_string(c.m) + ".bin";
    if (FILE* o = fopen(f.c_str(), "wb")) { fwrite(c.ref.data(), 2, c.ref.size(), o); fclose(o); }
  }
}

template <class Wt, int MT> Case make(const char* name, int64_t n, int64_t k) {
  Case c{};
  c.name = name; c.n = n; c.k = k; c.m = MT;
  if constexpr (Wt::dense) c.stride = k * 2;
  else c.stride = k / Wt::block * Wt::block_bytes;
  c.w_bytes = n * c.stride;
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&c.w[s], c.w_bytes));
    fill_bytes<<<1024, 256>>>(c.w[s], c.w_bytes, 17u + s, 0x3cu);  // every f16 / bf16 scale finite
  }
  CK(cudaMalloc(&c.x, 2 * MT * k)); CK(cudaMalloc(&c.out, 2 * MT * n));
  fill_x<<<256, 256>>>(c.x, MT * k);
  CK(cudaDeviceSynchronize());
  return c;
}
void release(Case& c) {
  for (int s = 0; s < kSets; ++s) CK(cudaFree(c.w[s]));
  CK(cudaFree(c.x)); CK(cudaFree(c.out));
}

// The weight's bytes read once by read16 (cuda_bw.cuh), launch and tail included: the floor of
// a GEMV of this size (a large copy's rate is out of reach of a 10-30 us kernel).
void read_floor(Case& c) {
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const float us = time_it([&](int s) {
    read16<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(c.w[s]), c.w_bytes / 16, nullptr, 0, sink);
  });
  c.report("read16 of W (the read floor)", us);
  CK(cudaFree(sink));
}

template <QFormat F> void q8x(Case& c) {
  if constexpr (F == QFormat::q4_0 || F == QFormat::q8_0) {
    const int64_t nb = c.k / 32;
    int8_t* qx; float* dx; int* sx;
    CK(cudaMalloc(&qx, c.k)); CK(cudaMalloc(&dx, 4 * nb)); CK(cudaMalloc(&sx, 4 * nb));
    auto k = gemv_q8x<F>;
    const int bytes = q8x_smem<F>(c.k);
    CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    const unsigned grid = unsigned((c.n + kGemvRows - 1) / kGemvRows), qgrid = unsigned((nb * 32 + 255) / 256);
    char what[80];
    c.report("q8x: quantize x alone", time_it([&](int) { quantize_x32<<<qgrid, 256>>>(c.x, c.k, qx, dx, sx); }));
    snprintf(what, sizeof what, "q8x: GEMV alone (%dKB, %d/SM)", bytes / 1024, per_sm(k, bytes));
    c.report(what, time_it([&](int s) { k<<<grid, 256, bytes>>>(c.params(s), qx, dx, sx); }));
    c.near("q8x (x as int8: ~0.5% of rms expected)");
    c.report("q8x: quantize + GEMV", time_it([&](int s) {
      quantize_x32<<<qgrid, 256>>>(c.x, c.k, qx, dx, sx);
      k<<<grid, 256, bytes>>>(c.params(s), qx, dx, sx);
    }));
    CK(cudaFree(qx)); CK(cudaFree(dx)); CK(cudaFree(sx));
  }
}

template <QFormat F> void run(const char* name, int64_t n, int64_t k) {
  using Wt = Quant<F>;
  {
    Case c = make<Wt, 1>(name, n, k);
    library<Wt, 1>(c);
    read_floor(c);
    q8x<F>(c);
    mmas<F>(c);
    release(c);
  }
  for (int m : {2, 4}) {  // the library only
    if (m == 2) {
      Case c = make<Wt, 2>(name, n, k); library<Wt, 2>(c);
      mmas<F>(c);
      release(c);
    } else {
      Case c = make<Wt, 4>(name, n, k); library<Wt, 4>(c);
      mmas<F>(c);
      release(c);
    }
  }
  {
    Case c = make<Wt, 8>(name, n, k);
    library<Wt, 8>(c);
    mmas<F>(c);
    release(c);
  }
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  g_copy_gbs = memcpy_gbs(int64_t(1) << 27);
  // GEMVBW_ONLY=name runs that case alone (for a profiler: scripts/ncu_gemv.sh)
  const char* only = getenv("GEMVBW_ONLY");
  auto want = [&](const char* n) { return !only || !strcmp(only, n); };
  if (want("bf16")) {  // dense bf16, the library only
    Case c = make<Dense, 1>("bf16", 4096, 14336);
    library<Dense, 1>(c);
    read_floor(c);
    release(c);
    Case c8 = make<Dense, 8>("bf16", 4096, 14336);
    library<Dense, 8>(c8);
    release(c8);
  }
  if (want("q4_0")) run<QFormat::q4_0>("q4_0", 4096, 14336);
  if (want("q8_0")) run<QFormat::q8_0>("q8_0", 4096, 14336);
  if (want("q4_K")) run<QFormat::q4_K>("q4_K", 4096, 14336);
  if (want("q6_K")) run<QFormat::q6_K>("q6_K", 4096, 14336);
  if (!only) run<QFormat::q4_0>("q4_0", 14336, 4096);
  if (want("q5_K")) run<QFormat::q5_K>("q5_K", 4096, 14336);
  if (want("q3_K")) run<QFormat::q3_K>("q3_K", 4096, 14336);
  if (want("iq4_xs")) run<QFormat::iq4_xs>("iq4_xs", 4096, 14336);
  return 0;
}
