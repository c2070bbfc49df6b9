// append_kv: k_cache / v_cache[slot] = k / v[t] for slot = slot_mapping[t]
// >= 0; -1 skips the token. One simdgroup per (token, kv head), lanes over
// head_dim. The host checks the slots first (core::check_slots); a slot
// outside the cache is skipped here all the same.
#include "attention_common.h"

template <typename T>
[[kernel]] void append_kv_kernel(device const T* k [[buffer(0)]],
                                 device const T* v [[buffer(1)]],
                                 device T* kc [[buffer(2)]],
                                 device T* vc [[buffer(3)]],
                                 device const int* slots [[buffer(4)]],
                                 constant AttnAppendParams& p [[buffer(5)]],
                                 uint2 group [[threadgroup_position_in_grid]],
                                 uint lane [[thread_index_in_simdgroup]]) {
  const uint t = group.x, h = group.y;
  // int64 slots: the low word first (little-endian); a negative one has a set high word.
  const ulong at = ulong(t) * p.slot_stride;
  const long s = p.slot_i64 != 0u ? long(ulong(uint(slots[2ul * at])) | (ulong(uint(slots[2ul * at + 1ul])) << 32))
                                  : long(slots[at]);
  if (s < 0 || s >= long(p.capacity)) return;
  const ulong blk = ulong(s) / p.block_size, pos = ulong(s) % p.block_size;
  device const T* ks = k + ulong(t) * p.k_st + ulong(h) * p.k_sh;
  device const T* vs = v + ulong(t) * p.v_st + ulong(h) * p.v_sh;
  device T* kd = kc + blk * p.kc_sb + pos * p.kc_ss + ulong(h) * p.kc_sh;
  device T* vd = vc + blk * p.vc_sb + pos * p.vc_ss + ulong(h) * p.vc_sh;
  for (uint d = lane; d < p.dim; d += ATTN_THREADS) {
    kd[d] = ks[d];
    vd[d] = vs[d];
  }
}

#define APPEND_INSTANCE(T, suffix) \
  template [[host_name("append_kv_" suffix)]] [[kernel]] decltype(append_kv_kernel<T>) append_kv_kernel<T>;
APPEND_INSTANCE(float, "f32")
APPEND_INSTANCE(half, "f16")
APPEND_INSTANCE(bfloat, "bf16")
