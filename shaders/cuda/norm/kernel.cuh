// The one kernel every norm op runs in. Forward ops: each row group takes one
// row. Ops with per-group state (the VJPs): each row group takes rows first,
// first + step, ... (a grid-stride loop over a bounded grid), then finishes.
#pragma once
#include <type_traits>

#include "cuda/norm/forward.cuh"
#include "cuda/norm/vjp.cuh"

namespace braze::cuda::norm {

template <class Op, class = void> struct HasFinish : std::false_type {};
template <class Op>
struct HasFinish<Op, std::void_t<decltype(&Op::finish)>> : std::true_type {};

template <class C, template <class> class OpT>
__global__ void __launch_bounds__(C::kWarp ? 128 : OpT<C>::kMaxThreads, OpT<C>::kMinBlocks)
    norm_kernel(typename OpT<C>::Params p) {
  __shared__ float reduce_buf[2][2][32];  // used by block-per-row groups only
  __shared__ float cluster_buf[2][2];     // used by cluster groups only
  RowReduce<C::kWarp, 2, C::kCluster> reduce{reduce_buf, cluster_buf};
  const Group<C> g;
  OpT<C> op;
  if constexpr (HasFinish<OpT<C>>::value) {
    for (int64_t row = g.first; row < p.rows; row += g.step) op.row(p, g, reduce, row);
    op.finish(p, g);
  } else if (g.first < p.rows) {
    // Forward ops: one row per group (the grid covers the rows), so nothing
    // is carried across rows in registers.
    op.row(p, g, reduce, g.first);
  }
  if constexpr (C::kCluster) cluster_sync();  // no CTA leaves while another may read its cluster_buf
}

}  // namespace braze::cuda::norm
