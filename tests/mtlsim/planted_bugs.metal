// Test shaders with planted bugs (and correct twins) proving that the
// simulator reports misuse instead of hanging or passing. Not shipped.
#include <metal_stdlib>
using namespace metal;

// Reverses 64 values through threadgroup memory. With `skip` = a thread index
// that thread returns before the barrier: undefined behaviour on a GPU.
kernel void reverse_early_return(device float* out [[buffer(0)]],
                                 constant uint& skip [[buffer(1)]],
                                 uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float tmp[64];
  if (tid == skip) {
    return;
  }
  tmp[tid] = float(tid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = tmp[63 - tid];
}

// Butterfly exchange; a mask >= 32 reads a lane that does not exist.
kernel void shuffle_xor_mask(device float* out [[buffer(0)]],
                             constant ushort& mask [[buffer(1)]],
                             uint lane [[thread_index_in_simdgroup]],
                             uint tid [[thread_position_in_grid]]) {
  out[tid] = simd_shuffle_xor(float(lane) + 0.5h, mask);
}

// Reads a threadgroup slot no thread wrote: the simulator's NaN fill shows it.
kernel void read_unwritten(device float* out [[buffer(0)]],
                           uint tid [[thread_position_in_threadgroup]]) {
  threadgroup float tmp[32];
  if (tid % 2 == 0) {
    tmp[tid] = 1.0f;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = tmp[tid ^ 1u];
}
