// The attention family's contract, shared by every backend: the paged KV
// cache write, decode, ragged / paged prefill and the merge of partial states.
// Layouts follow FlashInfer / vLLM: tokens, heads, then head_dim (contiguous);
// the cache is [num_blocks, block_size, Hkv, D] for k and for v. Each kernel
// kind has its own typed argument block; prepare_* validate shapes, dtypes and
// strides (TypeError / ValueError naming the argument) before anything runs.
//
// Values inside index arrays (slot_mapping, block_table, kv_lens, cu_seqlens)
// live on the device and are not read by prepare_*. Backends that can read
// them cheaply before writing (CPU, Metal's unified memory) run check_* below
// and raise; a GPU kernel never reads out of bounds: a block id outside
// [0, num_blocks) masks the keys it would hold, kv_lens is clamped to the
// block table's capacity and a slot outside the cache is skipped.
#pragma once
#include "core/op_table.h"
#include "core/tensor.h"

namespace braze::attention {

#define BRAZE_ATTENTION_OPS(X) X(append_kv) X(decode) X(prefill) X(prefill_paged) X(merge_states)
BRAZE_DECLARE_OPS(BRAZE_ATTENTION_OPS)

// The head dims every backend supports (one set everywhere).
bool supported_head_dim(int64_t d);

// k_cache[s / block_size, s % block_size, h, :] = k[t, h, :] for s =
// slot_mapping[t] >= 0 (likewise v); -1 skips the token. int32 or int64 slots.
struct AppendKvArgs {
  DType dtype;                          // of k, v and the caches
  DType slot_dtype;                     // i32 or i64
  int64_t tokens, heads, dim, num_blocks, block_size;
  const void* k; int64_t k_stride_t, k_stride_h;      // elements
  const void* v; int64_t v_stride_t, v_stride_h;
  void* k_cache; int64_t kc_stride_b, kc_stride_s, kc_stride_h;
  void* v_cache; int64_t vc_stride_b, vc_stride_s, vc_stride_h;
  const void* slots; int64_t slot_stride;
  Device device;
  int device_id;
};

// The paged cache one sequence's keys are read from: key j of sequence b is
// slot j % block_size of block block_table[b, j / block_size].
struct PagedKv {
  const void* k; int64_t k_stride_b, k_stride_s, k_stride_h;
  const void* v; int64_t v_stride_b, v_stride_s, v_stride_h;
  int64_t num_blocks, block_size;
  const int32_t* block_table; int64_t bt_stride;  // row stride, elements
  int64_t max_blocks;                             // block_table's columns: the capacity bound a
                                                  // GPU split-K grid is sized from without a host sync
  const int32_t* kv_lens;                         // [batch]
};

// Score of query position p against key position j, row head h:
//   s = scale * q.k; with softcap c > 0, s = c * tanh(s / c);
//   masked (excluded) when j >= kv_len, or causal and j > p, or window > 0
//   and j <= p - window. sinks[h] (when present) adds exp(sinks[h]) to the
//   softmax denominator. lse = log(denominator), sinks included, natural log;
//   -inf (and the output 0) when every key is masked and there is no sink.
struct Options {
  float scale;
  float softcap;           // 0: none
  int64_t window;          // 0: none
  const void* sinks;       // [Hq] or null
  DType sinks_dtype;
};

// Outputs of one (token, q head) row each: out [rows, Hq, D] in the q dtype,
// lse [rows, Hq] float32 (null when not asked for).
struct Outputs {
  void* out; int64_t out_stride_t, out_stride_h;
  float* lse; int64_t lse_stride_t, lse_stride_h;
};

// Scratch a split-K backend (CUDA) uses for partial states; its size comes
// from the caller (the backend's attention_workspace_bytes), never from a
// host read of kv_lens. CPU kernels take none.
struct Workspace {
  void* data = nullptr;
  int64_t bytes = 0;
};

// One query token per sequence: q [B, Hq, D] against its kv_lens[b] cached
// keys, query position kv_lens[b] - 1.
struct DecodeArgs {
  DType dtype;
  int64_t batch, q_heads, kv_heads, dim;
  const void* q; int64_t q_stride_b, q_stride_h;
  PagedKv kv;
  Options opt;
  Outputs o;
  Workspace ws;
  Device device;
  int device_id;
};

// Ragged prefill: sequence b holds tokens [cu_q[b], cu_q[b + 1]) of q.
// Not paged: its keys are tokens [cu_q[b], cu_q[b + 1]) of k / v
// ([T, Hkv, D]), query i at position i, key j at position j. Paged
// (prefill_paged): its keys are kv_lens[b] cached tokens and its n_b queries
// sit at the end of them, query i at position kv_lens[b] - n_b + i.
struct PrefillArgs {
  DType dtype;
  bool causal, paged;
  int64_t batch, tokens, q_heads, kv_heads, dim;
  const void* q; int64_t q_stride_t, q_stride_h;
  const int32_t* cu_seqlens;  // [batch + 1]
  const void* k; int64_t k_stride_t, k_stride_h;  // not paged
  const void* v; int64_t v_stride_t, v_stride_h;
  PagedKv kv;                                      // paged
  Options opt;
  Outputs o;
  Workspace ws;
  Device device;
  int device_id;
};

// (o, lse) = the merge of two partial attentions over disjoint key sets:
// lse = log(e^lse_a + e^lse_b), o = (o_a e^(lse_a - lse) + o_b e^(lse_b - lse)),
// 0 where both are -inf. o_* [T, H, D], lse_* [T, H] float32.
struct MergeArgs {
  DType dtype;
  int64_t tokens, heads, dim;
  const void* oa; int64_t oa_stride_t, oa_stride_h;
  const float* la; int64_t la_stride_t, la_stride_h;
  const void* ob; int64_t ob_stride_t, ob_stride_h;
  const float* lb; int64_t lb_stride_t, lb_stride_h;
  Outputs o;
  Device device;
  int device_id;
};

AppendKvArgs prepare_append_kv(const Tensor& k, const Tensor& v, const Tensor& k_cache, const Tensor& v_cache,
                               const Tensor& slot_mapping);
// scale: NaN means 1 / sqrt(D); window <= 0 and softcap <= 0 mean none.
DecodeArgs prepare_decode(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Tensor& block_table,
                          const Tensor& kv_lens, double scale, int64_t window, const Tensor& sinks, double softcap,
                          const Tensor& out, const Tensor& lse_out, const Tensor& workspace);
PrefillArgs prepare_prefill(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu_seqlens, bool causal,
                            double scale, int64_t window, const Tensor& sinks, double softcap, const Tensor& out,
                            const Tensor& lse_out, const Tensor& workspace);
PrefillArgs prepare_prefill_paged(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                  const Tensor& block_table, const Tensor& cu_seqlens_q, const Tensor& kv_lens,
                                  double scale, int64_t window, const Tensor& sinks, double softcap,
                                  const Tensor& out, const Tensor& lse_out, const Tensor& workspace);
MergeArgs prepare_merge_states(const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b, const Tensor& lse_b,
                               const Tensor& out, const Tensor& lse_out);

// Host-side checks of the index arrays' values (CPU, and Metal's unified
// memory): ValueError naming the array, before any write.
void check_slots(const AppendKvArgs& a);
// kv_lens[b] in [0, max_blocks * block_size] and the block ids it covers in [0, num_blocks).
void check_paged(const PagedKv& kv, int64_t batch);
// cu_seqlens starts at 0, never decreases and ends at `tokens`; paged: every
// sequence's query count <= kv_lens[b].
void check_prefill(const PrefillArgs& a);

}  // namespace braze::attention
