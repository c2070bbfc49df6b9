// The Hopper flash-attention forward (shaders/cuda/attention/flash_tc90.cuh: TMA + wgmma, producer /
// consumer warpgroups), its three schedules (tc90: S, softmax, PV in turn; tc90-overlap: S of the next
// tile and PV of this one in flight together; tc90-pingpong: that, the two consumer warpgroups taking
// turns to issue their GEMMs), checked against an f32 CUDA-core reference on a subset of rows
// (one sequence: every 61st, the first and last 128; ragged batches: every row) and timed beside the
// library's mma.sync flash kernel (shaders/cuda/attention/flash.cuh). Both take the library's ragged
// AttendParams. bf16 (and f16 checks), head_dim 128, Hq 32, Hkv 8.
// A check line ends "bad N" (elements off by more than 2e-2 + 2e-2 |ref|, plus lse entries off by more
// than 1e-2 + 1e-3 |ref|); the exit code is 1 when any is bad, 2 on a CUDA error, 3 on a hang.
// A wait on an mbarrier still unfinished after 2^26 tries (~1 s or more) reports its barrier to mapped
// host memory (BRAZE_TC90_SPIN_TRIES), and the host exits on seeing it; a host watchdog also exits if a
// launch has not finished in 20 s.
//
// nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -I csrc -I shaders -I scripts \
//   scripts/cuda_attn_wgmma.cu -o /tmp/attnw
// ATTNW_ONE="8192 full" /tmp/attnw: one length (causal unless "full"), timed only, schedules 0 / 1 / 2
// (e.g. under ncu -k regex:flash_tc90 --launch-count 1).
// (cuda/tc90.h's encoder lookup needs cuda/runtime.cuh's cc_major only in a function this never calls.)
#define BRAZE_TC90_SPIN_TRIES (1u << 26)
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "cuda/attention/flash.cuh"
#include "cuda/attention/flash_tc90.cuh"
#include "cuda/tc90.h"
#include "cuda_bw.cuh"

namespace {

using namespace braze::cuda::attn;
using braze::cuda::EncodeTiled;
using braze::cuda::tensor_map_encoder;
namespace tc90 = braze::cuda::tc90;
constexpr int D = 128, HQ = 32, HKV = 8;
unsigned* g_hang = nullptr;  // mapped host memory the device's timed-out waits write to

void die(const char* what, cudaError_t e) {
  printf("%s: %s (hang flag %#x)\n", what, cudaGetErrorString(e), g_hang ? *g_hang : 0u);
  fflush(stdout);
  _exit(2);
}
// Waits for the work queued so far; exits if it fails or is still running after `seconds`.
void finish(const char* what, double seconds = 20) {
  cudaEvent_t e;
  cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  if (r == cudaSuccess) r = cudaEventRecord(e);
  if (r != cudaSuccess) die(what, r);
  const auto t0 = std::chrono::steady_clock::now();
  while ((r = cudaEventQuery(e)) == cudaErrorNotReady) {
    if (*reinterpret_cast<volatile unsigned*>(g_hang)) {
      printf("hang: %s: an mbarrier wait timed out (barrier %#x)\n", what, *g_hang & 0x7fffffffu);
      fflush(stdout);
      _exit(3);
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) {
      printf("watchdog: %s still running after %.0f s (hang flag %#x)\n", what, seconds, *g_hang);
      fflush(stdout);
      _exit(3);
    }
    usleep(100);
  }
  if (r != cudaSuccess) die(what, r);
  cudaEventDestroy(e);
}

template <class T> __device__ __forceinline__ float to_f(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else return __bfloat162float(v);
}
// ~N(0, 1) from a hash (Box-Muller), rounded to T.
template <class T> __global__ void fill_normal(T* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    auto hash = [](uint32_t x) {
      x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
      return x;
    };
    const uint32_t a = hash(uint32_t(i) * 2u ^ seed), c = hash((uint32_t(i) * 2u + 1u) ^ (seed * 0x9e3779b9u));
    const float u1 = (float(a >> 8) + 1.f) * (1.f / 16777217.f), u2 = float(c >> 8) * (1.f / 16777216.f);
    const float z = sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
    if constexpr (std::is_same_v<T, __half>) p[i] = __float2half_rn(z);
    else p[i] = __float2bfloat16_rn(z);
  }
}

// One CTA of D threads per (checked row, head): f32 scores in shared memory, two passes. Row t of
// the buffer sits at position t - starts[ri] of its sequence (lens[ri] tokens, keys from starts[ri]).
template <class T>
__global__ void attn_ref(const T* q, const T* k0, const T* v0, const int* rows, const int* starts, const int* lens,
                         float scale, int causal, float* ref, float* ref_lse) {
  extern __shared__ float sh[];  // q [D], scores [len], reduce [32]
  const int ri = blockIdx.x, h = blockIdx.y, t = rows[ri], kvh = h / (HQ / HKV), d = threadIdx.x;
  const int len = lens[ri];
  const T* k = k0 + int64_t(starts[ri]) * HKV * D;
  const T* v = v0 + int64_t(starts[ri]) * HKV * D;
  float* qs = sh;
  float* sc = sh + D;
  float* red = sc + len;
  qs[d] = to_f(q[(int64_t(t) * HQ + h) * D + d]);
  __syncthreads();
  const int nk = causal ? t - starts[ri] + 1 : len;
  for (int j = d; j < nk; j += D) {
    const T* kr = k + (int64_t(j) * HKV + kvh) * D;
    float s = 0.f;
    for (int i = 0; i < D; ++i) s = fmaf(qs[i], to_f(kr[i]), s);
    sc[j] = s * scale;
  }
  __syncthreads();
  auto block_reduce = [&](float x, bool is_max) {
    for (int o = 16; o > 0; o /= 2) {
      const float y = __shfl_xor_sync(0xffffffffu, x, o);
      x = is_max ? fmaxf(x, y) : x + y;
    }
    if (d % 32 == 0) red[d / 32] = x;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < D / 32; ++i) r = is_max ? fmaxf(r, red[i]) : r + red[i];
    __syncthreads();
    return r;
  };
  float mx = -INFINITY;
  for (int j = d; j < nk; j += D) mx = fmaxf(mx, sc[j]);
  mx = block_reduce(mx, true);
  float sum = 0.f;
  for (int j = d; j < nk; j += D) {
    sc[j] = expf(sc[j] - mx);
    sum += sc[j];
  }
  sum = block_reduce(sum, false);  // its barriers also publish sc
  float acc = 0.f;
  for (int j = 0; j < nk; ++j) acc = fmaf(sc[j], to_f(v[(int64_t(j) * HKV + kvh) * D + d]), acc);
  ref[(int64_t(ri) * HQ + h) * D + d] = acc / sum;
  if (d == 0) ref_lse[int64_t(ri) * HQ + h] = mx + logf(sum);
}

// [T, H, D] 16-bit, boxes of 128 rows (t) x 64 elements (d) of one head: 128-byte rows, swizzled
// (the library's maps, csrc/cuda/attention_tc90.cu, with contiguous strides).
CUtensorMap make_map(const void* ptr, int len, int heads, bool f16) {
  static EncodeTiled enc = tensor_map_encoder();
  if (!enc) { printf("no cuTensorMapEncodeTiled\n"); exit(1); }
  CUtensorMap m;
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(heads), cuuint64_t(len)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(heads) * D * 2};
  const cuuint32_t box[3] = {64, 1, 128}, es[3] = {1, 1, 1};
  const CUresult r = enc(&m, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
                         const_cast<void*>(ptr), dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) { printf("cuTensorMapEncodeTiled failed %d\n", int(r)); exit(1); }
  return m;
}

template <class Launch> float time_med(Launch&& launch, const char* what, int reps = 10) {
  launch();
  launch();
  finish(what);
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> us;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(a));
    launch();
    CK(cudaEventRecord(b));
    finish(what);
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); us.push_back(ms * 1000.f);
  }
  CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return us[reps / 2];
}

// Unit checks of the two GEMMs on one warpgroup (the kernel's own tc90_qk / tc90_pv), for diagnosis:
// S = Q K^T for q rows 0-63 and 64-127 (head 0) against keys 0-127, and O = P V for a given 64 x 128 P
// (packed into A fragments as the kernel packs S) and values 0-127, once with the kernel's V
// descriptor (Alt 0) and once with its two byte offsets swapped (Alt 1, expected wrong).
template <class T, int Alt>
__global__ void __launch_bounds__(128) unit_gemms(const __grid_constant__ CUtensorMap map_q,
                                                  const __grid_constant__ CUtensorMap map_k,
                                                  const __grid_constant__ CUtensorMap map_v, const T* pm, float* s_out,
                                                  float* o_out) {
#if BRAZE_TC90
  using namespace tc90;
  using In = std::conditional_t<std::is_same_v<T, __half>, F16In, Bf16In>;
  extern __shared__ uint8_t us[];
  const uint32_t base = (tc90::smem_addr(us) + 1023u) & ~1023u, sq = base, sk = base + kTc90AttnTile,
                 sv = sk + kTc90AttnTile, bar = sv + kTc90AttnTile;
  const int tid = int(threadIdx.x), w = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  if (tid == 0) {
    mbar_init(bar, 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (tid == 0) {
    mbar_expect(bar, 3 * kTc90AttnTile);
    for (int hf = 0; hf < 2; ++hf) {
      tma_load_3d(sq + hf * kTc90AttnHalf, &map_q, bar, 64 * hf, 0, 0);
      tma_load_3d(sk + hf * kTc90AttnHalf, &map_k, bar, 64 * hf, 0, 0);
      tma_load_3d(sv + hf * kTc90AttnHalf, &map_v, bar, 64 * hf, 0, 0);
    }
  }
  mbar_wait(bar, 0);
  for (int half = 0; half < 2; ++half) {
    float s[64];
    wgmma_fence();
    tc90_qk<In>(s, sq + half * 64 * 128, sk);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(s);
    for (int i = 0; i < 64; ++i) {
      const int j = i / 4, r = half * 64 + 16 * w + g + 8 * ((i / 2) % 2), c = 8 * j + 2 * tq + i % 2;
      s_out[r * 128 + c] = s[i];
    }
  }
  uint32_t pf[8][4];
  auto at = [&](int r, int c) { return to_f(pm[r * 128 + c]); };
  const int r = 16 * w + g;
  for (int k = 0; k < 8; ++k) {
    const int c = 16 * k + 2 * tq;
    pf[k][0] = tc90_pack<T>(at(r, c), at(r, c + 1));
    pf[k][1] = tc90_pack<T>(at(r + 8, c), at(r + 8, c + 1));
    pf[k][2] = tc90_pack<T>(at(r, c + 8), at(r, c + 9));
    pf[k][3] = tc90_pack<T>(at(r + 8, c + 8), at(r + 8, c + 9));
  }
  float o[64];
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  wgmma_fence();
  if (Alt) tc90_pv<In, 1024, kTc90AttnHalf>(o, pf, sv);
  else tc90_pv<In>(o, pf, sv);
  wgmma_commit();
  wgmma_wait<0>();
  reg_fence(o);
  for (int i = 0; i < 64; ++i) {
    const int j = i / 4, rr = r + 8 * ((i / 2) % 2), c = 8 * j + 2 * tq + i % 2;
    o_out[rr * 128 + c] = o[i];
  }
#endif
}

struct Buffers {
  void *q, *k, *v, *out;
  float* lse;
};

// The kernels under test on one problem; which: 0 / 1 / 2 the tc90 kernel (Sched), 3 the library's flash.
// Both take the library's AttendParams: a ragged batch of `batch` sequences (cu_seqlens cu on the
// device) over `len` tokens, lse [Hq, T].
template <class T>
void launch(int which, const Buffers& bf, int len, int batch, const int32_t* cu, bool causal, const CUtensorMap* maps) {
  const float scale = 1.f / std::sqrt(float(D));
  AttendParams p{};
  p.mode = kRagged;
  p.batch = batch; p.q_heads = HQ; p.group = HQ / HKV; p.head_chunks = 1; p.splits = 1;
  p.tokens = len; p.causal = causal;
  p.q = bf.q; p.q_st = HQ * D; p.q_sh = D;
  p.k = bf.k; p.k_st = HKV * D; p.k_sh = D;
  p.v = bf.v; p.v_st = HKV * D; p.v_sh = D;
  p.cu = cu;
  p.scale = scale;
  p.out = bf.out; p.o_st = HQ * D; p.o_sh = D;
  p.lse = bf.lse; p.l_st = 1; p.l_sh = len;
  if (which < 3) {
    auto kern = which == 0 ? flash_tc90_kernel<T, 0> : which == 1 ? flash_tc90_kernel<T, 1> : flash_tc90_kernel<T, 2>;
    static bool attr[3] = {false, false, false};
    if (!attr[which]) {
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, kTc90AttnSmem));
      attr[which] = true;
    }
    const dim3 grid(unsigned((len + kTc90AttnRows - 1) / kTc90AttnRows * HQ), 1);
    kern<<<grid, kTc90AttnThreads, kTc90AttnSmem>>>(maps[0], maps[1], maps[2], p);
  } else {
    const size_t smem = flash_smem_bytes<D>();
    static bool attr = false;
    if (!attr) {
      CK(cudaFuncSetAttribute(flash_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      attr = true;
    }
    flash_kernel<T, D><<<unsigned((len + kFlashRows - 1) / kFlashRows * HQ), kFlashThreads, smem>>>(p);
  }
  CK(cudaGetLastError());
}

const char* name(int which) {
  return which == 0 ? "tc90" : which == 1 ? "tc90-overlap" : which == 2 ? "tc90-pingpong" : "lib-mma";
}

// Runs unit_gemms on the first 128 rows of q (head 0), k and v (kv head 0) and a random P; checks on the host.
template <class T> int64_t unit(const Buffers& bf, const CUtensorMap* maps, int len) {
  const int64_t n = 128 * 128;
  T* pm; float *s, *o;
  CK(cudaMalloc(&pm, n * 2)); CK(cudaMalloc(&s, n * 4)); CK(cudaMalloc(&o, n * 4));
  fill_normal<T><<<64, 256>>>(pm, n, 4242u);
  std::vector<T> hq(128 * 128), hk(128 * 128), hv(128 * 128), hp(n);
  for (int t = 0; t < 128; ++t) {
    CK(cudaMemcpy(hq.data() + t * 128, static_cast<T*>(bf.q) + int64_t(t) * HQ * D, 256, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hk.data() + t * 128, static_cast<T*>(bf.k) + int64_t(t) * HKV * D, 256, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hv.data() + t * 128, static_cast<T*>(bf.v) + int64_t(t) * HKV * D, 256, cudaMemcpyDeviceToHost));
  }
  CK(cudaMemcpy(hp.data(), pm, n * 2, cudaMemcpyDeviceToHost));
  const int smem = 3 * kTc90AttnTile + 1024 + 8;
  int64_t bad_all = 0;
  for (int alt = 0; alt < 2; ++alt) {
    auto kern = alt ? unit_gemms<T, 1> : unit_gemms<T, 0>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaMemset(s, 0xff, n * 4)); CK(cudaMemset(o, 0xff, n * 4));
    kern<<<1, 128, smem>>>(maps[0], maps[1], maps[2], pm, s, o);
    CK(cudaGetLastError());
    finish("unit gemms");
    std::vector<float> hs(n), ho(n);
    CK(cudaMemcpy(hs.data(), s, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ho.data(), o, n * 4, cudaMemcpyDeviceToHost));
    int64_t bad_s = 0, bad_o = 0;
    double es = 0, eo = 0;
    for (int r = 0; r < 128; ++r)
      for (int c = 0; c < 128; ++c) {
        double ws = 0, wo = 0;
        for (int i = 0; i < 128; ++i) {
          ws += double(float(hq[r * 128 + i])) * double(float(hk[c * 128 + i]));
          if (r < 64) wo += double(float(hp[r * 128 + i])) * double(float(hv[i * 128 + c]));
        }
        const double e1 = std::fabs(hs[r * 128 + c] - ws);
        if (!(e1 <= 1e-2 + 1e-3 * std::fabs(ws))) ++bad_s;
        if (!(e1 <= es)) es = e1;
        if (r < 64) {
          const double e2 = std::fabs(ho[r * 128 + c] - wo);
          if (!(e2 <= 1e-2 + 1e-3 * std::fabs(wo))) ++bad_o;
          if (!(e2 <= eo)) eo = e2;
        }
      }
    if (alt == 0) {
      printf("unit qk (S = Q K^T, both halves of Q): max abs err %.3g | bad %lld\n", es, (long long)bad_s);
      printf("unit pv (O = P V, V MN-major, lbo 16 KB, sbo 1 KB): max abs err %.3g | bad %lld\n", eo, (long long)bad_o);
      bad_all += bad_s + bad_o;
    } else {
      printf("unit pv alt (lbo, sbo swapped; expected wrong): max abs err %.3g, mismatches %lld\n", eo,
             (long long)bad_o);
    }
    fflush(stdout);
  }
  CK(cudaFree(pm)); CK(cudaFree(s)); CK(cudaFree(o));
  (void)len;
  return bad_all;
}

// Fills q / k / v for a ragged batch of sequences of `seqs` tokens, runs each kernel in `which`,
// checks (check: with one sequence, the first and last 128 rows and every 61st; ragged, every row)
// and times (time) it.
template <class T>
int64_t run(std::vector<int> seqs, bool causal, bool check, bool time, std::initializer_list<int> which,
            bool units = false) {
  const bool f16 = std::is_same_v<T, __half>;
  std::vector<int32_t> hcu(1, 0);
  for (int n : seqs) hcu.push_back(hcu.back() + n);
  const int len = hcu.back(), batch = int(seqs.size()), maxlen = *std::max_element(seqs.begin(), seqs.end());
  int32_t* cu = nullptr;
  CK(cudaMalloc(&cu, hcu.size() * 4));
  CK(cudaMemcpy(cu, hcu.data(), hcu.size() * 4, cudaMemcpyHostToDevice));
  const int64_t nq = int64_t(len) * HQ * D, nkv = int64_t(len) * HKV * D;
  Buffers bf;
  CK(cudaMalloc(&bf.q, nq * 2)); CK(cudaMalloc(&bf.k, nkv * 2)); CK(cudaMalloc(&bf.v, nkv * 2));
  CK(cudaMalloc(&bf.out, nq * 2)); CK(cudaMalloc(&bf.lse, int64_t(len) * HQ * 4));
  fill_normal<T><<<1024, 256>>>(static_cast<T*>(bf.q), nq, 11u + len);
  fill_normal<T><<<1024, 256>>>(static_cast<T*>(bf.k), nkv, 22u + len);
  fill_normal<T><<<1024, 256>>>(static_cast<T*>(bf.v), nkv, 33u + len);
  const CUtensorMap maps[3] = {make_map(bf.q, len, HQ, f16), make_map(bf.k, len, HKV, f16),
                               make_map(bf.v, len, HKV, f16)};
  int64_t bad_all = units ? unit<T>(bf, maps, len) : 0;
  std::vector<int> rows, starts, lens;
  for (int b = 0; b < batch; ++b)
    for (int t = hcu[b]; t < hcu[b + 1]; ++t)
      if (batch > 1 || t < 128 || t >= len - 128 || t % 61 == 0) {
        rows.push_back(t);
        starts.push_back(hcu[b]);
        lens.push_back(seqs[b]);
      }
  const int nr = int(rows.size());
  int *drows = nullptr, *dstarts = nullptr, *dlens = nullptr;
  float *ref = nullptr, *ref_lse = nullptr;
  std::vector<float> hr, hl;
  if (check) {
    CK(cudaMalloc(&drows, nr * 4)); CK(cudaMalloc(&ref, int64_t(nr) * HQ * D * 4));
    CK(cudaMalloc(&ref_lse, nr * HQ * 4));
    CK(cudaMemcpy(drows, rows.data(), nr * 4, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&dstarts, nr * 4)); CK(cudaMalloc(&dlens, nr * 4));
    CK(cudaMemcpy(dstarts, starts.data(), nr * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dlens, lens.data(), nr * 4, cudaMemcpyHostToDevice));
    const size_t sm = (D + maxlen + 32) * 4;
    if (sm > 48 * 1024) CK(cudaFuncSetAttribute(attn_ref<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(sm)));
    attn_ref<T><<<dim3(nr, HQ), D, sm>>>(static_cast<T*>(bf.q), static_cast<T*>(bf.k), static_cast<T*>(bf.v), drows,
                                         dstarts, dlens, 1.f / std::sqrt(float(D)), causal, ref, ref_lse);
    CK(cudaGetLastError());
    finish("reference", 60);
    hr.resize(int64_t(nr) * HQ * D); hl.resize(int64_t(nr) * HQ);
    CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl.data(), ref_lse, hl.size() * 4, cudaMemcpyDeviceToHost));
  }
  double flops = 0;
  for (int n : seqs) flops += 4.0 * HQ * double(n) * n * D * (causal ? 0.5 : 1.0);
  for (int wk : which) {
    char what[96];
    snprintf(what, sizeof(what), "%s %s T %d%s %s", name(wk), f16 ? "f16" : "bf16", len, batch > 1 ? " ragged" : "",
             causal ? "causal" : "full");
    if (check) {
      CK(cudaMemset(bf.out, 0xff, nq * 2));  // NaN pattern: rows never written fail the check
      CK(cudaMemset(bf.lse, 0xff, int64_t(len) * HQ * 4));
      launch<T>(wk, bf, len, batch, cu, causal, maps);
      finish(what);
      std::vector<T> ho(nq);
      std::vector<float> hlse(int64_t(len) * HQ);
      CK(cudaMemcpy(ho.data(), bf.out, nq * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hlse.data(), bf.lse, hlse.size() * 4, cudaMemcpyDeviceToHost));
      int64_t bad = 0, bad_lse = 0;
      double maxerr = 0, maxerr_lse = 0;
      for (int ri = 0; ri < nr; ++ri)
        for (int h = 0; h < HQ; ++h) {
          for (int d = 0; d < D; ++d) {
            const double want = hr[(int64_t(ri) * HQ + h) * D + d];
            const double got = float(ho[(int64_t(rows[ri]) * HQ + h) * D + d]);
            const double e = std::fabs(got - want);
            if (!(e <= 2e-2 + 2e-2 * std::fabs(want))) ++bad;
            if (!(e <= maxerr)) maxerr = e;  // NaN sticks
          }
          const double want = hl[int64_t(ri) * HQ + h], got = hlse[int64_t(h) * len + rows[ri]];
          const double e = std::fabs(got - want);
          if (!(e <= 1e-2 + 1e-3 * std::fabs(want))) ++bad_lse;
          if (!(e <= maxerr_lse)) maxerr_lse = e;
        }
      printf("check %s (%d rows): max abs err %.3g, lse %.3g | bad %lld\n", what, nr, maxerr, maxerr_lse,
             (long long)(bad + bad_lse));
      fflush(stdout);
      bad_all += bad + bad_lse;
    }
    if (time) {
      const float us = time_med([&] { launch<T>(wk, bf, len, batch, cu, causal, maps); }, what, len >= 8192 ? 6 : 10);
      printf("time %s: %.1f us %.0f TFLOP/s\n", what, us, flops / us * 1e-6);
      fflush(stdout);
    }
  }
  CK(cudaFree(bf.q)); CK(cudaFree(bf.k)); CK(cudaFree(bf.v)); CK(cudaFree(bf.out)); CK(cudaFree(bf.lse));
  if (check) {
    CK(cudaFree(drows)); CK(cudaFree(dstarts)); CK(cudaFree(dlens)); CK(cudaFree(ref)); CK(cudaFree(ref_lse));
  }
  CK(cudaFree(cu));
  return bad_all;
}

}  // namespace

int main() {
  cudaDeviceProp pr;
  CK(cudaGetDeviceProperties(&pr, 0));
  printf("%s, %d SMs, smem optin %zu\n", pr.name, pr.multiProcessorCount, pr.sharedMemPerBlockOptin);
  if (pr.major != 9) { printf("needs sm_90\n"); return 1; }
  CK(cudaHostAlloc(&g_hang, sizeof(unsigned), cudaHostAllocMapped));
  *g_hang = 0;
  unsigned* dhang = nullptr;
  CK(cudaHostGetDevicePointer(&dhang, g_hang, 0));
  CK(cudaMemcpyToSymbol(tc90::tc90_hang, &dhang, sizeof(dhang)));
  using bf16 = __nv_bfloat16;
  if (const char* one = getenv("ATTNW_ONE")) {  // "T" or "T full": that length alone, timed, every schedule (for ncu)
    const bool full = strstr(one, "full") != nullptr;
    return run<bf16>({atoi(one)}, !full, false, true, {0, 1, 2}) ? 1 : 0;
  }
  int64_t bad = 0;
  // T 1024 (with the GEMM unit checks first), T 1000 (a tile past T), f16; then T 4096 checked and timed,
  // then the other lengths timed
  bad += run<bf16>({1024}, true, true, true, {3, 0, 1, 2}, true);
  bad += run<bf16>({1000}, true, true, false, {0, 1, 2});
  bad += run<bf16>({1000}, false, true, false, {0, 1, 2});
  bad += run<__half>({1024}, true, true, false, {0, 1, 2});
  // ragged: sequences crossing 128-row windows, empty and one-token ones (every row checked)
  for (bool causal : {true, false}) {
    bad += run<bf16>({300, 0, 1, 127, 129, 256, 5, 383}, causal, true, false, {3, 0, 1, 2});
    bad += run<__half>({1, 130, 0, 64}, causal, true, false, {3, 0, 1, 2});
  }
  bad += run<bf16>({4096}, true, true, true, {3, 0, 1, 2});
  bad += run<bf16>({4096}, false, true, true, {3, 0, 1, 2});
  for (int len : {2048, 8192, 16384}) bad += run<bf16>({len}, true, false, true, {3, 0, 1, 2});
  // ragged timing: 8 prompts of 1000-3000 tokens (16000 in all)
  bad += run<bf16>({1000, 3000, 2000, 1500, 2500, 1200, 2800, 2000}, true, false, true, {3, 0});
  printf("total bad %lld\n", (long long)bad);
  return bad ? 1 : 0;
}
