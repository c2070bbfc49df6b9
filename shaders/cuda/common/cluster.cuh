// Thread-block clusters (sm_90+): a row split over the CTAs of a cluster sums
// its partials through distributed shared memory. Every helper traps when run
// on an older GPU (or in sm_80 code); launchers pick cluster kernels only where
// clusters_usable() (csrc/cuda/runtime.cuh) says they run.
#pragma once
#include <cstdint>

namespace braze::cuda {

__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
#else
  __trap();
  return 0;
#endif
}

__device__ __forceinline__ unsigned cluster_size() {
#if __CUDA_ARCH__ >= 900
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
#else
  __trap();
  return 1;
#endif
}

// A barrier of every thread of the cluster; shared-memory writes before it
// are visible to every CTA of the cluster after it.
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// The two halves of cluster_sync, for work between them: arrive once this
// thread's reads of other CTAs' shared memory are done (release), wait before
// its own shared memory may be reused or the CTA exits (acquire). Every thread
// pairs each arrive with one wait, and no cluster_sync comes between them.
__device__ __forceinline__ void cluster_arrive() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void cluster_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  __trap();
#endif
}

// The float at `local`'s shared-memory offset in CTA `rank` of the cluster.
__device__ __forceinline__ float cluster_load(const float* local, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
#else
  __trap();
  return 0.f;
#endif
}

// The address of `local` (a shared-memory object of this CTA) in CTA `rank`
// of the cluster, as a generic pointer that plain loads and stores take.
template <class T> __device__ __forceinline__ T* cluster_map(T* local, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  uint64_t remote;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(reinterpret_cast<uint64_t>(local)), "r"(rank));
  return reinterpret_cast<T*>(remote);
#else
  __trap();
  return local;
#endif
}

}  // namespace braze::cuda
