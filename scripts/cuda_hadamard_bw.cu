// What limits the CUDA Hadamard transform's split kernel (m = 1 rows of 2^k): the
// library kernel as csrc/cuda/ops.cu launches it, beside candidate variants and
// diagnostic cuts of the same frame, in one process (no braze build needed).
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders \
//     scripts/cuda_hadamard_bw.cu -o /tmp/hadbw && /tmp/hadbw
// (ops.cu is built with -O3 only: no -fmad=false; the kernels add, subtract and
// scale, so nothing contracts either way.) Registers: add -Xptxas -v, or
// `cuobjdump -res-usage /tmp/hadbw`.
// Each row: median of 7 timings of 20 launches rotating over 3 buffer sets
// (every set larger than the L2), bytes = rows * n * 2 read + the same written
// (bf16, out of place); % is against cudaMemcpyAsync device-to-device of the
// same total, measured here. Every variant is checked bit for bit against the
// library kernel's output; rows marked "diag" compute wrong values on purpose
// (cuts of the frame: where the time goes) and are not checked.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_bw.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/ops/hadamard.cuh"


using namespace braze::cuda;
using namespace braze::cuda::ops;
using T = __nv_bfloat16;



// ---------------------------------------------------------------- diagnostic cuts of the split kernel
// Mode 1: no shared-memory phase (L0's butterflies, then straight to the stores);
// Mode 2: no butterflies either (load, widen, scale, narrow, store). Wrong values.
template <int E, int LG, int Mode>
__global__ void __launch_bounds__(kHadSplitThreads, 4) split_cut(HadamardParams p) {
  constexpr int V = kVec16<T>, I = E / V, G = 1 << LG;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const int t = threadIdx.x, s = t & (G - 1), q = t >> LG;
  for (int64_t grp = blockIdx.x; grp < p.groups; grp += gridDim.x) {
    const int64_t r = grp * p.R + q;
    if (q >= p.R || r >= p.rows) continue;
    float d[E];
    Pack<T, V> k[I];
    const T* xr = x + r * p.x_stride;
#pragma unroll
    for (int i = 0; i < I; ++i) k[i] = load_pack<T, V>(xr, V * (s + G * i), V);
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int u = 0; u < V; ++u) d[i * V + u] = to_f32(k[i].v[u]);
    if constexpr (Mode == 1) butterflies<E>(d);
    T* yr = y + r * p.y_stride;
#pragma unroll
    for (int i = 0; i < I; ++i) {
      Pack<T, V> o;
#pragma unroll
      for (int u = 0; u < V; ++u) o.v[u] = from_f32<T>(d[i * V + u] * p.scale);
      store_pack<T, V>(yr, V * (s + G * i), V, o);
    }
  }
}

// ---------------------------------------------------------------- candidates (bit-identical to the library)
// split_v: hadamard_split_kernel's register / shared-memory phases, element for element
// (the same butterfly order), with two independent changes:
//  Narrow: L1 scales and narrows its results to T and writes them as T over its
//    row's f32 area (after a barrier: other threads may still read it), and L0
//    reads them back as one 16-byte pack of T each instead of V / 4 float4s
//    (half the bytes of the last shared-memory read; one more barrier).
//  S > 0 (sm_90): a grid of resident blocks walking the row groups, each block
//    keeping its next S groups' rows in flight as bulk copies (cp.async.bulk,
//    one per row, issued by thread 0, landing on an mbarrier per stage) into a
//    raw ring of S stages; threads read their packs from shared memory. No
//    register holds a load in flight, and no per-thread load instructions.
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint64_t* b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* b, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred P1;\n"
      "WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      " @P1 bra DONE;\n bra WAIT;\n"
      "DONE:\n}\n" ::"r"(smem_u32(b)),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(b))
               : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

template <class T, int E, int LG, int S, bool Narrow, int MB = 4>
__global__ void __launch_bounds__(kHadSplitThreads, MB) split_v(HadamardParams p) {
  constexpr int V = kVec16<T>, I = E / V;
  constexpr int LV = V == 8 ? 3 : V == 4 ? 2 : 1;
  constexpr int G = 1 << LG, LM = LV + LG;
  static_assert(E % V == 0 && (1 << LV) == V && E >= G && LG >= LV, "a thread holds whole 16-byte packs");
  extern __shared__ float4 sm4[];
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  constexpr int P = G * E;
  const int t = threadIdx.x;
  const int s = t & (G - 1), q = t >> LG;
  uint64_t* bar = reinterpret_cast<uint64_t*>(sm4);      // S mbarriers in the first 64 bytes
  float* rows = reinterpret_cast<float*>(sm4) + (S > 0 ? 16 : 0);
  float* row = rows + q * (P + E);
  float* l0 = row + V * s;
  constexpr int kL0Step = V * G + V;
  const int l1_off = (s & (V - 1)) + (s >> LV) * ((1 << LM) + V);
  float* l1 = row + l1_off;
  constexpr int kCStep = (G / V) * ((1 << LM) + V);
  T* raw = reinterpret_cast<T*>(rows + p.R * (P + E));  // S stages of R rows of P
  const auto issue = [&](int64_t grp, int st) {       // thread 0
    if (grp >= p.groups) return;
    const int64_t r0 = grp * p.R;
    const int n = int(p.rows - r0 < p.R ? p.rows - r0 : p.R);
    mbar_expect_tx(bar + st, uint32_t(n) * uint32_t(P * sizeof(T)));
    for (int i = 0; i < n; ++i) bulk_load(raw + (st * p.R + i) * P, x + (r0 + i) * p.x_stride, P * sizeof(T), bar + st);
  };
  if constexpr (S > 0) {
    if (t == 0) {
#pragma unroll
      for (int st = 0; st < S; ++st) mbar_init(bar + st, 1);
      mbar_init_fence();
    }
    __syncthreads();
    if (t == 0)
#pragma unroll
      for (int st = 0; st < S; ++st) issue(blockIdx.x + int64_t(st) * gridDim.x, st);
  }

  int it = 0;
  for (int64_t grp = blockIdx.x; grp < p.groups; grp += gridDim.x, ++it) {
    const int64_t r = grp * p.R + q;
    const bool active = q < p.R && r < p.rows;
    const int st = S > 0 ? it % S : 0;
    float d[E];
    {
      Pack<T, V> k[I];
      if constexpr (S > 0) {
        mbar_wait(bar + st, uint32_t(it / S) & 1u);
        if (active) {
          const T* src = raw + (st * p.R + q) * P + V * s;
#pragma unroll
          for (int i = 0; i < I; ++i) k[i] = *reinterpret_cast<const Pack<T, V>*>(src + V * G * i);
        }
      } else if (active) {
        const T* xr = x + r * p.x_stride;
#pragma unroll
        for (int i = 0; i < I; ++i) k[i] = load_pack<T, V>(xr, V * (s + G * i), V);
      }
#pragma unroll
      for (int i = 0; i < I; ++i)
#pragma unroll
        for (int u = 0; u < V; ++u) d[i * V + u] = active ? to_f32(k[i].v[u]) : 0.f;
    }
    butterflies<E>(d);
#pragma unroll
    for (int i = 0; i < I; ++i)
#pragma unroll
      for (int u = 0; u < V; u += 4)
        *reinterpret_cast<float4*>(l0 + i * kL0Step + u) =
            make_float4(d[i * V + u], d[i * V + u + 1], d[i * V + u + 2], d[i * V + u + 3]);
    __syncthreads();
    if constexpr (S > 0) {
      if (t == 0) {  // every thread has read stage st: refill it
        fence_proxy_async();
        issue(grp + int64_t(S) * gridDim.x, st);
      }
    }
#pragma unroll
    for (int k = 0; k < E; ++k) d[k] = l1[(k % G) * V + (k / G) * kCStep];
#pragma unroll
    for (int h = 1; h < G; h *= 2) {
#pragma unroll
      for (int k = 0; k < E; ++k)
        if ((k & h) == 0) {
          const float a = d[k], b = d[k + h];
          d[k] = a + b;
          d[k + h] = a - b;
        }
    }
    if constexpr (Narrow) {
      T* n1 = reinterpret_cast<T*>(row) + l1_off;  // the same padded layout, in T
      __syncthreads();                             // every thread has read its f32 L1 values
#pragma unroll
      for (int k = 0; k < E; ++k) n1[(k % G) * V + (k / G) * kCStep] = from_f32<T>(d[k] * p.scale);
      __syncthreads();
      if (active) {
        const T* n0 = reinterpret_cast<const T*>(row) + V * s;
        T* yr = y + r * p.y_stride;
#pragma unroll
        for (int i = 0; i < I; ++i)
          store_pack<T, V>(yr, V * (s + G * i), V, *reinterpret_cast<const Pack<T, V>*>(n0 + i * kL0Step));
      }
    } else {
#pragma unroll
      for (int k = 0; k < E; ++k) l1[(k % G) * V + (k / G) * kCStep] = d[k];
      __syncthreads();
      if (active) {
        T* yr = y + r * p.y_stride;
#pragma unroll
        for (int i = 0; i < I; ++i) {
          const float* src = l0 + i * kL0Step;
          Pack<T, V> o;
#pragma unroll
          for (int u = 0; u < V; u += 4) {
            const float4 f = *reinterpret_cast<const float4*>(src + u);
            o.v[u] = from_f32<T>(f.x * p.scale), o.v[u + 1] = from_f32<T>(f.y * p.scale);
            o.v[u + 2] = from_f32<T>(f.z * p.scale), o.v[u + 3] = from_f32<T>(f.w * p.scale);
          }
          store_pack<T, V>(yr, V * (s + G * i), V, o);
        }
      }
    }
    __syncthreads();  // the next row group reuses the rows' shared memory
  }
}

// ---------------------------------------------------------------- ceiling: a 16-byte copy
constexpr int kU = 4;
__global__ void copy16(const uint4* __restrict__ s, uint4* __restrict__ d, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU) {
    uint4 w[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) w[u] = __ldg(s + i0 + u * step);
#pragma unroll
    for (int u = 0; u < kU; ++u) if (i0 + u * step < n) d[i0 + u * step] = w[u];
  }
}
// The same frame as the split kernel (a block of 128 threads a group of rows, 8 packs a thread), copying.
__global__ void __launch_bounds__(128) copy_rows(const uint4* __restrict__ s, uint4* __restrict__ d, int64_t n) {
  const int64_t base = int64_t(blockIdx.x) * 128 * 8 + threadIdx.x;
  uint4 w[8];
#pragma unroll
  for (int u = 0; u < 8; ++u) w[u] = s[base + 128 * u];
#pragma unroll
  for (int u = 0; u < 8; ++u) d[base + 128 * u] = w[u];
}

__global__ void fill(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16(float(int(h & 0xffff) - 32768) * (1.f / 8192.f));  // [-4, 4), all finite
  }
}


int g_sms = 0;
template <class K> int resident(K k, int threads, int smem) {
  int per;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, reinterpret_cast<const void*>(k), threads, size_t(smem)));
  return per;
}
template <class K> void allow(K k, int smem) {
  if (smem > 48 * 1024) CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
}

// ---------------------------------------------------------------- the library's launch (csrc/cuda/ops.cu, hadamard_run)
// split: BRAZE_CUDA_HAD_SPLIT (1 default, 2 prefetch, 0 the shuffle kernel). Rows of n = M * 2^logP, bf16, contiguous.
template <int E, int LG>
void lib_split_launch(HadamardParams p, unsigned grid, unsigned block, int smem, bool prefetch) {
  if (prefetch) {
    const auto kernel = hadamard_split_kernel<T, E, LG, true>;
    smem += int(int64_t(p.R) * (E << LG) * int64_t(sizeof(T)));
    allow(kernel, smem);
    grid = unsigned(std::min<int64_t>(p.groups, int64_t(g_sms) * resident(kernel, int(block), smem)));
    kernel<<<grid, block, size_t(smem)>>>(p);
  } else {
    const auto kernel = hadamard_split_kernel<T, E, LG, false>;
    allow(kernel, smem);
    kernel<<<grid, block, size_t(smem)>>>(p);
  }
}
void lib_launch(const void* x, void* y, int64_t rows, int M, int logP, float scale, int split) {
  const int P = 1 << logP, n = M * P;
  if (M == 1 && logP >= 6 && logP <= 12 && split > 0) {
    const int E = 1 << ((logP + 1) / 2), logG = logP - (logP + 1) / 2, G = 1 << logG;
    HadamardParams p{};
    p.x = x, p.y = y, p.x_stride = n, p.y_stride = n, p.rows = rows;
    p.R = int(std::min<int64_t>(kHadSplitThreads / G, rows));
    p.groups = (rows + p.R - 1) / p.R;
    p.scale = scale, p.M = 1, p.logP = logP, p.logG = logG, p.threads = p.R * G;
    const unsigned grid = unsigned(std::min<int64_t>(p.groups, INT_MAX)), block = unsigned(p.threads);
    const int smem = int(int64_t(p.R) * (P + E) * int64_t(sizeof(float)));
    switch (logP) {
      case 11: return lib_split_launch<64, 5>(p, grid, block, smem, split == 2);
      case 12: return lib_split_launch<64, 6>(p, grid, block, smem, split == 2);
      default: printf("bench: no split shape for 2^%d\n", logP); exit(1);
    }
  }
  int E = std::min(P, 16);  // BRAZE_CUDA_HAD_ELEMS default
  while (int64_t(M) * (P / E) > kHadThreads) E *= 2;
  int logG = 0;
  while ((E << logG) < P) ++logG;
  const int per_row = M << logG;
  const int R = per_row < 128 ? int(std::min<int64_t>(128 / per_row, rows)) : 1;
  const bool staged = M > 1 || logG > 5;
  HadamardParams p{};
  p.x = x, p.y = y, p.x_stride = n, p.y_stride = n, p.rows = rows;
  p.groups = (rows + R - 1) / R;
  p.scale = scale, p.M = M, p.logP = logP, p.logG = logG, p.R = R, p.threads = R * per_row;
  const unsigned grid = unsigned(std::min<int64_t>(p.groups, INT_MAX)), block = unsigned((p.threads + 31) / 32 * 32);
  const int smem = staged ? int(int64_t(R) * n * int64_t(sizeof(float))) : 0;
  auto go = [&](auto kernel) { allow(kernel, smem); kernel<<<grid, block, size_t(smem)>>>(p); };
  constexpr int V = kVec16<T>;
  switch (E) {
    case 16: return M > 1 ? go(hadamard_kernel<T, 16, V, true>) : go(hadamard_kernel<T, 16, V, false>);
    case 32: return M > 1 ? go(hadamard_kernel<T, 32, V, true>) : go(hadamard_kernel<T, 32, V, false>);
    case 64: return M > 1 ? go(hadamard_kernel<T, 64, V, true>) : go(hadamard_kernel<T, 64, V, false>);
    default: printf("bench: no generic shape for E = %d\n", E); exit(1);
  }
}

// ---------------------------------------------------------------- one shape
static double g_memcpy_gbs = 0;

void run(int64_t rows, int M, int logP) {
  const int n = M << logP;
  const int64_t elems = rows * n, bytes1 = elems * 2;
  const float scale = 1.f / 64.f;
  T *x[kSets], *y[kSets];
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&x[s], bytes1)); CK(cudaMalloc(&y[s], bytes1));
    fill<<<1024, 256>>>(x[s], elems, 17u + s);
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint8_t> ref(bytes1), got(bytes1);
  const double bytes = 2.0 * double(bytes1), ceil_us = bytes / g_memcpy_gbs / 1e3;
  auto report = [&](const char* what, float us) {
    printf("%6lld x %-6d %-40s %8.1f us %7.0f GB/s %5.1f%%\n", (long long)rows, n, what, us, bytes / us / 1e3,
           100.0 * ceil_us / us);
  };
  auto check = [&](const char* what) {
    CK(cudaMemcpy(got.data(), y[0], bytes1, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    const uint16_t *a = reinterpret_cast<const uint16_t*>(got.data()), *b = reinterpret_cast<const uint16_t*>(ref.data());
    for (int64_t i = 0; i < elems; ++i) bad += a[i] != b[i];
    if (bad) printf("  %s: %lld of %lld elements DIFFER from the library kernel\n", what, (long long)bad, (long long)elems);
  };
  auto variant = [&](const char* what, auto&& launch, bool checked = true) {
    CK(cudaMemset(y[0], 0xff, bytes1));
    report(what, time_it(launch));
    if (checked) check(what);
  };
  // the library's default, the reference bits
  report(M == 1 && logP <= 12 ? "library split (default)" : "library (generic kernel)",
         time_it([&](int s) { lib_launch(x[s], y[s], rows, M, logP, scale, 1); }));
  CK(cudaMemcpy(ref.data(), y[0], bytes1, cudaMemcpyDeviceToHost));
  if (M == 1 && logP <= 12) {
    variant("library split prefetch (SPLIT=2)", [&](int s) { lib_launch(x[s], y[s], rows, M, logP, scale, 2); });
    variant("library shuffle kernel (SPLIT=0)", [&](int s) { lib_launch(x[s], y[s], rows, M, logP, scale, 0); });
    if (logP == 12 || logP == 11) {
      constexpr int E = 64;
      const int LG = logP - 6, G = 1 << LG, R = kHadSplitThreads / G;
      HadamardParams p{};
      p.x_stride = n, p.y_stride = n, p.rows = rows, p.R = R, p.groups = rows / R, p.scale = scale, p.M = 1;
      p.logP = logP, p.logG = LG, p.threads = R * G;
      auto cut = [&](auto kernel, const char* what) {
        variant(what, [&](int s) { p.x = x[s], p.y = y[s]; kernel<<<unsigned(p.groups), kHadSplitThreads>>>(p); }, false);
      };
      if (logP == 12) {
        cut(split_cut<E, 6, 1>, "diag: no smem phase (wrong values)");
        cut(split_cut<E, 6, 2>, "diag: no butterflies (wrong values)");
      } else {
        cut(split_cut<E, 5, 1>, "diag: no smem phase (wrong values)");
        cut(split_cut<E, 5, 2>, "diag: no butterflies (wrong values)");
      }
      // candidates
      auto cand = [&](auto kernel, int S, const char* what) {
        const int smem = (S > 0 ? 64 : 0) + R * (n + E) * 4 + S * R * n * 2;
        allow(kernel, smem);
        const int per = resident(kernel, kHadSplitThreads, smem);
        const unsigned grid = S > 0 ? unsigned(std::min<int64_t>(p.groups, int64_t(g_sms) * per)) : unsigned(p.groups);
        char name[80];
        snprintf(name, sizeof name, "%s (%d/SM)", what, per);
        variant(name, [&](int s) { p.x = x[s], p.y = y[s]; kernel<<<grid, kHadSplitThreads, smem>>>(p); });
      };
      auto cands = [&](auto lg) {
        constexpr int L = decltype(lg)::value;
        cand(split_v<T, E, L, 0, false, 4>, 0, "split_v copy of the library");
        cand(split_v<T, E, L, 0, false, 3>, 0, "split_v, 168 regs");
        cand(split_v<T, E, L, 0, true, 4>, 0, "split_v narrow");
        cand(split_v<T, E, L, 1, false, 4>, 1, "split_v bulk S=1");
        cand(split_v<T, E, L, 1, true, 4>, 1, "split_v bulk S=1 narrow");
        cand(split_v<T, E, L, 2, false, 3>, 2, "split_v bulk S=2");
        cand(split_v<T, E, L, 2, true, 3>, 2, "split_v bulk S=2 narrow");
        cand(split_v<T, E, L, 3, true, 2>, 3, "split_v bulk S=3 narrow");
      };
      if (logP == 12) cands(std::integral_constant<int, 6>{});
      else cands(std::integral_constant<int, 5>{});
      // the library kernel with one row a block (64 or 32 threads)
      {
        HadamardParams q = p;
        q.R = 1, q.groups = rows, q.threads = G;
        const int smem = (n + E) * 4;
        variant("library kernel, 1 row a block", [&](int s) {
          q.x = x[s], q.y = y[s];
          if (logP == 12) hadamard_split_kernel<T, E, 6, false><<<unsigned(rows), G, smem>>>(q);
          else hadamard_split_kernel<T, E, 5, false><<<unsigned(rows), G, smem>>>(q);
        });
      }
    }
  }
  for (int s = 0; s < kSets; ++s) { CK(cudaFree(x[s])); CK(cudaFree(y[s])); }
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const int64_t n = int64_t(1) << 27;  // 128 MiB each way
  uint8_t *s[kSets], *d[kSets];
  for (int i = 0; i < kSets; ++i) { CK(cudaMalloc(&s[i], n)); CK(cudaMalloc(&d[i], n)); }
  const float mc = time_it([&](int i) { CK(cudaMemcpyAsync(d[i], s[i], n, cudaMemcpyDeviceToDevice)); });
  g_memcpy_gbs = 2.0 * n / mc / 1e3;
  printf("cudaMemcpyAsync D2D %lld B: %.1f us, %.0f GB/s (read + write)\n", (long long)n, mc, g_memcpy_gbs);
  const float ck = time_it([&](int i) { copy16<<<prop.multiProcessorCount * 8, 256>>>((const uint4*)s[i], (uint4*)d[i], n / 16); });
  printf("copy16 kernel:          %.1f us, %.0f GB/s, %.1f%% of memcpy\n", ck, 2.0 * n / ck / 1e3, 100.0 * mc / ck);
  const float cr = time_it([&](int i) { copy_rows<<<unsigned(n / 16 / 1024), 128>>>((const uint4*)s[i], (uint4*)d[i], n / 16); });
  printf("copy_rows (split grid): %.1f us, %.0f GB/s, %.1f%% of memcpy\n", cr, 2.0 * n / cr / 1e3, 100.0 * mc / cr);
  for (int i = 0; i < kSets; ++i) { CK(cudaFree(s[i])); CK(cudaFree(d[i])); }
  run(16384, 1, 12);
  run(16384, 1, 11);
  run(16384, 12, 10);
  return 0;
}
