// Launcher of the Hopper flash-attention forward (flash_tc90.cuh): 3-D tensor maps
// over q [tokens, Hq, 128] and k / v [tokens, Hkv, 128] with the caller's
// strides, the kernel's shared memory, a grid of (128-row window, head). The
// schedule: the two consumer warpgroups taking turns (Sched 2) up to
// kTc90PingPongTokens tokens, S / softmax / PV in turn (Sched 0) beyond, the
// faster of the two on an H100 at each length (docs/performance.md, 2026-12-07:
// Sched 2 4-7% faster at T 1024-8192; at T 16384 Sched 0 2.5-6% faster in one run,
// the two within 4% either way in the next, at the 700 W cap's clocks).
// Built for sm_90a only (CMakeLists.txt).
#include "cuda/attention_tc90.h"

#include <cuda.h>

#include <climits>
#include <cmath>

#include "cuda/attention/flash_tc90.cuh"
#include "cuda/runtime.cuh"

namespace braze::cuda {
namespace {

using namespace braze::cuda::attn;

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

// [tokens, heads, 128] 16-bit elements, token / head strides in elements; boxes of 128 tokens x 64
// elements of one head, 128-byte swizzle, rows past `tokens` read as zeros. false where the encoder
// refuses (the strides it takes: multiples of 16 bytes below 2^40). An axis of one element gets a
// stride of one row: a size-1 axis may carry any stride, and its only coordinate is 0.
bool tensor_map(CUtensorMap& map, bool f16, const void* ptr, int64_t tokens, int64_t heads, int64_t st,
                int64_t sh) {
  if (tokens == 1) st = 128;
  if (heads == 1) sh = 128;
  if (st <= 0 || sh <= 0 || (st * 2) % 16 != 0 || (sh * 2) % 16 != 0 || st * 2 >= (int64_t(1) << 40) ||
      sh * 2 >= (int64_t(1) << 40))
    return false;
  const cuuint64_t dims[3] = {cuuint64_t(kTc90AttnD), cuuint64_t(heads), cuuint64_t(tokens)};
  const cuuint64_t strides[2] = {cuuint64_t(sh * 2), cuuint64_t(st * 2)};
  const cuuint32_t box[3] = {64, 1, cuuint32_t(kTc90AttnRows)}, step[3] = {1, 1, 1};
  return tensor_map_encoder()(&map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
                              const_cast<void*>(ptr), dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

constexpr int64_t kTc90PingPongTokens = 8192;

template <class T, bool Cap>
void launch(const CUtensorMap (&m)[3], const AttendParams& p, int device, cudaStream_t s) {
  auto kernel = p.tokens <= kTc90PingPongTokens ? flash_tc90_kernel<T, 2, Cap> : flash_tc90_kernel<T, 0, Cap>;
  allow_smem(reinterpret_cast<const void*>(kernel), kTc90AttnSmem, device, "attention prefill (wgmma)");
  const int64_t ctas = (p.tokens + kTc90AttnRows - 1) / kTc90AttnRows * p.q_heads;
  kernel<<<unsigned(ctas), kTc90AttnThreads, kTc90AttnSmem, s>>>(m[0], m[1], m[2], p);
  check_launch("attention prefill (wgmma)");
}

}  // namespace

bool prefill_tc90(DType t, const AttendParams& p, int64_t dim, int64_t kv_heads, int device, cudaStream_t s) {
  if (p.mode != kRagged || dim != kTc90AttnD || (t != DType::f16 && t != DType::bf16)) return false;
  // scale: the row max is taken before scaling (and softcap's tanh), so it must be positive.
  if (!(p.scale > 0.f) || !std::isfinite(p.scale) || !(p.softcap >= 0.f)) return false;
  if ((p.tokens + kTc90AttnRows - 1) / kTc90AttnRows * p.q_heads > INT_MAX) return false;
  const bool out_ok = (reinterpret_cast<uintptr_t>(p.out) & 3) == 0 && p.o_st % 2 == 0 && p.o_sh % 2 == 0;
  if (!out_ok || !aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v)) return false;
  if (!tc90_device(device)) return false;
  const bool f16 = t == DType::f16;
  CUtensorMap m[3];
  if (!tensor_map(m[0], f16, p.q, p.tokens, p.q_heads, p.q_st, p.q_sh) ||
      !tensor_map(m[1], f16, p.k, p.tokens, kv_heads, p.k_st, p.k_sh) ||
      !tensor_map(m[2], f16, p.v, p.tokens, kv_heads, p.v_st, p.v_sh))
    return false;
  const bool cap = p.softcap > 0.f;
  if (f16) cap ? launch<__half, true>(m, p, device, s) : launch<__half, false>(m, p, device, s);
  else cap ? launch<__nv_bfloat16, true>(m, p, device, s) : launch<__nv_bfloat16, false>(m, p, device, s);
  return true;
}

}  // namespace braze::cuda
