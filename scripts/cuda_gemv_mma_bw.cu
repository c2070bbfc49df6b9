// The tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh) beside the SIMT GEMV
// (gemv.cuh) for q4_0 / q4_K weights and 1..16 rows of 16-bit x, in one process,
// against cudaMemcpy of the weight's bytes (no braze build needed):
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders \
//     scripts/cuda_gemv_mma_bw.cu -o /tmp/gemvmma && /tmp/gemvmma
// Each time: cuda_bw.cuh's median over 3 weight sets larger than the L2; bytes =
// the packed weight read once; % against the bytes a cudaMemcpyAsync moves
// (read + written, braze bench's ceiling). "mma R16" is the first form (R = 16 rows of W
// a CTA, 4 stages of 512 elements: the launcher's where shared memory is short), timed
// beside stages of 1024 and 2048 elements (2-4 of them); "KS2048 S2" is the launcher's
// form on sm_90 (2026-12-07: docs/bench/h100-0408-gemvmma-ks.txt), from 2 rows for q4_0
// and 3 for q4_K (quant_gemv_mma.cu; 6 / 8 stages and a 32-row tile were timed before,
// 2026-12-06; the 1-row mma figures are for comparison); each mma
// output is checked against the SIMT GEMV's: both sum exact code x products
// in f32 (different orders), so they may differ by one unit in the last place
// of the output plus f32 noise.
#include <cuda_runtime.h>

#include "cuda_bw.cuh"

#include <cmath>
#include <cstdio>
#include <vector>

#include "cuda/quant/gemv.cuh"
#include "cuda/quant/gemv_mma.cuh"

using namespace braze::cuda::quant;
using braze::quant::QFormat;

static double g_copy_gbs = 0;
static int g_sms = 0;

template <class T> static float host_f32(uint16_t h) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  } else {
    const uint32_t s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? std::ldexp(float(m), -24) : std::ldexp(float(m | 1024), int(e) - 25);
    return s ? -v : v;
  }
}

template <class K> static void allow(K k, int bytes) {
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

template <QFormat F, class T, int MT> static float simt(MmParams p, uint8_t* const* w, int64_t n) {
  auto k = gemv_kernel<Quant<F>, T, MT>;
  constexpr int bytes = gemv_smem_bytes<Quant<F>, T, MT>();
  allow(k, bytes);
  return time_it([&](int i) {
    p.w.data = w[i];
    k<<<unsigned((n + kGemvRows - 1) / kGemvRows), kGemvThreads, bytes>>>(p);
  });
}

// NAN where the stages do not fit a CTA's shared memory
template <QFormat F, class T, int R, int NT, int S = kGemvMmaStages, int KS = kGemvMmaSlab>
static float mma(MmParams p, uint8_t* const* w, int64_t n) {
  auto k = gemv_mma_kernel<F, T, R, NT, S, KS>;
  constexpr int bytes = gemv_mma_smem_bytes<F, R, NT, S, KS>();
  int optin;
  CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  if (bytes > optin) return NAN;
  allow(k, bytes);
  return time_it([&](int i) {
    p.w.data = w[i];
    k<<<unsigned((n + R - 1) / R), kGemvMmaThreads, bytes>>>(p);
  });
}

// max |a - b| / (ulp(|b|) + 1e-4 max |b|) over the m x n outputs (<= 1: within tolerance; two f32
// sums a hair apart may round to neighbouring outputs)
template <class T> static double compare(const void* a, const void* b, int m, int64_t n) {
  std::vector<uint16_t> ha(size_t(m * n)), hb(size_t(m * n));
  CK(cudaMemcpy(ha.data(), a, ha.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, hb.size() * 2, cudaMemcpyDeviceToHost));
  const double u = std::is_same_v<T, __nv_bfloat16> ? std::ldexp(1.0, -7) : std::ldexp(1.0, -10);
  double big = 0, worst = 0;
  for (size_t i = 0; i < hb.size(); ++i) big = std::max(big, double(std::fabs(host_f32<T>(hb[i]))));
  for (size_t i = 0; i < hb.size(); ++i) {
    const double x = host_f32<T>(ha[i]), y = host_f32<T>(hb[i]);
    const double r = std::isfinite(x) ? std::fabs(x - y) / (u * std::fabs(y) + 1e-4 * big + 1e-30) : 1e30;
    worst = std::max(worst, r);
  }
  return worst;
}

template <QFormat F, class T, int MT, int NT>
static void row(const char* name, const char* dt, int m, MmParams p, uint8_t* const* w, int64_t n, int64_t k,
                double bytes, void* out_simt, void* out_mma) {
  p.m = m;
  p.out = out_simt;
  const float ts = simt<F, T, MT>(p, w, n);
  const double gs = bytes / ts / 1e3;
  printf("%-5s %s N %6lld K %6lld m %2d: simt %7.1f us %5.1f%%", name, dt, (long long)n, (long long)k, m, ts,
         100 * gs / g_copy_gbs);
  {  // m = 1 too, for comparison (the library keeps one row on the SIMT GEMV)
    p.out = out_mma;
    const float t16 = mma<F, T, 16, NT>(p, w, n);
    double worst = compare<T>(out_mma, out_simt, m, n);
    float tv[4];
    auto check = [&](float t) {
      if (!std::isnan(t)) worst = std::max(worst, compare<T>(out_mma, out_simt, m, n));
      return t;
    };
    tv[0] = check(mma<F, T, 16, NT, 4, 1024>(p, w, n));
    tv[1] = check(mma<F, T, 16, NT, 3, 1024>(p, w, n));
    tv[2] = check(mma<F, T, 16, NT, 2, 2048>(p, w, n));
    tv[3] = check(mma<F, T, 16, NT, 3, 2048>(p, w, n));
    auto pct = [&](float t) { return 100 * bytes / t / 1e3 / g_copy_gbs; };
    printf(" | mma R16 %6.1f us %5.1f%%", t16, pct(t16));
    const char* names[4] = {"KS1024 S4", "KS1024 S3", "KS2048 S2", "KS2048 S3"};
    for (int i = 0; i < 4; ++i) printf(" | %s %6.1f", names[i], tv[i]);
    printf(" | err/tol %.2f %s", worst, worst <= 1 ? "ok" : "MISMATCH");
  }
  printf("\n");
}

template <QFormat F, class T> static void run(const char* name, const char* dt, int64_t n, int64_t k) {
  constexpr int B = info(F).blocks.block, BB = info(F).blocks.block_bytes;
  const int64_t stride = k / B * BB, wbytes = n * stride;
  uint8_t* w[kSets];
  for (int i = 0; i < kSets; ++i) {
    CK(cudaMalloc(&w[i], size_t(wbytes)));
    fill_bytes<<<1024, 256>>>(w[i], wbytes, 17u + i, 0x3c);
  }
  void *x, *o1, *o2;
  CK(cudaMalloc(&x, size_t(16 * k * 2)));
  fill_bytes<<<256, 256>>>(static_cast<uint8_t*>(x), 16 * k * 2, 5u, 0x3c);
  CK(cudaMalloc(&o1, size_t(16 * n * 2)));
  CK(cudaMalloc(&o2, size_t(16 * n * 2)));
  MmParams p{};
  p.w = DeqParams{w[0], stride, nullptr, 0, braze::DType::f16, nullptr, 0, nullptr, 0, nullptr, 0, n, k, 0, false};
  p.x = x;
  p.x_stride = k;
  p.out_stride = n;
  p.vec_x = true;
  const double bytes = double(wbytes);
  row<F, T, 1, 1>(name, dt, 1, p, w, n, k, bytes, o1, o2);
  row<F, T, 2, 1>(name, dt, 2, p, w, n, k, bytes, o1, o2);
  row<F, T, 4, 1>(name, dt, 3, p, w, n, k, bytes, o1, o2);
  row<F, T, 4, 1>(name, dt, 4, p, w, n, k, bytes, o1, o2);
  row<F, T, 8, 1>(name, dt, 8, p, w, n, k, bytes, o1, o2);
  row<F, T, 16, 2>(name, dt, 16, p, w, n, k, bytes, o1, o2);
  for (int i = 0; i < kSets; ++i) CK(cudaFree(w[i]));
  CK(cudaFree(x));
  CK(cudaFree(o1));
  CK(cudaFree(o2));
}

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  printf("%s, %d SMs\n", prop.name, g_sms);
  g_copy_gbs = memcpy_gbs(int64_t(1) << 27);
  run<QFormat::q4_0, __nv_bfloat16>("q4_0", "bf16", 4096, 14336);
  run<QFormat::q4_0, __nv_bfloat16>("q4_0", "bf16", 14336, 4096);
  run<QFormat::q4_K, __nv_bfloat16>("q4_K", "bf16", 4096, 14336);
  run<QFormat::q4_K, __nv_bfloat16>("q4_K", "bf16", 14336, 4096);
  run<QFormat::q4_0, __half>("q4_0", "f16 ", 4096, 14336);
  run<QFormat::q4_K, __half>("q4_K", "f16 ", 4096, 14336);
  return 0;
}
