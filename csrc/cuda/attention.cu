// Host launchers of the attention family. Decode of f16 / bf16 with head_dim
// 64, 80, 96 or 128 and 16-byte aligned K / V runs the decode kernel
// (shaders/cuda/attention/decode.cuh; BRAZE_CUDA_DECODE=simt forces the attend
// kernel); everything else runs the attend kernel
// (shaders/cuda/attention/attend.cuh): grid x the token (decode: the
// sequence), y (kv head, chunk of its query heads), z the split. Decode
// splits its keys over `splits` CTAs, a count fixed from the batch, the head
// counts and the block table's capacity (never from kv_lens, which stays on
// the device), and merges the partial states with a second kernel; prefill
// runs one split. 16-byte loads need 16-byte aligned K / V bases and strides;
// anything else takes the scalar path. Prefill of f16 / bf16 with head_dim
// <= 128 and 16-byte aligned q / k / v runs the tensor-core flash kernel
// instead (shaders/cuda/attention/flash.cuh; BRAZE_CUDA_PREFILL=simt forces
// the attend kernel); on Hopper, ragged prefill of head_dim 128 takes the
// wgmma kernel first (attention_tc90.cu; BRAZE_CUDA_ATTN=mma keeps the mma.sync
// one). Nothing here allocates or synchronizes.
#include "cuda/attention.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "cuda/attention/attend.cuh"
#include "cuda/attention/decode.cuh"
#include "cuda/attention/flash.cuh"
#include "cuda/attention/small.cuh"
#include "cuda/runtime.cuh"
#if BRAZE_CUDA_TC90
#include "cuda/attention_tc90.h"
#endif

namespace braze::cuda {
namespace {

using namespace braze::cuda::attn;
using braze::attention::AppendKvArgs;
using braze::attention::DecodeArgs;
using braze::attention::MergeArgs;
using braze::attention::Options;
using braze::attention::Outputs;
using braze::attention::PagedKv;
using braze::attention::PrefillArgs;

constexpr int kElemThreads = 256;
constexpr int64_t kMaxSplits = 64;
constexpr int64_t kMinKeysPerSplit = 256;
constexpr int64_t kDecodeMinKeysPerSplit = 128;  // 2 tiles of 16 keys for each of the decode kernel's 4 warps

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

// Query heads per CTA (attend.cuh's R): kMaxRows, or 4 for groups of at most 4.
int64_t max_rows(int64_t dim) { return dim > 128 ? 4 : 8; }
int64_t rows_per_cta(int64_t dim, int64_t group) { return group <= 4 ? 4 : max_rows(dim); }

// Decode's split count: enough CTAs for about two per multiprocessor, each
// split at least kMinKeysPerSplit keys of the table's capacity. The CTAs per
// split are at least batch * ceil(Hq / kMaxRows) whatever Hkv is, so the workspace
// size needs no Hkv.
int64_t decode_splits(int64_t batch, int64_t q_heads, int64_t dim, int64_t capacity, int device) {
  const int64_t base = std::max<int64_t>(1, batch * ceil_div(q_heads, max_rows(dim)));
  const int64_t want = ceil_div(2 * int64_t(sm_count(device)), base);
  return std::max<int64_t>(1, std::min({want, ceil_div(capacity, kMinKeysPerSplit), kMaxSplits}));
}

int64_t split_bytes(int64_t batch, int64_t q_heads, int64_t dim, int64_t splits) {
  return splits > 1 ? batch * q_heads * splits * (dim + 2) * int64_t(sizeof(float)) : 0;
}

void fill_common(AttendParams& p, int64_t q_heads, int64_t kv_heads, int64_t dim, const Options& o,
                 const Outputs& out) {
  p.q_heads = int(q_heads);
  p.group = int(q_heads / kv_heads);
  p.head_chunks = int(ceil_div(p.group, rows_per_cta(dim, p.group)));
  p.scale = o.scale;
  p.softcap = o.softcap;
  p.window = o.window;
  p.sinks = o.sinks;
  p.sinks_type = !o.sinks ? 0 : o.sinks_dtype == DType::f32 ? 1 : o.sinks_dtype == DType::f16 ? 2 : 3;
  p.out = out.out;
  p.o_st = out.out_stride_t;
  p.o_sh = out.out_stride_h;
  p.lse = out.lse;
  p.l_st = out.lse_stride_t;
  p.l_sh = out.lse_stride_h;
  if (p.group * kv_heads > INT_MAX || kv_heads * p.head_chunks > 65535)
    throw ValueError("too many heads for one CUDA attention launch");
}

void fill_paged(AttendParams& p, const PagedKv& kv) {
  p.kc = kv.k;
  p.kc_sb = kv.k_stride_b;
  p.kc_ss = kv.k_stride_s;
  p.kc_sh = kv.k_stride_h;
  p.vc = kv.v;
  p.vc_sb = kv.v_stride_b;
  p.vc_ss = kv.v_stride_s;
  p.vc_sh = kv.v_stride_h;
  p.num_blocks = kv.num_blocks;
  p.block_size = kv.block_size;
  p.max_blocks = kv.max_blocks;
  p.bt = kv.block_table;
  p.bt_stride = kv.bt_stride;
  p.kv_lens = kv.kv_lens;
}

// Whether every K / V row start is 16-byte aligned (broadcast axes included).
template <class T> bool vector_ok(const AttendParams& p) {
  const int64_t v = 16 / int64_t(sizeof(T));
  if (p.mode == kRagged)
    return aligned16(p.k) && aligned16(p.v) && p.k_st % v == 0 && p.k_sh % v == 0 && p.v_st % v == 0 &&
           p.v_sh % v == 0;
  return aligned16(p.kc) && aligned16(p.vc) && p.kc_sb % v == 0 && p.kc_ss % v == 0 && p.kc_sh % v == 0 &&
         p.vc_sb % v == 0 && p.vc_ss % v == 0 && p.vc_sh % v == 0;
}

template <class T, int D, int R> void attend_rows(const AttendParams& p, dim3 grid, cudaStream_t s) {
  if (vector_ok<T>(p)) attend_kernel<T, D, R, true><<<grid, kThreads, 0, s>>>(p);
  else attend_kernel<T, D, R, false><<<grid, kThreads, 0, s>>>(p);
}

template <class T, int D> void attend_dim(const AttendParams& p, dim3 grid, cudaStream_t s) {
  if (rows_per_cta(D, p.group) == 4) attend_rows<T, D, 4>(p, grid, s);
  else attend_rows<T, D, kMaxRows<D>>(p, grid, s);
  check_launch("attention");
  if (p.splits > 1) check(launch_merge<T, D>(p, s, false), "attention split merge");
}

template <class T> void attend_typed(const AttendParams& p, int64_t dim, dim3 grid, cudaStream_t s) {
  switch (dim) {
    case 64: return attend_dim<T, 64>(p, grid, s);
    case 80: return attend_dim<T, 80>(p, grid, s);
    case 96: return attend_dim<T, 96>(p, grid, s);
    case 128: return attend_dim<T, 128>(p, grid, s);
    case 192: return attend_dim<T, 192>(p, grid, s);
    case 256: return attend_dim<T, 256>(p, grid, s);
    default: throw ValueError("head_dim must be one of 64, 80, 96, 128, 192, 256");
  }
}

void attend(DType t, const AttendParams& p, int64_t dim, dim3 grid, cudaStream_t s) {
  switch (t) {
    case DType::f32: return attend_typed<float>(p, dim, grid, s);
    case DType::f16: return attend_typed<__half>(p, dim, grid, s);
    case DType::bf16: return attend_typed<__nv_bfloat16>(p, dim, grid, s);
    default: throw TypeError(std::string("attention on CUDA takes float32, float16 or bfloat16, got ") +
                             dtype_name(t));
  }
}

// BRAZE_CUDA_PREFILL: unset, empty or "mma" (default) lets prefill take the
// flash kernel where it applies; "simt" keeps the attend kernel. Read once.
bool prefill_simt() {
  static const bool simt = [] {
    const char* v = std::getenv("BRAZE_CUDA_PREFILL");
    if (v == nullptr || *v == 0 || std::strcmp(v, "mma") == 0) return false;
    if (std::strcmp(v, "simt") == 0) return true;
    throw ValueError(std::string("BRAZE_CUDA_PREFILL must be 'mma' or 'simt', got '") + v + "'");
  }();
  return simt;
}

bool flash_dim_ok(int64_t dim) { return dim == 64 || dim == 80 || dim == 96 || dim == 128; }

// cp.async moves 16 bytes: q and K / V rows (and their strides) 16-byte aligned.
template <class T> bool flash_ok(const AttendParams& p, int64_t dim) {
  const int64_t v = 16 / int64_t(sizeof(T));
  return flash_dim_ok(dim) && aligned16(p.q) && p.q_st % v == 0 && p.q_sh % v == 0 && vector_ok<T>(p) &&
         (p.mode == kRagged || p.block_size <= INT_MAX);
}

template <class T, int D> void flash_launch(const AttendParams& p, int device, cudaStream_t s) {
  const size_t smem = flash_smem_bytes<D>();
  allow_smem(reinterpret_cast<const void*>(flash_kernel<T, D>), int(smem), device, "attention prefill");
  const int64_t ctas = ceil_div(p.tokens, kFlashRows) * p.q_heads;
  if (ctas > INT_MAX) throw ValueError("too many tokens x heads for one CUDA prefill");
  flash_kernel<T, D><<<unsigned(ctas), kFlashThreads, smem, s>>>(p);
  check_launch("attention prefill");
}

template <class T> void flash_typed(const AttendParams& p, int64_t dim, int device, cudaStream_t s) {
  switch (dim) {
    case 64: return flash_launch<T, 64>(p, device, s);
    case 80: return flash_launch<T, 80>(p, device, s);
    case 96: return flash_launch<T, 96>(p, device, s);
    default: return flash_launch<T, 128>(p, device, s);
  }
}

// Runs a flash kernel and returns true where one applies: on Hopper (a build
// with the sm_90a unit) the wgmma kernel where prefill_tc90 takes the call
// (ragged, f16 / bf16, head_dim 128, TMA-expressible strides;
// BRAZE_CUDA_ATTN=mma keeps it off), else the mma.sync kernel.
bool flash(DType t, const AttendParams& p, int64_t dim, int64_t kv_heads, int device, cudaStream_t s) {
  if (prefill_simt()) return false;
#if BRAZE_CUDA_TC90
  if (attn_tc90_enabled() && prefill_tc90(t, p, dim, kv_heads, device, s)) return true;
#else
  (void)kv_heads;
#endif
  if (t == DType::f16 && flash_ok<__half>(p, dim)) return flash_typed<__half>(p, dim, device, s), true;
  if (t == DType::bf16 && flash_ok<__nv_bfloat16>(p, dim)) return flash_typed<__nv_bfloat16>(p, dim, device, s), true;
  return false;
}

// BRAZE_CUDA_DECODE: unset, empty or "mma" (default) lets decode take the
// decode kernel where it applies; "simt" keeps the attend kernel. Read once.
bool decode_simt() {
  static const bool simt = [] {
    const char* v = std::getenv("BRAZE_CUDA_DECODE");
    if (v == nullptr || *v == 0 || std::strcmp(v, "mma") == 0) return false;
    if (std::strcmp(v, "simt") == 0) return true;
    throw ValueError(std::string("BRAZE_CUDA_DECODE must be 'mma' or 'simt', got '") + v + "'");
  }();
  return simt;
}

// The decode kernel: head_dim a multiple of 16 up to 128, 16-byte aligned K / V
// rows (cp.async), and key indices in 32 bits (capacity at most 2^30 keys).
template <class T> bool decode_ok(const AttendParams& p, int64_t dim) {
  return flash_dim_ok(dim) && vector_ok<T>(p) && p.block_size <= (int64_t(1) << 30) &&
         p.max_blocks * p.block_size <= (int64_t(1) << 30);
}

// Opts `kernel` into `smem` bytes of dynamic shared memory and returns how
// many of its CTAs a multiprocessor of `device` (current) holds; 0 when the
// device offers less shared memory than one needs. Once per (kernel, device).
int decode_ctas_per_sm(const void* kernel, size_t smem, int device) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> cache;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(kernel, device);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int n = 0;
  if (size_t(smem_optin(device)) >= smem) {
    allow_smem(kernel, int(smem), device, "attention decode");
    check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kDecThreads, smem),
          "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  }
  cache.emplace(key, n);
  return n;
}

// The decode kernel's splits: one CTA an SM (units x splits <= SMs) when the
// units alone leave SMs idle, each split at least kDecodeMinKeysPerSplit keys
// of the table's capacity, at most `allowed` (what the workspace holds). Its
// warps keep 2-3 tiles of 16 keys in flight each, so one CTA an SM already has
// more bytes in flight than HBM needs; a second CTA an SM (two fit) made the
// split kernel no faster and doubled the merge's states (H100, B1 L32768:
// 16 splits 52.0 us, 33 splits 52.6; B4 L4096: 4 splits 29.5, 8 splits 29.4;
// docs/performance.md).
int64_t decode_kernel_splits(int64_t units, int64_t sms, int64_t capacity, int64_t allowed) {
  if (units >= sms) return 1;
  return std::max<int64_t>(1, std::min({sms / units, ceil_div(capacity, kDecodeMinKeysPerSplit), allowed}));
}

template <class T, int D>
bool decode_launch(AttendParams p, int64_t kv_heads, int64_t allowed, int device, cudaStream_t s) {
  const auto kernel = decode_kernel<T, D>;
  const size_t smem = decode_smem_bytes<D>();
  const int per_sm = decode_ctas_per_sm(reinterpret_cast<const void*>(kernel), smem, device);
  if (per_sm == 0) return false;
  p.head_chunks = int(ceil_div(p.group, kDecRows));
  const int64_t units = int64_t(p.batch) * kv_heads * p.head_chunks;
  if (units > INT_MAX) return false;
  p.splits = int(decode_kernel_splits(units, sm_count(device), p.max_blocks * p.block_size, allowed));
  kernel<<<dim3(unsigned(units), unsigned(p.splits)), kDecThreads, smem, s>>>(p);
  check_launch("attention decode");
  // The merge launches while the split kernel runs and waits for it on the device (sm_90 code).
  if (p.splits > 1) check(launch_merge<T, D>(p, s, clusters_usable(device)), "attention split merge");
  return true;
}

template <class T>
bool decode_typed(const AttendParams& p, int64_t dim, int64_t kv_heads, int64_t allowed, int device,
                  cudaStream_t s) {
  switch (dim) {
    case 64: return decode_launch<T, 64>(p, kv_heads, allowed, device, s);
    case 80: return decode_launch<T, 80>(p, kv_heads, allowed, device, s);
    case 96: return decode_launch<T, 96>(p, kv_heads, allowed, device, s);
    default: return decode_launch<T, 128>(p, kv_heads, allowed, device, s);
  }
}

// Runs the decode kernel and returns true where it applies, with at most
// `allowed` splits (1 without a workspace).
bool decode_fast(DType t, const AttendParams& p, int64_t dim, int64_t kv_heads, int64_t allowed, int device,
                 cudaStream_t s) {
  if (decode_simt()) return false;
  if (t == DType::f16 && decode_ok<__half>(p, dim)) return decode_typed<__half>(p, dim, kv_heads, allowed, device, s);
  if (t == DType::bf16 && decode_ok<__nv_bfloat16>(p, dim))
    return decode_typed<__nv_bfloat16>(p, dim, kv_heads, allowed, device, s);
  return false;
}

template <class K, class P> void launch_elementwise(K kernel, const P& p, int64_t n, cudaStream_t s, const char* what) {
  const int64_t blocks = ceil_div(n, kElemThreads);
  if (blocks > INT_MAX) throw ValueError(std::string("too many elements for one CUDA ") + what + " launch");
  kernel<<<unsigned(blocks), kElemThreads, 0, s>>>(p);
  check_launch(what);
}

}  // namespace

int64_t attention_workspace_bytes(const std::string& op, DType dtype, int64_t rows, int64_t q_heads,
                                  int64_t head_dim, int64_t max_blocks, int64_t block_size, int device) {
  (void)dtype;
  if (op != "decode") return 0;
  DeviceGuard g(device);
  return split_bytes(rows, q_heads, head_dim,
                     decode_splits(rows, q_heads, head_dim, max_blocks * block_size, device));
}

void append_kv_run(const AppendKvArgs& a, uintptr_t stream) {
  const int64_t n = a.tokens * a.heads * a.dim;
  if (n == 0) return;
  DeviceGuard g(a.device_id);
  AppendParams p{a.tokens, a.heads, a.dim, a.num_blocks * a.block_size, a.block_size,
                 a.k, a.k_stride_t, a.k_stride_h, a.v, a.v_stride_t, a.v_stride_h,
                 a.k_cache, a.kc_stride_b, a.kc_stride_s, a.kc_stride_h,
                 a.v_cache, a.vc_stride_b, a.vc_stride_s, a.vc_stride_h,
                 a.slots, a.slot_stride, a.slot_dtype == DType::i64};
  const cudaStream_t s = as_stream(stream);
  switch (a.dtype) {
    case DType::f32: return launch_elementwise(append_kv_kernel<float>, p, n, s, "append_kv");
    case DType::f16: return launch_elementwise(append_kv_kernel<__half>, p, n, s, "append_kv");
    case DType::bf16: return launch_elementwise(append_kv_kernel<__nv_bfloat16>, p, n, s, "append_kv");
    default: throw TypeError(std::string("append_kv on CUDA takes float32, float16 or bfloat16, got ") +
                             dtype_name(a.dtype));
  }
}

void decode_run(const DecodeArgs& a, uintptr_t stream) {
  if (a.batch == 0 || a.q_heads == 0) return;
  if (a.batch > INT_MAX || a.batch * a.q_heads > INT_MAX) throw ValueError("too many sequences for one CUDA decode");
  DeviceGuard g(a.device_id);
  AttendParams p{};
  p.mode = kDecode;
  p.batch = int(a.batch);
  p.causal = true;
  p.q = a.q;
  p.q_st = a.q_stride_b;
  p.q_sh = a.q_stride_h;
  fill_paged(p, a.kv);
  fill_common(p, a.q_heads, a.kv_heads, a.dim, a.opt, a.o);
  int64_t splits = decode_splits(a.batch, a.q_heads, a.dim, a.kv.max_blocks * a.kv.block_size, a.device_id);
  // Without the workspace attention_workspace_bytes asks for (a direct
  // binding call), one split: slower for long contexts, never wrong.
  if (a.ws.bytes < split_bytes(a.batch, a.q_heads, a.dim, splits) || !aligned16(a.ws.data)) splits = 1;
  p.splits = int(splits);
  p.ws = static_cast<float*>(a.ws.data);
  if (decode_fast(a.dtype, p, a.dim, a.kv_heads, splits, a.device_id, as_stream(stream))) return;
  attend(a.dtype, p, a.dim, dim3(unsigned(a.batch), unsigned(a.kv_heads * p.head_chunks), unsigned(splits)),
         as_stream(stream));
}

void prefill_run(const PrefillArgs& a, uintptr_t stream) {
  if (a.tokens == 0 || a.q_heads == 0) return;
  if (a.tokens > INT_MAX) throw ValueError("too many tokens for one CUDA prefill");
  if (a.batch == 0)  // a shape fact: the kernel's search would read past cu_seqlens
    throw ValueError("cu_seqlens names no sequence but q has " + std::to_string(a.tokens) + " tokens");
  DeviceGuard g(a.device_id);
  AttendParams p{};
  p.mode = a.paged ? kPaged : kRagged;
  p.batch = int(a.batch);
  p.tokens = a.tokens;
  p.causal = a.causal;
  p.splits = 1;
  p.q = a.q;
  p.q_st = a.q_stride_t;
  p.q_sh = a.q_stride_h;
  p.cu = a.cu_seqlens;
  if (a.paged) {
    fill_paged(p, a.kv);
  } else {
    p.k = a.k;
    p.k_st = a.k_stride_t;
    p.k_sh = a.k_stride_h;
    p.v = a.v;
    p.v_st = a.v_stride_t;
    p.v_sh = a.v_stride_h;
  }
  fill_common(p, a.q_heads, a.kv_heads, a.dim, a.opt, a.o);
  if (flash(a.dtype, p, a.dim, a.kv_heads, a.device_id, as_stream(stream))) return;
  attend(a.dtype, p, a.dim, dim3(unsigned(a.tokens), unsigned(a.kv_heads * p.head_chunks), 1), as_stream(stream));
}

void merge_states_run(const MergeArgs& a, uintptr_t stream) {
  const int64_t n = a.tokens * a.heads * a.dim;
  if (n == 0) return;
  DeviceGuard g(a.device_id);
  MergeParams p{a.tokens, a.heads, a.dim, a.oa, a.oa_stride_t, a.oa_stride_h, a.la, a.la_stride_t, a.la_stride_h,
                a.ob, a.ob_stride_t, a.ob_stride_h, a.lb, a.lb_stride_t, a.lb_stride_h,
                a.o.out, a.o.out_stride_t, a.o.out_stride_h, a.o.lse, a.o.lse_stride_t, a.o.lse_stride_h};
  const cudaStream_t s = as_stream(stream);
  switch (a.dtype) {
    case DType::f32: return launch_elementwise(merge_states_kernel<float>, p, n, s, "merge_states");
    case DType::f16: return launch_elementwise(merge_states_kernel<__half>, p, n, s, "merge_states");
    case DType::bf16: return launch_elementwise(merge_states_kernel<__nv_bfloat16>, p, n, s, "merge_states");
    default: throw TypeError(std::string("merge_states on CUDA takes float32, float16 or bfloat16, got ") +
                             dtype_name(a.dtype));
  }
}

}  // namespace braze::cuda
