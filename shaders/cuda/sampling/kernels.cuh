// Sampling family kernels: one block of kThreads per row. Same rules as the
// CPU (csrc/cpu/sampling.cpp): thresholds by a radix select over float keys
// (11 + 11 + 10 bits), kept tokens drawn by inverse CDF in index order with
// the row's Philox uniform. Masses are summed in 2^-40 fixed point with
// integer atomics, so every result is independent of thread scheduling.
#pragma once
#include <cstdint>

#include "core/philox.h"
#include "core/sampling.h"
#include "cuda/common/dtype.cuh"
#include "cuda/sampling/block.cuh"

namespace braze::cuda::sampling {

using braze::sampling::Args;
using braze::sampling::Op;
using u64 = unsigned long long;

constexpr float kInf = __builtin_huge_valf();
constexpr double kFix = 1099511627776.0;  // 2^40

template <class T> __device__ __forceinline__ const T* row_in(const Args& a, int64_t r) {
  return static_cast<const T*>(a.x) + r * a.x_stride;
}

// Row max (NaN ignored) and whether the row is samplable.
template <class T> struct RowMax {
  float m;
  bool valid;
};
template <class T> __device__ RowMax<T> row_max(const T* x, int64_t n, Shared& sh) {
  float m = -kInf;
  bool nan = false;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    float v = to_f32(x[i]);
    nan |= v != v;
    m = fmaxf(m, v);
  }
  m = block_max(m, sh);
  nan = block_any(nan);
  return {m, !nan && isfinite(m)};
}

// The largest key v with sum(weight(i, x_i) over keys >= v) >= target.
template <class T, class Weight>
__device__ uint32_t radix_select(const T* x, int64_t n, u64 target, Weight weight, u64* bins, Shared& sh) {
  uint32_t prefix = 0, prefix_mask = 0;
  u64 above = 0;
  __shared__ uint32_t s_bucket;
  __shared__ u64 s_above;
  for (int level = 0; level < 3; ++level) {
    const int shift = level == 0 ? 21 : level == 1 ? 10 : 0;
    const int nbins = level == 2 ? 1024 : 2048;
    for (int b = threadIdx.x; b < nbins; b += kThreads) bins[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      const float v = to_f32(x[i]);
      const uint32_t k = key_of(v);
      if ((k & prefix_mask) != prefix) continue;
      const u64 w = weight(i, v);
      if (w) atomicAdd(&bins[(k >> shift) & uint32_t(nbins - 1)], w);
    }
    __syncthreads();
    if (threadIdx.x < 32) {  // one warp finds the bucket, scanning from the top
      const int lane = threadIdx.x, per = nbins / 32, hi = nbins - 1 - lane * per;
      u64 s = 0;
      for (int j = 0; j < per; ++j) s += bins[hi - j];
      u64 inc = s;
      for (int o = 1; o < 32; o <<= 1) {
        u64 t = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += t;
      }
      unsigned hit = __ballot_sync(0xffffffffu, above + inc >= target && s > 0);
      unsigned nonempty = __ballot_sync(0xffffffffu, s > 0);
      // Integer sums cannot fall short of a target <= the total; the lowest
      // nonempty bucket is the answer only if they ever did.
      const int pick = hit ? __ffs(hit) - 1 : (nonempty ? 31 - __clz(nonempty) : 0);
      if (lane == pick) {
        u64 acc = above + inc - s;
        int b = hi, lowest = hi;
        for (int j = 0; j < per; ++j) {
          const u64 c = bins[hi - j];
          if (!c) continue;
          lowest = b = hi - j;
          if (acc + c >= target) break;
          acc += c;
          b = -1;
        }
        if (b < 0) b = lowest;
        s_bucket = uint32_t(b);
        s_above = acc;
      }
    }
    __syncthreads();
    prefix |= s_bucket << shift;
    prefix_mask |= uint32_t(nbins - 1) << shift;
    above = s_above;
    __syncthreads();
  }
  return prefix;
}

__device__ __forceinline__ u64 fixed(float e) { return u64(double(e) * kFix); }

// softmax / log_softmax / logsumexp: per-thread online max and sum, combined once.
template <class T> __global__ void __launch_bounds__(kThreads) normalize_kernel(Args a) {
  __shared__ Shared sh;
  const int64_t r = blockIdx.x;
  const T* x = row_in<T>(a, r);
  const float it = 1.f / a.temperature.at(r);
  float m = -kInf, s = 0.f;
  bool bad = false;
  for (int64_t i = threadIdx.x; i < a.cols; i += kThreads) {
    const float v = to_f32(x[i]);
    bad |= (v != v) || v == kInf;
    if (v == -kInf) continue;
    if (v > m) {
      s = s * __expf((m - v) * it) + 1.f;
      m = v;
    } else {
      s += __expf((v - m) * it);
    }
  }
  const float mx = block_max(m, sh);
  float total = block_sum(m == -kInf ? 0.f : s * __expf((m - mx) * it), sh);
  if (block_any(bad)) total = __builtin_nanf("");
  const float ms = mx == -kInf ? 0.f : mx, log_s = logf(total);
  if (a.op == Op::logsumexp) {
    if (threadIdx.x == 0) static_cast<float*>(a.y)[r] = ms * it + log_s;
    return;
  }
  float* y = static_cast<float*>(a.y) + r * a.y_stride;
  const float inv = 1.f / total;
  for (int64_t i = threadIdx.x; i < a.cols; i += kThreads) {
    const float z = (to_f32(x[i]) - ms) * it;
    y[i] = a.op == Op::softmax ? __expf(z) * inv : z - log_s;
  }
}

template <class T> __global__ void __launch_bounds__(kThreads) argmax_kernel(Args a) {
  __shared__ Shared sh;
  const int64_t r = blockIdx.x;
  const T* x = row_in<T>(a, r);
  const RowMax<T> rm = row_max(x, a.cols, sh);
  long long first = INT64_MAX;
  for (int64_t i = threadIdx.x; i < a.cols && first == INT64_MAX; i += kThreads)
    if (to_f32(x[i]) == rm.m) first = i;
  first = block_min_index(first, sh);
  if (threadIdx.x == 0) static_cast<int32_t*>(a.y)[r] = rm.valid ? int32_t(first) : -1;
}

template <class T> __device__ void copy_row(const Args& a, const T* x, T* y) {
  if (a.in_place) return;
  for (int64_t i = threadIdx.x; i < a.cols; i += kThreads) y[i] = x[i];
}

template <class T> __global__ void __launch_bounds__(kThreads) mask_kernel(Args a) {
  __shared__ Shared sh;
  __shared__ u64 bins[2048];
  const int64_t r = blockIdx.x;
  const T* x = row_in<T>(a, r);
  T* y = static_cast<T*>(a.y) + r * a.y_stride;
  const RowMax<T> rm = row_max(x, a.cols, sh);
  if (!rm.valid) return copy_row(a, x, y);
  float cut = -kInf, e_min = 0.f;
  const float m = rm.m;
  const float it = a.op == Op::top_k_mask ? 1.f : 1.f / a.temperature.at(r);
  if (a.op == Op::top_k_mask) {
    const int64_t k = a.top_k.at(r);
    if (k <= 0 || k >= a.cols) return copy_row(a, x, y);
    cut = float_of(radix_select(x, a.cols, u64(k), [](int64_t, float) { return u64(1); }, bins, sh));
  } else if (a.op == Op::min_p_mask) {
    e_min = a.min_p.at(r);
    if (!(e_min > 0.f)) return copy_row(a, x, y);
  } else {
    const float p = a.p.at(r);
    if (p >= 1.f) return copy_row(a, x, y);
    u64 local = 0, total = 0;
    for (int64_t i = threadIdx.x; i < a.cols; i += kThreads) local += fixed(__expf((to_f32(x[i]) - m) * it));
    block_exclusive_scan(local, &total, sh);
    const u64 target = u64(ceil(double(p) * double(total)));
    auto mass = [&](int64_t, float v) { return fixed(__expf((v - m) * it)); };
    cut = float_of(radix_select(x, a.cols, target, mass, bins, sh));
  }
  __syncthreads();  // in place: every read of the row happened before any write
  const T neg = from_f32<T>(-kInf);
  for (int64_t i = threadIdx.x; i < a.cols; i += kThreads) {
    const float v = to_f32(x[i]);
    bool keep = v >= cut;
    if (e_min > 0.f) keep &= __expf((v - m) * it) >= e_min;
    y[i] = keep ? x[i] : neg;
  }
}

template <class T> __global__ void __launch_bounds__(kThreads) sample_kernel(Args a) {
  __shared__ Shared sh;
  __shared__ u64 bins[2048];
  const int64_t r = blockIdx.x, n = a.cols;
  const T* x = row_in<T>(a, r);
  int32_t* out = static_cast<int32_t*>(a.y);
  const RowMax<T> rm = row_max(x, n, sh);
  if (!rm.valid) {
    if (threadIdx.x == 0) out[r] = -1;
    return;
  }
  const float m = rm.m, t = a.temperature.at(r);
  const int64_t k = a.top_k.at(r);
  if (!(t > 0.f) || k == 1) {
    long long first = INT64_MAX;
    for (int64_t i = threadIdx.x; i < n && first == INT64_MAX; i += kThreads)
      if (to_f32(x[i]) == m) first = i;
    first = block_min_index(first, sh);
    if (threadIdx.x == 0) out[r] = int32_t(first);
    return;
  }
  const float it = 1.f / t, mp = a.min_p.at(r), p = a.p.at(r);
  float cut = -kInf;
  if (k > 1 && k < n) cut = float_of(radix_select(x, n, u64(k), [](int64_t, float) { return u64(1); }, bins, sh));
  auto kept_mass = [&](int64_t, float v) {
    const float e = __expf((v - m) * it);
    return (v >= cut && e >= mp) ? fixed(e) : u64(0);
  };
  if (p < 1.f) {
    u64 local = 0, total = 0;
    for (int64_t i = threadIdx.x; i < n; i += kThreads) local += kept_mass(i, to_f32(x[i]));
    block_exclusive_scan(local, &total, sh);
    const u64 target = u64(ceil(double(p) * double(total)));
    cut = fmaxf(cut, float_of(radix_select(x, n, target, kept_mass, bins, sh)));
  }
  // Inverse CDF in index order: thread j owns the j-th contiguous slice.
  const int64_t per = (n + kThreads - 1) / kThreads, b0 = min(n, threadIdx.x * per), b1 = min(n, b0 + per);
  u64 local = 0, total = 0;
  for (int64_t i = b0; i < b1; ++i) local += kept_mass(i, to_f32(x[i]));
  const u64 before = block_exclusive_scan(local, &total, sh);
  const uint32_t u24 = braze::philox::row_block(a.seed, a.offset, uint64_t(r)).v[0] >> 8;
  const u64 target = (total >> 24) * u24 + (((total & 0xffffffull) * u24) >> 24);  // floor(u * total)
  long long tok = INT64_MAX;
  if (before <= target && target < before + local) {
    u64 c = before;
    for (int64_t i = b0; i < b1; ++i) {
      c += kept_mass(i, to_f32(x[i]));
      if (c > target) {
        tok = i;
        break;
      }
    }
  }
  tok = block_min_index(tok, sh);
  if (threadIdx.x == 0) out[r] = tok == INT64_MAX ? -1 : int32_t(tok);
}

template <class T> __global__ void __launch_bounds__(kThreads) penalty_kernel(Args a) {
  const int64_t r = blockIdx.x;
  const T* x = row_in<T>(a, r);
  T* y = static_cast<T*>(a.y) + r * a.y_stride;
  const int32_t* ids = a.ids + r * a.ids_stride;
  copy_row(a, x, y);
  __syncthreads();
  for (int64_t j = threadIdx.x; j < a.ids_len; j += kThreads) {
    const int32_t tok = ids[j];
    if (tok < 0 || tok >= a.cols) continue;
    bool first = true;
    for (int64_t q = 0; q < j && first; ++q) first = ids[q] != tok;
    if (!first) continue;  // the first occurrence applies the penalty for all of them
    int count = 0;
    for (int64_t q = j; q < a.ids_len; ++q) count += ids[q] == tok;
    float v = to_f32(x[tok]);
    v = v > 0.f ? v / a.repetition : v * a.repetition;
    y[tok] = from_f32<T>(v - (float(count) * a.frequency + a.presence));
  }
}

__global__ void philox_uniform_kernel(Args a) {
  const int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < a.rows) static_cast<float*>(a.y)[r] = braze::philox::row_uniform(a.seed, a.offset, uint64_t(r));
}

}  // namespace braze::cuda::sampling
