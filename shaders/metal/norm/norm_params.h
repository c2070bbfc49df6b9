// Parameters of the norm kernels, shared verbatim by the MSL kernels and the
// C++ launch plans (csrc/metal/plans/norm.cpp), so both agree on the layout.
#pragma once

#ifdef __METAL_VERSION__
typedef uint norm_u32;
#else
typedef unsigned int norm_u32;  // 32 bits on every host the plans build for
static_assert(sizeof(norm_u32) == 4, "norm_u32 must be 32 bits");
#endif

// Elements each thread keeps in registers in the one-pass form; segments
// longer than NORM_REG_ELEMS * NORM_MAX_THREADS use the looped form, which
// re-reads the row from memory instead.
#define NORM_REG_ELEMS 8
#define NORM_MAX_THREADS 1024

#define NORM_HAS_WEIGHT 1u
#define NORM_HAS_BIAS 2u
#define NORM_NEED_DWEIGHT 4u
#define NORM_NEED_DBIAS 8u

struct NormParams {
  norm_u32 n;               // elements per normalized segment
  norm_u32 segments;        // segments per row: 1, or row length / group_size
  norm_u32 rows;            // rows in the call
  norm_u32 rows_per_block;  // VJP: rows one threadgroup walks through
  norm_u32 blocks;          // VJP: threadgroups, i.e. partial rows per gradient
  norm_u32 stride_x;        // row strides in elements
  norm_u32 stride_aux;      // residual / gate / dy
  norm_u32 stride_out;      // out / dx
  norm_u32 stride_aux_out;  // residual_out
  norm_u32 flags;           // NORM_HAS_* / NORM_NEED_*
  float eps;
  float weight_offset;
};

// Column sums of `blocks` f32 partial rows of length n, cast to the output.
struct NormReduceParams {
  norm_u32 n;
  norm_u32 blocks;
};
