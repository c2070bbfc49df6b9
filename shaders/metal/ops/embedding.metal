// Embedding gather: y[t, :] = table[ids[t], :], from one template
// embedding_kernel<T, I> (I: int / long ids).
//
// Threadgroup (column block b, token t) with the elementwise kernels' tiling
// (ops_params.h). An id outside [0, vocab) writes zeros and the table is not
// read at all for it. Rows are copied as T (bit-exact, no f32 round trip).
#include <metal_stdlib>

#include "ops_params.h"

using namespace metal;

template <typename T, typename I>
[[kernel]] void embedding_kernel(device const I* ids [[buffer(0)]],
                                 device const T* table [[buffer(1)]],
                                 device T* y [[buffer(2)]],
                                 constant EmbeddingParams& p [[buffer(3)]],
                                 uint2 group [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint nt [[threads_per_threadgroup]]) {
  const long id = long(ids[ulong(group.y) * p.ids_stride]);
  const bool valid = id >= 0 && id < long(p.vocab);
  device const T* row = table + (valid ? ulong(id) * p.table_stride : 0ul);
  device T* yr = y + ulong(group.y) * p.y_stride;
  const uint base = group.x * (nt * ACT_ELEMS) + tid;
  for (uint i = 0; i < ACT_ELEMS; ++i) {
    const uint c = base + i * nt;
    if (c >= p.dim) return;
    if (valid) {
      yr[c] = row[c];
    } else {
      yr[c] = T(0.0f);
    }
  }
}

// Host names: embedding_<dtype> (int32 ids), embedding_i64_<dtype>.
#define EMB_INSTANCE(name, T, I) \
  template [[host_name(name)]] [[kernel]] decltype(embedding_kernel<T, I>) embedding_kernel<T, I>;
#define EMB_DTYPE(T, suffix)                 \
  EMB_INSTANCE("embedding_" suffix, T, int)  \
  EMB_INSTANCE("embedding_i64_" suffix, T, long)

EMB_DTYPE(float, "f32")
EMB_DTYPE(half, "f16")
EMB_DTYPE(bfloat, "bf16")
