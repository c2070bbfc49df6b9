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

// d = a b + c (8 x 8, row-major in `m`: a, b, c, then d), b loaded transposed
// when flags.x; a divergent call when flags.y: lanes below flags.y take
// another call (flags.z = 1), return early (flags.z = 2) or load from a
// lane-dependent address (flags.z = 3).
kernel void matrix_mma(device float* m [[buffer(0)]],
                       constant uint3& flags [[buffer(1)]],
                       uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 a, b, c, d;
  simdgroup_load(a, m, 8);
  simdgroup_load(b, m + 64, 8, ulong2(0, 0), flags.x != 0u);
  simdgroup_load(c, m + (flags.z == 3u && lane < flags.y ? 64u : 128u), 8);
  if (flags.z == 2u && lane < flags.y) {
    return;
  }
  if (flags.z == 1u && lane < flags.y) {
    simdgroup_multiply(d, a, b);
  } else {
    simdgroup_multiply_accumulate(d, a, b, c);
  }
  simdgroup_store(d, m + 192, 8);
}

// m[0..63] = the identity times 2 + a filled 0.5 (multiply by the diagonal).
kernel void matrix_fill(device half* m [[buffer(0)]]) {
  simdgroup_half8x8 two = simdgroup_half8x8(2.0h);
  simdgroup_half8x8 half_ = make_filled_simdgroup_matrix<half, 8, 8>(0.5h);
  simdgroup_half8x8 d;
  simdgroup_multiply(d, two, half_);
  simdgroup_store(d, m, 8);
}
