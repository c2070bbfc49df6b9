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

#include "cuda_bw.cuh"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/quant/act.cuh"


using namespace braze::cuda::quant;



// ------------------------------------------------------------------ variants
namespace v {

// The variants are the library's row_held_kernel (act.cuh) at other shapes of
// CTA; div_fast, scale_fast and the kernel live there.
using braze::cuda::quant::div_fast;
using braze::cuda::quant::row_held_kernel;

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
// some -0, +0, subnormals and outliers. !specials: the normal-ish values alone.
template <class T> __global__ void fill(T* x, int64_t rows, int64_t cols, uint32_t seed, bool specials) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const uint32_t h = hash(i, seed), h2 = hash(i, seed ^ 0x9e3779b9u);
    float u = (float(h & 0xffff) + float(h >> 16) + float(h2 & 0xffff) - 98302.5f) / 32768.f;  // ~N(0, 0.7)
    float v = ldexpf(u, int(r % 41) - 20);
    const int kind = specials ? int(r % 64) : 64;
    if (!specials) {
    } else if (kind == 0) v = 0.f;
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

  Case(const char* n, int64_t r, int64_t c, bool specials = true) : name(n), rows(r), cols(c) {
    for (int s = 0; s < kSets; ++s) {
      CK(cudaMalloc(&x[s], rows * cols * sizeof(T))); CK(cudaMalloc(&q[s], rows * cols)); CK(cudaMalloc(&sx[s], rows * 4));
      fill<T><<<1024, 256>>>(x[s], rows, cols, 1234u + s, specials);
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

  // What csrc/cuda/quant.cu's row_quant launches for these rows (bf16 / f16, aligned, cols % 8 == 0).
  template <int NT, int H, int MinB> void shipped_as() {
    auto k = row_held_kernel<C, T, NT, H, true, MinB>;
    const int g = int(std::min<int64_t>(rows, resident(k, NT)));
    char what[64];
    snprintf(what, sizeof what, "library row_held %dx%d (%d/SM)", NT, H, resident(k, NT) / 132);
    clear();
    k<<<g, NT>>>(params(0));
    CK(cudaDeviceSynchronize());
    report(what, time_it([&](int s) { k<<<g, NT>>>(params(s)); }));
    check();
  }
  void shipped() {
    if (cols <= 4096) shipped_as<256, 2, 6>();
    else if (cols <= 8192) shipped_as<512, 2, 3>();
    else shipped_as<512, 4, 2>();
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
    c.shipped();
    c.held<256, 4, false, 6>();
    c.held<256, 4, true, 4>();
    c.held<512, 2, true, 4>();
    c.held<512, 2, false, 4>();
    c.held<1024, 1, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16 clean", 4096, 8192, false);
    c.library();
    c.shipped();
    c.held<1024, 1, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 16, 8192);
    c.library();
    c.shipped();
    c.held<1024, 1, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 4096, 4096);
    c.library();
    c.shipped();
    c.held<128, 4, false, 8>();
    c.held<512, 1, true, 4>();
    c.held<512, 1, true, 3>();
    c.held<256, 2, true, 4>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 4096, 14336);
    c.library();
    c.shipped();
    c.held<512, 4, false, 2>();
    c.held<1024, 2, true, 2>();
  }
  {
    Case<RowCode::e4m3, B> c("e4m3 bf16", 1024, 28672);
    c.library();
    c.shipped();
  }
  {
    Case<RowCode::int8, B> c("int8 bf16", 4096, 8192);
    c.library();
    c.shipped();
  }
  {
    Case<RowCode::e5m2, B> c("e5m2 bf16", 1024, 8192);
    c.library();
    c.shipped();
  }
  {
    Case<RowCode::e4m3, __half> c("e4m3 f16", 4096, 8192);
    c.library();
    c.shipped();
  }
  {
    Case<RowCode::int8, __half> c("int8 f16", 1024, 4096);
    c.library();
    c.shipped();
  }
  return 0;
}
