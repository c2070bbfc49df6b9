// The persistent-grid walk of the elementwise kernels' tuning variants: work
// items are (row group, tile) pairs numbered group * tiles + tile; block b
// takes items b, b + gridDim.x, ... The position advances by a (groups,
// tiles) step the host divides out once, so the loop has no division.
#pragma once
#include <cstdint>

namespace braze::cuda::ops {

struct Walk {
  int64_t groups;       // row groups (blockDim.y rows each)
  int tiles;            // tiles a row (gridDim.x of the 2-D form)
  int step_tiles;       // gridDim.x % tiles
  int64_t step_groups;  // gridDim.x / tiles
};

struct WalkPos {
  int64_t group;
  int tile;
};

__device__ __forceinline__ WalkPos walk_start(const Walk& w) {
  return {int64_t(blockIdx.x / unsigned(w.tiles)), int(blockIdx.x % unsigned(w.tiles))};
}

__device__ __forceinline__ void walk_next(const Walk& w, WalkPos& pos) {
  pos.group += w.step_groups;
  pos.tile += w.step_tiles;
  if (pos.tile >= w.tiles) {
    pos.tile -= w.tiles;
    ++pos.group;
  }
}

}  // namespace braze::cuda::ops
