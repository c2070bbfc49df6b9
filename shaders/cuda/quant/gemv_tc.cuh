// The tensor-core GEMV for 1..8 rows of f16 / bf16 x on q4_0 / q4_K weights,
// built to issue few instructions a weight (the one-row GEMV is bound by issue:
// the SIMT kernel of gemv.cuh issues ~0.116 warp instructions a weight in its
// dot loop alone, gemv_mma.cuh ~0.2; this kernel's whole loop 0.076-0.083 for
// q4_0, 0.10-0.11 for q4_K, counted in the SASS of sm_90).
//
// W is the mma's M side (16 rows a CTA; lane (g, t) holds rows g and g + 8 of
// each A fragment), x rows the N side (8 columns: 1..8 rows issue the same
// instructions but for one FMA a column). Each of a CTA's 8 warps owns a
// contiguous range of K, in stages of 256 elements (8 q4_0 blocks or one q4_K
// super-block: 144 bytes a row either way), and streams its 16 rows of that
// range and the x rows through its own cp.async ring: no CTA barrier until the
// final sum of the 8 warps' partial outputs.
//
// A unit is 32 elements (a q4_0 block, a q4_K sub-block). A lane's codes for two
// units are three aligned words a row (q4_0: one PRMT realigns and orders the
// first block's nibbles, one orders the second's) or one 8-byte load (q4_K: the
// low and high nibbles of the same bytes); every 8 nibbles become four A pairs
// by 3 shifts, 4 LOP3 (mask | magic exponent: 128 + n as bf16, 1024 + n as f16)
// and 4 HSUB2 (exact), f16's high nibbles by HFMA2 in place (no shift). Two
// m16n8k16 mmas sum a unit's code x x products into a fresh f32 fragment that
// one FMA a column scales (q4_K: and a second takes dmin m sum x off, the sums of
// x by an mma of ones). Biased (bf16 only): codes stay 128 + n, the sums of x
// take (128 + offset) sum x off instead of the HSUB2s. As in gemv_mma.cuh every
// product is exact code x x and only f32 sums round.
#pragma once
#include <type_traits>

#include "cuda/attention/mma.cuh"
#include "cuda/common/cp_async.cuh"
#include "cuda/quant/gemv.cuh"

namespace braze::cuda::quant {

namespace tc {

using dot_detail::half_at;
using dot_detail::perm;
using dot_detail::word;
using braze::cuda::cp_async_commit;
using braze::cuda::cp_async_wait;

constexpr int kRows = 16, kWarps = 8, kThreads = 32 * kWarps;
constexpr int kGroup = 8;        // 32-element units a stage (256 elements: 8 q4_0 blocks, a q4_K super-block)
constexpr int kWP = 144;         // bytes of a staged W row (both formats): 36 words, rows 4 banks apart
constexpr int kXP = 512 + 32;    // bytes of a staged x row: 136 words, rows 8 banks apart

template <int MT> constexpr int stage_bytes() { return kRows * kWP + MT * kXP; }
template <int MT, int S> constexpr int smem_bytes() { return kWarps * S * stage_bytes<MT>() + kWarps * kRows * 8 * 4; }

// A pairs of codes n (4 bits) minus Off: bf16 as 128 + n by a mask and a magic
// exponent (one LOP3), minus 128 + Off (HSUB2) or, Biased, left at 128 + n (the
// kernel takes (128 + Off) sum x off with an mma of ones); f16 as 1024 + n (low
// nibble, HSUB2 1024 + Off) or 1024 + 16 n (high nibble in place, HFMA2 by 1/16
// then - 64 - Off), so f16's high nibbles need no shift.
template <int Off, bool Biased> constexpr int kAOff = Biased ? -128 : Off;  // an A value is n - kAOff

// A small integer as T's bits, exactly (the host fallback of the pairs below).
template <class T> BRAZE_HD uint32_t small_bits(int c) {
  if (c == 0) return 0u;
  const uint32_t s = c < 0 ? 1u : 0u, a = uint32_t(c < 0 ? -c : c);
  int e = 0;
  while ((a >> (e + 1)) != 0) ++e;  // a = 2^e + rest, rest < 2^e
  const uint32_t rest = a - (1u << e);
  if constexpr (std::is_same_v<T, __half>) return (s << 15) | (uint32_t(e + 15) << 10) | (rest << (10 - e));
  else return (s << 15) | (uint32_t(e + 127) << 7) | (rest << (7 - e));
}

#if defined(__CUDA_ARCH__)
template <uint32_t M> __device__ __forceinline__ uint32_t mask_or(uint32_t p, uint32_t base) {  // (p & M) | base
  uint32_t v;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(p), "n"(M), "r"(base));
  return v;
}
template <class V> __device__ __forceinline__ uint32_t bits_of(V v) { return *reinterpret_cast<const uint32_t*>(&v); }
__device__ __forceinline__ __half2 h2(uint16_t b) { return __half2half2(__ushort_as_half(b)); }
#endif

// The nibbles at bits 0..3 and 16..19 of p as an A pair.
template <class T, int Off, bool Biased> BRAZE_HD uint32_t pair_lo(uint32_t p) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, __half>) {
    static_assert(!Biased, "f16 codes are unbiased");
    const uint32_t v = mask_or<0x000F000Fu>(p, 0x64006400u);
    return bits_of(__hsub2(*reinterpret_cast<const __half2*>(&v), h2(uint16_t(0x6400u + Off))));
  } else {
    const uint32_t v = mask_or<0x000F000Fu>(p, 0x43004300u);
    if constexpr (Biased) return v;
    else return bits_of(__hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v),
                                __bfloat162bfloat162(__ushort_as_bfloat16(uint16_t(0x4300u + Off)))));
  }
#else
  constexpr int off = kAOff<Off, Biased>;
  return small_bits<T>(int(p & 15u) - off) | (small_bits<T>(int((p >> 16) & 15u) - off) << 16);
#endif
}
// The nibbles at bits 4..7 and 20..23 of p as an A pair.
template <class T, int Off, bool Biased> BRAZE_HD uint32_t pair_hi(uint32_t p) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, __half>) {
    const uint32_t v = mask_or<0x00F000F0u>(p, 0x64006400u);
    // 1024 + 16 n -> (1024 + 16 n) / 16 - (64 + Off): f16 bits of 1/16 and -(64 + Off) (Off < 64)
    return bits_of(__hfma2(*reinterpret_cast<const __half2*>(&v), h2(0x2C00u), h2(uint16_t(0xD400u + 16 * Off))));
  } else {
    return pair_lo<T, Off, Biased>(p >> 4);
  }
#else
  return pair_lo<T, Off, Biased>(p >> 4);
#endif
}

// A lane's share of a row of W for two 32-element units (a q4_0 pair of blocks, a
// q4_K pair of sub-blocks sharing their nibble bytes): a[e][i] the A pairs of unit e,
// pair i = 2 st + h the k-step st's pair h, elements x_first(st, t) + 2 h and + 1.
struct Q4Pair {
  uint32_t a[2][4];
  float d[2];  // q4_0: the blocks' scales
};
// q4_0: base = the pair of blocks (36 bytes, 4-byte aligned); each block's elements
// (4t, 4t+1), (4t+2, 4t+3) (step 0), (16+4t, ..), (18+4t, ..) (step 1).
template <class T, bool Biased> BRAZE_HD void load_q4_0(const uint8_t* base, int t, Q4Pair& r) {
  const uint32_t w0 = word(base + 4 * t), w1 = word(base + 4 * t + 4), w5 = word(base + 20 + 4 * t);
  r.d[0] = half_at(base);
  r.d[1] = half_at(base + 18);
  // nibble bytes q0..q3 of the lane, ordered q0 q2 q1 q3 (pairs at bits 0 / 16)
  const uint32_t p[2] = {perm(w0, w1, 0x5342u), perm(w5, 0u, 0x3120u)};
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    const uint32_t q = p[e] >> 8;
    r.a[e][0] = pair_lo<T, 8, Biased>(p[e]);
    r.a[e][1] = pair_lo<T, 8, Biased>(q);
    r.a[e][2] = pair_hi<T, 8, Biased>(p[e]);
    r.a[e][3] = pair_hi<T, 8, Biased>(q);
  }
}
// q4_K: row = the super-block (144 bytes, 16-byte aligned), j = the pair of sub-blocks
// (2j: low nibbles, 2j + 1: high, of qs[32 j ..]); the lane's bytes 8t..8t+7 hold both
// sub-blocks' elements 8t..8t+7: (8t, 8t+1), (8t+2, ..) (step 0), (8t+4, ..), (8t+6, ..).
template <class T, bool Biased> BRAZE_HD void load_q4_K(const uint8_t* row, int j, int t, Q4Pair& r) {
  const uint32_t u0 = word(row + 16 + 32 * j + 8 * t), u1 = word(row + 20 + 32 * j + 8 * t);
  const uint32_t p0 = perm(u0, 0u, 0x3120u), p1 = perm(u1, 0u, 0x3120u), q0 = p0 >> 8, q1 = p1 >> 8;
  r.a[0][0] = pair_lo<T, 0, Biased>(p0);
  r.a[0][1] = pair_lo<T, 0, Biased>(q0);
  r.a[0][2] = pair_lo<T, 0, Biased>(p1);
  r.a[0][3] = pair_lo<T, 0, Biased>(q1);
  r.a[1][0] = pair_hi<T, 0, Biased>(p0);
  r.a[1][1] = pair_hi<T, 0, Biased>(q0);
  r.a[1][2] = pair_hi<T, 0, Biased>(p1);
  r.a[1][3] = pair_hi<T, 0, Biased>(q1);
  r.d[0] = r.d[1] = 0.f;
}
// First x element of k-step st for lane t in a unit.
template <QFormat F> BRAZE_HD int x_first(int st, int t) { return F == QFormat::q4_0 ? 16 * st + 4 * t : 8 * t + 4 * st; }

// q4_K's scales of one row: the 6-bit scales and mins as bytes (sc[0]: sub-blocks 0..3,
// sc[1]: 4..7), d and dmin, and -2^23 d, -2^23 dmin (a byte b in the mantissa of
// 2^23 times d, minus 2^23 d: b d with one rounding, as the codec's float(b) * d).
struct KScales {
  uint32_t sc[2], mn[2];
  float d, dm, nd, ndm;
};
BRAZE_HD void k_scales(const uint8_t* row, KScales& k) {
  k.d = half_at(row);
  k.dm = half_at(row + 2);
  k.nd = -8388608.f * k.d;
  k.ndm = -8388608.f * k.dm;
  const uint32_t s0 = word(row + 4), s1 = word(row + 8), s2 = word(row + 12);
  k.sc[0] = s0 & 0x3F3F3F3Fu;
  k.mn[0] = s1 & 0x3F3F3F3Fu;
  k.sc[1] = (s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u);
  k.mn[1] = ((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u);
}
// Sub-block s's d sc, and what multiplies sum x: dmin mn (+ 128 d sc for biased codes).
template <bool Biased> BRAZE_HD void k_coef(const KScales& k, int s, float& dsc, float& cm) {
  dsc = fmaf(dot_detail::magic(k.sc[s >> 2], s & 3), k.d, k.nd);
  const float dmn = fmaf(dot_detail::magic(k.mn[s >> 2], s & 3), k.dm, k.ndm);
  cm = Biased ? fmaf(128.f, dsc, dmn) : dmn;
}

// The A fragments of k-step st from rows g (wg) and g + 8 (wh) for unit e (m16n8k16:
// a[0] row g k 2t.., a[1] row g + 8, a[2] row g k 2t + 8.., a[3] row g + 8).
BRAZE_HD void frags(const Q4Pair& wg, const Q4Pair& wh, int e, int st, uint32_t (&a)[4]) {
  a[0] = wg.a[e][2 * st];
  a[1] = wh.a[e][2 * st];
  a[2] = wg.a[e][2 * st + 1];
  a[3] = wh.a[e][2 * st + 1];
}

#if defined(__CUDACC__)
__device__ __forceinline__ uint2 lds64(const uint8_t* p) { return *reinterpret_cast<const uint2*>(p); }
__device__ __forceinline__ uint4 lds128(const uint8_t* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {  // dst: a shared-window address
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}

// Requires: K a multiple of 256, W's row stride a multiple of 16 bytes, x 16-byte
// aligned with a row stride of a multiple of 8 elements, 1 <= m <= MT <= 8.
template <QFormat F, class T, int MT, int S, bool Biased>
__global__ void __launch_bounds__(kThreads, MT <= 2 ? 2 : 1) gemv_tc(const MmParams p) {
  constexpr int SB = stage_bytes<MT>();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  uint8_t* ring = smem + warp * S * SB;
  float* red = reinterpret_cast<float*>(smem + kWarps * S * SB);  // [warp][16 rows][8 columns]
  const int64_t N = p.w.rows, r0 = int64_t(blockIdx.x) * kRows;
  const int64_t ngr = p.w.cols / (32 * kGroup), per = (ngr + kWarps - 1) / kWarps;
  const int64_t glo = warp * per < ngr ? warp * per : ngr, ghi = glo + per < ngr ? glo + per : ngr;
  const int nst = int(ghi - glo), mrows = int(p.m);

  // Lane l copies row l % 16 of W, bytes 80 (l / 16) .. of a stage's 144: five 16-byte
  // pieces (four for l >= 16) from one pointer (rows past N copy row N - 1; their sums are
  // dropped), and piece l of each x row.
  const int wr = lane & 15, wh = lane >> 4;
  const int64_t srow = r0 + wr < N ? r0 + wr : N - 1;
  const uint8_t* wsrc = p.w.data + srow * p.w.data_stride + glo * kWP + 80 * wh;
  const uint32_t sbase = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
  const uint32_t wdst = sbase + wr * kWP + 80 * wh, xdst = sbase + kRows * kWP + 16 * lane;
  const T* xsrc = static_cast<const T*>(p.x) + glo * 32 * kGroup + 8 * lane;
  auto stage = [&](int s) {
    if (s < nst) {
      const uint32_t off = uint32_t(s % S) * SB;
      const uint8_t* src = wsrc + int64_t(s) * kWP;
#pragma unroll
      for (int i = 0; i < 5; ++i)
        if (i < 4 || wh == 0) cp16(wdst + off + 16 * i, src + 16 * i);
#pragma unroll
      for (int mm = 0; mm < MT; ++mm)
        if (mm < mrows) cp16(xdst + off + mm * kXP, xsrc + mm * p.x_stride + s * 32 * kGroup);
    }
    cp_async_commit();  // empty groups past the end keep the wait counts uniform
  };

  float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < S - 1; ++s) stage(s);
  const int xr = g < mrows ? g : 0;  // columns past m read row 0; their sums are dropped
  for (int s = 0; s < nst; ++s) {
    stage(s + S - 1);
    cp_async_wait<S - 1>();
    __syncwarp();
    const uint8_t* buf = ring + (s % S) * SB;
    const uint8_t* xb = buf + kRows * kWP + xr * kXP;
    const uint8_t* rg = buf + g * kWP;  // rows g, g + 8 (rows past N: copies of row N - 1, sums dropped)
    const uint8_t* rh = rg + 8 * kWP;
    KScales kg, kh;
    if constexpr (F == QFormat::q4_K) {
      k_scales(rg, kg);
      k_scales(rh, kh);
    }
#pragma unroll
    for (int c = 0; c < kGroup / 2; ++c) {
      Q4Pair wg, wh;
      if constexpr (F == QFormat::q4_0) {
        load_q4_0<T, Biased>(rg + 36 * c, t, wg);
        load_q4_0<T, Biased>(rh + 36 * c, t, wh);
      } else {
        load_q4_K<T, Biased>(rg, c, t, wg);
        load_q4_K<T, Biased>(rh, c, t, wh);
      }
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int u = 2 * c + e;  // the unit: elements 32 u .. of the stage
        uint32_t b[2][2];         // k-step st: x elements x_first(st, t) .. + 3 of x row xr
        if constexpr (F == QFormat::q4_0) {
          const uint2 x0 = lds64(xb + 64 * u + 8 * t), x1 = lds64(xb + 64 * u + 32 + 8 * t);
          b[0][0] = x0.x; b[0][1] = x0.y; b[1][0] = x1.x; b[1][1] = x1.y;
        } else {
          const uint4 xv = lds128(xb + 64 * u + 16 * t);
          b[0][0] = xv.x; b[0][1] = xv.y; b[1][0] = xv.z; b[1][1] = xv.w;
        }
        float d4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          uint32_t a[4];
          frags(wg, wh, e, st, a);
          braze::cuda::attn::mma16816<T>(d4, a, b[st][0], b[st][1]);
        }
        constexpr bool kSums = Biased || F == QFormat::q4_K;  // sum x: biased codes, q4_K's mins
        float sx[4] = {0.f, 0.f, 0.f, 0.f};
        if constexpr (kSums) {
          const uint32_t k1 = std::is_same_v<T, __half> ? 0x3C003C00u : 0x3F803F80u;  // 1, 1
          const uint32_t ones[4] = {k1, k1, k1, k1};
          braze::cuda::attn::mma16816<T>(sx, ones, b[0][0], b[0][1]);
          braze::cuda::attn::mma16816<T>(sx, ones, b[1][0], b[1][1]);
        }
        float mul[2], sub[2];  // rows g, g + 8: acc += mul d4 - sub sx
        if constexpr (F == QFormat::q4_0) {
          mul[0] = wg.d[e];
          mul[1] = wh.d[e];
        } else {
          k_coef<Biased>(kg, u, mul[0], sub[0]);
          k_coef<Biased>(kh, u, mul[1], sub[1]);
        }
#pragma unroll
        for (int cc = 0; cc < 4; ++cc) {
          if (MT == 1 && cc % 2 == 1) continue;  // column 2t + 1: an x row only from 2 rows on
          const int h = cc >> 1;
          if constexpr (F == QFormat::q4_0) {
            const float v = Biased ? fmaf(-136.f, sx[cc], d4[cc]) : d4[cc];
            acc[cc] = fmaf(mul[h], v, acc[cc]);
          } else {
            acc[cc] = fmaf(mul[h], d4[cc], acc[cc]);
            acc[cc] = fmaf(-sub[h], sx[cc], acc[cc]);
          }
        }
      }
    }
    __syncwarp();  // the buffer is refilled by the next iteration's stage
  }
  cp_async_wait<0>();
  float* rw = red + warp * kRows * 8;
  rw[g * 8 + 2 * t] = acc[0];
  rw[g * 8 + 2 * t + 1] = acc[1];
  rw[(g + 8) * 8 + 2 * t] = acc[2];
  rw[(g + 8) * 8 + 2 * t + 1] = acc[3];
  __syncthreads();
  if (threadIdx.x < kRows * 8) {
    const int j = int(threadIdx.x) >> 3, n = int(threadIdx.x) & 7;
    if (n < mrows && r0 + j < N) {
      float v = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) v += red[(w * kRows + j) * 8 + n];
      if (p.bias) v += in_f32(static_cast<const T*>(p.bias)[r0 + j]);
      static_cast<T*>(p.out)[n * p.out_stride + r0 + j] = out_of<T>(v);
    }
  }
}
#endif

}  // namespace tc

}  // namespace braze::cuda::quant
