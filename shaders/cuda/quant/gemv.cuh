// out[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for few rows of x (m <= 16):
// the read of W is the whole cost, so W is streamed once and every x row is
// applied to each decoded chunk while it sits in registers.
//
// A CTA of 8 warps owns 16 rows of W (a warp two: each staged x value is
// read once from shared memory for both). K goes by in slabs; slab s + 1 is
// in flight while slab s is used (two buffers):
//   W: each warp copies its rows' bytes (packed, or dense elements) to shared
//      memory with 16-byte cp.async (4-byte where a row is not 16-byte
//      aligned), so HBM always has a slab's reads in flight;
//   x: all threads convert the slab of every x row to f32 in shared memory,
//      16-element chunks 20 floats apart so the lanes' float4 reads of
//      consecutive chunks fall in distinct banks.
// Lane l decodes chunks l, l + 32, ... of its two rows (decode_chunk, from
// the staged bytes; dense: 16-byte shared loads) and accumulates MT rows of x against them in f32 (in
// 4 / 2 partial sums for 1-2 / 4 rows, so FMA latency does not bound the few-row tiles); a warp
// reduction, the bias and one rounding finish each output. Formats with a fast
// dot (gemv_dot.cuh: q4_0, q4_1, q5_0, q8_0, q3_K, q4_K, q5_K, q6_K, iq4_nl,
// iq4_xs) skip the decode:
// lane l takes 32-element units l, l + 32, ... of both rows, read as words and
// applied to x with the block scale factored out of the element loop (one row of
// x: a lane's two units of a slab are read before either dot, so their shared
// loads overlap).
#pragma once
#include "cuda/quant/gemv_dot.cuh"
#include "cuda/quant/weights.cuh"

namespace braze::cuda::quant {

struct MmParams {
  DeqParams w;  // rows N, cols K; dense: data / data_stride (bytes) only
  const void* x;
  int64_t x_stride;  // elements
  const void* bias;  // [N] or null
  void* out;
  int64_t out_stride;  // elements
  int64_t m;
  bool vec_x;  // x and its row stride 16-byte aligned (GEMV: aligned to 8 elements)
};

constexpr int kGemvThreads = 256;
constexpr int kGemvRowsPerWarp = 2;
constexpr int kGemvRows = kGemvThreads / 32 * kGemvRowsPerWarp;  // rows of W per CTA

// Formats with a fast dot (gemv_dot.cuh): lanes take 32-element units, x is
// staged in 32-element chunks (36 floats apart) and, where the dot needs them
// (a min term; biased codes, taken for 16-bit x), with the sum of each 16.
template <class Wt> constexpr bool gemv_fast() {
  if constexpr (Wt::dense) return false;
  else return has_dot_unit<Wt::format>();
}
template <class T> constexpr bool gemv_biased() { return sizeof(T) == 2; }
template <class Wt, class T> constexpr bool gemv_sums() {
  if constexpr (gemv_fast<Wt>()) return dot_sums<Wt::format, gemv_biased<T>()>();
  else return false;
}
template <class Wt> constexpr int gemv_xchunk() { return gemv_fast<Wt>() ? kDotUnit : kChunk; }
template <class Wt> constexpr int gemv_xpitch() { return gemv_xchunk<Wt>() + 4; }  // floats per staged chunk of x

// A block of W's row as staged: dense rows are 1-element blocks of T.
template <class Wt, class T> constexpr int gemv_block() {
  if constexpr (Wt::dense) return 1;
  else return Wt::block;
}
template <class Wt, class T> constexpr int gemv_block_bytes() {
  if constexpr (Wt::dense) return int(sizeof(T));
  else return Wt::block_bytes;
}
// K elements per slab: long for one row (more bytes in flight), shorter as
// the staged x rows grow, and at most 2 KB of a dense row; always a multiple
// of 512 (every block size, and 16 elements for each of 32 lanes). The fast
// dots take 1024 up to 8 rows (32 elements for each lane); 16 rows keep 512
// (half the lanes idle, but the x reads from shared memory bound that tile
// anyway, and 1024 would need ~190 KB: more than an sm_80 CTA may have).
template <class Wt, class T, int MT> constexpr int gemv_slab() {
  constexpr int ks = MT <= 1 ? 2048 : MT == 2 || (gemv_fast<Wt>() && MT <= 8) ? 1024 : 512;
  constexpr int cap = Wt::dense ? 2048 / int(sizeof(T)) : ks;
  return ks < cap ? ks : cap;
}
template <class Wt, class T, int MT> constexpr int gemv_row_pitch() {
  constexpr int KS = gemv_slab<Wt, T, MT>();
  return (KS / gemv_block<Wt, T>() * gemv_block_bytes<Wt, T>() + 15) / 16 * 16;
}
template <class Wt, class T, int MT> constexpr int gemv_smem_bytes() {
  constexpr int KS = gemv_slab<Wt, T, MT>();
  constexpr int sums = gemv_sums<Wt, T>() ? 2 * MT * (KS / 16) * 4 : 0;
  return 2 * MT * (KS / gemv_xchunk<Wt>() * gemv_xpitch<Wt>()) * 4 + sums + 2 * kGemvRows * gemv_row_pitch<Wt, T, MT>();
}

// n (<= 16) elements of T from shared memory (16-byte aligned) as floats, zeros past n.
template <class T> __device__ __forceinline__ void shared_chunk(const T* src, float (&w)[kChunk], int n) {
  if (n >= kChunk) {
    constexpr int kWords = kChunk * int(sizeof(T)) / 16;
    union {
      uint4 u[kWords];
      T e[kChunk];
    } v;
#pragma unroll
    for (int i = 0; i < kWords; ++i) v.u[i] = reinterpret_cast<const uint4*>(src)[i];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) w[i] = in_f32(v.e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kChunk; ++i) w[i] = i < n ? in_f32(src[i]) : 0.f;
  }
}

// Eight consecutive elements of x, as stored (zeros past n); vec: src
// aligned to 16 bytes. Kept raw between the load and the staging store, so a
// prefetched group costs 4 registers (16-bit x) rather than 8.
template <class T> struct XRaw {
  static constexpr int kWords = int(sizeof(T)) / 2;  // uint4 words
  union {
    uint4 u[kWords];
    T e[8];
  };
};
template <class T> __device__ __forceinline__ XRaw<T> load8(const T* src, int n, bool vec) {
  XRaw<T> r;
  if (vec && n >= 8) {
#pragma unroll
    for (int i = 0; i < XRaw<T>::kWords; ++i) r.u[i] = __ldg(reinterpret_cast<const uint4*>(src) + i);
  } else {
#pragma unroll
    for (int i = 0; i < XRaw<T>::kWords; ++i) r.u[i] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < n) r.e[i] = src[i];
  }
  return r;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// CTAs an SM must hold: two (all 256 CTAs of N = 4096 resident on 132 SMs), so
// at most 128 registers; one where a fast dot's x rows fill the shared memory (M = 16).
template <class Wt, int MT> constexpr int gemv_min_ctas() { return gemv_fast<Wt>() && MT <= 8 ? 2 : 1; }

// Where a lane has several units in a slab (one row: two), it loads the words of
// all of them before the first dot (H100, 2026-12-07: q4_0 20.3 -> 19.6 us).
template <class Wt, class T, int MT>
__global__ void __launch_bounds__(kGemvThreads, gemv_min_ctas<Wt, MT>()) gemv_kernel(const MmParams p) {
  constexpr bool kFast = gemv_fast<Wt>(), kSums = gemv_sums<Wt, T>();
  constexpr int XC = gemv_xchunk<Wt>(), XP = gemv_xpitch<Wt>();
  constexpr int KS = gemv_slab<Wt, T, MT>(), XS = KS / XC * XP, WP = gemv_row_pitch<Wt, T, MT>();
  constexpr int SS = kSums ? KS / 16 : 0;  // sums of 16 elements of x a slab row
  constexpr int B = gemv_block<Wt, T>(), BB = gemv_block_bytes<Wt, T>();
  extern __shared__ __align__(16) uint8_t smem[];
  float* xbuf = reinterpret_cast<float*>(smem);  // [2][MT][XS]
  float* sbuf = xbuf + 2 * MT * XS;              // [2][MT][SS]
  uint8_t* wbuf = smem + 2 * MT * (XS + SS) * 4;  // [2][kGemvRows][WP]
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  const int64_t K = p.w.cols, N = p.w.rows;
  const int64_t r0 = int64_t(blockIdx.x) * kGemvRows + warp * kGemvRowsPerWarp;  // this warp's first row
  const int mrows = int(p.m);
  const int64_t nslab = (K + KS - 1) / KS;

  // W: each warp's rows of slab s into buffer buf (one cp.async group)
  auto stage_w = [&](int64_t s, int buf) {
    const int64_t k0 = s * KS;
    const int kn = int(K - k0 < KS ? K - k0 : KS);
#pragma unroll
    for (int j = 0; j < kGemvRowsPerWarp; ++j) {
      const int64_t r = r0 + j;
      if (r < N)
        stage_async(wbuf + (buf * kGemvRows + warp * kGemvRowsPerWarp + j) * WP,
                    p.w.data + r * p.w.data_stride + k0 / B * BB, kn / B * BB, lane, 32);
    }
    cp_async_commit();
  };
  // x: 8 consecutive elements of one row a thread and pass, loaded (xload)
  // into registers, then widened to f32 into a buffer (xstore) with, where the
  // dot needs them, the sums of each 16 (a pair of threads)
  constexpr int XG = MT * (KS / 8), XPT = (XG + kGemvThreads - 1) / kGemvThreads;
  static_assert(!kSums || XG % kGemvThreads == 0, "every lane takes each staging pass (shuffles)");
  constexpr bool kPre = XPT <= 2;  // few groups: their loads fly while the slab before is used
  XRaw<T> xr[XPT];
  auto xload = [&](int64_t s) {
    const int64_t k0 = s * KS;
    const int kn = int(K - k0 < KS ? K - k0 : KS);
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
      const int g = int(threadIdx.x) + i * kGemvThreads;
      const int mm = g / (KS / 8), kk = (g - mm * (KS / 8)) * 8;
      xr[i] = mm < mrows && g < XG ? load8<T>(static_cast<const T*>(p.x) + mm * p.x_stride + k0 + kk, kn - kk, p.vec_x)
                                   : XRaw<T>{};
    }
  };
  auto xstore = [&](int buf) {
    float* xb = xbuf + buf * MT * XS;
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
      const int g = int(threadIdx.x) + i * kGemvThreads;
      if (XG % kGemvThreads != 0 && g >= XG) break;
      const int mm = g / (KS / 8), kk = (g - mm * (KS / 8)) * 8;
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = in_f32(xr[i].e[e]);
      float* d = xb + mm * XS + kk / XC * XP + kk % XC;
      *reinterpret_cast<float4*>(d) = make_float4(v[0], v[1], v[2], v[3]);
      *reinterpret_cast<float4*>(d + 4) = make_float4(v[4], v[5], v[6], v[7]);
      if constexpr (kSums) {  // ((s0 + s1) + (s2 + s3)) over the four 4-element sums of 16 elements
        float t = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
        t += __shfl_xor_sync(0xffffffffu, t, 1);
        if ((kk & 15) == 0) sbuf[(buf * MT + mm) * SS + kk / 16] = t;
      }
    }
  };

  float acc[kGemvRowsPerWarp][MT];
#pragma unroll
  for (int j = 0; j < kGemvRowsPerWarp; ++j)
#pragma unroll
    for (int mm = 0; mm < MT; ++mm) acc[j][mm] = 0.f;
  // decoded chunks (not kFast): kP partial sums an output, so that few x rows
  // still give independent chains of FMAs (as unit_dot does)
  constexpr int kP = kFast ? 1 : MT <= 2 ? 4 : MT <= 4 ? 2 : 1;
  float part[kGemvRowsPerWarp][MT][kP];
#pragma unroll
  for (int j = 0; j < kGemvRowsPerWarp; ++j)
#pragma unroll
    for (int mm = 0; mm < MT; ++mm)
#pragma unroll
      for (int c = 0; c < kP; ++c) part[j][mm][c] = 0.f;

  if (nslab > 0) {
    stage_w(0, 0);
    xload(0);
    xstore(0);
  }
  for (int64_t s = 0; s < nslab; ++s) {
    const int buf = int(s & 1);
    if (s + 1 < nslab) {
      stage_w(s + 1, buf ^ 1);
      if constexpr (kPre) xload(s + 1);
    }
    if (s + 1 < nslab) cp_async_wait<1>();
    else cp_async_wait<0>();
    __syncthreads();  // slab s (bytes and x) visible to every warp

    const int64_t k0 = s * KS;
    const int kn = int(K - k0 < KS ? K - k0 : KS);
    const float* xb = xbuf + buf * MT * XS;
    if constexpr (kFast) {
      const uint8_t* rows = wbuf + (buf * kGemvRows + warp * kGemvRowsPerWarp) * WP;
      const float* sb = sbuf + buf * MT * SS;
      constexpr int UL = KS / (32 * kDotUnit);  // units a lane in a whole slab
      if constexpr (UL > 1) {  // every unit's words first, then the dots
        DotUnit<Wt::format> w[UL][kGemvRowsPerWarp];  // rows past N read stale bytes; their sums are dropped
#pragma unroll
        for (int i = 0; i < UL; ++i)
          if ((lane + 32 * i) * kDotUnit < kn)
#pragma unroll
            for (int j = 0; j < kGemvRowsPerWarp; ++j) w[i][j].load(rows + j * WP, lane + 32 * i);
#pragma unroll
        for (int i = 0; i < UL; ++i) {
          const int u = lane + 32 * i;
          if (u * kDotUnit < kn)
            unit_dot<Wt::format, kGemvRowsPerWarp, MT, gemv_biased<T>()>(w[i], xb + u * XP, XS, sb + 2 * u, SS, acc);
        }
      } else {
        for (int u = lane; u * kDotUnit < kn; u += 32) {
          DotUnit<Wt::format> w[kGemvRowsPerWarp];
#pragma unroll
          for (int j = 0; j < kGemvRowsPerWarp; ++j) w[j].load(rows + j * WP, u);
          unit_dot<Wt::format, kGemvRowsPerWarp, MT, gemv_biased<T>()>(w, xb + u * XP, XS, sb + 2 * u, SS, acc);
        }
      }
    } else {
      for (int c = lane; c * kChunk < kn; c += 32) {
        const int krel = c * kChunk;
        float w[kGemvRowsPerWarp][kChunk];
#pragma unroll
        for (int j = 0; j < kGemvRowsPerWarp; ++j) {
          const int64_t r = r0 + j;
          const uint8_t* staged = wbuf + (buf * kGemvRows + warp * kGemvRowsPerWarp + j) * WP;
          if (r >= N) {
#pragma unroll
            for (int i = 0; i < kChunk; ++i) w[j][i] = 0.f;
          } else if constexpr (Wt::dense) {
            shared_chunk<T>(reinterpret_cast<const T*>(staged) + krel, w[j], kn - krel);
          } else {
            decode_chunk<Wt::format>(staged, krel, r, k0, p.w, w[j]);
            if constexpr (Wt::block == 1) {  // a tail chunk: staged bytes past K are stale
#pragma unroll
              for (int i = 0; i < kChunk; ++i)
                if (krel + i >= kn) w[j][i] = 0.f;
            }
          }
        }
#pragma unroll
        for (int mm = 0; mm < MT; ++mm) {
          if (MT > 1 && mm >= mrows) break;
          const float4* xv = reinterpret_cast<const float4*>(xb + mm * XS + c * XP);
#pragma unroll
          for (int q = 0; q < kChunk / 4; ++q) {
            const float4 xq = xv[q];
            const float xt[4] = {xq.x, xq.y, xq.z, xq.w};
#pragma unroll
            for (int j = 0; j < kGemvRowsPerWarp; ++j)
#pragma unroll
              for (int t = 0; t < 4; ++t) part[j][mm][t % kP] = fmaf(w[j][4 * q + t], xt[t], part[j][mm][t % kP]);
          }
        }
      }
    }
    if (s + 1 < nslab) {  // x buffer buf ^ 1 was last read by slab s - 1, before the barrier below it
      if constexpr (!kPre) xload(s + 1);
      xstore(buf ^ 1);
    }
    __syncthreads();  // slab s read before stage_w(s + 2) overwrites its bytes; x of s + 1 visible
  }

  if constexpr (!kFast) {
#pragma unroll
    for (int j = 0; j < kGemvRowsPerWarp; ++j)
#pragma unroll
      for (int mm = 0; mm < MT; ++mm) {
        if constexpr (kP == 4) acc[j][mm] = (part[j][mm][0] + part[j][mm][1]) + (part[j][mm][2] + part[j][mm][3]);
        else if constexpr (kP == 2) acc[j][mm] = part[j][mm][0] + part[j][mm][1];
        else acc[j][mm] = part[j][mm][0];
      }
  }
#pragma unroll
  for (int j = 0; j < kGemvRowsPerWarp; ++j) {
    const int64_t r = r0 + j;
#pragma unroll
    for (int mm = 0; mm < MT; ++mm) {
      if (MT > 1 && mm >= mrows) break;
      float v = warp_sum(acc[j][mm]);
      if (lane == 0 && r < N) {
        if (p.bias) v += in_f32(static_cast<const T*>(p.bias)[r]);
        static_cast<T*>(p.out)[mm * p.out_stride + r] = out_of<T>(v);
      }
    }
  }
}

}  // namespace braze::cuda::quant
