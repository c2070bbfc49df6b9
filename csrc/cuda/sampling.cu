// Host launchers of the sampling family: a block per row (grid = rows), or a
// cluster per row where few long rows would leave SMs idle (sm_90: softmax &
// co, sample and the masks), the caller's stream and device; nothing here
// synchronizes or allocates. Each op
// has a vector instantiation (16-byte packs; softmax & co: 4-element packs,
// so f32 rows are written 16 bytes at a time) taken when every row base is
// aligned for it, and a scalar one for anything else.
#include "cuda/sampling.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>

#include "cuda/runtime.cuh"
#include "cuda/sampling/kernels.cuh"

namespace braze::cuda {
namespace {

using braze::sampling::Logits;
using braze::sampling::Op;
using namespace braze::cuda::sampling;

// Every row of (base, stride) starts on a `bytes` boundary.
bool rows_aligned(const void* base, int64_t stride, int64_t rows, size_t elem, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(base) % bytes) return false;
  return rows <= 1 || (uint64_t(stride) * elem) % bytes == 0;
}

// The register form split over clusters of `ctas` CTAs of P packs per thread
// (P >= 2: a row that needs more than one CTA of max_p needs more than 8 of 1).
template <class T> void launch_normalize_cluster(const NormalizeArgs& a, int P, int64_t ctas, cudaStream_t s) {
  const unsigned grid = unsigned(a.rows * ctas), c = unsigned(ctas);
  const char* what = "softmax kernel launch (cluster)";
  switch (P) {
    case 2: return launch_clustered(normalize_regs<T, 2, true>, grid, kNormThreads, c, s, what, a);
    case 4: return launch_clustered(normalize_regs<T, 4, true>, grid, kNormThreads, c, s, what, a);
    case 8: return launch_clustered(normalize_regs<T, 8, true>, grid, kNormThreads, c, s, what, a);
    case 16:
      if constexpr (sizeof(T) == 2) return launch_clustered(normalize_regs<T, 16, true>, grid, kNormThreads, c, s, what, a);
      [[fallthrough]];
    default: throw std::logic_error("softmax cluster form: no kernel for this many packs per thread");
  }
}

// Packs per thread and CTAs per row of the cluster form, or false where it
// does not apply. It takes rows longer than one CTA holds (at most 8 CTAs),
// splitting further while one wave of two CTAs per SM has room. (Rows that
// one CTA holds stay whole: splitting 64 x 32000 measured slower.)
bool cluster_plan(const Logits& a, int64_t packs, int max_p, int* P, int64_t* ctas) {
  const int64_t slots = 2 * int64_t(sm_count(a.device_id));
  const auto need = [&](int p) { return (packs + kNormThreads * p - 1) / (kNormThreads * p); };
  if (!clusters_usable(a.device_id) || need(max_p) == 1) return false;
  int p = max_p;
  while (p > 1 && need(p / 2) <= 8 && a.rows * need(p / 2) <= slots) p /= 2;
  if (need(p) > 8 || a.rows * need(p) > INT32_MAX) return false;
  *P = p;
  *ctas = need(p);
  return true;
}

template <class T> void launch_normalize(const NormalizeArgs& a, cudaStream_t s) {
  const dim3 grid(unsigned(a.rows)), block(kNormThreads);
  const bool has_rows = a.op != Op::logsumexp;
  const bool vec = rows_aligned(a.x, a.x_stride, a.rows, sizeof(T), 4 * sizeof(T)) &&
                   (!has_rows || rows_aligned(a.out, a.out_stride, a.rows, sizeof(float), 16));
  // Packs per thread of the register form: at most 32 registers of row data.
  const int64_t packs = (a.cols + 3) / 4;
  const int max_p = sizeof(T) == 4 ? 8 : 16;
  int cp = 0;
  int64_t ctas = 0;
  if (vec && cluster_plan(a, packs, max_p, &cp, &ctas)) return launch_normalize_cluster<T>(a, cp, ctas, s);
  int64_t p = 1;
  while (kNormThreads * p < packs) p *= 2;
  if (!vec) normalize_looped<T, 1><<<grid, block, 0, s>>>(a);
  else if (p == 1) normalize_regs<T, 1><<<grid, block, 0, s>>>(a);
  else if (p == 2) normalize_regs<T, 2><<<grid, block, 0, s>>>(a);
  else if (p == 4) normalize_regs<T, 4><<<grid, block, 0, s>>>(a);
  else if (p == 8) normalize_regs<T, 8><<<grid, block, 0, s>>>(a);
  else if (p == 16 && p <= max_p) normalize_regs<T, sizeof(T) == 4 ? 8 : 16><<<grid, block, 0, s>>>(a);
  else normalize_looped<T, 4><<<grid, block, 0, s>>>(a);
}

// CTAs per row for sample and the masks: a row is split over a cluster (of
// up to 8 CTAs, slices of at least kMinSlice elements) only while the rows
// leave SMs idle, since each CTA of 1024 threads holds an SM; 1 = whole rows.
constexpr int64_t kMinSlice = 8192;
int split_ctas(const Logits& a, bool vec) {
  if (!vec || a.cols < 2 * kMinSlice) return 1;
  const int64_t sms = sm_count(a.device_id);
  const int64_t c = std::min<int64_t>({8, sms / a.rows, a.cols / kMinSlice});
  return c >= 2 && clusters_usable(a.device_id) ? int(c) : 1;
}

// The row kernels' vector form needs every row of x (and of out, where `out`
// is given) on a 16-byte boundary.
template <class T> bool vec_rows(const Logits& a, const void* out = nullptr, int64_t out_stride = 0) {
  return rows_aligned(a.x, a.x_stride, a.rows, sizeof(T), 16) &&
         (!out || rows_aligned(out, out_stride, a.rows, sizeof(T), 16));
}

// F(type tag) for the logits' dtype.
template <class F> void with_logits_dtype(DType t, F f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::f16: return f(__half{});
    case DType::bf16: return f(__nv_bfloat16{});
    default: throw TypeError(std::string("logits: unsupported dtype ") + dtype_name(t));
  }
}

template <class T, int V> void launch_mask(const MaskArgs& a, cudaStream_t s) {
  if constexpr (V > 1) {
    const int ctas = split_ctas(a, true);
    if (ctas > 1)
      return launch_clustered(mask_kernel<T, V, true>, unsigned(a.rows * ctas), kThreads, unsigned(ctas), s,
                              "mask (cluster)", a);
  }
  mask_kernel<T, V><<<unsigned(a.rows), kThreads, 0, s>>>(a);
}

template <class T, int V> void launch_sample(const SampleArgs& a, cudaStream_t s) {
  if constexpr (V > 1) {
    const int ctas = split_ctas(a, true);
    if (ctas > 1)
      return launch_clustered(sample_kernel<T, V, true>, unsigned(a.rows * ctas), kThreads, unsigned(ctas), s,
                              "sample (cluster)", a);
  }
  sample_kernel<T, V><<<unsigned(a.rows), kThreads, 0, s>>>(a);
}

// Checks every op of the family makes before it launches.
void check_rows(const Logits& a) {
  if (a.rows > INT32_MAX) throw ValueError("logits: at most 2^31 - 1 rows are supported on CUDA");
  if (a.cols > (int64_t(1) << 30))  // in-row indices are 32-bit
    throw ValueError("logits: at most 2^30 columns are supported on CUDA");
}

}  // namespace

void normalize_run(const NormalizeArgs& a, uintptr_t stream) {
  if (a.rows == 0) return;
  check_rows(a);
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  with_logits_dtype(a.dtype, [&](auto tag) { launch_normalize<decltype(tag)>(a, s); });
  check_launch("sampling");
}

void argmax_run(const ArgmaxArgs& a, uintptr_t stream) {
  if (a.rows == 0) return;
  check_rows(a);
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  with_logits_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (vec_rows<T>(a)) argmax_kernel<T, 16 / sizeof(T)><<<unsigned(a.rows), kThreads, 0, s>>>(a);
    else argmax_kernel<T, 1><<<unsigned(a.rows), kThreads, 0, s>>>(a);
  });
  check_launch("sampling");
}

void mask_run(const MaskArgs& a, uintptr_t stream) {
  if (a.rows == 0) return;
  check_rows(a);
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  with_logits_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (vec_rows<T>(a, a.out, a.out_stride)) launch_mask<T, 16 / sizeof(T)>(a, s);
    else launch_mask<T, 1>(a, s);
  });
  check_launch("sampling");
}

void penalties_run(const PenaltyArgs& a, uintptr_t stream) {
  if (a.rows == 0) return;
  check_rows(a);
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  with_logits_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (vec_rows<T>(a, a.out, a.out_stride)) penalty_kernel<T, 16 / sizeof(T)><<<unsigned(a.rows), kThreads, 0, s>>>(a);
    else penalty_kernel<T, 1><<<unsigned(a.rows), kThreads, 0, s>>>(a);
  });
  check_launch("sampling");
}

void sample_run(const SampleArgs& a, uintptr_t stream) {
  if (a.rows == 0) return;
  check_rows(a);
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  with_logits_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (vec_rows<T>(a)) launch_sample<T, 16 / sizeof(T)>(a, s);
    else launch_sample<T, 1>(a, s);
  });
  check_launch("sampling");
}

void philox_run(const PhiloxArgs& a, uintptr_t stream) {
  if (a.n == 0) return;
  if (a.n > INT32_MAX) throw ValueError("out: at most 2^31 - 1 rows are supported on CUDA");
  DeviceGuard guard(a.device_id);
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  philox_uniform_kernel<<<unsigned((a.n + 255) / 256), 256, 0, s>>>(a);
  check_launch("sampling");
}

}  // namespace braze::cuda
