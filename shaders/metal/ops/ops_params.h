// Parameters of the ops kernels, shared verbatim by the MSL kernels and the
// C++ launch plans (csrc/metal/plans/ops.cpp), so both agree on the layout.
#pragma once

#ifdef __METAL_VERSION__
typedef uint ops_u32;
#else
typedef unsigned int ops_u32;  // 32 bits on every host the plans build for
static_assert(sizeof(ops_u32) == 4, "ops_u32 must be 32 bits");
#endif

// Elementwise kernels: a threadgroup covers ACT_ELEMS * threads consecutive
// columns of one row (thread t: columns base + t, base + t + threads, ...).
#define ACT_MAX_THREADS 256
#define ACT_ELEMS 4

#define ACT_INTERLEAVED 1u  // gated: g = x[2j], u = x[2j + 1]; else x[j], x[cols + j]

struct ActParams {
  ops_u32 rows;
  ops_u32 cols;      // output row length (gated inputs have 2 * cols)
  ops_u32 x_stride;  // row strides in elements
  ops_u32 y_stride;
  ops_u32 dy_stride; // the VJP kernels (y is dx, x's shape)
  ops_u32 flags;     // ACT_*
  float alpha;       // swiglu_clamped
  float limit;
};

// Embedding: the same column tiling as the elementwise kernels, one token
// per grid row.
struct EmbeddingParams {
  ops_u32 tokens;
  ops_u32 vocab;
  ops_u32 dim;
  ops_u32 ids_stride;  // elements
  ops_u32 table_stride;
  ops_u32 y_stride;
};

// Hadamard: one threadgroup per row of n = m * 2^k. Column c of the row's
// [m, 2^k] view is c = lane + 32 * (r + E * s): lane bits (kl of them, at
// most 5), register bits (kr: E = 2^kr registers per sub-row, a template
// parameter) and simdgroup bits (ks: 2^ks simdgroups, at most 32). Each thread
// keeps m * E values, at most HAD_MAX_REGS.
#define HAD_MAX_REGS 32
#define HAD_TG_FLOATS 8192  // the simdgroup-bit butterflies' threadgroup buffer (32 KiB)

struct HadamardParams {
  ops_u32 rows;
  ops_u32 n;
  ops_u32 lane_bits;  // kl: 2^kl lanes of each simdgroup hold data
  ops_u32 simd_bits;  // ks: 2^ks simdgroups
  ops_u32 x_stride;   // elements
  ops_u32 y_stride;
  float scale;
};
