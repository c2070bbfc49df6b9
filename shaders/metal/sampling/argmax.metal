// argmax: the first index of the row max (f32 compare of the upcast logits),
// -1 for a row that holds a NaN or has no finite max (as the CPU backend).
// One threadgroup per row: max reduction, then the smallest index holding it.
#include "sampling_common.h"

template <typename T>
[[kernel]] void argmax_kernel(SAMPLING_KERNEL_ARGS(T, int)) {
  threadgroup float2 red2[32];
  threadgroup uint redu[32];
  const Lanes L = {tid, nt, lane, sg, nsg};
  device const T* xr = x + ulong(row) * P.x_stride;
  const float2 mn = row_max_nan(xr, P.cols, red2, L);
  if (!samplable(mn)) {
    if (tid == 0) y[row] = -1;
    return;
  }
  const uint first = first_equal(xr, P.cols, mn.x, redu, L);
  if (tid == 0) y[row] = int(first);
}

template [[host_name("argmax_f32")]] [[kernel]] decltype(argmax_kernel<float>) argmax_kernel<float>;
template [[host_name("argmax_f16")]] [[kernel]] decltype(argmax_kernel<half>) argmax_kernel<half>;
template [[host_name("argmax_bf16")]] [[kernel]] decltype(argmax_kernel<bfloat>) argmax_kernel<bfloat>;
