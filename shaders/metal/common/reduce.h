// Threadgroup reductions built from SIMD-group sums (simd width 32).
#pragma once
#include <metal_stdlib>

// Sum of `v` over every thread of the threadgroup, returned to all threads.
// `scratch` holds one V per simdgroup (32 entries covers 1024 threads). All
// threads must call it (it contains barriers); it ends with a barrier so the
// caller may reuse `scratch` immediately.
template <typename V>
inline V threadgroup_sum(V v, threadgroup V* scratch, uint lane, uint simd_index,
                         uint simd_count) {
  v = metal::simd_sum(v);
  if (lane == 0) {
    scratch[simd_index] = v;
  }
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
  V total = lane < simd_count ? scratch[lane] : V(0);
  total = metal::simd_sum(total);
  metal::threadgroup_barrier(metal::mem_flags::mem_threadgroup);
  return total;
}
