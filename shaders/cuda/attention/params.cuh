// Parameters of the attention kernels (filled by csrc/cuda/attention.cu).
#pragma once
#include <cstdint>

namespace braze::cuda::attn {

// Which rows a CTA of the attend kernel serves and where its keys live.
enum Mode : int { kDecode = 0, kRagged = 1, kPaged = 2 };

struct AttendParams {
  int mode;
  int batch, q_heads, group, head_chunks, splits;
  int64_t tokens;  // q's rows (ragged: bounds every sequence's tokens)
  bool causal;
  const void* q; int64_t q_st, q_sh;
  // ragged prefill: key j of sequence b is token cu[b] + j of k / v
  const void* k; int64_t k_st, k_sh;
  const void* v; int64_t v_st, v_sh;
  const int32_t* cu;
  // decode / paged prefill
  const void* kc; int64_t kc_sb, kc_ss, kc_sh;
  const void* vc; int64_t vc_sb, vc_ss, vc_sh;
  int64_t num_blocks, block_size, max_blocks, bt_stride;
  const int32_t* bt;
  const int32_t* kv_lens;
  float scale, softcap;
  int64_t window;
  const void* sinks; int sinks_type;  // 0 none, 1 f32, 2 f16, 3 bf16
  void* out; int64_t o_st, o_sh;
  float* lse; int64_t l_st, l_sh;
  float* ws;  // splits > 1: [batch * q_heads][splits][D + 2] (acc, then max, then sum)
};

}  // namespace braze::cuda::attn
