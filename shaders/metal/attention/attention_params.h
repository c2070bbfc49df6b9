// Parameters of the attention kernels, shared verbatim by the MSL kernels and
// the C++ launch plans (csrc/metal/plans/attention.cpp). Strides are in
// elements; offsets are formed in 64 bits.
#pragma once

#ifdef __METAL_VERSION__
typedef uint attn_u32;
#else
typedef unsigned int attn_u32;  // 32 bits on every host the plans build for
static_assert(sizeof(attn_u32) == 4, "attn_u32 must be 32 bits");
#endif

#define ATTN_THREADS 32   // one simdgroup per threadgroup in every kernel
#define ATTN_TILE 8       // prefill: queries and keys per tile (the simdgroup matrix side)
#define ATTN_MAX_DIM 256

// Dtype of sinks (AttnParams::sinks_dtype).
#define ATTN_SINKS_NONE 0
#define ATTN_SINKS_F32 1
#define ATTN_SINKS_F16 2
#define ATTN_SINKS_BF16 3

// decode (grid: Hq x batch) and prefill / prefill_paged (grid: query tiles x Hq).
struct AttnParams {
  attn_u32 batch, q_heads, kv_heads, dim;
  attn_u32 q_st, q_sh;              // q: token (decode: sequence) and head strides
  attn_u32 k_st, k_sh, v_st, v_sh;  // ragged k / v: token, head; paged: slot, head
  attn_u32 k_sb, v_sb;              // paged: block strides of the caches
  attn_u32 block_size, num_blocks, bt_stride, max_blocks;
  attn_u32 o_st, o_sh, l_st, l_sh;  // out and lse_out: token, head
  attn_u32 window;                  // 0: none (larger than any position: clamped)
  attn_u32 causal;
  attn_u32 has_lse;
  attn_u32 sinks_dtype;             // ATTN_SINKS_*
  float scale, softcap;             // softcap 0: none
};

// merge_states (grid: tokens * heads).
struct AttnMergeParams {
  attn_u32 heads, dim;
  attn_u32 a_st, a_sh, la_st, la_sh;
  attn_u32 b_st, b_sh, lb_st, lb_sh;
  attn_u32 o_st, o_sh, l_st, l_sh;
  attn_u32 has_lse;
};

// append_kv (grid: tokens x heads).
struct AttnAppendParams {
  attn_u32 tokens, heads, dim, block_size, capacity;  // capacity: num_blocks * block_size
  attn_u32 k_st, k_sh, v_st, v_sh;
  attn_u32 kc_sb, kc_ss, kc_sh, vc_sb, vc_ss, vc_sh;
  attn_u32 slot_stride, slot_i64;
};
