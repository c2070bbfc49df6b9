// Asynchronous global -> shared copies (sm_80+ cp.async), shared by the
// kernels that stage tiles ahead of their use. A thread's copies land after
// its cp_async_wait<N> (at most N of its committed groups still in flight) and
// are visible to the block after the __syncthreads that follows.
#pragma once
#include <cstdint>

namespace braze::cuda {

// 16 bytes, both ends 16-byte aligned; L2 only (.cg): staged bytes are read once from shared memory.
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// 4 bytes, both ends 4-byte aligned.
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace braze::cuda
