// A lean tensor-core GEMV for q4_0 weights and 1..8 rows of 16-bit x, written
// to cut the instructions an element (the one-row GEMV is issue-bound: SASS of
// the library's SIMT kernel issues ~0.116 warp instructions a weight, its
// tensor-core kernel ~0.2), timed beside the library's kernels in one process:
//   nvcc -O3 -std=c++17 -arch=sm_90 --expt-relaxed-constexpr -I csrc -I shaders -I scripts \
//     scripts/cuda_gemv_tc_bw.cu -o /tmp/gemvtc && /tmp/gemvtc
//   /tmp/gemvtc --host   (no GPU: checks the fragment mapping against a plain dot, one warp emulated)
// Design (counted, not yet measured): W is the mma's M side (16 rows a CTA, a
// warp's rows g and g + 8 of each fragment), x rows the N side (8 columns: 1..8
// rows cost the same instructions). Each of a CTA's 8 warps owns a contiguous
// range of K (groups of 8 blocks) and streams its 16 rows of that range and
// the x rows through its own cp.async ring: no CTA barrier until the final sum
// of the 8 warps' partial outputs. A lane's share of a pair of blocks (36
// bytes, 4-byte aligned) is three aligned words a row: one PRMT realigns and
// orders the first block's nibbles, one orders the second's; each 8 nibbles
// become four bf16 / f16 pairs by 3 shifts, 4 LOP3 (mask | magic exponent) and
// 4 HSUB2 (minus 8 + the magic, exact), and two m16n8k16 mmas sum a block's
// code x x products into a fresh f32 fragment that one FMA a column scales.
#include <cuda_runtime.h>

#include "cuda_bw.cuh"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/attention/mma.cuh"
#include "cuda/quant/gemv.cuh"
#include "cuda/quant/gemv_mma.cuh"
#include "cuda/quant/gemv_tc.cuh"

using namespace braze::cuda::quant;
using braze::quant::QFormat;


// --host: one warp emulated on the host for one stage (16 rows x 256 elements of W)
// and 8 x rows: each lane's A pairs, B words and scale coefficients from the
// kernel's own functions, the mma as a plain product of the matrices the PTX
// fragment layout gathers from the lanes, each lane's sums as the kernel forms
// them; against sum_e w_e x_e over the raw bytes decoded as the CPU codec does.
template <class T> static uint16_t to16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return uint16_t(u >> 16);  // exact for the values used
  else return braze::f32_to_f16(f);
}
template <class T> static float from16(uint16_t h) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  } else {
    return braze::f16_to_f32(h);
  }
}
static float host_f16(const uint8_t* p) { return braze::f16_to_f32(uint16_t(p[0] | (p[1] << 8))); }
// element e (0..255) of a stage row, decoded as the CPU codecs do
template <QFormat F> static double host_w(const uint8_t* row, int e) {
  if constexpr (F == QFormat::q4_0) {
    const uint8_t* b = row + 18 * (e / 32);
    const int k = e % 32, q = k < 16 ? (b[2 + k] & 15) : (b[2 + k - 16] >> 4);
    return double(host_f16(b)) * (q - 8);
  } else {
    const int s = e / 32, k = e % 32;
    int sc, mn;
    braze::quant::kq_detail::scale_min_k4(row + 4, s, sc, mn);
    const float d = host_f16(row) * float(sc), m = host_f16(row + 2) * float(mn);
    const uint8_t byte = row[16 + 32 * (s / 2) + k];
    const int q = s % 2 ? byte >> 4 : byte & 15;
    return double(d) * q - double(m);
  }
}
template <QFormat F, class T, bool Biased> static int host_check() {
  constexpr int kM = 8;
  std::mt19937 rng(7);
  std::vector<uint8_t> w(tc::kRows * tc::kWP);
  for (auto& v : w) v = uint8_t(rng());
  auto put16 = [&](uint8_t* p, float f) { const uint16_t h = braze::f32_to_f16(f); memcpy(p, &h, 2); };
  for (int r = 0; r < tc::kRows; ++r) {  // scales: f16 of moderate size
    uint8_t* row = &w[r * tc::kWP];
    if constexpr (F == QFormat::q4_0)
      for (int b = 0; b < 8; ++b) put16(row + 18 * b, std::ldexp(1.f + float(rng() % 1000) / 1000.f, -8 + int(rng() % 4)));
    else {
      put16(row, std::ldexp(1.f + float(rng() % 1000) / 1000.f, -10));
      put16(row + 2, std::ldexp(1.f + float(rng() % 1000) / 1000.f, -9));
    }
  }
  std::vector<uint16_t> x(kM * 256);
  for (auto& v : x) v = to16<T>(float(int(rng() % 255) - 127) / 64.f);
  double want[16][kM] = {}, mag[16][kM] = {}, got[16][kM] = {};
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < kM; ++n)
      for (int e = 0; e < 256; ++e) {
        const double v = host_w<F>(&w[r * tc::kWP], e) * from16<T>(x[n * 256 + e]);
        want[r][n] += v;
        mag[r][n] += std::fabs(v);
      }
  constexpr bool kSums = Biased || F == QFormat::q4_K;
  for (int c = 0; c < 4; ++c)
    for (int e = 0; e < 2; ++e) {
      const int u = 2 * c + e;
      double D[16][8] = {}, SX[16][8] = {};  // the mmas of the codes and of ones (rows x columns)
      float mul[32][2], sub[32][2];
      for (int st = 0; st < 2; ++st) {
        float A[16][16], B[16][8];
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane >> 2, t = lane & 3;
          const uint8_t* rg = &w[g * tc::kWP];
          const uint8_t* rh = rg + 8 * tc::kWP;
          tc::Q4Pair wg, wh;
          if constexpr (F == QFormat::q4_0) {
            tc::load_q4_0<T, Biased>(rg + 36 * c, t, wg);
            tc::load_q4_0<T, Biased>(rh + 36 * c, t, wh);
            mul[lane][0] = wg.d[e];
            mul[lane][1] = wh.d[e];
          } else {
            tc::load_q4_K<T, Biased>(rg, c, t, wg);
            tc::load_q4_K<T, Biased>(rh, c, t, wh);
            tc::KScales kg, kh;
            tc::k_scales(rg, kg);
            tc::k_scales(rh, kh);
            tc::k_coef<Biased>(kg, u, mul[lane][0], sub[lane][0]);
            tc::k_coef<Biased>(kh, u, mul[lane][1], sub[lane][1]);
          }
          uint32_t a[4];
          tc::frags(wg, wh, e, st, a);
          const uint16_t* xr = &x[g * 256 + 32 * u + tc::x_first<F>(st, t)];  // the lane's x row: column g
          const uint32_t b0 = xr[0] | (uint32_t(xr[1]) << 16), b1 = xr[2] | (uint32_t(xr[3]) << 16);
          for (int q = 0; q < 2; ++q) {  // slots 2t, 2t + 1 (a0 / a1, b0), 2t + 8, 2t + 9 (a2 / a3, b1)
            A[g][2 * t + q] = from16<T>(uint16_t(a[0] >> (16 * q)));
            A[g + 8][2 * t + q] = from16<T>(uint16_t(a[1] >> (16 * q)));
            A[g][2 * t + 8 + q] = from16<T>(uint16_t(a[2] >> (16 * q)));
            A[g + 8][2 * t + 8 + q] = from16<T>(uint16_t(a[3] >> (16 * q)));
            B[2 * t + q][g] = from16<T>(uint16_t(b0 >> (16 * q)));
            B[2 * t + 8 + q][g] = from16<T>(uint16_t(b1 >> (16 * q)));
          }
        }
        for (int r = 0; r < 16; ++r)
          for (int n = 0; n < 8; ++n)
            for (int k = 0; k < 16; ++k) {
              D[r][n] += double(A[r][k]) * B[k][n];
              SX[r][n] += kSums ? double(B[k][n]) : 0.0;
            }
      }
      for (int lane = 0; lane < 32; ++lane) {  // c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8
        const int g = lane >> 2, t = lane & 3;
        for (int cc = 0; cc < 4; ++cc) {
          const int r = g + 8 * (cc >> 1), n = 2 * t + (cc & 1), h = cc >> 1;
          if constexpr (F == QFormat::q4_0) got[r][n] += mul[lane][h] * (D[r][n] - (Biased ? 136.0 * SX[r][n] : 0.0));
          else got[r][n] += mul[lane][h] * D[r][n] - sub[lane][h] * SX[r][n];
        }
      }
    }
  double worst = 0;
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < kM; ++n) worst = std::max(worst, std::fabs(got[r][n] - want[r][n]) / (mag[r][n] + 1e-30));
  const bool ok = worst < 1e-6;
  printf("host check %s %s%s: largest |emulated warp - plain dot| / sum |terms| %.3g %s\n",
         F == QFormat::q4_0 ? "q4_0" : "q4_K", std::is_same_v<T, __half> ? "f16" : "bf16", Biased ? " biased" : "",
         worst, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}

static double g_copy_gbs = 0;

template <class T> struct Bench {
  const char* name;
  int64_t n, k, m, stride, w_bytes;
  uint8_t* w[kSets];
  T *x, *out;
  std::vector<uint16_t> ref;
  MmParams params(int s) const {
    MmParams p{};
    p.w = DeqParams{w[s], stride, nullptr, 0, braze::DType::f32, nullptr, 0, nullptr, 0, nullptr, 0, n, k, 0, false};
    p.x = x; p.x_stride = k; p.bias = nullptr; p.out = out; p.out_stride = n; p.m = m; p.vec_x = true;
    return p;
  }
  void report(const char* what, float us) const {
    printf("%s %s %lldx%lld m=%lld %-40s %7.1f us %5.1f%%\n", name, std::is_same_v<T, __half> ? "f16" : "bf16",
           (long long)n, (long long)k, (long long)m, what, us, 100.0 * (w_bytes / g_copy_gbs / 1e3) / us);
  }
  std::vector<uint16_t> fetch() const {
    std::vector<uint16_t> o(m * n);
    CK(cudaMemcpy(o.data(), out, 2 * m * n, cudaMemcpyDeviceToHost));
    return o;
  }
  void near(const char* what) const {  // against the SIMT kernel's output: both exact products, f32 sums
    const auto got = fetch();
    double dmax = 0, rmax = 0;
    for (int64_t i = 0; i < m * n; ++i) {
      dmax = std::max(dmax, double(std::fabs(from16<T>(got[i]) - from16<T>(ref[i]))));
      rmax = std::max(rmax, double(std::fabs(from16<T>(ref[i]))));
    }
    printf("  %s: max |diff| %.3g of max |out| %.3g (%.2g)%s\n", what, dmax, rmax, dmax / rmax,
           dmax / rmax < 0.02 ? "" : "  MISMATCH");
  }
};

template <class K> static void allow(K k, int bytes) {
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

template <QFormat F, class T, int MT> static void run(int64_t n, int64_t k) {
  Bench<T> b{};
  b.name = F == QFormat::q4_0 ? "q4_0" : "q4_K";
  b.n = n; b.k = k; b.m = MT; b.stride = F == QFormat::q4_0 ? k / 32 * 18 : k / 256 * 144; b.w_bytes = n * b.stride;
  for (int s = 0; s < kSets; ++s) {
    CK(cudaMalloc(&b.w[s], b.w_bytes));
    fill_bytes<<<1024, 256>>>(b.w[s], b.w_bytes, 17u + s, 0x3cu);  // every f16 scale finite
  }
  CK(cudaMalloc(&b.x, 2 * MT * k)); CK(cudaMalloc(&b.out, 2 * MT * n));
  {
    std::vector<uint16_t> hx(MT * k);
    for (int64_t i = 0; i < MT * k; ++i) hx[i] = to16<T>(float(int((i * 7919) % 2001) - 1000) / 1000.f);
    CK(cudaMemcpy(b.x, hx.data(), 2 * MT * k, cudaMemcpyHostToDevice));
  }
  {  // the library's SIMT kernel: the reference
    auto kern = gemv_kernel<Quant<F>, T, MT>;
    constexpr int bytes = gemv_smem_bytes<Quant<F>, T, MT>();
    allow(kern, bytes);
    const unsigned grid = unsigned((n + kGemvRows - 1) / kGemvRows);
    b.report("library SIMT", time_it([&](int s) { kern<<<grid, kGemvThreads, bytes>>>(b.params(s)); }));
    b.ref = b.fetch();
  }
  if constexpr (MT >= 2) {  // the library's tensor-core kernel (R 16, one n-tile)
    auto kern = gemv_mma_kernel<F, T, 16, 1>;
    constexpr int bytes = gemv_mma_smem_bytes<F, 16, 1>();
    allow(kern, bytes);
    const unsigned grid = unsigned((n + 15) / 16);
    b.report("library mma", time_it([&](int s) { kern<<<grid, kGemvMmaThreads, bytes>>>(b.params(s)); }));
    b.near("library mma");
  }
  auto lean = [&](auto kern, int bytes, const char* what) {
    allow(kern, bytes);
    const unsigned grid = unsigned((n + tc::kRows - 1) / tc::kRows);
    char w[96];
    int per = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, reinterpret_cast<const void*>(kern), tc::kThreads, bytes));
    snprintf(w, sizeof w, "%s (%dKB, %d/SM)", what, bytes / 1024, per);
    CK(cudaMemset(b.out, 0, 2 * MT * n));
    b.report(w, time_it([&](int s) { kern<<<grid, tc::kThreads, bytes>>>(b.params(s)); }));
    b.near(w);
  };
  lean(tc::gemv_tc<F, T, MT, 3, false>, tc::smem_bytes<MT, 3>(), "lean tc S3");
  lean(tc::gemv_tc<F, T, MT, 4, false>, tc::smem_bytes<MT, 4>(), "lean tc S4");
  if constexpr (MT <= 2) lean(tc::gemv_tc<F, T, MT, 6, false>, tc::smem_bytes<MT, 6>(), "lean tc S6");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    lean(tc::gemv_tc<F, T, MT, 4, true>, tc::smem_bytes<MT, 4>(), "lean tc S4 biased");
    if constexpr (MT <= 2) lean(tc::gemv_tc<F, T, MT, 6, true>, tc::smem_bytes<MT, 6>(), "lean tc S6 biased");
  }
  for (int s = 0; s < kSets; ++s) CK(cudaFree(b.w[s]));
  CK(cudaFree(b.x)); CK(cudaFree(b.out));
}

int main(int argc, char** argv) {
  const int bad = host_check<QFormat::q4_0, __nv_bfloat16, false>() | host_check<QFormat::q4_0, __nv_bfloat16, true>() |
                  host_check<QFormat::q4_0, __half, false>() | host_check<QFormat::q4_K, __nv_bfloat16, false>() |
                  host_check<QFormat::q4_K, __nv_bfloat16, true>() | host_check<QFormat::q4_K, __half, false>();
  if (bad || (argc > 1 && !strcmp(argv[1], "--host"))) return bad;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  g_copy_gbs = memcpy_gbs(int64_t(1) << 27);
  using bf = __nv_bfloat16;
  run<QFormat::q4_0, bf, 1>(4096, 14336);
  run<QFormat::q4_K, bf, 1>(4096, 14336);
  run<QFormat::q4_0, bf, 2>(4096, 14336);
  run<QFormat::q4_0, bf, 8>(4096, 14336);
  run<QFormat::q4_K, bf, 8>(4096, 14336);
  run<QFormat::q4_0, __half, 1>(4096, 14336);
  run<QFormat::q4_K, __half, 1>(4096, 14336);
  run<QFormat::q4_0, bf, 4>(4096, 14336);
  run<QFormat::q4_0, bf, 1>(14336, 4096);
  run<QFormat::q4_0, bf, 8>(14336, 4096);
  return 0;
}
