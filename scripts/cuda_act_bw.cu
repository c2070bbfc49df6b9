// What the CUDA per-token quantize_activations (fp8_e4m3 / int8, one f32 scale
// a row) reaches beside a copy of its bytes: the library kernel and variants
// that hold the row as raw 16-byte vectors (bf16 / f16 bits, not f32), prefetch
// the next row while the current one is reduced and encoded, and divide by the
// row's scale with a reciprocal and one exact correction (div_fast), in one
// process (no braze build needed).
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -fmad=false -I csrc -I shaders \
//     scripts/cuda_act_bw.cu -o /tmp/actbw && /tmp/actbw
// (-Xptxas -v prints each kernel's registers and spills.)
// Each row: median of 7 timings of 20 launches rotating over 3 buffer sets,
// bytes = input read + codes written + scales written; % is against
// cudaMemcpyAsync device-to-device of the same total, measured here. Every
// variant's codes and scales are compared bit for bit with the library
// kernel's (the inputs hold NaN, inf, -0, subnormals, huge and tiny rows, an
// all-zero row and ties of the fp8 grid). First, div_fast against x / s over
// every scale significand and every bf16 / f16 significand of x.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/quant/act.cuh"

using namespace braze::cuda::quant;

#define CK(x)                                                                            \
  do {                                                                                   \
    cudaError_t e_ = (x);                                                                \
    if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } \
  } while (0)

constexpr int kSets = 3, kIters = 20, kReps = 7;

// ------------------------------------------------------------------ variants
namespace v {

// Rows whose scale s has its exponent field in [67, 252) (2^-60 <= s < 2^125):
// 1 / s is a normal float, and for every finite x with |x / s| >= 2^-20 the
// residual below is exact, so div_fast's result depends on the significands of
// x and s alone (and their exponent difference); main() checks it equals x / s
// for all of those (bf16 and f16 x, every s). Where |x / s| < 2^-20 its result
// keeps x's sign and stays below 2^-19, which every code (e4m3, e5m2, int8)
// sends to a signed zero as it does x / s. Rows with inf / NaN / 0 or extreme
// scales take the library's division.
__device__ __forceinline__ bool scale_fast(float s) { return (__float_as_uint(s) >> 23) - 67u < 185u; }

// x / s, given r = 1 / s rounded to nearest: q0 = x r, then one correction by
// the exact residual q0 s - x. The residual's sign arrangement keeps -0 (x = -0
// gives q0 = -0, e = +0, -e r + q0 = -0).
__device__ __forceinline__ float div_fast(float x, float s, float r) {
  const float q0 = __fmul_rn(x, r);
  const float e = __fmaf_rn(q0, s, -x);
  return __fmaf_rn(-e, r, q0);
}

// Two elements of a 32-bit word of T (2 bytes) as floats, exactly as in_f32.
template <class T> __device__ __forceinline__ float2 unpack2(uint32_t w) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  } else {
    return make_float2(__half2float(__ushort_as_half(uint16_t(w))), __half2float(__ushort_as_half(uint16_t(w >> 16))));
  }
}

// Running amax (abs_bits of in_f32) over a 16-byte vector of T. bf16: in its
// own bits (x's f32 bits are its bits << 16, so the order is the same); f16:
// through the floats, as the library has it (NaN payloads ordered alike).
template <class T> struct Amax {
  uint32_t lo = 0, hi = 0;
  __device__ __forceinline__ void add(uint4 w) {
    const uint32_t a[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (std::is_same_v<T, __nv_bfloat16>) {
        lo = max(lo, a[j] & 0x7fffu);
        hi = max(hi, a[j] & 0x7fff0000u);
      } else {
        const float2 f = unpack2<T>(a[j]);
        lo = max(lo, abs_bits(f.x));
        hi = max(hi, abs_bits(f.y));
      }
    }
  }
  // The f32 abs bits of the max.
  __device__ __forceinline__ uint32_t bits() const {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) return max(lo << 16, hi);
    else return max(lo, hi);
  }
};

// Codes of two finite values: the hardware conversion (no NaN fix-up), encode_elem before sm_89.
template <Elem E> __device__ __forceinline__ uint32_t encode2_finite(float a, float b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  return __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, E == Elem::e4m3 ? __NV_E4M3 : __NV_E5M2);
#else
  return encode_elem<E>(a) | (encode_elem<E>(b) << 8);
#endif
}

// int8_encode of a finite quotient: clamp to +-127, round half to even.
__device__ __forceinline__ uint32_t int8_code(float q) {
  const float c = fminf(fmaxf(q, -127.f), 127.f);
  return uint32_t(__float2int_rn(c)) & 0xffu;
}

// 8 codes of a 16-byte vector of T, s in the fast range (r = 1 / s).
template <RowCode C, class T> __device__ __forceinline__ uint2 encode8_fast(uint4 w, float s, float r) {
  const uint32_t a[4] = {w.x, w.y, w.z, w.w};
  uint32_t c[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = unpack2<T>(a[j]);
    const float q0 = div_fast(f.x, s, r), q1 = div_fast(f.y, s, r);
    if constexpr (C == RowCode::int8) c[j] = int8_code(q0) | (int8_code(q1) << 8);
    else c[j] = encode2_finite<C == RowCode::e4m3 ? Elem::e4m3 : Elem::e5m2>(q0, q1);
  }
  return make_uint2(c[0] | (c[1] << 16), c[2] | (c[3] << 16));
}

// Any s: the library's encode8 (div_x86, NaN rules).
template <RowCode C, class T> __device__ __forceinline__ uint2 encode8_any(uint4 w, float s) {
  const uint32_t a[4] = {w.x, w.y, w.z, w.w};
  float f[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 t = unpack2<T>(a[j]);
    f[2 * j] = t.x;
    f[2 * j + 1] = t.y;
  }
  return encode8<C>(f, s);
}

// One row per CTA pass; thread t holds vectors t + i NT (i < H) of 8 elements
// as raw bits (16 registers at H = 4). Pipe: the next row's vectors are loaded
// before this row's reduce and encode (a persistent grid, 2H vectors held).
// Needs T 2 bytes, cols % 8 == 0, x's rows 16-byte aligned, q's 8; vectors past
// NT H are read again for the encode.
template <RowCode C, class T, int NT, int H, bool Pipe, int MinB>
__global__ void __launch_bounds__(NT, MinB) row_held_kernel(const RowParams p) {
  static_assert(sizeof(T) == 2, "2-byte elements");
  __shared__ uint32_t scratch[32];
  const int nv = int(p.cols >> 3);
  const int t = int(threadIdx.x);
  uint4 cur[H], nxt[H];
  auto load = [&](int64_t row, uint4(&b)[H]) {
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + row * p.x_stride);
#pragma unroll
    for (int i = 0; i < H; ++i) b[i] = t + i * NT < nv ? __ldg(src + t + i * NT) : make_uint4(0u, 0u, 0u, 0u);
  };
  int64_t r = blockIdx.x;
  if (Pipe && r < p.rows) load(r, cur);
  for (; r < p.rows; r += gridDim.x) {
    if constexpr (Pipe) {
      const int64_t rn = r + gridDim.x;
      if (rn < p.rows) load(rn, nxt);
    } else {
      load(r, cur);
    }
    const uint4* src = reinterpret_cast<const uint4*>(static_cast<const T*>(p.x) + r * p.x_stride);
    Amax<T> am;
#pragma unroll
    for (int i = 0; i < H; ++i) am.add(cur[i]);
    for (int k = t + H * NT; k < nv; k += NT) am.add(__ldg(src + k));
    const uint32_t m = block_max(am.bits(), scratch);
    const float s = row_scale<C>(m);
    if (t == 0) static_cast<float*>(p.sx)[r] = s;
    uint2* dst = reinterpret_cast<uint2*>(p.q + r * p.q_stride);
    if (scale_fast(s)) {
      const float rc = __frcp_rn(s);
#pragma unroll
      for (int i = 0; i < H; ++i)
        if (t + i * NT < nv) dst[t + i * NT] = encode8_fast<C, T>(cur[i], s, rc);
      for (int k = t + H * NT; k < nv; k += NT) dst[k] = encode8_fast<C, T>(__ldg(src + k), s, rc);
    } else {
#pragma unroll
      for (int i = 0; i < H; ++i)
        if (t + i * NT < nv) dst[t + i * NT] = encode8_any<C, T>(cur[i], s);
      for (int k = t + H * NT; k < nv; k += NT) dst[k] = encode8_any<C, T>(__ldg(src + k), s);
    }
    if constexpr (Pipe) {
#pragma unroll
      for (int i = 0; i < H; ++i) cur[i] = nxt[i];
    }
  }
}

// Exhaustive check of div_fast: s = 1.m (every m of 23 bits), x = +-1.n * 2^k
// (every n of XB bits, k in [-22, 16]: |x / s| from 2^-23 to 2^17, beyond
// e5m2's 57344). Counts results whose bits differ from x / s.
template <int XB> __global__ void div_check(unsigned long long* bad) {
  const uint64_t total = uint64_t(1) << (23 + XB);
  unsigned long long n = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t sm = uint32_t(i) & 0x7fffffu, xm = uint32_t(i >> 23);
    const float s = __uint_as_float(0x3f800000u | sm), r = __frcp_rn(s);
    for (int k = -22; k <= 16; ++k) {
      const float x = __uint_as_float((uint32_t(127 + k) << 23) | (xm << (23 - XB)));
      if (__float_as_uint(div_fast(x, s, r)) != __float_as_uint(x / s)) ++n;
      if (__float_as_uint(div_fast(-x, s, r)) != __float_as_uint(-x / s)) ++n;
    }
  }
  if (n) atomicAdd(bad, n);
}

}  // namespace v

// ------------------------------------------------------------------ inputs
__device__ __forceinline__ uint32_t hash(uint64_t i, uint32_t seed) {
  uint32_t h = uint32_t(i) * 2654435761u ^ uint32_t(i >> 32) * 40503u ^ seed;
  h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
  return h;
}

// Normal-ish values scaled by 2^(row % 41 - 20), with rows of specials:
// row % 64 == 0 all zero, 1 a NaN, 2 +inf, 3 -inf, 4 tiny (~2^-125, a scale
// outside the fast range), 5 huge (up to ~3e38), 6 multiples of 1/16 up to 448
// (the scale is 1: quotients on the e4m3 grid and its midpoints); elsewhere
// some -0, +0, subnormals and outliers.
template <class T> __global__ void fill(T* x, int64_t rows, int64_t cols, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const uint32_t h = hash(i, seed), h2 = hash(i, seed ^ 0x9e3779b9u);
    float u = (float(h & 0xffff) + float(h >> 16) + float(h2 & 0xffff) - 98302.5f) / 32768.f;  // ~N(0, 0.7)
    float v = ldexpf(u, int(r % 41) - 20);
    const int kind = int(r % 64);
    if (kind == 0) v = 0.f;
    else if (kind == 1 && c == (h2 >> 20) % cols) v = __uint_as_float(0x7fc00000u | (h2 & 0x3f0000u));
    else if (kind == 2 && c == 7) v = __int_as_float(0x7f800000);
    else if (kind == 3 && c == cols - 1) v = -__int_as_float(0x7f800000);
    else if (kind == 4) v = ldexpf(u, -125);
    else if (kind == 5) v = ldexpf(u, 126) * (c == 3 ? 1.8f : 1.f);
    else if (kind == 6) v = c == 0 ? 448.f : float(int(h2 % 7169) - 3584) / 16.f;
    else if ((h2 >> 24) == 1) v = -0.f;
    else if ((h2 >> 24) == 2) v = 0.f;
    else if ((h2 >> 24) == 3) v = __uint_as_float((h2 & 0x8000ffffu));  // f32 subnormal (bf16: its top bits)
    else if ((h2 >> 24) == 4) v *= 1000.f;
    x[i] = T(v);
  }
}

// ------------------------------------------------------------------ timing
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
  std::sort(ms.begin(), ms.end());
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  return ms[kReps / 2];
}

template <class K> int resident(K k, int threads) {
  int dev, sms, per;
  CK(cudaGetDevice(&dev)); CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, reinterpret_cast<const void*>(k), threads, 0));
  return sms * per;
}

static double g_memcpy_gbs = 0;

template <RowCode C, class T> struct Case {
  const char* name;
  int64_t rows, cols;
  T* x[kSets];
  uint8_t* q[kSets];
  float* sx[kSets];
  std::vector<uint8_t> ref_q;
  std::vector<float> ref_s;
  double bytes;

  Case(const char* n, int64_t r, int64_t c) : name(n), rows(r), cols(c) {
    for (int s = 0; s < kSets; ++s) {
      CK(cudaMalloc(&x[s], rows * cols * sizeof(T))); CK(cudaMalloc(&q[s], rows * cols)); CK(cudaMalloc(&sx[s], rows * 4));
      fill<T><<<1024, 256>>>(x[s], rows, cols, 1234u + s);
    }
    CK(cudaDeviceSynchronize());
    bytes = double(rows * cols * (sizeof(T) + 1) + rows * 4);
  }
  ~Case() {
    for (int s = 0; s < kSets; ++s) { CK(cudaFree(x[s])); CK(cudaFree(q[s])); CK(cudaFree(sx[s])); }
  }
  RowParams params(int s) const { return RowParams{x[s], cols, q[s], cols, sx[s], 1, rows, cols}; }
  void report(const char* what, float us) const {
    const double ceil_us = bytes / g_memcpy_gbs / 1e3;
    printf("%-14s %5lld x %-6lld %-34s %7.1f us %6.0f GB/s %5.1f%%", name, (long long)rows, (long long)cols, what, us,
           bytes / us / 1e3, 100.0 * ceil_us / us);
  }
  void clear() {
    CK(cudaMemset(q[0], 0xcd, rows * cols)); CK(cudaMemset(sx[0], 0xcd, rows * 4)); CK(cudaDeviceSynchronize());
  }
  void take_ref() {
    ref_q.resize(rows * cols); ref_s.resize(rows);
    CK(cudaMemcpy(ref_q.data(), q[0], rows * cols, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref_s.data(), sx[0], rows * 4, cudaMemcpyDeviceToHost));
    int fast = 0, zero = 0;
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t b; memcpy(&b, &ref_s[r], 4);
      fast += (b >> 23) - 67u < 185u; zero += b == 0;
    }
    printf("   [scales: %d fast, %d zero, %lld other]\n", fast, zero, (long long)(rows - fast - zero));
  }
  void check() const {
    std::vector<uint8_t> got(rows * cols); std::vector<float> gs(rows);
    CK(cudaMemcpy(got.data(), q[0], rows * cols, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gs.data(), sx[0], rows * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0, bads = 0, first = -1;
    for (int64_t i = 0; i < rows * cols; ++i)
      if (got[i] != ref_q[i]) { if (first < 0) first = i; ++bad; }
    for (int64_t r = 0; r < rows; ++r) bads += memcmp(&gs[r], &ref_s[r], 4) != 0;
    printf("   codes %lld differ, scales %lld differ", (long long)bad, (long long)bads);
    if (first >= 0) printf(" (first at row %lld col %lld: %02x, library %02x)", (long long)(first / cols),
                           (long long)(first % cols), got[first], ref_q[first]);
    printf("\n");
  }

  void library() {
    auto k = row_quant_kernel<C, T, true>;  // csrc/cuda/quant.cu's row_quant: vec, grid_for(rows) one wave
    const int g = int(std::min<int64_t>(rows, resident(k, kRowThreads)));
    clear();
    k<<<g, kRowThreads>>>(params(0));
    CK(cudaDeviceSynchronize());
    report("library row_quant_kernel", time_it([&](int s) { k<<<g, kRowThreads>>>(params(s)); }));
    take_ref();
  }

  // A held variant: grid = min(rows, waves * resident).
  template <int NT, int H, bool Pipe, int MinB> void held(int waves = 1) {
    auto k = v::row_held_kernel<C, T, NT, H, Pipe, MinB>;
    const int res = resident(k, NT);
    const int g = int(std::min<int64_t>(rows, int64_t(waves) * res));
    char what[64];
    snprintf(what, sizeof what, "held%s %dx%d mb%d (%d/SM%s)", Pipe ? "+pipe" : "", NT, H, MinB, res / 132 ? res / 132 : res,
             waves > 1 ? ", many" : "");
    clear();
    k<<<g, NT>>>(params(0));
    CK(cudaDeviceSynchronize());
    report(what, time_it([&](int s) { k<<<g, NT>>>(params(s)); }));
    check();
  }
};


int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  {
    unsigned long long* bad; CK(cudaMalloc(&bad, 16)); CK(cudaMemset(bad, 0, 16));
    v::div_check<7><<<prop.multiProcessorCount * 16, 256>>>(bad);
    v::div_check<10><<<prop.multiProcessorCount * 16, 256>>>(bad + 1);
    unsigned long long h[2]; CK(cudaMemcpy(h, bad, 16, cudaMemcpyDeviceToHost));
    printf("div_fast vs x / s, every s significand, x = +-1.n 2^k (k -22..16): bf16 n %llu differ, f16 n %llu differ\n", h[0], h[1]);
    CK(cudaFree(bad));
  }
  {
    const int64_t n = int64_t(96) << 20;  // the main shape's bytes
    uint8_t *s[kSets], *d[kSets];
    for (int i = 0; i < kSets; ++i) { CK(cudaMalloc(&s[i], n)); CK(cudaMalloc(&d[i], n)); }
    const float mc = time_it([&](int i) { CK(cudaMemcpyAsync(d[i], s[i], n / 2, cudaMemcpyDeviceToDevice)); });
    g_memcpy_gbs = double(n) / mc / 1e3;
    printf("cudaMemcpyAsync D2D %lld MB: %.1f us, %.0f GB/s (read + write)\n", (long long)(n >> 21), mc, g_memcpy_gbs);
    for (int i = 0; i < kSets; ++i) { CK(cudaFree(s[i])); CK(cudaFree(d[i])); }
  }
  using B = __nv_bfloat16;
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 4096, 8192);
    c.library();
    c.held<256, 4, false, 4>();
    c.held<256, 4, false, 6>();
    c.held<256, 4, false, 8>();
    c.held<128, 8, false, 4>();
    c.held<256, 4, true, 4>();
    c.held<256, 4, true, 3>();
    c.held<512, 2, true, 3>();
    c.held<512, 2, false, 4>();
    c.held<1024, 1, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 16, 8192);
    c.library();
    c.held<256, 4, false, 4>();
    c.held<256, 4, true, 4>();
    c.held<1024, 1, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 4096, 4096);
    c.library();
    c.held<256, 4, false, 4>();
    c.held<256, 4, true, 4>();
    c.held<128, 4, true, 8>();
    c.held<128, 4, false, 8>();
    c.held<256, 2, true, 6>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 4096, 14336);
    c.library();
    c.held<256, 4, false, 4>();  // 8192 held, the rest read again
    c.held<256, 4, true, 4>();
    c.held<512, 4, true, 2>();
    c.held<512, 4, false, 2>();
    c.held<1024, 2, true, 2>();
  }
  {
    Case<RowCode::int8, B> c("int8 bf16", 4096, 8192);
    c.library();
    c.held<256, 4, false, 4>();
    c.held<256, 4, true, 4>();
  }
  {
    Case<RowCode::e5m2, B> c("e5m2 bf16", 1024, 8192);
    c.library();
    c.held<256, 4, true, 4>();
  }
  {
    Case<RowCode::e4m3, __half> c("e4m3 f16", 4096, 8192);
    c.library();
    c.held<256, 4, false, 4>();
    c.held<256, 4, true, 4>();
  }
  return 0;
}
