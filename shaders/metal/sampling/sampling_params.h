// Parameters of the sampling kernels, shared verbatim by the MSL kernels and
// the C++ launch plans (csrc/metal/plans/sampling.cpp).
//
// Every sampling kernel binds the same buffers (absent arrays are bound to a
// present one and never read):
//   [[buffer(0)]] x            logits [rows, cols] (row stride x_stride), T
//   [[buffer(1)]] y            out: [rows, cols] (y_stride) of T or float, or [rows] int / float
//   [[buffer(2)]] temperature  float [rows]  (SAMPLING_ROW_TEMPERATURE)
//   [[buffer(3)]] top_k        int   [rows]  (SAMPLING_ROW_K)
//   [[buffer(4)]] p            float [rows]  (SAMPLING_ROW_P: top_p, or min_p of min_p_mask)
//   [[buffer(5)]] min_p        float [rows]  (SAMPLING_ROW_MIN_P: min_p of sample)
//   [[buffer(6)]] ids          int   [rows, ids_len] (ids_stride): apply_penalties
//   [[buffer(7)]] SamplingParams
#pragma once

#ifdef __METAL_VERSION__
typedef uint sampling_u32;
typedef int sampling_i32;
#else
typedef unsigned int sampling_u32;
typedef int sampling_i32;
static_assert(sizeof(sampling_u32) == 4, "sampling_u32 must be 32 bits");
#endif

#define SAMPLING_MAX_THREADS 1024  // threads per threadgroup (one row), at most
#define SAMPLING_PHILOX_THREADS 256  // philox_uniform: rows per threadgroup

// Per-row parameter arrays present (else the scalar of SamplingParams).
#define SAMPLING_ROW_TEMPERATURE 1u
#define SAMPLING_ROW_K 2u
#define SAMPLING_ROW_P 4u
#define SAMPLING_ROW_MIN_P 8u
#define SAMPLING_IN_PLACE 16u  // y is x (masks, penalties): the copy of a row is skipped

struct SamplingParams {
  sampling_u32 rows;
  sampling_u32 cols;
  sampling_u32 x_stride;   // elements between rows of x
  sampling_u32 y_stride;   // elements between rows of y ([rows, cols] outputs)
  sampling_u32 flags;      // SAMPLING_*
  float temperature;       // scalars, used where no per-row array is bound
  sampling_i32 top_k;
  float p;
  float min_p;
  sampling_u32 ids_len;    // apply_penalties: history length and row stride
  sampling_u32 ids_stride;
  float repetition, frequency, presence;
  sampling_u32 seed_lo, seed_hi;      // sample / philox_uniform
  sampling_u32 offset_lo, offset_hi;
};
