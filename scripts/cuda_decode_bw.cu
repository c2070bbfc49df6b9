// What limits the CUDA paged decode (issue 16): the library's split kernel
// (shaders/cuda/attention/decode.cuh) and its merge (attend.cuh), launched as
// csrc/cuda/attention.cu launches them, row by row beside the copy ceilings,
// in one process (no braze build needed). bf16, Hq 32 / Hkv 8, D 128, block 16,
// every sequence full (as `braze bench` makes its decode inputs), block tables
// a shuffled permutation of the cache's blocks ([num_blocks, 16, Hkv, D], 3 spare).
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders \
//     scripts/cuda_decode_bw.cu -o /tmp/decbw && /tmp/decbw
// (attention.cu builds with -O3 and no other math flag; --expt-relaxed-constexpr is not
// needed by these headers but harmless.) Runs in ~10 s on an H100 / H200.
// Each row: median of 7 timings of 20 launches rotating over buffer sets (q, K, V,
// out) that together exceed 3 x 64 MB, so K / V come from HBM; per-launch GPU time,
// the gap between two kernels of a row included. bytes = K and V read once + q + out
// + kv_lens (the `braze bench` cost of decode). %copy: against a 1 GiB
// cudaMemcpyAsync D2D (read + write bytes a second, as `braze bench`'s ceiling);
// %same: against a memcpy of this shape's K and V bytes (its own launch overhead in).
// Rows:
//   library S + merge   the library's split count S and both kernels (attention.cu)
//   split alone / merge alone   each kernel by itself (merge: on the workspace of S)
//   split S=n + merge   the library kernels with another split count (and its split kernel alone)
//   copy: split + merge bench copy of decode_kernel (F=0): must equal the library bit for bit
//   no-math split       the copy with the QK / softmax / PV math removed: the load pattern alone
//   split + merge2      merge2: a merge with fewer dependent load rounds (weights once, float2,
//                       two halves of the splits per CTA), plain launch
//   split + merge2 carveout max   merge2 asking for the decode kernel's shared-memory carveout:
//                       whether an SM's L1 / shared reconfiguration between the kernels costs
//   split(PDL) + merge2 PDL  the split kernel triggers its dependents at its start and merge2
//                       is launched with programmatic stream serialization (griddepcontrol.wait)
//   fused S=n           no merge kernel: the last CTA of a (sequence, kv head) to finish
//                       (a counter per unit, self-resetting) merges that unit's heads
//   memcpy K+V / read16 K+V   ceilings over the cache: cudaMemcpyAsync of K and of V, and a
//                       16-byte-vector read-reduce kernel
// Every row that writes the output is checked against `library S + merge`'s output:
// max |diff| / max |out| (another split count rounds in another order), FAIL above 1.6e-2.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/attention/decode.cuh"
#include "cuda_bw.cuh"

using namespace braze::cuda;
using namespace braze::cuda::attn;
using T = __nv_bfloat16;
constexpr int D = 128;

static cudaStream_t g_s;

// cuda_bw.cuh's timer on this file's stream, over `sets` buffer sets
template <class Launch> float time_it(int sets, Launch&& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int s = 0; s < sets; ++s) launch(s);
  std::vector<float> ms;
  for (int rep = 0; rep < kReps; ++rep) {
    CK(cudaEventRecord(a, g_s));
    for (int i = 0; i < kIters; ++i) launch(i % sets);
    CK(cudaEventRecord(b, g_s)); CK(cudaEventSynchronize(b));
    float m; CK(cudaEventElapsedTime(&m, a, b)); ms.push_back(m * 1000.f / kIters);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[kReps / 2];
}

// The library's split rules, copied from csrc/cuda/attention.cu (anonymous namespace there).
constexpr int64_t kMaxSplits = 64, kMinKeysPerSplit = 256, kDecodeMinKeysPerSplit = 128;
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t max_rows(int64_t dim) { return dim > 128 ? 4 : 8; }
// decode_splits: what the workspace from attention_workspace_bytes holds ("allowed").
int64_t lib_allowed(int64_t batch, int64_t q_heads, int64_t dim, int64_t capacity, int sms) {
  const int64_t base = std::max<int64_t>(1, batch * ceil_div(q_heads, max_rows(dim)));
  const int64_t want = ceil_div(2 * int64_t(sms), base);
  return std::max<int64_t>(1, std::min({want, ceil_div(capacity, kMinKeysPerSplit), kMaxSplits}));
}
// decode_kernel_splits (one CTA an SM)
int64_t lib_splits(int64_t units, int64_t sms, int64_t capacity, int64_t allowed) {
  if (units >= sms) return 1;
  return std::max<int64_t>(1, std::min({sms / units, ceil_div(capacity, kDecodeMinKeysPerSplit), allowed}));
}

// ---------------------------------------------------------------- variants
constexpr int kNoMath = 1, kFused = 2, kTrigger = 4, kTime = 8;

// Rows h0 .. h0 + nrows - 1 of sequence b merged from the workspace's p.splits states
// (128 threads, D 128; sm: kDecRows * (splits + 1) + kDecRows * D floats). The weights
// e^(m_i - M) and L once per row (a warp a row, lanes over splits), then each thread
// sums a column pair (float2) of every row over half the splits; the halves meet in sm.
template <class T, int D>
__device__ __forceinline__ void merge_rows(const AttendParams& p, int b, int h0, int nrows, float* sm) {
  static_assert(D == 128, "a column pair a thread, two halves: 128 threads");
  const int S = p.splits, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* wt = sm;
  float* part = sm + kDecRows * (S + 1);
  for (int r = warp; r < nrows; r += kDecWarps) {
    const int h = h0 + r;
    const float* st = p.ws + (int64_t(b) * p.q_heads + h) * S * (D + 2);
    float M = -INFINITY;
    for (int i = lane; i < S; i += 32) M = fmaxf(M, __ldcg(st + i * (D + 2) + D));
#pragma unroll
    for (int o = 16; o; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    const float sk = p.sinks_type ? sink_logit(p, h) : -INFINITY;
    M = fmaxf(M, sk);
    float L = 0.f;
    for (int i = lane; i < S; i += 32) {
      const float w = rescale(__ldcg(st + i * (D + 2) + D), M);
      wt[r * (S + 1) + i] = w;
      L += __ldcg(st + i * (D + 2) + D + 1) * w;
    }
#pragma unroll
    for (int o = 16; o; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    if (p.sinks_type) L += expf(sk - M);
    if (lane == 0) {
      wt[r * (S + 1) + S] = L;
      if (p.lse) p.lse[int64_t(b) * p.l_st + int64_t(h) * p.l_sh] = L > 0.f ? M + logf(L) : -INFINITY;
    }
  }
  __syncthreads();
  const int c = (threadIdx.x % (D / 2)) * 2, half = threadIdx.x / (D / 2);
  float2 A[kDecRows];
#pragma unroll
  for (int r = 0; r < kDecRows; ++r) A[r] = make_float2(0.f, 0.f);
  const float* base = p.ws + (int64_t(b) * p.q_heads + h0) * S * (D + 2) + c;
#pragma unroll 4
  for (int i = half; i < S; i += 2) {
#pragma unroll
    for (int r = 0; r < kDecRows; ++r) {
      if (r < nrows) {
        const float2 v = __ldcg(reinterpret_cast<const float2*>(base + (int64_t(r) * S + i) * (D + 2)));
        const float w = wt[r * (S + 1) + i];
        A[r].x += v.x * w;
        A[r].y += v.y * w;
      }
    }
  }
  if (half == 1) {
#pragma unroll
    for (int r = 0; r < kDecRows; ++r) {
      if (r < nrows) {
        part[r * D + c] = A[r].x;
        part[r * D + c + 1] = A[r].y;
      }
    }
  }
  __syncthreads();
  if (half == 0) {
#pragma unroll
    for (int r = 0; r < kDecRows; ++r) {
      if (r < nrows) {
        const float L = wt[r * (S + 1) + S];
        const float ax = A[r].x + part[r * D + c], ay = A[r].y + part[r * D + c + 1];
        T* o = static_cast<T*>(p.out) + int64_t(b) * p.o_st + int64_t(h0 + r) * p.o_sh + c;
        o[0] = from_f32<T>(L > 0.f ? ax / L : 0.f);
        o[1] = from_f32<T>(L > 0.f ? ay / L : 0.f);
      }
    }
  }
}

size_t merge2_smem(int splits) { return size_t(kDecRows * (splits + 1) + kDecRows * D) * sizeof(float); }

// merge2: one CTA per (sequence, q head), as merge_splits_kernel; Pdl: waits on the split kernel
// (griddepcontrol.wait) so it may be launched before that one ends.
// Tag: a distinct kernel for the carveout row (a function attribute holds for every later launch).
template <class T, int D, bool Pdl, int Tag = 0>
__global__ void __launch_bounds__(kDecThreads) merge2(const AttendParams p) {
  if constexpr (Pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  extern __shared__ float merge_sm[];
  merge_rows<T, D>(p, int(blockIdx.x) / p.q_heads, int(blockIdx.x) % p.q_heads, 1, merge_sm);
}

// decode_kernel of shaders/cuda/attention/decode.cuh, copied (F = 0 must match it bit for bit),
// with the bench's switches: kNoMath (loads and waits only), kFused (the last CTA of a unit
// merges; counters: one int a unit, zero between launches), kTrigger (PDL: dependents may launch),
// kTime (times: globaltimer at the CTA's start and end and its SM, 3 words a CTA).
template <class T, int D, int F>
__global__ void __launch_bounds__(kDecThreads) decode_var(const AttendParams p, int* counters,
                                                          unsigned long long* times) {
  static_assert(D % 16 == 0 && D <= 128, "the f32 accumulators of P V (16 x D a warp) must fit in registers");
  constexpr int S = kDecStride<D>, NS = kDecStages<D>, TILE = kDecTile<D>, KT = D / 16, NT = D / 8;
  const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
  if constexpr ((F & kTime) != 0) {
    if (threadIdx.x == 0) {
      unsigned long long t;
      unsigned sm;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      times[3 * cta] = t;
      times[3 * cta + 2] = sm;
    }
  }
  static_assert(NS >= 2 && NS <= 4, "the mask ring holds NS - 1 tiles of 16 bits in 64");
  extern __shared__ __align__(16) unsigned char decode_smem[];
  if constexpr ((F & kTrigger) != 0) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");

  const int units = (p.q_heads / p.group) * p.head_chunks;
  const int b = int(blockIdx.x) / units, u = int(blockIdx.x) - b * units;
  const int kvh = u / p.head_chunks;
  const int h0 = kvh * p.group + (u - kvh * p.head_chunks) * kDecRows;
  const int nrows = min(kDecRows, kvh * p.group + p.group - h0);
  const int split = blockIdx.y;

  // The query sits at kv_len - 1: every key of [key_lo, len) is unmasked
  // (window: the last `window` of them). The split's share is rounded up to
  // whole tiles, so tiles (and, for block sizes dividing 16, pages) start at
  // multiples of 16 past key_lo; shares past the end are empty.
  const int len = int(min(max(int64_t(p.kv_lens[b]), int64_t(0)), p.max_blocks * p.block_size));
  const int key_lo = p.window > 0 ? int(max(int64_t(0), int64_t(len) - p.window)) : 0;
  const int n = len - key_lo;  // >= 0
  const int per = ((n + p.splits - 1) / p.splits + kDecKeys - 1) / kDecKeys * kDecKeys;
  const int s0 = int(min(int64_t(len), int64_t(key_lo) + int64_t(split) * per));
  const int s1 = min(len, s0 + per);
  const int tiles = (s1 - s0 + kDecKeys - 1) / kDecKeys;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, tq = lane % 4;
  const int steps = tiles > warp ? (tiles - warp + kDecWarps - 1) / kDecWarps : 0;  // this warp's tiles
  T* ring = reinterpret_cast<T*>(decode_smem) + warp * NS * 2 * TILE;

  // Prologue: the first NS - 1 tiles in flight (a group committed per stage,
  // empty or not, so wait_group counts tiles). masks: 16 bits a tile in flight,
  // the oldest lowest.
  uint64_t masks = 0;
#pragma unroll
  for (int t = 0; t < NS - 1; ++t) {
    if (t < steps) {
      T* ks = ring + t * 2 * TILE;
      const unsigned m = decode_load<T, D>(p, ks, ks + TILE, b, kvh, s0 + (warp + kDecWarps * t) * kDecKeys, s1, lane);
      masks |= uint64_t(m) << (16 * t);
    }
    cp_async_commit();
  }

  // Q as A fragments (row g: head h0 + g; rows g + 8 and heads past the chunk are zero):
  // qf[kk][0] holds columns 16kk + 2tq, +1, qf[kk][1] the same + 8. Element loads: q may be unaligned.
  uint32_t qf[KT][2];
  {
    const T* qr = static_cast<const T*>(p.q) + int64_t(b) * p.q_st + int64_t(h0 + (g < nrows ? g : 0)) * p.q_sh;
#pragma unroll
    for (int kk = 0; kk < KT; ++kk) {
      const int c = kk * 16 + 2 * tq;
      qf[kk][0] = g < nrows ? pack2<T>(to_f32(qr[c]), to_f32(qr[c + 1])) : 0u;
      qf[kk][1] = g < nrows ? pack2<T>(to_f32(qr[c + 8]), to_f32(qr[c + 9])) : 0u;
    }
  }
  const float scale2 = p.scale * kDecLog2e;

  // Row g's state: o[n][0..1] columns 8n + 2tq, +1 (o[n][2..3], rows g + 8, stay zero).
  float o[NT][4], m = -INFINITY, l = 0.f;
#pragma unroll
  for (int i = 0; i < NT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  int st = 0;  // the stage of tile k: k % NS
  for (int k = 0; k < steps; ++k) {
    cp_async_wait<NS - 2>();  // this lane's copies of tile k have landed ...
    __syncwarp();             // ... and every lane's are visible; tile k - 1's stage is free
    const unsigned cur = unsigned(masks) & 0xffffu;
    masks >>= 16;
    const int kn = k + NS - 1;
    if (kn < steps) {
      T* ks = ring + (st == 0 ? NS - 1 : st - 1) * 2 * TILE;  // (k + NS - 1) % NS: tile k - 1's stage
      const unsigned mn = decode_load<T, D>(p, ks, ks + TILE, b, kvh, s0 + (warp + kDecWarps * kn) * kDecKeys, s1, lane);
      masks |= uint64_t(mn) << (16 * (NS - 2));
    }
    cp_async_commit();

    const T* kb = ring + st * 2 * TILE;
    const T* vb = kb + TILE;
    st = st + 1 == NS ? 0 : st + 1;

    if constexpr (!(F & kNoMath)) {  // bench: kNoMath keeps the loads and waits only
      // S = Q K^T: K rows are B's columns, so plain ldmatrix gives B fragments;
      // matrices (keys +0, d +0), (+0, +8), (+8, +0), (+8, +8) -> keys 0-7, 8-15.
      float s[2][4];
#pragma unroll
      for (int i = 0; i < 2; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KT; ++kk) {
        uint32_t bf[4];
        ldmatrix_x4(bf, smem_addr(kb + ((lane / 16) * 8 + lane % 8) * S + kk * 16 + ((lane / 8) & 1) * 8));
        const uint32_t a[4] = {qf[kk][0], 0u, qf[kk][1], 0u};
        mma16816<T>(s[0], a, bf[0], bf[1]);
        mma16816<T>(s[1], a, bf[2], bf[3]);
      }

      // Row g's scores in base 2: x[2i + e] is key 8i + 2tq + e of the tile.
      float x[4];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v = s[i][e];
          if (p.softcap > 0.f) v = p.softcap * tanhf(v * p.scale / p.softcap) * kDecLog2e;
          else v *= scale2;
          x[2 * i + e] = (cur >> (8 * i + 2 * tq + e)) & 1u ? v : -INFINITY;
        }
      }
      float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));  // the row's 16 keys sit on its quad
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mnew = fmaxf(m, mx);
      const float mu = mnew == -INFINITY ? 0.f : mnew;  // every key so far masked: any finite shift
      const float corr = exp2f(m - mu);
      m = mnew;
      float pr[4], sum = 0.f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        pr[i] = exp2f(x[i] - mu);
        sum += pr[i];
      }
      l = l * corr + sum;
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        o[i][0] *= corr;
        o[i][1] *= corr;
      }

      // O += P V: P (row g: keys 2tq, +1 and 8 + 2tq, +1) is the A fragment;
      // V rows are B's rows, so ldmatrix.trans gives B fragments: matrices
      // (keys +0, d +0), (+8, +0), (+0, +8), (+8, +8) -> columns 16dp + 0-7, 8-15.
      const uint32_t pa[4] = {pack2<T>(pr[0], pr[1]), 0u, pack2<T>(pr[2], pr[3]), 0u};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, smem_addr(vb + (((lane / 8) & 1) * 8 + lane % 8) * S + dp * 16 + (lane / 16) * 8));
        mma16816<T>(o[2 * dp], pa, bf[0], bf[1]);
        mma16816<T>(o[2 * dp + 1], pa, bf[2], bf[3]);
      }
    }
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);  // the quad's columns
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // The warps' states through shared memory: [warp][row][D acc, max (base 2), sum].
  cp_async_wait<0>();  // only empty groups can be left; no copy may land on the states
  __syncthreads();     // every warp is done with its ring
  float* red = reinterpret_cast<float*>(decode_smem);
  {
    float* w = red + (warp * kDecRows + g) * (D + 2);
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      w[8 * i + 2 * tq] = o[i][0];
      w[8 * i + 2 * tq + 1] = o[i][1];
    }
    if (tq == 0) {
      w[D] = m;
      w[D + 1] = l;
    }
  }
  __syncthreads();

  for (int idx = threadIdx.x; idx < nrows * D; idx += kDecThreads) {
    const int r = idx / D, d = idx - r * D, h = h0 + r;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) M = fmaxf(M, red[(w * kDecRows + r) * (D + 2) + D]);
    float L = 0.f, A = 0.f;
#pragma unroll
    for (int w = 0; w < kDecWarps; ++w) {
      const float* sw = red + (w * kDecRows + r) * (D + 2);
      const float f = sw[D] == -INFINITY ? 0.f : exp2f(sw[D] - M);
      L += sw[D + 1] * f;
      A += sw[d] * f;
    }
    M *= kDecLn2;  // natural log from here on, as the merge kernel and lse take it
    if (p.splits > 1) {
      float* state = p.ws + ((int64_t(b) * p.q_heads + h) * p.splits + split) * (D + 2);
      state[d] = A;
      if (d == 0) {
        state[D] = M;
        state[D + 1] = L;
      }
      continue;
    }
    if (p.sinks_type) {  // the sink joins the denominator only
      const float sk = sink_logit(p, h), M2 = fmaxf(M, sk);
      if (M2 != -INFINITY) {
        const float f = rescale(M, M2);
        L = L * f + expf(sk - M2);
        A *= f;
        M = M2;
      }
    }
    static_cast<T*>(p.out)[int64_t(b) * p.o_st + int64_t(h) * p.o_sh + d] = from_f32<T>(L > 0.f ? A / L : 0.f);
    if (p.lse && d == 0) p.lse[int64_t(b) * p.l_st + int64_t(h) * p.l_sh] = L > 0.f ? M + logf(L) : -INFINITY;
  }
  if constexpr ((F & kTime) != 0) {
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      times[3 * cta + 1] = t;
    }
  }
  if constexpr ((F & kFused) != 0) {
    if (p.splits > 1) {
      __threadfence();  // this CTA's states, before its arrival is counted
      __syncthreads();
      int* flag = reinterpret_cast<int*>(decode_smem) + (decode_smem_bytes<D>() / sizeof(int) - 1);
      if (threadIdx.x == 0) *flag = atomicAdd(counters + blockIdx.x, 1);
      __syncthreads();
      if (*flag != p.splits - 1) return;
      __threadfence();
      merge_rows<T, D>(p, b, h0, nrows, reinterpret_cast<float*>(decode_smem));
      if (threadIdx.x == 0) counters[blockIdx.x] = 0;
    }
  }
}

// ---------------------------------------------------------------- ceilings and fills
// Uniform values in [-2, 2) as bf16, from a hash of the index.
__global__ void fill_bf16(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed ^ uint32_t(i >> 32) * 40503u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    p[i] = __float2bfloat16(float(h >> 8) * (4.f / 16777216.f) - 2.f);
  }
}

static double g_copy_gbs = 0;  // 1 GiB memcpy, read + write bytes a second
static int g_sms = 0;

float max_abs(const std::vector<float>& v) {
  float m = 0.f;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// bs: the block size; shuffle: the block table a permutation (else blocks in order);
// lean: the library and its split kernel only (the cost of pages: block 16 against one a sequence).
void run(int B, int L, int bs = 16, bool shuffle = true, bool lean = false) {
  constexpr int Hq = 32, Hkv = 8;
  const int group = Hq / Hkv, head_chunks = int(ceil_div(group, kDecRows));
  const int64_t max_blocks = ceil_div(L, bs), num_blocks = B * max_blocks + 3, cap = max_blocks * bs;
  const int64_t cache_elems = num_blocks * bs * Hkv * D, cache_bytes = cache_elems * 2;
  const int64_t q_elems = int64_t(B) * Hq * D;
  const double bytes = double(2 * int64_t(B) * L * Hkv * D + 2 * q_elems) * 2 + 4.0 * B;
  const int sets = int(std::max<int64_t>(3, ceil_div(3 * (int64_t(64) << 20), 2 * cache_bytes)));

  // library choice
  const size_t smem = decode_smem_bytes<D>();
  int per_sm = 0;
  CK(cudaFuncSetAttribute(decode_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_kernel<T, D>, kDecThreads, smem));
  const int64_t units = int64_t(B) * Hkv * head_chunks;
  const int64_t allowed = lib_allowed(B, Hq, D, cap, g_sms);
  const int S = int(lib_splits(units, g_sms, cap, allowed));
  const int maxS = std::max(4 * S, 8);
  printf("\n== B%d L%d, block %d%s: %lld units, %d CTAs/SM (%zu B smem), library splits S=%d (workspace cap %lld), "
         "%d buffer sets of %.1f MB, %.1f MB moved a call\n",
         B, L, bs, shuffle ? " (shuffled)" : " (in order)", (long long)units, per_sm, smem, S, (long long)allowed, sets, 2.0 * cache_bytes / 1e6, bytes / 1e6);

  std::vector<T*> kc(sets), vc(sets), q(sets), out(sets);
  for (int s = 0; s < sets; ++s) {
    CK(cudaMalloc(&kc[s], cache_bytes)); CK(cudaMalloc(&vc[s], cache_bytes));
    CK(cudaMalloc(&q[s], q_elems * 2)); CK(cudaMalloc(&out[s], q_elems * 2));
    fill_bf16<<<1024, 256, 0, g_s>>>(kc[s], cache_elems, 11u + 3 * s);
    fill_bf16<<<1024, 256, 0, g_s>>>(vc[s], cache_elems, 12u + 3 * s);
    fill_bf16<<<64, 256, 0, g_s>>>(q[s], q_elems, 13u + 3 * s);
  }
  std::vector<int32_t> table(size_t(B) * max_blocks), lens(B, L);
  {
    std::vector<int32_t> perm(num_blocks);
    for (int64_t i = 0; i < num_blocks; ++i) perm[i] = int32_t(i);
    std::mt19937 rng(1234 + B);
    if (shuffle) std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t i = 0; i < int64_t(B) * max_blocks; ++i) table[i] = perm[i];
  }
  int32_t *bt, *kv_lens;
  CK(cudaMalloc(&bt, table.size() * 4)); CK(cudaMalloc(&kv_lens, B * 4));
  CK(cudaMemcpy(bt, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  unsigned long long* times;
  const int64_t max_ctas = units * std::max<int64_t>(maxS, 16);
  CK(cudaMalloc(&times, max_ctas * 3 * 8));
  CK(cudaMemcpy(kv_lens, lens.data(), B * 4, cudaMemcpyHostToDevice));
  float* ws;
  int* counters;
  CK(cudaMalloc(&ws, size_t(B) * Hq * maxS * (D + 2) * 4));
  CK(cudaMalloc(&counters, units * 4)); CK(cudaMemset(counters, 0, units * 4));
  T* dst;
  CK(cudaMalloc(&dst, cache_bytes));
  unsigned* sink;
  CK(cudaMalloc(&sink, 4));
  CK(cudaDeviceSynchronize());

  auto prm = [&](int s, int splits) {
    AttendParams p{};
    p.mode = kDecode;
    p.batch = B; p.q_heads = Hq; p.group = group; p.head_chunks = head_chunks; p.splits = splits;
    p.causal = true;
    p.q = q[s]; p.q_st = int64_t(Hq) * D; p.q_sh = D;
    p.kc = kc[s]; p.kc_sb = int64_t(bs) * Hkv * D; p.kc_ss = int64_t(Hkv) * D; p.kc_sh = D;
    p.vc = vc[s]; p.vc_sb = p.kc_sb; p.vc_ss = p.kc_ss; p.vc_sh = D;
    p.num_blocks = num_blocks; p.block_size = bs; p.max_blocks = max_blocks; p.bt_stride = max_blocks;
    p.bt = bt; p.kv_lens = kv_lens;
    p.scale = 1.f / std::sqrt(float(D)); p.softcap = 0.f; p.window = 0;
    p.sinks = nullptr; p.sinks_type = 0;
    p.out = out[s]; p.o_st = int64_t(Hq) * D; p.o_sh = D;
    p.lse = nullptr;
    p.ws = ws;
    return p;
  };
  const dim3 merge_grid(unsigned(B) * Hq);
  auto lib_split = [&](int s, int n) {
    decode_kernel<T, D><<<dim3(unsigned(units), unsigned(n)), kDecThreads, smem, g_s>>>(prm(s, n));
  };
  auto lib_merge = [&](int s, int n) { CK((launch_merge<T, D>(prm(s, n), g_s, true))); };
  auto lib_full = [&](int s, int n) {
    lib_split(s, n);
    if (n > 1) lib_merge(s, n);
  };
  auto var_split = [&](auto f_tag, int s, int n) {
    constexpr int F = decltype(f_tag)::value;
    constexpr size_t vsm = decode_smem_bytes<D>();
    static bool once = false;  // per instantiation
    if (!once) {
      CK(cudaFuncSetAttribute(decode_var<T, D, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(vsm)));
      once = true;
    }
    decode_var<T, D, F><<<dim3(unsigned(units), unsigned(n)), kDecThreads, vsm, g_s>>>(prm(s, n), counters, times);
  };
  // One launch of a kTime variant: when its CTAs start and end (us after the first start) and where.
  auto timeline = [&](const char* what, int n, auto&& launch) {
    const int64_t ctas = units * n;
    launch(1 % sets);
    CK(cudaStreamSynchronize(g_s));
    std::vector<unsigned long long> t(ctas * 3);
    CK(cudaMemcpy(t.data(), times, t.size() * 8, cudaMemcpyDeviceToHost));
    unsigned long long t0 = ~0ull;
    for (int64_t c = 0; c < ctas; ++c) t0 = std::min(t0, t[3 * c]);
    std::vector<double> st(ctas), en(ctas), dur(ctas);
    std::vector<int> per(1024, 0);
    for (int64_t c = 0; c < ctas; ++c) {
      st[c] = (t[3 * c] - t0) / 1e3; en[c] = (t[3 * c + 1] - t0) / 1e3; dur[c] = en[c] - st[c];
      per[t[3 * c + 2] & 1023]++;
    }
    std::sort(st.begin(), st.end()); std::sort(en.begin(), en.end()); std::sort(dur.begin(), dur.end());
    int sms = 0, most = 0;
    for (int v : per) { sms += v > 0; most = std::max(most, v); }
    auto pc = [&](std::vector<double>& v, double f) { return v[std::min<int64_t>(ctas - 1, int64_t(f * ctas))]; };
    printf("   %-32s S=%-3d %lld CTAs on %d SMs (at most %d on one); start last %.2f us; end p10 %.2f p50 %.2f "
           "p90 %.2f last %.2f us; CTA time p10 %.2f p50 %.2f max %.2f us\n", what, n, (long long)ctas, sms, most,
           st.back(), pc(en, 0.1), pc(en, 0.5), pc(en, 0.9), en.back(), pc(dur, 0.1), pc(dur, 0.5), dur.back());
  };
  CK(cudaFuncSetAttribute(merge2<T, D, false, 1>, cudaFuncAttributePreferredSharedMemoryCarveout,
                          int(cudaSharedmemCarveoutMaxShared)));
  auto m2 = [&](int s, int n, bool pdl, bool carve = false) {
    if (n <= 1) return;
    const AttendParams p = prm(s, n);
    if (carve) {
      merge2<T, D, false, 1><<<merge_grid, kDecThreads, merge2_smem(n), g_s>>>(p);
      return;
    }
    if (!pdl) {
      merge2<T, D, false><<<merge_grid, kDecThreads, merge2_smem(n), g_s>>>(p);
      return;
    }
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = merge_grid; cfg.blockDim = dim3(kDecThreads); cfg.dynamicSmemBytes = merge2_smem(n); cfg.stream = g_s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at; cfg.numAttrs = 1;
    CK(cudaLaunchKernelEx(&cfg, merge2<T, D, true>, p));
  };

  // memcpy of the same bytes: the ceiling this shape's size allows
  const float mc_us = time_it(sets, [&](int s) {
    CK(cudaMemcpyAsync(dst, kc[s], cache_bytes, cudaMemcpyDeviceToDevice, g_s));
    CK(cudaMemcpyAsync(dst, vc[s], cache_bytes, cudaMemcpyDeviceToDevice, g_s));
  });
  const double same_gbs = 2.0 * 2 * cache_bytes / mc_us / 1e3;

  std::vector<float> ref(q_elems);
  std::vector<T> host(q_elems);
  auto fetch = [&](std::vector<float>& v) {
    CK(cudaStreamSynchronize(g_s));
    CK(cudaMemcpy(host.data(), out[0], q_elems * 2, cudaMemcpyDeviceToHost));
    v.resize(q_elems);
    for (int64_t i = 0; i < q_elems; ++i) v[i] = __bfloat162float(host[i]);
  };
  auto report = [&](const char* what, int n, float us, const char* note = "") {
    const double gbs = bytes / us / 1e3;
    printf("B%-2d L%-5d %-28s S=%-4d %8.2f us %6.0f GB/s %5.1f%%copy %5.1f%%same %s\n", B, L, what, n, us, gbs,
           100.0 * gbs / g_copy_gbs, 100.0 * gbs / same_gbs, note);
  };
  // Runs launch(0) on a poisoned out[0] and compares with ref.
  auto check = [&](auto&& launch, bool exact) {
    CK(cudaMemsetAsync(out[0], 0xff, q_elems * 2, g_s));
    launch(0);
    std::vector<float> got;
    fetch(got);
    float diff = 0.f;
    bool nan = false;
    for (int64_t i = 0; i < q_elems; ++i) {
      if (!(std::fabs(got[i] - ref[i]) <= 1e30f)) nan = true;
      else diff = std::max(diff, std::fabs(got[i] - ref[i]));
    }
    static char note[96];
    const float rel = diff / std::max(max_abs(ref), 1e-30f);
    if (exact) snprintf(note, sizeof note, "%s", !nan && diff == 0.f ? "bit-exact" : "DIFFERS (FAIL)");
    else snprintf(note, sizeof note, "diff %.2e%s", rel, nan || rel > 1.6e-2f ? " FAIL" : "");
    return note;
  };
  using namespace std;
  using F0 = integral_constant<int, 0>;
  using FNoMath = integral_constant<int, kNoMath>;
  using FFused = integral_constant<int, kFused>;
  using FTrig = integral_constant<int, kTrigger>;

  // (a) the library
  const float full = time_it(sets, [&](int s) { lib_full(s, S); });
  CK(cudaMemsetAsync(out[0], 0xff, q_elems * 2, g_s));
  lib_full(0, S);
  fetch(ref);
  report("library S + merge", S, full, S > 1 ? "(the reference)" : "(the reference; one split: no merge)");
  // (b), (c)
  const float split = time_it(sets, [&](int s) { lib_split(s, S); });
  report("split alone", S, split);
  if (S > 1) {
    lib_split(0, S);
    const float merge = time_it(sets, [&](int s) { lib_merge(s, S); });
    report("merge alone", S, merge);
    printf("   -> full - split - merge = %.2f us (the launch gap between the two, less any overlap)\n",
           full - split - merge);
  }
  // (d) other split counts, library kernels
  if (!lean) {
    vector<int> ns = {S / 2, 2 * S, 4 * S};
    if (S == 1) ns = {2, 4};
    for (int n : ns) {
      if (n < 1 || n == S || n > maxS) continue;
      char what[48];
      snprintf(what, sizeof what, "split S=%d + merge", n);
      const float t = time_it(sets, [&](int s) { lib_full(s, n); });
      report(what, n, t, check([&](int s) { lib_full(s, n); }, false));
      snprintf(what, sizeof what, "split alone S=%d", n);
      report(what, n, time_it(sets, [&](int s) { lib_split(s, n); }));
    }
  }
  // variants
  if (!lean) {
    auto f0 = [&](int s) { var_split(F0{}, s, S); if (S > 1) lib_merge(s, S); };
    report("copy: split + merge", S, time_it(sets, f0), check(f0, true));
    report("no-math split", S, time_it(sets, [&](int s) { var_split(FNoMath{}, s, S); }), "(output not checked)");
    if (S > 1) {
      auto a = [&](int s) { lib_split(s, S); m2(s, S, false); };
      report("split + merge2", S, time_it(sets, a), check(a, false));
      auto ac = [&](int s) { lib_split(s, S); m2(s, S, false, true); };
      report("split + merge2 carveout max", S, time_it(sets, ac), check(ac, false));
      lib_split(0, S);
      report("merge2 alone", S, time_it(sets, [&](int s) { m2(s, S, false); }));
      auto b = [&](int s) { var_split(FTrig{}, s, S); m2(s, S, true); };
      report("split(PDL) + merge2 PDL", S, time_it(sets, b), check(b, false));
    }
    vector<int> ns = {S, 2 * S};
    if (S == 1) ns = {2, 4};
    else if (S / 2 >= 2) ns.insert(ns.begin(), S / 2);
    for (int n : ns) {
      if (n < 2 || n > maxS) continue;
      char what[48];
      snprintf(what, sizeof what, "fused S=%d", n);
      auto f = [&](int s) { var_split(FFused{}, s, n); };
      report(what, n, time_it(sets, f), check(f, false));
    }
  }
  // where the time goes: when each CTA starts and ends (one launch)
  if (!lean) {
    using FT = integral_constant<int, kTime>;
    using FTN = integral_constant<int, kTime | kNoMath>;
    timeline("no-math split (timed)", S, [&](int s) { var_split(FTN{}, s, S); });
    timeline("split (timed)", S, [&](int s) { var_split(FT{}, s, S); });
  }
  // (e) ceilings
  const float rr = time_it(sets, [&](int s) {
    read16<<<g_sms * 8, 256, 0, g_s>>>(reinterpret_cast<const uint4*>(kc[s]), cache_bytes / 16,
                                       reinterpret_cast<const uint4*>(vc[s]), cache_bytes / 16, sink);
  });
  printf("B%-2d L%-5d %-28s        %8.2f us %6.0f GB/s of K+V read (%.1f%% of the 1 GiB copy's rate)\n", B, L,
         "read16 K+V", rr, 2.0 * cache_bytes / rr / 1e3, 100.0 * 2.0 * cache_bytes / rr / 1e3 / g_copy_gbs);
  printf("B%-2d L%-5d %-28s        %8.2f us %6.0f GB/s read + written\n", B, L, "memcpy K+V", mc_us, same_gbs);

  for (int s = 0; s < sets; ++s) {
    CK(cudaFree(kc[s])); CK(cudaFree(vc[s])); CK(cudaFree(q[s])); CK(cudaFree(out[s]));
  }
  CK(cudaFree(bt)); CK(cudaFree(times)); CK(cudaFree(kv_lens)); CK(cudaFree(ws)); CK(cudaFree(counters)); CK(cudaFree(dst));
  CK(cudaFree(sink));
}

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // a time limit that stops the run keeps the rows printed so far
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  CK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, g_sms, prop.l2CacheSize >> 20);
  {
    const int64_t n = int64_t(1) << 30;
    uint8_t *s, *d;
    CK(cudaMalloc(&s, n)); CK(cudaMalloc(&d, n));
    CK(cudaMemset(s, 1, n));
    CK(cudaDeviceSynchronize());  // g_s does not wait on the legacy stream
    const float t = time_it(1, [&](int) { CK(cudaMemcpyAsync(d, s, n, cudaMemcpyDeviceToDevice, g_s)); });
    g_copy_gbs = 2.0 * n / t / 1e3;
    printf("copy ceiling: 1 GiB cudaMemcpyAsync D2D %.1f us, %.0f GB/s (read + write)\n", t, g_copy_gbs);
    CK(cudaFree(s)); CK(cudaFree(d));
  }
  printf("columns: row, split count, per-launch us, decode bytes / us, %% of the 1 GiB copy's rate, "
         "%% of this shape's K+V memcpy rate\n");
  run(1, 32768);
  run(1, 32768, 16, false, true);
  run(1, 32768, 32768, true, true);
  run(64, 4096);
  run(64, 4096, 4096, true, true);
  run(1, 4096);
  run(4, 4096);
  return 0;
}
