// out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for 2..16 rows of f16 / bf16 x
// and q4_0 / q4_K weights, on tensor cores (mma.sync m16n8k16, f32 accumulators).
// The SIMT GEMV (gemv.cuh) multiplies every decoded weight by every x row on
// CUDA cores and becomes FMA-bound past a few rows; here W is the mma's M side
// (16 rows of W a tile), x rows the N side (one n-tile of 8, two for 9..16),
// so a weight costs its decode only, whatever m.
//
// A CTA of 8 warps owns R = 16 or 32 rows of W and all of K. K goes by in
// slabs of KS elements through an S-deep cp.async pipeline (the launcher takes
// 2 x 2048 where shared memory holds them, else 4 x 512): each slab's
// packed W bytes (16-byte copies, each byte read once from DRAM) and x rows
// (16-byte copies; x is small and L2-resident) land in shared memory. The
// slab's units (q4_0: one 32-element block; q4_K: two 32-element sub-blocks
// sharing 32 bytes of nibbles) go round the warps (split-K inside the CTA);
// the 8 warps' partial sums meet in shared memory at the end.
//
// A unit's A fragments are the codes, not the weights: lane (g = lane / 4,
// t = lane % 4) reads one 32-bit word of nibbles per row of W (rows g, g + 8
// of each m-tile), turns the 8 codes into 16-bit floats with the 2^10 (f16) /
// 2^7 (bf16) mantissa trick (exact: q - 8 for q4_0, q for q4_K), and the mma
// sums code x over a 32-element scale segment (two k-steps) into a fresh f32
// fragment, which one FMA per element scales into the accumulators (q4_K: and
// a second subtracts dmin m times the segment's sum of x, which an mma of a
// ones A fragment gives). So, as in the SIMT GEMV, every product is exact code
// times x and only the f32 sums round: no weight is rounded to x's dtype.
// The k order within a unit is permuted (the reduction does not care) so a
// lane's codes are consecutive nibbles of one word and its B fragments x
// elements 4 apart in one 8- (q4_0) or 16-byte (q4_K) shared load.
#pragma once
#include "cuda/attention/mma.cuh"
#include "cuda/quant/gemv.cuh"

namespace braze::cuda::quant {

constexpr int kGemvMmaThreads = 256;
constexpr int kGemvMmaWarps = kGemvMmaThreads / 32;
constexpr int kGemvMmaSlab = 512;  // K elements a pipeline stage
constexpr int kGemvMmaStages = 4;

// Per format: elements of a unit, scale segments in it (32 elements each),
// the code offset, and the shared-memory row pitches' residue mod 128 bytes
// that makes a warp's W word loads (wmod) and x loads (xmod) conflict-free.
template <QFormat F> struct MmaUnit;
template <> struct MmaUnit<QFormat::q4_0> {
  static constexpr int kElems = 32, kSegs = 1, kOff = 8, kWMod = 16, kXMod = 32;
  static constexpr bool kMin = false;
};
template <> struct MmaUnit<QFormat::q4_K> {
  static constexpr int kElems = 64, kSegs = 2, kOff = 0, kWMod = 32, kXMod = 64;
  static constexpr bool kMin = true;
};
template <QFormat F> constexpr bool has_gemv_mma() { return F == QFormat::q4_0 || F == QFormat::q4_K; }

// KS: K elements a stage (the library's kGemvMmaSlab), S: the pipeline's stages (the library's
// kGemvMmaStages); scripts/cuda_gemv_mma_bw.cu times others.
template <QFormat F, int KS = kGemvMmaSlab> constexpr int gemv_mma_wpitch() {  // bytes of a staged W row
  constexpr int bytes = KS / info(F).blocks.block * info(F).blocks.block_bytes;
  constexpr int b16 = (bytes + 15) / 16 * 16;
  return b16 + ((MmaUnit<F>::kWMod - b16 % 128) + 128) % 128;
}
template <QFormat F, int KS = kGemvMmaSlab> constexpr int gemv_mma_xpitch() {  // elements of a staged x row
  return KS + MmaUnit<F>::kXMod / 2;
}
template <QFormat F, int R, int NT, int KS = kGemvMmaSlab> constexpr int gemv_mma_stage_bytes() {
  return R * gemv_mma_wpitch<F, KS>() + 8 * NT * gemv_mma_xpitch<F, KS>() * 2;
}
template <QFormat F, int R, int NT, int S = kGemvMmaStages, int KS = kGemvMmaSlab>
constexpr int gemv_mma_smem_bytes() {
  constexpr int pipe = S * gemv_mma_stage_bytes<F, R, NT, KS>();
  constexpr int red = kGemvMmaWarps * 8 * NT * R * 4;
  return pipe > red ? pipe : red;
}

namespace mma_detail {

template <class T> struct Magic;
template <> struct Magic<__half> { static constexpr uint32_t kBase = 0x6400u; };         // 1024 + code
template <> struct Magic<__nv_bfloat16> { static constexpr uint32_t kBase = 0x4300u; };  // 128 + code

// The nibbles at bits 0..3 and 16..19 of w as a pair of T, minus off: exact.
template <class T, int Off> __device__ __forceinline__ uint32_t nib_pair(uint32_t w) {
  constexpr uint32_t base = Magic<T>::kBase | (Magic<T>::kBase << 16);
  const uint32_t v = (w & 0x000F000Fu) | base;
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 r = __hsub2(*reinterpret_cast<const __half2*>(&v), __half2half2(__ushort_as_half(
                                                                         uint16_t(Magic<T>::kBase + Off))));
    return *reinterpret_cast<const uint32_t*>(&r);
  } else {
    const __nv_bfloat162 r = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v),
                                     __bfloat162bfloat162(__ushort_as_bfloat16(uint16_t(Magic<T>::kBase + Off))));
    return *reinterpret_cast<const uint32_t*>(&r);
  }
}

// A word of 8 nibbles (byte j: low nibble element e_j, high nibble element f_j)
// as A-fragment pairs: lo = {(e0, e1), (e2, e3)}, hi = {(f0, f1), (f2, f3)}.
template <class T, int Off>
__device__ __forceinline__ void nibbles(uint32_t w, uint32_t (&lo)[2], uint32_t (&hi)[2]) {
  const uint32_t p = __byte_perm(w, 0u, 0x3120u);  // bytes 0, 2, 1, 3: bytes 0 and 1 at bits 0 and 16
  lo[0] = nib_pair<T, Off>(p);
  lo[1] = nib_pair<T, Off>(p >> 8);
  hi[0] = nib_pair<T, Off>(p >> 4);
  hi[1] = nib_pair<T, Off>(p >> 12);
}

template <class T> constexpr uint32_t ones() {
  return std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;
}

}  // namespace mma_detail

// One row of W's share of a unit for lane t: codes as A pairs a[seg][step][2],
// the segments' scales d[seg] and (q4_K) mins m[seg] (value = d code - m).
// row: the staged row's bytes, u: the unit in the slab.
template <QFormat F, class T> struct MmaRow;

template <class T> struct MmaRow<QFormat::q4_0, T> {
  uint32_t a[1][2][2];
  float d[1], m[1];
  __device__ __forceinline__ void load(const uint8_t* row, int u, int t) {
    const uint8_t* b = row + 18 * u;
    d[0] = dot_detail::half_at(b);
    m[0] = 0.f;
    uint32_t w[1];
    dot_detail::words<1>(b + 2 + 4 * t, 0, w);  // elements 4t..4t+3 (low), 16+4t.. (high)
    mma_detail::nibbles<T, 8>(w[0], a[0][0], a[0][1]);
  }
};

template <class T> struct MmaRow<QFormat::q4_K, T> {
  uint32_t a[2][2][2];
  float d[2], m[2];
  __device__ __forceinline__ void load(const uint8_t* row, int u, int t) {
    const uint8_t* b = row + 144 * (u >> 2);
    const int pair = u & 3;
    const float dd = dot_detail::half_at(b), dm = dot_detail::half_at(b + 2);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      int sc, mn;
      braze::quant::kq_detail::scale_min_k4(b + 4, 2 * pair + s, sc, mn);
      d[s] = dd * float(sc);
      m[s] = dm * float(mn);
    }
    // bytes 8t..8t+7 of the pair's 32: low nibbles elements 8t.. of sub-block 2 pair, high of 2 pair + 1
    const uint2 w = *reinterpret_cast<const uint2*>(b + 16 + 32 * pair + 8 * t);
    mma_detail::nibbles<T, 0>(w.x, a[0][0], a[1][0]);
    mma_detail::nibbles<T, 0>(w.y, a[0][1], a[1][1]);
  }
};

// Lane t's B fragments of one x row for a unit: b[seg][step][2] (x at the unit's first element).
template <QFormat F> __device__ __forceinline__ void mma_x(const uint16_t* x, int t, uint32_t (&b)[MmaUnit<F>::kSegs][2][2]) {
  if constexpr (F == QFormat::q4_0) {
#pragma unroll
    for (int st = 0; st < 2; ++st) {  // elements 16 st + 4t ..
      const uint2 v = *reinterpret_cast<const uint2*>(x + 16 * st + 4 * t);
      b[0][st][0] = v.x;
      b[0][st][1] = v.y;
    }
  } else {
#pragma unroll
    for (int s = 0; s < 2; ++s) {  // elements 32 s + 8t + 4 st ..
      const uint4 v = *reinterpret_cast<const uint4*>(x + 32 * s + 8 * t);
      b[s][0][0] = v.x;
      b[s][0][1] = v.y;
      b[s][1][0] = v.z;
      b[s][1][1] = v.w;
    }
  }
}

// Requires (the launcher checks): p.m in 2..8 NT, x 16-byte aligned with a row
// stride of a multiple of 8 elements, K a multiple of the block.
template <QFormat F, class T, int R, int NT, int S = kGemvMmaStages, int KS = kGemvMmaSlab>
__global__ void __launch_bounds__(kGemvMmaThreads) gemv_mma_kernel(const MmParams p) {
  static_assert(S >= 2, "a stage computed while the next one loads");
  using U = MmaUnit<F>;
  static_assert(KS % 512 == 0, "whole units and 16-byte pieces of x");
  constexpr int MTL = R / 16, XR = 8 * NT, WP = gemv_mma_wpitch<F, KS>(), XP = gemv_mma_xpitch<F, KS>();
  constexpr int BB = info(F).blocks.block_bytes, BK = info(F).blocks.block;
  constexpr int SB = gemv_mma_stage_bytes<F, R, NT, KS>();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  const int64_t K = p.w.cols, N = p.w.rows, r0 = int64_t(blockIdx.x) * R;
  const int mrows = int(p.m);
  const int64_t nslab = (K + KS - 1) / KS;

  auto stage = [&](int64_t s) {
    if (s < nslab) {
      uint8_t* buf = smem + int(s % S) * SB;
      const int64_t k0 = s * KS;
      const int kn = int(K - k0 < KS ? K - k0 : KS);
      for (int j = warp; j < R; j += kGemvMmaWarps)
        if (r0 + j < N)
          stage_async(buf + j * WP, p.w.data + (r0 + j) * p.w.data_stride + k0 / BK * BB, kn / BK * BB, lane, 32);
      uint16_t* xs = reinterpret_cast<uint16_t*>(buf + R * WP);
      const uint16_t* xg = static_cast<const uint16_t*>(p.x) + k0;
      constexpr int kPieces = KS / 8;  // 16-byte pieces of a slab row
      for (int i = int(threadIdx.x); i < mrows * kPieces; i += kGemvMmaThreads) {
        const int mm = i / kPieces, c = i % kPieces;
        if (8 * c < kn) cp_async16(xs + mm * XP + 8 * c, xg + mm * p.x_stride + 8 * c);
      }
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };

  float acc[MTL][NT][4];
#pragma unroll
  for (int mi = 0; mi < MTL; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][ni][c] = 0.f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) stage(s);
  for (int64_t s = 0; s < nslab; ++s) {
    cp_async_wait<S - 2>();
    __syncthreads();  // slab s visible; every warp is past slab s - 1, whose buffer the next stage refills
    stage(s + S - 1);
    const uint8_t* wb = smem + int(s % S) * SB;
    const uint16_t* xs = reinterpret_cast<const uint16_t*>(wb + R * WP);
    const int64_t k0 = s * KS;
    const int nu = int((K - k0 < KS ? K - k0 : KS) / U::kElems);
    for (int u = warp; u < nu; u += kGemvMmaWarps) {
      MmaRow<F, T> w[MTL][2];  // rows 16 mi + g, 16 mi + g + 8 (rows past N: stale bytes, results dropped)
#pragma unroll
      for (int mi = 0; mi < MTL; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) w[mi][h].load(wb + (16 * mi + 8 * h + g) * WP, u, t);
#pragma unroll
      for (int ni = 0; ni < NT; ++ni) {
        // x row 8 ni + g (rows past m: stale shared memory, results dropped)
        uint32_t b[U::kSegs][2][2];
        mma_x<F>(xs + (8 * ni + g) * XP + u * U::kElems, t, b);
#pragma unroll
        for (int sg = 0; sg < U::kSegs; ++sg) {
          float sx[4] = {0.f, 0.f, 0.f, 0.f};
          if constexpr (U::kMin) {
            const uint32_t one[4] = {mma_detail::ones<T>(), mma_detail::ones<T>(), mma_detail::ones<T>(),
                                     mma_detail::ones<T>()};
            attn::mma16816<T>(sx, one, b[sg][0][0], b[sg][0][1]);
            attn::mma16816<T>(sx, one, b[sg][1][0], b[sg][1][1]);
          }
#pragma unroll
          for (int mi = 0; mi < MTL; ++mi) {
            float dsum[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int st = 0; st < 2; ++st) {
              const uint32_t a[4] = {w[mi][0].a[sg][st][0], w[mi][1].a[sg][st][0], w[mi][0].a[sg][st][1],
                                     w[mi][1].a[sg][st][1]};
              attn::mma16816<T>(dsum, a, b[sg][st][0], b[sg][st][1]);
            }
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              acc[mi][ni][c] = fmaf(w[mi][c >> 1].d[sg], dsum[c], acc[mi][ni][c]);
              if constexpr (U::kMin) acc[mi][ni][c] = fmaf(-w[mi][c >> 1].m[sg], sx[c], acc[mi][ni][c]);
            }
          }
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp done with the pipeline's buffers

  // the warps' partial sums: red[warp][x row][row of W]
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int mi = 0; mi < MTL; ++mi)
#pragma unroll
    for (int ni = 0; ni < NT; ++ni)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = 16 * mi + g + 8 * (c >> 1), xr = 8 * ni + 2 * t + (c & 1);
        red[(warp * XR + xr) * R + row] = acc[mi][ni][c];
      }
  __syncthreads();
  for (int i = int(threadIdx.x); i < mrows * R; i += kGemvMmaThreads) {
    const int xr = i / R, row = i % R;
    if (r0 + row >= N) continue;
    float v = 0.f;
#pragma unroll
    for (int wv = 0; wv < kGemvMmaWarps; ++wv) v += red[(wv * XR + xr) * R + row];
    if (p.bias) v += in_f32(static_cast<const T*>(p.bias)[r0 + row]);
    static_cast<T*>(p.out)[xr * p.out_stride + r0 + row] = out_of<T>(v);
  }
}

}  // namespace braze::cuda::quant
