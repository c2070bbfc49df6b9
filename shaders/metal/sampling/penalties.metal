// apply_penalties: for each token seen in the row's history ids[0..L) (-1 =
// padding; out-of-range ids are ignored), `count` times:
// v = x > 0 ? x / repetition : x * repetition, then
// v -= count * frequency + presence, in f32, one cast on store (the CPU's
// formula). One threadgroup per row: the row is copied to out (unless in
// place), then after a device-memory barrier thread j handles history
// position j if it is the first occurrence of its token (so each token is
// written once, by one thread, reading the original logit).
#include "sampling_common.h"

template <typename T>
[[kernel]] void apply_penalties_kernel(SAMPLING_KERNEL_ARGS(T, T)) {
  const uint n = P.cols;
  device const T* xr = x + ulong(row) * P.x_stride;
  device T* yr = y + ulong(row) * P.y_stride;
  device const int* hist = ids + ulong(row) * P.ids_stride;
  if ((P.flags & SAMPLING_IN_PLACE) == 0u)
    for (uint i = tid; i < n; i += nt) yr[i] = xr[i];
  threadgroup_barrier(mem_flags::mem_device);
  for (uint j = tid; j < P.ids_len; j += nt) {
    const int tok = hist[j];
    if (tok < 0 || uint(tok) >= n) continue;
    bool first = true;
    for (uint q = 0; q < j && first; ++q) first = hist[q] != tok;
    if (!first) continue;
    uint count = 0;
    for (uint q = j; q < P.ids_len; ++q) count += hist[q] == tok ? 1u : 0u;
    float v = float(xr[tok]);
    v = v > 0.0f ? v / P.repetition : v * P.repetition;
    v -= float(count) * P.frequency + P.presence;
    yr[tok] = T(v);
  }
}

template [[host_name("apply_penalties_f32")]] [[kernel]] decltype(apply_penalties_kernel<float>)
    apply_penalties_kernel<float>;
template [[host_name("apply_penalties_f16")]] [[kernel]] decltype(apply_penalties_kernel<half>)
    apply_penalties_kernel<half>;
template [[host_name("apply_penalties_bf16")]] [[kernel]] decltype(apply_penalties_kernel<bfloat>)
    apply_penalties_kernel<bfloat>;
