// The attend kernel: one CTA serves up to R query heads of one token (a GQA
// group, or a chunk of it when the group is large) against one kv head's keys,
// so each K / V row read feeds every head of the group. Keys are spread over
// teams of kTeam lanes (each lane holds 8-element chunks of head_dim, loaded
// as 16 bytes where aligned); each team keeps its own f32 online-softmax state,
// so the key loop has no barrier; teams merge by shuffles, warps through
// shared memory. Split z of `splits` takes an even share of the sequence's
// unmasked key range, computed on the device from kv_lens / cu_seqlens, and
// writes its partial state to the workspace (merged by merge_splits_kernel).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention/params.cuh"
#include "cuda/common/dtype.cuh"

namespace braze::cuda::attn {

constexpr int kTeam = 8;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTeamsPerWarp = 32 / kTeam;
constexpr int kTeams = kThreads / kTeam;

// Query heads per CTA, R: at most 1024 / D, so a lane's accumulators stay
// within 128 floats; 4 where the GQA group has at most 4 heads (the launcher
// picks), so small groups do not carry idle rows.
template <int D> constexpr int kMaxRows = D > 128 ? 4 : 8;

__device__ __forceinline__ float sink_logit(const AttendParams& p, int h) {
  switch (p.sinks_type) {
    case 1: return static_cast<const float*>(p.sinks)[h];
    case 2: return to_f32(static_cast<const __half*>(p.sinks)[h]);
    case 3: return to_f32(static_cast<const __nv_bfloat16*>(p.sinks)[h]);
    default: return -INFINITY;
  }
}

// e^(x - m), 0 when m is -inf (nothing seen yet).
__device__ __forceinline__ float rescale(float x, float m) { return m == -INFINITY ? 0.f : expf(x - m); }

template <class T, bool Vec> __device__ __forceinline__ void load8(const T* src, float (&f)[8]) {
  if constexpr (Vec && sizeof(T) == 2) {
    const uint4 u = *reinterpret_cast<const uint4*>(src);
    const T* h = reinterpret_cast<const T*>(&u);
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = to_f32(h[e]);
  } else if constexpr (Vec) {
    const float4 a = reinterpret_cast<const float4*>(src)[0], b = reinterpret_cast<const float4*>(src)[1];
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) f[e] = to_f32(src[e]);
  }
}

// Row j of sequence b's keys and values for kv head kvh; false where the
// block table names no block of the cache (the key is masked, never read).
template <class T>
__device__ __forceinline__ bool key_rows(const AttendParams& p, int b, int64_t seq_start, int kvh, int64_t j,
                                         const T*& kp, const T*& vp) {
  if (p.mode == kRagged) {
    kp = static_cast<const T*>(p.k) + (seq_start + j) * p.k_st + kvh * p.k_sh;
    vp = static_cast<const T*>(p.v) + (seq_start + j) * p.v_st + kvh * p.v_sh;
    return true;
  }
  const int64_t blk = j / p.block_size, slot = j - blk * p.block_size;
  const int64_t id = p.bt[b * p.bt_stride + blk];
  if (id < 0 || id >= p.num_blocks) return false;
  kp = static_cast<const T*>(p.kc) + id * p.kc_sb + slot * p.kc_ss + kvh * p.kc_sh;
  vp = static_cast<const T*>(p.vc) + id * p.vc_sb + slot * p.vc_ss + kvh * p.vc_sh;
  return true;
}

template <class T, int D, int R, bool Vec>
__global__ void __launch_bounds__(kThreads) attend_kernel(const AttendParams p) {
  static_assert(R <= kMaxRows<D>, "too many rows for the accumulators");
  constexpr int C = D / 8;                      // 8-element chunks of a row
  constexpr int CPL = (C + kTeam - 1) / kTeam;  // chunks per lane (the last may be partial)
  __shared__ float q_s[R][D];
  __shared__ float red_m[kWarps][R], red_l[kWarps][R];
  __shared__ float red_acc[kWarps][R][D];

  const int t = blockIdx.x;  // decode: the sequence; prefill: the token
  const int kvh = blockIdx.y / p.head_chunks;
  const int h0 = kvh * p.group + (blockIdx.y % p.head_chunks) * R;
  const int nrows = min(R, kvh * p.group + p.group - h0);
  const int split = blockIdx.z;

  // The sequence, its key count, this token's position and its key range.
  int b = t;
  int64_t len = 0, pos = 0, seq_start = 0;
  const int64_t cap = p.max_blocks * p.block_size;
  if (p.mode == kDecode) {
    len = min(max(int64_t(p.kv_lens[b]), int64_t(0)), cap);
    pos = len - 1;
  } else {
    int lo = 0, hi = p.batch;  // the last sequence starting at or before t
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (p.cu[mid] <= t) lo = mid; else hi = mid;
    }
    b = lo;
    // cu_seqlens values are not checked on the host: clamped so k / v rows stay inside [0, tokens).
    const int64_t start = min(max(int64_t(p.cu[b]), int64_t(0)), p.tokens);
    const int64_t n = min(max(int64_t(p.cu[b + 1]) - start, int64_t(0)), p.tokens - start), i = t - start;
    if (p.mode == kRagged) {
      len = n;
      pos = i;
      seq_start = start;
    } else {
      len = min(max(int64_t(p.kv_lens[b]), int64_t(0)), cap);
      pos = len - n + i;
    }
  }
  int64_t key_hi = p.causal ? min(len, pos + 1) : len;
  const int64_t key_lo = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : int64_t(0);
  if (key_hi < key_lo) key_hi = key_lo;
  const int64_t per = (key_hi - key_lo + p.splits - 1) / p.splits;
  const int64_t s0 = min(key_hi, key_lo + split * per), s1 = min(key_hi, s0 + per);

  for (int idx = threadIdx.x; idx < R * D; idx += kThreads) {
    const int r = idx / D, d = idx - r * D;
    q_s[r][d] = r < nrows ? to_f32(static_cast<const T*>(p.q)[t * p.q_st + (h0 + r) * p.q_sh + d]) : 0.f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int team = lane / kTeam, tl = lane % kTeam;
  float m[R], l[R], acc[R][CPL * 8];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int e = 0; e < CPL * 8; ++e) acc[r][e] = 0.f;
  }

  // Warp-uniform loop (the team reductions shuffle across the whole warp).
  for (int64_t jb = s0 + warp * kTeamsPerWarp; jb < s1; jb += kTeams) {
    const int64_t j = jb + team;
    const T* kp = nullptr;
    const T* vp = nullptr;
    const bool valid = j < s1 && key_rows<T>(p, b, seq_start, kvh, j, kp, vp);
    float kf[CPL][8], vf[CPL][8];
#pragma unroll
    for (int c = 0; c < CPL; ++c) {
      const int ch = tl + c * kTeam;
      if (valid && ch < C) {
        load8<T, Vec>(kp + ch * 8, kf[c]);
        load8<T, Vec>(vp + ch * 8, vf[c]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) kf[c][e] = vf[c][e] = 0.f;
      }
    }
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float dot = 0.f;
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
        const int ch = tl + c * kTeam;
        if (ch < C) {
#pragma unroll
          for (int e = 0; e < 8; ++e) dot = fmaf(q_s[r][ch * 8 + e], kf[c][e], dot);
        }
      }
#pragma unroll
      for (int o = 1; o < kTeam; o <<= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[r] = dot;
    }
    if (valid) {
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float sc = s[r] * p.scale;
        if (p.softcap > 0.f) sc = p.softcap * tanhf(sc / p.softcap);
        const float mn = fmaxf(m[r], sc);
        const float corr = rescale(m[r], mn), pr = expf(sc - mn);
        l[r] = l[r] * corr + pr;
#pragma unroll
        for (int c = 0; c < CPL; ++c)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[r][c * 8 + e] = fmaf(acc[r][c * 8 + e], corr, pr * vf[c][e]);
        m[r] = mn;
      }
    }
  }

  // Teams of a warp: lanes tl, tl + 8, tl + 16, tl + 24 hold the same chunks.
#pragma unroll
  for (int o = kTeam; o < 32; o <<= 1) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float mo = __shfl_xor_sync(0xffffffffu, m[r], o), lo = __shfl_xor_sync(0xffffffffu, l[r], o);
      const float mn = fmaxf(m[r], mo);
      const float a = rescale(m[r], mn), c = rescale(mo, mn);
      l[r] = l[r] * a + lo * c;
#pragma unroll
      for (int e = 0; e < CPL * 8; ++e) {
        const float other = __shfl_xor_sync(0xffffffffu, acc[r][e], o);
        acc[r][e] = acc[r][e] * a + other * c;
      }
      m[r] = mn;
    }
  }
  if (team == 0) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (tl == 0) {
        red_m[warp][r] = m[r];
        red_l[warp][r] = l[r];
      }
#pragma unroll
      for (int c = 0; c < CPL; ++c) {
        const int ch = tl + c * kTeam;
        if (ch < C) {
#pragma unroll
          for (int e = 0; e < 8; ++e) red_acc[warp][r][ch * 8 + e] = acc[r][c * 8 + e];
        }
      }
    }
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < nrows * D; idx += kThreads) {
    const int r = idx / D, d = idx - r * D, h = h0 + r;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, red_m[w][r]);
    float L = 0.f, A = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float f = rescale(red_m[w][r], M);
      L += red_l[w][r] * f;
      A += red_acc[w][r][d] * f;
    }
    if (p.splits > 1) {
      float* st = p.ws + ((int64_t(t) * p.q_heads + h) * p.splits + split) * (D + 2);
      st[d] = A;
      if (d == 0) {
        st[D] = M;
        st[D + 1] = L;
      }
      continue;
    }
    if (p.sinks_type) {  // the sink joins the denominator only
      const float sk = sink_logit(p, h), M2 = fmaxf(M, sk), f = rescale(M, M2);
      L = L * f + expf(sk - M2);
      A *= f;
      M = M2;
    }
    static_cast<T*>(p.out)[t * p.o_st + h * p.o_sh + d] = from_f32<T>(L > 0.f ? A / L : 0.f);
    if (p.lse && d == 0) p.lse[t * p.l_st + h * p.l_sh] = L > 0.f ? M + logf(L) : -INFINITY;
  }
}

// Split-K merge: one CTA per (sequence, q head) combines the splits' states
// ([D acc, max, sum] each, D + 2 floats). It is latency-bound (a few KB from
// L2), so every thread issues all its loads at once: thread (c, g) takes
// column pair c of splits g, g + G, ... (kMergePer at a time), merges them in
// registers, and the G groups meet in shared memory. Launched with
// programmatic stream serialization where the device and the loaded code
// allow (launch_merge): it waits on the split kernel's completion here, so
// its launch overlaps the split kernel's tail.
constexpr int kMergeThreads = 512;
constexpr int kMergePer = 8;  // splits a thread loads together

template <class T, int D> __global__ void __launch_bounds__(kMergeThreads) merge_splits_kernel(const AttendParams p) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  constexpr int C = D / 2, G = kMergeThreads / C;
  __shared__ float gm[G], gl[G];
  __shared__ float2 ga[G][C];
  const int row = blockIdx.x, b = row / p.q_heads, h = row - b * p.q_heads;
  const int c = threadIdx.x % C, g = threadIdx.x / C;
  const float* st = p.ws + int64_t(row) * p.splits * (D + 2);
  if (g < G) {
    float m = -INFINITY, l = 0.f;
    float2 a = make_float2(0.f, 0.f);
    for (int i0 = g; i0 < p.splits; i0 += G * kMergePer) {
      float mi[kMergePer], li[kMergePer];
      float2 ai[kMergePer];
#pragma unroll
      for (int j = 0; j < kMergePer; ++j) {
        const int i = i0 + j * G;
        mi[j] = -INFINITY;
        li[j] = 0.f;
        ai[j] = make_float2(0.f, 0.f);
        if (i < p.splits) {
          const float* si = st + int64_t(i) * (D + 2);
          mi[j] = __ldcg(si + D);
          li[j] = __ldcg(si + D + 1);
          ai[j] = __ldcg(reinterpret_cast<const float2*>(si + 2 * c));  // D + 2 even, ws 16-byte aligned
        }
      }
      float mn = m;
#pragma unroll
      for (int j = 0; j < kMergePer; ++j) mn = fmaxf(mn, mi[j]);
      const float f = rescale(m, mn);
      l *= f;
      a.x *= f;
      a.y *= f;
#pragma unroll
      for (int j = 0; j < kMergePer; ++j) {
        const float w = rescale(mi[j], mn);
        l += li[j] * w;
        a.x += ai[j].x * w;
        a.y += ai[j].y * w;
      }
      m = mn;
    }
    ga[g][c] = a;
    if (c == 0) {
      gm[g] = m;
      gl[g] = l;
    }
  }
  __syncthreads();
  if (g != 0) return;
  float M = -INFINITY;
#pragma unroll
  for (int k = 0; k < G; ++k) M = fmaxf(M, gm[k]);
  const float sk = p.sinks_type ? sink_logit(p, h) : -INFINITY;
  M = fmaxf(M, sk);
  float L = p.sinks_type ? expf(sk - M) : 0.f;
  float2 A = make_float2(0.f, 0.f);
#pragma unroll
  for (int k = 0; k < G; ++k) {
    const float w = rescale(gm[k], M);
    L += gl[k] * w;
    A.x += ga[k][c].x * w;
    A.y += ga[k][c].y * w;
  }
  T* o = static_cast<T*>(p.out) + int64_t(b) * p.o_st + int64_t(h) * p.o_sh + 2 * c;
  o[0] = from_f32<T>(L > 0.f ? A.x / L : 0.f);
  o[1] = from_f32<T>(L > 0.f ? A.y / L : 0.f);
  if (p.lse && c == 0) p.lse[int64_t(b) * p.l_st + int64_t(h) * p.l_sh] = L > 0.f ? M + logf(L) : -INFINITY;
}

// Launches merge_splits_kernel on p's workspace; early: with programmatic
// stream serialization (sm_90 code only: the kernel's griddepcontrol.wait is
// what orders it after the split kernel).
template <class T, int D> cudaError_t launch_merge(const AttendParams& p, cudaStream_t s, bool early) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(p.batch) * unsigned(p.q_heads));
  cfg.blockDim = dim3(kMergeThreads);
  cfg.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = early ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, merge_splits_kernel<T, D>, p);
}

}  // namespace braze::cuda::attn
