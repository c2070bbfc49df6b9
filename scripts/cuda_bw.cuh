// The harness the standalone CUDA microbenches share (scripts/cuda_*_bw.cu):
// an error check, and the timer: median of kReps timings of kIters launches,
// each launch(i) taking buffer set i % kSets (sets larger than the L2, so
// every launch reads from memory), after one warm-up launch a set.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                             \
  do {                                                                                                    \
    cudaError_t e_ = (x);                                                                                 \
    if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } \
  } while (0)

constexpr int kSets = 3, kIters = 20, kReps = 7;

template <class Launch> float time_it(Launch&& launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int s = 0; s < kSets; ++s) launch(s);
  std::vector<float> ms;
  for (int rep = 0; rep < kReps; ++rep) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < kIters; ++i) launch(i % kSets);
    CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float m; CK(cudaEventElapsedTime(&m, a, b)); ms.push_back(m * 1000.f / kIters);
  }
  CK(cudaGetLastError());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[kReps / 2];
}

// cudaMemcpyAsync's rate over n-byte buffers (read + written, GB/s), printed: the ceiling the
// microbenches compare with.
inline double memcpy_gbs(int64_t n) {
  uint8_t *s[kSets], *d[kSets];
  for (int i = 0; i < kSets; ++i) { CK(cudaMalloc(&s[i], n)); CK(cudaMalloc(&d[i], n)); }
  const float mc = time_it([&](int i) { CK(cudaMemcpyAsync(d[i], s[i], n, cudaMemcpyDeviceToDevice)); });
  const double gbs = 2.0 * n / mc / 1e3;
  printf("cudaMemcpyAsync D2D %lld B: %.1f us, %.0f GB/s read + write\n", (long long)n, mc, gbs);
  for (int i = 0; i < kSets; ++i) { CK(cudaFree(s[i])); CK(cudaFree(d[i])); }
  return gbs;
}

// n bytes of hashed noise, each below mod (0x3c: every f16 / bf16 made of them finite).
__global__ void fill_bytes(uint8_t* p, int64_t n, uint32_t seed, uint32_t mod) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = uint8_t(h % mod);
  }
}

// Reads a (na uint4) then b (nb uint4) once, 16-byte loads kU a thread in flight, and keeps nothing
// (an XOR of the words, stored only on an impossible value): the rate a pure read of those bytes
// reaches, launch and tail included, the floor of a kernel that must read them (decode: K and V;
// GEMV: the weight). Launch with a few CTAs an SM (e.g. SMs x 8 of 256 threads).
constexpr int kU = 4;
__global__ void read16(const uint4* __restrict__ a, int64_t na, const uint4* __restrict__ b, int64_t nb,
                       unsigned* sink) {
  const int64_t n = na + nb, step = int64_t(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  for (int64_t i0 = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i0 < n; i0 += step * kU) {
    uint4 w[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t i = i0 + u * step;
      w[u] = i < na ? __ldg(a + i) : i < n ? __ldg(b + (i - na)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= w[u].x ^ w[u].y ^ w[u].z ^ w[u].w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;  // never in practice; keeps the loads
}
