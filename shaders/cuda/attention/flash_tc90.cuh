// Flash-attention forward on Hopper's warpgroup MMA (sm_90a), FlashAttention-3 style: the ragged
// prefill of f16 / bf16 with head_dim 128 (AttendParams, mode kRagged: sequence b holds tokens
// [cu[b], cu[b + 1]) of q [tokens, Hq, 128] and of k / v [tokens, Hkv, 128], query i and key j at
// positions i and j of their sequence; element strides per token and head, head_dim contiguous).
// Options: causal, scale (> 0: the max is taken before scaling), window, sinks, lse (natural log),
// GQA (kv head h / group), softcap (Cap: its own instantiation, so the plain kernel carries no tanh).
//
// A CTA of 3 warpgroups owns 128 consecutive rows of q (a window of the ragged buffer) for one query
// head and serves each sequence that intersects the window in turn (found by a binary search of cu on
// the device; one sequence for a long prompt), as flash.cuh does:
//   warpgroup 0, the producer: one thread issues the copy engine's 3-D tensor copies (maps over
//     [tokens, H, D] with the caller's strides, boxes of 128 tokens x 64 elements = 128-byte rows,
//     128-byte swizzle, tokens past the buffer read as 0): Q once, then for each sequence the K and V
//     tiles of 128 keys from its first unmasked key into a ring of kTc90AttnStages stages, each tile
//     completing on its own "full" mbarrier; a stage's K (V) tile is refilled after its K (V) "empty"
//     mbarrier has an arrival from each of the 8 consumer warps: K is released once S is computed,
//     before the softmax, so the next K can land while P V still reads this stage's V. The ring's count
//     runs on across sequences;
//   warpgroups 1 and 2, the consumers, 64 rows each: S = Q K^T (8 wgmma m64n128k16, A = Q and B = K
//     from shared memory, both K-major), masks on the tiles that need them (a key past the sequence,
//     which is the next sequence's or past the buffer, the causal and window edges), online softmax
//     in f32 registers (base 2, scale folded into log2 e; row max and sum over the 4 lanes of a quad),
//     P rounded to the input type in registers and O += P V (8 wgmma m64n128k16 with A = P from
//     registers, B = V MN-major from shared memory, imm-trans-b = 1); then the rows of the window that
//     belong to the sequence are written (the sinks join the denominator there).
// A D-wide row is two 64-element boxes: each 128-row tile is two 16 KB halves (d 0-63, d 64-127);
// QK^T's k steps 0-3 read half 0 at +32 bytes each, 4-7 half 1; PV's B descriptor spans both halves
// with its leading byte offset (16 KB) and a k step (16 keys) advances 2 KB.
//
// Sched 0 (the library's beyond 8192 tokens): each tile is S, wait, softmax, PV, wait. Sched 1 (FA3's
// intra-warpgroup pipelining): S of tile n + 1 is issued before PV of tile n, and its softmax runs while
// PV is in flight; O is rescaled and P repacked once PV has completed. Sched 2: 1, plus FA3's ping-pong
// between the two consumers: named barriers 1 and 2 pass a turn so the warpgroups issue their GEMMs
// alternately.
// On the H100 (docs/bench/h100-35fb9e8-attn-wgmma.txt) Sched 0 was the fastest at every length while
// a stage's K and V were released together; since K is released as soon as S is computed, Sched 2 is
// 4-7% faster at T 1024-8192 and the library's up to 8192 tokens (docs/bench/h100-1025-attn-sched.txt,
// h100-1339-prefill-pingpong.txt; at T 16384 the two are within the H100's power-capped clock's noise).
// Grid: x = (window, head), the head fastest and the last windows first (under a causal mask they
// have the most tiles; the heads of one GQA group, reading the same K / V, run side by side).
// setmaxnreg: producer 24, consumers 240 registers. Shared memory: Q 32 KB + 2 stages x (K 32 + V 32 KB).
#pragma once
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/attention/attend.cuh"
#include "cuda/common/tc90.cuh"

namespace braze::cuda::attn {

#ifndef BRAZE_TC90_ATTN_STAGES
// K / V stages in the ring (scripts/cuda_attn_wgmma.cu can build with 3: 224 KB of tiles)
#define BRAZE_TC90_ATTN_STAGES 2
#endif
constexpr int kTc90AttnRows = 128, kTc90AttnKeys = 128, kTc90AttnStages = BRAZE_TC90_ATTN_STAGES;
constexpr int kTc90AttnThreads = 384;
constexpr int kTc90AttnD = 128;
constexpr uint32_t kTc90AttnHalf = 128 * 128;                // bytes: 128 rows x 64 elements
constexpr uint32_t kTc90AttnTile = 2 * kTc90AttnHalf;       // one 128-row tile of Q, K or V
constexpr int kTc90AttnBars = 1 + 4 * kTc90AttnStages;      // q, k full, v full, k empty, v empty
constexpr int kTc90AttnSmem = (1 + 2 * kTc90AttnStages) * kTc90AttnTile + 8 * kTc90AttnBars + 1024;

__device__ __forceinline__ float tc90_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
template <class T> __device__ __forceinline__ uint32_t tc90_pack(float a, float b) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

#if BRAZE_TC90
// The per-warpgroup state of 64 rows: this lane's rows are r0 + 8 h (h = 0, 1) of the block.
struct Tc90Softmax {
  float m[2], l[2];  // running max (base 2, scaled) and this lane's partial sum
};

// Scores of the key tile starting at key j0 of the sequence (s, raw Q K^T) -> exponentials in place;
// corr: the factor O must be scaled by. With mask, key j of this lane's row h is kept for
// lo[h] <= j < hi[h] (sequence positions). Cap (softcap c): s becomes c tanh(scale s / c) log2 e first
// (cap_in = scale / c, cap_out = c log2 e) and scale_log2 is then 1.
template <bool Cap>
__device__ __forceinline__ void tc90_softmax(float (&s)[64], Tc90Softmax& st, float (&corr)[2], int j0,
                                             const int (&lo)[2], const int (&hi)[2], bool mask, float scale_log2,
                                             float cap_in, float cap_out) {
  const int tq = threadIdx.x % 4;
  if constexpr (Cap) {
#pragma unroll
    for (int i = 0; i < 64; ++i) s[i] = cap_out * tanhf(s[i] * cap_in);
    scale_log2 = 1.f;
  }
  if (mask) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = j0 + 8 * j + 2 * tq + (e & 1), h = e >> 1;
        if (key >= hi[h] || key < lo[h]) s[4 * j + e] = -INFINITY;
      }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mn = fmaxf(st.m[h], mx * scale_log2);
    const float mu = mn == -INFINITY ? 0.f : mn;  // every key so far masked: any finite shift
    corr[h] = tc90_exp2(st.m[h] - mu);
    st.m[h] = mn;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const float e = tc90_exp2(fmaf(s[4 * j + 2 * h + c], scale_log2, -mu));
        s[4 * j + 2 * h + c] = e;
        sum += e;
      }
    st.l[h] = st.l[h] * corr[h] + sum;
  }
}

// O *= corr (per row), then P = s rounded to T as 8 A fragments of 16 keys.
template <class T>
__device__ __forceinline__ void tc90_rescale_pack(float (&o)[64], const float (&s)[64], const float (&corr)[2],
                                                  uint32_t (&p)[8][4]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    o[4 * j] *= corr[0];
    o[4 * j + 1] *= corr[0];
    o[4 * j + 2] *= corr[1];
    o[4 * j + 3] *= corr[1];
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    p[k][0] = tc90_pack<T>(s[8 * k], s[8 * k + 1]);
    p[k][1] = tc90_pack<T>(s[8 * k + 2], s[8 * k + 3]);
    p[k][2] = tc90_pack<T>(s[8 * k + 4], s[8 * k + 5]);
    p[k][3] = tc90_pack<T>(s[8 * k + 6], s[8 * k + 7]);
  }
}

// S[64 x 128] = Q K^T: qa the warpgroup's 64 rows of the Q tile, k the K tile (both 2 halves, K-major).
template <class In> __device__ __forceinline__ void tc90_qk(float (&s)[64], uint32_t qa, uint32_t k) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const uint32_t off = (kk / 4) * kTc90AttnHalf + (kk % 4) * 32;
    tc90::wgmma_n128_ss<In>(s, tc90::sw128_desc(qa + off), tc90::sw128_desc(k + off), kk > 0);
  }
}
// O[64 x 128] += P V: P as 8 A fragments of 16 keys, v the V tile ([keys][d], 2 halves): B MN-major,
// 16 keys = 2 KB a k step, the two 64-column halves kTc90AttnHalf apart (lbo), 8-key groups 1 KB (sbo).
template <class In, uint32_t Lbo = kTc90AttnHalf, uint32_t Sbo = 1024>
__device__ __forceinline__ void tc90_pv(float (&o)[64], const uint32_t (&pf)[8][4], uint32_t v) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) tc90::wgmma_n128_rs_tb<In>(o, pf[kk], tc90::sw128_desc_mn(v + kk * 2048, Lbo, Sbo), 1);
}

template <int N> __device__ __forceinline__ void tc90_fence_p(uint32_t (&p)[N][4]) {
#pragma unroll
  for (int k = 0; k < N; ++k) tc90::reg_fence(p[k]);
}
#endif  // BRAZE_TC90

// The part of a CTA's window [r0, r0 + 128) that sequence b holds: rows [ra, rb) (empty when
// ra >= rb), its first row `start` and length `len`, and the key range [key_lo, key_lo + 128 tiles)
// that covers every row's unmasked keys. false once the sequence starts past the window. cu's values
// are not checked on the host: clamped so rows stay inside [0, tokens), as flash.cuh.
struct Tc90Seq {
  int start, len, ra, rb, key_lo, tiles;
};
__device__ __forceinline__ bool tc90_seq(const AttendParams& p, int b, int r0, Tc90Seq& q) {
  const int64_t start = min(max(int64_t(p.cu[b]), int64_t(0)), p.tokens);
  const int64_t n = min(max(int64_t(p.cu[b + 1]) - start, int64_t(0)), p.tokens - start);
  if (start >= r0 + kTc90AttnRows) return false;
  q.start = int(start);
  q.len = int(n);
  q.ra = int(max(start, int64_t(r0)));
  q.rb = int(min(start + n, int64_t(r0) + kTc90AttnRows));
  const int pos_first = q.ra - q.start, pos_last = q.rb - 1 - q.start;
  const int key_hi = p.causal ? min(q.len, pos_last + 1) : q.len;
  q.key_lo = p.window > 0 ? int(max(int64_t(0), int64_t(pos_first) - p.window + 1)) : 0;
  q.tiles = q.ra < q.rb && key_hi > q.key_lo ? (key_hi - q.key_lo + kTc90AttnKeys - 1) / kTc90AttnKeys : 0;
  return true;
}
// The first sequence that may intersect the window: the last one starting at or before r0.
__device__ __forceinline__ int tc90_first_seq(const AttendParams& p, int r0) {
  int lo = 0, hi = p.batch;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (p.cu[mid] <= r0) lo = mid; else hi = mid;
  }
  return lo;
}

// T: __nv_bfloat16 or __half. Maps: q over [tokens, Hq, 128], k / v over [tokens, Hkv, 128] (3-D,
// the caller's strides; box 64 x 1 x 128, 128-byte swizzle). p.out / p.lse rows are written through
// their strides (out 4-byte aligned with even strides: the launcher checks).
template <class T, int Sched, bool Cap = false>
__global__ void __launch_bounds__(kTc90AttnThreads, 1)
    flash_tc90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                      const __grid_constant__ CUtensorMap map_v, const AttendParams p) {
#if BRAZE_TC90
  using namespace tc90;
  using In = std::conditional_t<std::is_same_v<T, __half>, F16In, Bf16In>;
  constexpr int ST = kTc90AttnStages;
  extern __shared__ uint8_t tc90_attn_smem[];
  const uint32_t base = (tc90::smem_addr(tc90_attn_smem) + 1023u) & ~1023u;  // swizzled tiles start on 1024 bytes
  const uint32_t sq = base, skv = base + kTc90AttnTile;  // stage s: K at skv + 2 s tile, V one tile on
  const uint32_t bar_q = base + (1 + 2 * ST) * kTc90AttnTile;
  auto kfull = [&](int s) { return bar_q + 8 + 8 * s; };
  auto vfull = [&](int s) { return bar_q + 8 + 8 * ST + 8 * s; };
  auto kempty = [&](int s) { return bar_q + 8 + 16 * ST + 8 * s; };
  auto vempty = [&](int s) { return bar_q + 8 + 24 * ST + 8 * s; };
  auto kst = [&](int s) { return skv + 2 * s * kTc90AttnTile; };

  const int tid = int(threadIdx.x), wg = tid / 128;
  const int windows = int(gridDim.x) / p.q_heads;
  const int h = int(blockIdx.x) % p.q_heads, r0 = (windows - 1 - int(blockIdx.x) / p.q_heads) * kTc90AttnRows;
  const int first = tc90_first_seq(p, r0);

  if (tid == 0) {
    mbar_init(bar_q, 1);
    for (int s = 0; s < ST; ++s) {
      mbar_init(kfull(s), 1);
      mbar_init(vfull(s), 1);
      mbar_init(kempty(s), 8);  // lane 0 of each consumer warp
      mbar_init(vempty(s), 8);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (tid == 0) {
      const int kvh = h / p.group;
      mbar_expect(bar_q, kTc90AttnTile);
      tma_load_3d(sq, &map_q, bar_q, 0, h, r0);
      tma_load_3d(sq + kTc90AttnHalf, &map_q, bar_q, 64, h, r0);
      int it = 0;  // tiles issued so far, over every sequence
      Tc90Seq q;
      for (int b = first; b < p.batch && tc90_seq(p, b, r0, q); ++b)
        for (int n = 0; n < q.tiles; ++n, ++it) {
          const int s = it % ST, key = q.start + q.key_lo + n * kTc90AttnKeys;
          const uint32_t k = kst(s), v = k + kTc90AttnTile;
          if (it >= ST) mbar_wait(kempty(s), uint32_t(it / ST - 1) & 1u);
          mbar_expect(kfull(s), kTc90AttnTile);
          tma_load_3d(k, &map_k, kfull(s), 0, kvh, key);
          tma_load_3d(k + kTc90AttnHalf, &map_k, kfull(s), 64, kvh, key);
          if (it >= ST) mbar_wait(vempty(s), uint32_t(it / ST - 1) & 1u);
          mbar_expect(vfull(s), kTc90AttnTile);
          tma_load_3d(v, &map_v, vfull(s), 0, kvh, key);
          tma_load_3d(v + kTc90AttnHalf, &map_v, vfull(s), 64, kvh, key);
        }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  const int cw = wg - 1, t = tid % 128, w = t / 32, lane = tid % 32;
  const int row = r0 + cw * 64 + w * 16 + lane / 4;  // this lane's first row (the second: + 8)
  const uint32_t qa = sq + cw * 64 * 128;            // this warpgroup's 64 rows of each Q half
  const float scale_log2 = p.scale * 1.4426950408889634f;
  const float cap_in = Cap ? p.scale / p.softcap : 0.f, cap_out = Cap ? p.softcap * 1.4426950408889634f : 0.f;
  auto qk = [&](float (&s)[64], int stage) { tc90_qk<In>(s, qa, kst(stage)); };
  auto pv = [&](float (&o)[64], const uint32_t (&pf)[8][4], int stage) {
    tc90_pv<In>(o, pf, kst(stage) + kTc90AttnTile);
  };
  mbar_wait(bar_q, 0);

  int it = 0;  // tiles consumed so far, over every sequence (the producer's count)
  Tc90Seq q;
  for (int b = first; b < p.batch && tc90_seq(p, b, r0, q); ++b) {
    if (q.ra >= q.rb) continue;
    // This lane's rows' key ranges, and the window's bounds that decide which tiles need a mask.
    int lo[2], hi[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int pos = row + 8 * hh - q.start;
      hi[hh] = p.causal ? min(q.len, pos + 1) : q.len;
      lo[hh] = p.window > 0 ? int(max(int64_t(0), int64_t(pos) - p.window + 1)) : 0;
    }
    const int pos_first = q.ra - q.start, pos_last = q.rb - 1 - q.start;
    const int hi_min = p.causal ? min(q.len, pos_first + 1) : q.len;
    const int lo_max = p.window > 0 ? int(max(int64_t(0), int64_t(pos_last) - p.window + 1)) : 0;
    const int it0 = it, tiles = q.tiles;
    it += tiles;
    auto j0 = [&](int n) { return q.key_lo + n * kTc90AttnKeys; };
    auto masked = [&](int n) { return j0(n) + kTc90AttnKeys > hi_min || j0(n) < lo_max; };
    auto stage = [&](int n) { return (it0 + n) % ST; };
    auto phase = [&](int n) { return uint32_t((it0 + n) / ST) & 1u; };

    float o[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] = 0.f;
    Tc90Softmax st{{-INFINITY, -INFINITY}, {0.f, 0.f}};
    uint32_t pf[8][4];
    float corr[2];

    // Sched 2: warpgroup cw issues its GEMMs after a bar_sync on barrier 1 + cw, which completes with
    // the other's bar_arrive after its own issue; consumer 1 starts by letting consumer 0 go first and
    // skips its arrival after its last issue (each barrier: as many arrivals as syncs, per sequence).
    auto my_turn = [&] {
      if constexpr (Sched == 2) bar_sync(1 + cw, 256);
    };
    auto pass_turn = [&](bool last) {
      if constexpr (Sched == 2)
        if (!(last && cw == 1)) bar_arrive(2 - cw, 256);
    };

    if constexpr (Sched == 0) {
      for (int n = 0; n < tiles; ++n) {
        const int s = stage(n);
        const uint32_t ph = phase(n);
        float sc[64];
        mbar_wait(kfull(s), ph);
        wgmma_fence();
        qk(sc, s);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(sc);
        if (lane == 0) mbar_arrive(kempty(s));  // K of this stage read: the producer may refill it
        tc90_softmax<Cap>(sc, st, corr, j0(n), lo, hi, masked(n), scale_log2, cap_in, cap_out);
        tc90_rescale_pack<T>(o, sc, corr, pf);
        mbar_wait(vfull(s), ph);
        wgmma_fence();
        pv(o, pf, s);
        wgmma_commit();
        wgmma_wait<0>();
        reg_fence(o);
        tc90_fence_p(pf);
        if (lane == 0) mbar_arrive(vempty(s));
      }
    } else if (tiles > 0) {
      if constexpr (Sched == 2)
        if (cw == 1) bar_arrive(1, 256);
      {  // tile 0: S, softmax, P
        float sc[64];
        mbar_wait(kfull(stage(0)), phase(0));
        my_turn();
        wgmma_fence();
        qk(sc, stage(0));
        wgmma_commit();
        pass_turn(false);
        wgmma_wait<0>();
        reg_fence(sc);
        if (lane == 0) mbar_arrive(kempty(stage(0)));
        tc90_softmax<Cap>(sc, st, corr, j0(0), lo, hi, masked(0), scale_log2, cap_in, cap_out);
        tc90_rescale_pack<T>(o, sc, corr, pf);
      }
      for (int n = 1; n < tiles; ++n) {
        const int s = stage(n), sp = stage(n - 1);
        float sc[64];
        mbar_wait(kfull(s), phase(n));
        my_turn();
        wgmma_fence();
        qk(sc, s);  // S of tile n ...
        wgmma_commit();
        mbar_wait(vfull(sp), phase(n - 1));
        wgmma_fence();
        pv(o, pf, sp);  // ... and O += P V of tile n - 1, both in flight
        wgmma_commit();
        pass_turn(false);
        wgmma_wait<1>();  // S done
        reg_fence(sc);
        if (lane == 0) mbar_arrive(kempty(s));
        tc90_softmax<Cap>(sc, st, corr, j0(n), lo, hi, masked(n), scale_log2, cap_in, cap_out);
        wgmma_wait<0>();  // PV done: O and P are ours again, the stage of tile n - 1 is free
        reg_fence(o);
        tc90_fence_p(pf);
        if (lane == 0) mbar_arrive(vempty(sp));
        tc90_rescale_pack<T>(o, sc, corr, pf);
      }
      const int sl = stage(tiles - 1);
      mbar_wait(vfull(sl), phase(tiles - 1));
      my_turn();
      wgmma_fence();
      pv(o, pf, sl);
      wgmma_commit();
      pass_turn(true);
      wgmma_wait<0>();
      reg_fence(o);
      tc90_fence_p(pf);
      if (lane == 0) mbar_arrive(vempty(sl));
    }

    // O / L (the quad's partial sums, the sink in the denominator), rows of this sequence only;
    // lse = ln 2 (m + log2 L).
    T* out = static_cast<T*>(p.out);
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float L = st.l[hh];
      L += __shfl_xor_sync(0xffffffffu, L, 1);
      L += __shfl_xor_sync(0xffffffffu, L, 2);
      float M = st.m[hh], fo = 1.f;
      if (p.sinks_type) {
        const float sk = sink_logit(p, h) * 1.4426950408889634f, M2 = fmaxf(M, sk);
        if (M2 != -INFINITY) {
          fo = tc90_exp2(M - M2);
          L = L * fo + tc90_exp2(sk - M2);
          M = M2;
        }
      }
      const int r = row + 8 * hh;
      if (r < q.ra || r >= q.rb) continue;
      const float inv = L > 0.f ? fo / L : 0.f;
      T* dst = out + int64_t(r) * p.o_st + int64_t(h) * p.o_sh + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 16; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j) = tc90_pack<T>(o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
      if (p.lse && lane % 4 == 0)
        p.lse[int64_t(r) * p.l_st + int64_t(h) * p.l_sh] = L > 0.f ? (M + __log2f(L)) * 0.6931471805599453f : -INFINITY;
    }
  }
#endif
}

}  // namespace braze::cuda::attn
