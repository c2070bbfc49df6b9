// Where the time of CUDA sample goes for ONE row of 128256 f32 logits (issue 12
// item 6: top_k 50 + top_p 0.9 in at most 15 us of GPU time). One process, no
// braze build: the library kernels from the headers, launched as
// csrc/cuda/sampling.cu launches them (sample_kernel<float, 4, true>, one
// cluster of split_ctas() CTAs of 1024 threads; softmax normalize_regs<float,
// 8, true>, cluster_plan()'s cluster of 512-thread CTAs), beside the floors.
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders \
//     scripts/cuda_sample_bw.cu -o /tmp/smpbw && /tmp/smpbw
// (sampling.cu's own flags: -O3, no -fmad=false, so the tokens are the library's.)
//
// Columns: cold = median of kCold single launches, each after a 512 MiB read
// that evicts the L2 (and the kernel's code), events around the launch only
// (as `braze bench`'s cuda_time, python/braze/bench/timing.py); cdata = the
// same, but an untimed launch on another copy of the row runs between the
// flush and the timed launch (code back in L2, this row still in HBM); rot = back to
// back, each launch on the next of 256 copies of the row (131 MB: the row
// comes from HBM, the code stays in L2 / the instruction caches); warm = back
// to back on one copy (L2 holds the 513 KB row). rot and warm: median over
// kReps of the mean of kWarm launches. cold - cdata ~ the cost of fetching the
// kernel's code from HBM (the sample kernel's SASS is 214 KB, softmax's 20 KB),
// cdata - rot ~ what a lone launch pays beyond back to back, rot - warm ~ the
// row's HBM reads.
// Rows:
//   lib <mix>             the library sample launch (cluster form, 8 CTAs on
//                         132 SMs), mixes as named (temperature 1 unless said)
//   lib <mix> cN          the same kernel in clusters of N CTAs (16: the
//                         non-portable size; n/a where it cannot launch)
//   lib <mix> 1 CTA       the non-cluster form (what rows >= SMs / 8 take)
//   stop<S> <mix>         a copy of sample_row as it was before the short-list
//                         selects (max and bound through two cluster barriers,
//                         top-p and the draw by radix levels; the library's
//                         helpers otherwise) that returns after stage S:
//                         1 pass 1 (row max + thread maxima, HBM) + across
//                         2 + list bound (radix over the 1024 thread maxima,
//                           2 levels, + across; no-k mixes: the across only)
//                         3 + compact pass (row from L2) + gather of the lists
//                           (skipped when no bound is known: no top_k)
//                         4 + kth_key (4 list levels, or nothing)
//                         5 + top_p select (4 list levels, or select_global:
//                           a row pass per level + compact + list levels)
//                         7 the whole draw (checked token for token against the library)
//                         consecutive differences are the stages' costs (SASS
//                         19 / 41 / 52 / 102 / 167 / 214 KB for stops 1-5, 7: in
//                         the cold column each stage also pays for its code)
//   lib stop<S> <mix>     the library kernel returning after stage S of
//                         sample_row (1 max + bound + their exchange, 2 + list
//                         and gather, 3 + k-th key, 4 + kept items' masses,
//                         5 + top-p; short lists only, else radix fallbacks)
//   softmax cluster       the library softmax on the same row (the floor to approach)
//   empty cluster         same geometry and static shared memory, no work
//   empty + 1 csync       ... one cluster barrier (every split kernel ends with one)
//   16 csync              ... 16 cluster barriers: (t16 - t1) / 15 per barrier
//   read once             every CTA reads its slice once (16-byte loads, as pass
//                         1: 8 slots, ~4 packs a thread), block max, no cluster sync
//   mass pass, fixed()    read once summing fixed(__expf(v - 8)) as the cdf / top-p
//                         passes weigh each element (f32 -> f64 -> u64 conversions);
//   mass pass, fixed_int  the same with an integer fixed() (bit-identical: checked
//                         on the host for every float in [0, 1])
//   list levels x4 / x16  4 or 16 radix levels (u64 masses) over a 256-item list in
//                         shared memory, per CTA, as the list selects run
//   events only           the two events with nothing between (after the flush)
// Tokens: the library's draws for seeds 1234 (offset 7, the bench's) and 0..7,
// each mix; every variant is checked against them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda/sampling/kernels.cuh"

using namespace braze::cuda::sampling;
using braze::cuda::cluster_sync;
using braze::sampling::NormalizeArgs;
using braze::sampling::SampleArgs;

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } \
  } while (0)

constexpr int kCols = 128256, kCold = 41, kWarm = 50, kReps = 7;
constexpr int kRot = 256, kRowStride = kCols + 64;  // 256 row copies: 131 MB, past any L2

// The value every CTA of the cluster gets from op over all CTAs' v (in rank order), through `slot`
// (one slot per call site: each is posted once); the library's Ctx::across of that time.
template <int NT, bool kC, class Op> __device__ u64 across(Ctx<NT, kC>& cx, u64* slot, u64 v, Op op) {
  if (threadIdx.x == 0) *slot = v;
  cluster_sync();
  return cx.combine(slot, op);
}

// ---------------------------------------------------------------- instrumented copy of sample_row
// (the form of 35fb9e8: the max and the bound through two cluster barriers, the
// list selects by radix levels; kth_key and the gather are the library's.)
template <int NT, int V, bool kC, class T> __device__ RowMax row_max_of(Ctx<NT, kC>& cx, const T* row) {
  const RowMax own = row_max<NT, V>(row + cx.c0, cx.n, cx.br);
  const bool plain = own.best != ~0ull && own.best != 0;  // NaN and "nothing" combine as they are
  const u64 mine = plain ? (own.best & ~0xffffffffull) | ~(u32(cx.c0) + own.first) : own.best;
  const u64 best = across(cx, &cx.sm.post_best, mine, [](u64 a, u64 b) { return a > b ? a : b; });
  const float m = float_of(u32(best >> 32));
  return {best != ~0ull && best != 0 && isfinite(m), m, own.tm, ~u32(best), best};
}

// sample_row as it was before the short-list selects, but for `if constexpr (Stop == s) return`.
template <int Stop, int NT, int V, bool kC, class T>
__device__ Drawn sample_row_upto(Ctx<NT, kC>& cx, const SampleArgs& a, int64_t r, const T* x) {
  const int n = int(a.cols);
  const bool lead = cx.rank == 0;
  const RowMax rm = row_max_of<NT, V>(cx, x);
  if constexpr (Stop == 1) return {int32_t(rm.first), lead};
  if (!rm.valid) return {-1, lead};
  const float t = a.temperature.at(r);
  const int64_t k = a.top_k.at(r);
  if (!(t > 0.f) || k == 1) return {int32_t(rm.first), lead};
  const float m = rm.m, it = 1.f / t, mp = a.min_p.at(r), p = a.top_p.at(r);
  const bool top_k = k > 1 && k < n;
  auto uniform24 = [&] { return braze::philox::row_block(a.seed, a.offset, uint64_t(r)).v[0] >> 8; };
  auto mass_above = [&](u32 key, u32 cut) -> u64 {
    if (key < cut) return 0;
    const float e = __expf((float_of(key) - m) * it);
    return e >= mp ? fixed(e) : 0;
  };
  auto top_p_target = [p](u64 total) { return u64(ceil(double(p) * double(total))); };
  u32 listed;
  {  // list_top, with a stop between the bound and the compact pass
    const int64_t kk = top_k ? k : 0;
    u32 low = 0;
    bool none = false;
    if (n > kCap) {
      const int np = (cx.n + V - 1) / V, holders = np < NT ? np : NT;
      const bool known = kk >= 1 && kk <= holders;
      if (known) {
        if (threadIdx.x < holders) cx.sm.list.key[threadIdx.x] = key_of(rm.tm);
        __syncthreads();
        Sel s;
        const ListSrc<NT> src{cx.sm, u32(holders), false};
        auto one = [](u32, u32) { return u64(1); };
        auto target = [kk](u64) { return u64(kk); };
        radix_level<NT, true>(cx, s, src, one, target);
        radix_level<NT, true>(cx, s, src, one, target);
        low = s.prefix;
      }
      if constexpr (kC) {
        const u64 b = across(cx, &cx.sm.post_bound, known ? (u64(1) << 32) | low : 0ull,
                             [](u64 a, u64 c) { return a > c ? a : c; });
        if (!b) none = true;
        low = u32(b);
      } else if (!known) {
        none = true;
      }
    }
    if constexpr (Stop == 2) return {int32_t(low), lead};
    if (none) {
      listed = 0;
    } else {
      const float bound = threshold_of(low);
      const u32 c = compact<NT, V, kU<V>>(cx, x, [bound](float v, u32) { return v >= bound; });
      listed = c <= kCap ? c : 0;
    }
  }
  if constexpr (Stop == 3) return {int32_t(listed), lead};
  u32 cut = top_k ? kth_key<NT, V>(cx, x, k, listed) : 0;
  if constexpr (Stop == 4) return {int32_t(cut), lead};
  if (listed) {
    if (p < 1.f) {
      const u32 ck = cut;
      cut = max(cut, select_list<NT, false>(cx, Sel{}, listed, false, [&](u32 key, u32) { return mass_above(key, ck); },
                                            top_p_target));
    }
    if constexpr (Stop == 5) return {int32_t(cut), lead};
    const int bits = 32 - __clz(u32(n - 1) | 1u), bytes = (bits + 7) / 8;
    Sel s;
    s.level = 4 - bytes;
    s.mask = s.prefix = bytes == 4 ? 0u : ~0u << (8 * bytes);
    const u32 u24 = uniform24();
    const u32 tok = ~select_list<NT, false>(cx, s, listed, true, [&](u32, u32 key) { return mass_above(key, cut); },
                                            [u24](u64 total) { return scaled(total, u24) + 1; });
    return {int32_t(tok), lead};
  }
  if (p < 1.f) {
    const u32 ck = cut;
    cut = max(cut, select_global<NT, V, kU<V>, false>(cx, x, [&](u32 key, u32) { return mass_above(key, ck); },
                                                      top_p_target));
  }
  if constexpr (Stop == 5) return {int32_t(cut), lead};
  const u32 tok = cdf_global<NT, V, kU<V>>(cx, x, [&](u32 key) { return mass_above(key, cut); }, uniform24());
  return {int32_t(tok), kC ? tok != ~0u : lead};
}

template <int Stop> __global__ void __launch_bounds__(kThreads) sample_upto(SampleArgs a) {
  constexpr int NT = kThreads;
  __shared__ SelectSmem<NT> sm;
  Ctx<NT, true> cx(sm, int(a.cols), 4);
  const int64_t r = blockIdx.x / cx.ctas;
  const Drawn d = sample_row_upto<Stop, NT, 4>(cx, a, r, row_in<float>(a, r));
  if (threadIdx.x == 0 && d.mine) a.out[r] = d.tok;
  cx.finish();
}

// ---------------------------------------------------------------- floors
// Same block size and static shared memory as sample_kernel; `touch` is false
// at run time (it keeps the shared memory allocated).
template <int Syncs> __global__ void __launch_bounds__(kThreads) empty_cluster(int* out, bool touch) {
  __shared__ SelectSmem<kThreads> sm;
  if (touch) {
    u32* w = reinterpret_cast<u32*>(&sm);
    constexpr int kWords = int(sizeof(sm) / 4);
    w[(threadIdx.x * 37) % kWords] = threadIdx.x;
    __syncthreads();
    out[blockIdx.x] = int(w[(threadIdx.x * 41) % kWords]);
  }
#pragma unroll 1
  for (int i = 0; i < Syncs; ++i) cluster_sync();
}

// fixed(e) without FP64: e * 2^40 truncated, from the float's bits (e >= 0
// finite; exact, so the same integer as u64(double(e) * 2^40); main checks it).
__host__ __device__ __forceinline__ u64 fixed_int(float e) {
  u32 b;
  memcpy(&b, &e, 4);
  const int E = int(b >> 23);
  if (E == 0) return 0;  // subnormal: below 2^-126, times 2^40 truncates to 0
  const u64 m = (b & 0x7fffffu) | 0x800000u;
  const int sh = E - 127 - 23 + 40;
  return sh >= 0 ? m << sh : sh > -64 ? m >> -sh : 0;
}

// Each CTA reads its slice (as Ctx splits the row) once: 16-byte packs, kUFirst in flight.
// Mode 0: the max (pass 1's arithmetic); 1: the sum of fixed(__expf(v - 8)) as
// the cdf / top-p passes take each mass (FP64 conversions); 2: the same with fixed_int.
template <int Mode> __global__ void __launch_bounds__(kThreads) read_once(const float* x, int cols, float* out) {
  __shared__ SelectSmem<kThreads> sm;
  const unsigned ctas = gridDim.x, rank = blockIdx.x;
  const int per = ((cols + int(ctas) - 1) / int(ctas) + 3) / 4 * 4;
  const int c0 = min(cols, int(rank) * per), n = min(cols - c0, per);
  BlockReduce<kThreads> br{&sm.red};
  if constexpr (Mode == 0) {
    float tm = -kInf;
    for_elems<kThreads, 4, kUFirst<4>>(x + c0, n, [&](int, float v) { tm = fmaxf(tm, v); });
    tm = br.max(tm);
    if (threadIdx.x == 0) out[rank] = tm;
  } else {
    u64 s = 0;
    for_elems<kThreads, 4, kU<4>>(x + c0, n, [&](int, float v) {
      const float e = __expf((float_of(key_of(v)) - 8.f) * 1.f);
      s += Mode == 1 ? fixed(e) : fixed_int(e);
    });
    s = br.max(s);
    if (threadIdx.x == 0) out[rank] = float(s);
  }
}

// R selects of 4 levels (u64 masses, as top-p / the draw) over a list of c
// items in shared memory; cluster geometry as sample (every CTA runs its own).
template <int R> __global__ void __launch_bounds__(kThreads) list_levels(int cols, u32 c, int* out) {
  __shared__ SelectSmem<kThreads> sm;
  Ctx<kThreads, true> cx(sm, cols, 4);
  for (u32 i = threadIdx.x; i < c; i += kThreads) {
    u32 h = i * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    sm.list.key[i] = key_of(4.f + float(h >> 9) * (1.f / 8388608.f) * 4.f);
    sm.list.idx[i] = i * 97u;
  }
  __syncthreads();
  u32 acc = 0;
  for (int rep = 0; rep < R; ++rep) {
    auto mass = [rep](u32 key, u32) { return fixed(__expf(float_of(key) - 8.f - 0.001f * rep)); };
    auto target = [](u64 total) { return u64(ceil(0.9 * double(total))); };
    acc += select_list<kThreads, false>(cx, Sel{}, c, false, mass, target);
  }
  if (threadIdx.x == 0) out[blockIdx.x] = int(acc);
  cluster_sync();
}

__global__ void flush_read(const uint4* p, int64_t n, int* out) {
  uint32_t s = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 w = __ldg(p + i);
    s ^= w.x ^ w.y ^ w.z ^ w.w;
  }
  if (s == 0x12345678u) out[0] = int(s);
}

// ---------------------------------------------------------------- host
// launch(row): the kernel on `row`, a copy of the logits (kernels that do not
// read the row ignore it).
using Launch = std::function<void(const float*)>;
struct Timer {
  uint4* flush;
  int64_t flush_n;
  int* dummy;
  int sms;
  const float* rows;  // kRot copies of the row, kRowStride apart
  cudaEvent_t a, b;
  // code_warm: after the flush, an untimed launch on copy 1 brings the code
  // (not copy 2's row) back before the timed launch on copy 2.
  float cold(const Launch& launch, bool code_warm) {
    launch(rows);
    CK(cudaDeviceSynchronize());
    std::vector<float> us;
    for (int i = 0; i < kCold; ++i) {
      flush_read<<<sms * 4, 512>>>(flush, flush_n, dummy);
      if (code_warm) launch(rows + kRowStride);
      CK(cudaEventRecord(a));
      launch(rows + (code_warm ? 2 * kRowStride : 0));
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      us.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    std::sort(us.begin(), us.end());
    return us[kCold / 2];
  }
  // Back to back, kWarm launches a timing; rot: each on the next of kRot copies
  // (none in L2 when its turn comes; the code stays warm), else all on copy 0.
  float warm(const Launch& launch, bool rot) {
    for (int i = 0; i < kRot; ++i) launch(rows + (rot ? int64_t(i) * kRowStride : 0));
    std::vector<float> us;
    int at = 0;
    for (int rep = 0; rep < kReps; ++rep) {
      CK(cudaEventRecord(a));
      for (int i = 0; i < kWarm; ++i, at = (at + 1) % kRot) launch(rows + (rot ? int64_t(at) * kRowStride : 0));
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      us.push_back(ms * 1000.f / kWarm);
    }
    CK(cudaGetLastError());
    std::sort(us.begin(), us.end());
    return us[kReps / 2];
  }
  void row(const char* what, const Launch& launch) {
    const float c = cold(launch, false), cc = cold(launch, true), r = warm(launch, true), w = warm(launch, false);
    printf("%-34s %8.2f %8.2f %8.2f %8.2f\n", what, c, cc, r, w);
    fflush(stdout);
  }
};

template <class... P, class... A>
cudaError_t launch_cl(void (*kernel)(P...), unsigned grid, unsigned block, unsigned cluster, A... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = 0;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

struct Mix {
  const char* name;
  float t, p, mp;
  int k;
};

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  printf("%s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);

  // The row: Normal(0, 2) f32 (the bench's logits: rows(..., scale=2.0)), from a fixed generator.
  std::vector<float> h(kCols);
  uint64_t st = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    uint64_t z = (st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return double((z ^ (z >> 31)) >> 11) * (1.0 / 9007199254740992.0);
  };
  for (int i = 0; i < kCols; i += 2) {
    const double u1 = 1.0 - next(), u2 = next(), rr = std::sqrt(-2.0 * std::log(u1));
    h[i] = float(2.0 * rr * std::cos(6.283185307179586 * u2));
    if (i + 1 < kCols) h[i + 1] = float(2.0 * rr * std::sin(6.283185307179586 * u2));
  }
  uint32_t sum = 0;
  for (float v : h) { uint32_t b; memcpy(&b, &v, 4); sum = sum * 31u + b; }
  const float mx = *std::max_element(h.begin(), h.end());
  printf("row: 1 x %d f32 Normal(0, 2), max %.4f at %d, bits hash %08x\n", kCols, mx,
         int(std::max_element(h.begin(), h.end()) - h.begin()), sum);

  float *x, *soft;
  int *out, *dummy;
  CK(cudaMalloc(&x, int64_t(kRot) * kRowStride * 4));
  CK(cudaMalloc(&soft, kCols * 4));
  CK(cudaMalloc(&out, 64 * 4));
  CK(cudaMalloc(&dummy, 4096 * 4));
  for (int i = 0; i < kRot; ++i) CK(cudaMemcpy(x + int64_t(i) * kRowStride, h.data(), kCols * 4, cudaMemcpyHostToDevice));
  Timer tm{};
  tm.flush_n = (int64_t(512) << 20) / 16;
  CK(cudaMalloc(&tm.flush, tm.flush_n * 16));
  CK(cudaMemset(tm.flush, 1, tm.flush_n * 16));
  tm.dummy = dummy;
  tm.sms = sms;
  tm.rows = x;
  CK(cudaEventCreate(&tm.a));
  CK(cudaEventCreate(&tm.b));

  // split_ctas (csrc/cuda/sampling.cu) for 1 row: min(8, SMs / rows, cols / kMinSlice).
  const int ctas = std::min({8, sms / 1, kCols / 8192});
  printf("sample cluster: %d CTAs x %d threads (split_ctas), slice %d elements\n", ctas, kThreads,
         ((kCols + ctas - 1) / ctas + 3) / 4 * 4);

  const Mix mixes[] = {{"none", 1.f, 1.f, 0.f, 0},          {"top_k 50", 1.f, 1.f, 0.f, 50},
                       {"top_p 0.9", 1.f, 0.9f, 0.f, 0},    {"top_k 50 top_p 0.9", 1.f, 0.9f, 0.f, 50},
                       {"min_p 0.05", 1.f, 1.f, 0.05f, 0},  {"t.7 k20 p.8 minp.05", 0.7f, 0.8f, 0.05f, 20},
                       {"top_k 1000 top_p 0.95", 1.f, 0.95f, 0.f, 1000}};  // the radix fallbacks
  auto args = [&](const Mix& m, uint64_t seed) {
    SampleArgs a{};
    a.dtype = braze::DType::f32;
    a.rows = 1;
    a.cols = kCols;
    a.x = x;
    a.x_stride = kCols;
    a.device = braze::Device::cuda;
    a.device_id = 0;
    a.out = out;
    a.temperature.value = m.t;
    a.top_p.value = m.p;
    a.min_p.value = m.mp;
    a.top_k.value = m.k;
    a.seed = seed;
    a.offset = 7;
    return a;
  };
  auto lib = [&](const SampleArgs& a, int c) {
    if (c == 1) {
      sample_kernel<float, 4><<<1, kThreads>>>(a);
      return cudaGetLastError();
    }
    return launch_cl(sample_kernel<float, 4, true>, unsigned(c), kThreads, unsigned(c), a);
  };
  auto token = [&] {
    CK(cudaDeviceSynchronize());
    int t;
    CK(cudaMemcpy(&t, out, 4, cudaMemcpyDeviceToHost));
    return t;
  };
  const bool c16 = cudaFuncSetAttribute(sample_kernel<float, 4, true>, cudaFuncAttributeNonPortableClusterSizeAllowed,
                                        1) == cudaSuccess;
  {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(16);
    cfg.blockDim = dim3(kThreads);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 16;
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int nc = 0;
    const cudaError_t e = cudaOccupancyMaxActiveClusters(&nc, sample_kernel<float, 4, true>, &cfg);
    printf("clusters of 16 x 1024 resident: %d (%s)\n", nc, e == cudaSuccess && c16 ? "ok" : "n/a");
    cudaGetLastError();
  }

  {  // fixed_int == fixed for every float in [0, 1] (the masses: e = exp(<= 0)), and a sweep above
    int bad = 0;
    for (uint32_t b = 0; b <= 0x3f800000u; ++b) {
      float e;
      memcpy(&e, &b, 4);
      bad += fixed_int(e) != u64(double(e) * kFix);
    }
    for (uint32_t b = 0x3f800000u; b < 0x4b000000u; b += 4093) {
      float e;
      memcpy(&e, &b, 4);
      bad += fixed_int(e) != u64(double(e) * kFix);
    }
    printf("fixed_int vs u64(double(e) * 2^40), every float in [0, 1]: %s\n", bad ? "DIFFERS" : "equal");
  }

  // ---- tokens
  const uint64_t seeds[] = {1234, 0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<std::vector<int>> ref;
  printf("\ntokens of the library kernel (cluster %d), offset 7, seeds 1234 0 1 2 3 4 5 6 7:\n", ctas);
  for (const Mix& m : mixes) {
    std::vector<int> t;
    printf("  %-22s", m.name);
    for (uint64_t s : seeds) {
      CK(cudaMemset(out, 0x7f, 4));  // a kernel that writes nothing shows 2139062143
      CK(lib(args(m, s), ctas));
      t.push_back(token());
      printf(" %6d", t.back());
    }
    printf("\n");
    ref.push_back(t);
  }
  auto check = [&](const char* what, const std::function<cudaError_t(const SampleArgs&)>& launch) {
    int bad = 0;
    for (size_t i = 0; i < sizeof(mixes) / sizeof(mixes[0]); ++i)
      for (size_t j = 0; j < sizeof(seeds) / sizeof(seeds[0]); ++j) {
        CK(cudaMemset(out, 0x7f, 4));
        CK(launch(args(mixes[i], seeds[j])));
        bad += token() != ref[i][j];
      }
    printf("  %-22s %s\n", what, bad ? "TOKENS DIFFER" : "same tokens");
  };
  check("instrumented copy", [&](const SampleArgs& a) { return launch_cl(sample_upto<7>, ctas, kThreads, ctas, a); });
  check("non-cluster (1 CTA)", [&](const SampleArgs& a) { return lib(a, 1); });
  for (int c : {2, 4, 16}) {
    if (c == 16 && !c16) continue;
    const cudaError_t e = lib(args(mixes[0], 1234), c);
    char what[32];
    snprintf(what, sizeof what, "cluster %d", c);
    if (e != cudaSuccess) {
      printf("  %-22s n/a (%s)\n", what, cudaGetErrorString(e));
      cudaGetLastError();
      continue;
    }
    CK(cudaDeviceSynchronize());
    check(what, [&, c](const SampleArgs& a) { return lib(a, c); });
  }

  // ---- timings
  printf("\n%-34s %8s %8s %8s %8s   (us)\n", "row", "cold", "cdata", "rot", "warm");
  {
    tm.row("events only", [](const float*) {});
    tm.row("empty cluster", [&](const float*) { CK(launch_cl(empty_cluster<0>, ctas, kThreads, ctas, dummy, false)); });
    tm.row("empty + 1 csync", [&](const float*) { CK(launch_cl(empty_cluster<1>, ctas, kThreads, ctas, dummy, false)); });
    tm.row("16 csync", [&](const float*) { CK(launch_cl(empty_cluster<16>, ctas, kThreads, ctas, dummy, false)); });
    tm.row("read once", [&](const float* row) { CK(launch_cl(read_once<0>, ctas, kThreads, ctas, row, kCols, (float*)dummy)); });
    tm.row("read once, no cluster", [&](const float* row) { read_once<0><<<ctas, kThreads>>>(row, kCols, (float*)dummy); });
    tm.row("mass pass, fixed() FP64", [&](const float* row) { CK(launch_cl(read_once<1>, ctas, kThreads, ctas, row, kCols, (float*)dummy)); });
    tm.row("mass pass, fixed_int", [&](const float* row) { CK(launch_cl(read_once<2>, ctas, kThreads, ctas, row, kCols, (float*)dummy)); });
    tm.row("list levels x4 (256 items)", [&](const float*) { CK(launch_cl(list_levels<1>, ctas, kThreads, ctas, kCols, 256u, dummy)); });
    tm.row("list levels x16 (256 items)", [&](const float*) { CK(launch_cl(list_levels<4>, ctas, kThreads, ctas, kCols, 256u, dummy)); });
  }
  {  // softmax as launch_normalize's cluster_plan takes it: P packs a thread, ctas CTAs of 512
    NormalizeArgs a{};
    a.dtype = braze::DType::f32;
    a.rows = 1;
    a.cols = kCols;
    a.x = x;
    a.x_stride = kCols;
    a.device = braze::Device::cuda;
    a.device_id = 0;
    a.op = braze::sampling::Op::softmax;
    a.out = soft;
    a.out_stride = kCols;
    a.temperature.value = 1.f;
    const int64_t packs = (kCols + 3) / 4, slots = 2 * int64_t(sms);
    auto need = [&](int p) { return (packs + kNormThreads * p - 1) / (kNormThreads * p); };
    int p = 8;
    while (p > 1 && need(p / 2) <= 8 && need(p / 2) <= slots) p /= 2;
    const int nc = int(need(p));
    char what[48];
    snprintf(what, sizeof what, "softmax cluster (P %d, %d x 512)", p, nc);
    if (p != 8) printf("(softmax plan P = %d: this script launches P = 8)\n", p);
    tm.row(what, [&](const float* row) {
      NormalizeArgs b = a;
      b.x = row;
      CK(launch_cl(normalize_regs<float, 8, true>, unsigned(nc), kNormThreads, unsigned(nc), b));
    });
  }
  for (const Mix& m : mixes) {
    const SampleArgs a = args(m, 1234);
    char what[64];
    snprintf(what, sizeof what, "lib %s", m.name);
    tm.row(what, [&](const float* row) { SampleArgs b = a; b.x = row; CK(lib(b, ctas)); });
  }
  for (const Mix& m : mixes) {
    const SampleArgs a = args(m, 1234);
    char what[64];
#define STOP(S)                                                                          \
  snprintf(what, sizeof what, "stop%d %s", S, m.name);                                   \
  tm.row(what, [&](const float* row) { SampleArgs b = a; b.x = row; CK(launch_cl(sample_upto<S>, ctas, kThreads, ctas, b)); });
    STOP(1) STOP(2) STOP(3) STOP(4) STOP(5) STOP(7)
#undef STOP
  }
  for (const Mix& m : mixes) {  // the library kernel's own stages (sample_row's Stop)
    const SampleArgs a = args(m, 1234);
    char what[64];
#define NSTOP(S)                                                                         \
  snprintf(what, sizeof what, "lib stop%d %s", S, m.name);                               \
  tm.row(what, [&](const float* row) { SampleArgs b = a; b.x = row; CK(launch_cl(sample_kernel<float, 4, true, S>, ctas, kThreads, ctas, b)); });
    NSTOP(1) NSTOP(2) NSTOP(3) NSTOP(4) NSTOP(5)
#undef NSTOP
  }
  for (int c : {1, 2, 4, 16}) {
    if (c == 16 && !c16) continue;
    for (int mi : {0, 3}) {
      const SampleArgs a = args(mixes[mi], 1234);
      if (lib(a, c) != cudaSuccess) { cudaGetLastError(); continue; }
      CK(cudaDeviceSynchronize());
      char what[64];
      if (c == 1) snprintf(what, sizeof what, "lib %s 1 CTA", mixes[mi].name);
      else snprintf(what, sizeof what, "lib %s c%d", mixes[mi].name, c);
      tm.row(what, [&](const float* row) { SampleArgs b = a; b.x = row; CK(lib(b, c)); });
    }
  }
  return 0;
}
