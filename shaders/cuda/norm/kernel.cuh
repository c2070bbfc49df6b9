// The one kernel every norm op runs in: each row group takes rows first,
// first + step, ... (a grid-stride loop, so the grid may be smaller than the
// row count), then ops with per-group state (the VJPs) finish.
#pragma once
#include <type_traits>

#include "cuda/norm/forward.cuh"
#include "cuda/norm/vjp.cuh"

namespace braze::cuda::norm {

template <class Op, class = void> struct HasFinish : std::false_type {};
template <class Op>
struct HasFinish<Op, std::void_t<decltype(&Op::finish)>> : std::true_type {};

template <class C, template <class> class OpT>
__global__ void __launch_bounds__(C::kWarp ? 128 : OpT<C>::kMaxThreads, OpT<C>::kMinBlocks) norm_kernel(Params p) {
  __shared__ float reduce_buf[2][2][32];  // used by block-per-row groups only
  RowReduce<C::kWarp> reduce{reduce_buf};
  const Group<C> g;
  OpT<C> op;
  for (int64_t row = g.first; row < p.rows; row += g.step) op.row(p, g, reduce, row);
  if constexpr (HasFinish<OpT<C>>::value) op.finish(p, g);
}

}  // namespace braze::cuda::norm
