// Parameters of the quant kernels, shared verbatim by the MSL kernels and the
// C++ launch plans (csrc/metal/plans/quant.cpp), so both agree on the layout.
#pragma once

#ifdef __METAL_VERSION__
typedef uint quant_u32;
#else
typedef unsigned int quant_u32;  // 32 bits on every host the plans build for
static_assert(sizeof(quant_u32) == 4, "quant_u32 must be 32 bits");
#endif

// Format ids: the order of BRAZE_QUANT_FORMATS (csrc/core/quant/formats.h);
// the plans static_assert that every id equals its QFormat.
#define QF_Q8_0 0
#define QF_Q4_0 1
#define QF_Q4_1 2
#define QF_Q5_0 3
#define QF_Q5_1 4
#define QF_Q2_K 5
#define QF_Q3_K 6
#define QF_Q4_K 7
#define QF_Q5_K 8
#define QF_Q6_K 9
#define QF_Q8_K 10
#define QF_IQ4_NL 11
#define QF_IQ4_XS 12
#define QF_MXFP4 13
#define QF_MXFP6_E2M3 14
#define QF_MXFP6_E3M2 15
#define QF_MXFP8_E4M3 16
#define QF_MXFP8_E5M2 17
#define QF_MXFP4_GGUF 18
#define QF_NVFP4 19
#define QF_NVFP4_GGUF 20
#define QF_FP8_E4M3 21
#define QF_FP8_E5M2 22
#define QF_INT8 23
#define QF_AFFINE2 24
#define QF_AFFINE3 25
#define QF_AFFINE4 26
#define QF_AFFINE5 27
#define QF_AFFINE6 28
#define QF_AFFINE8 29

// Every quant kernel decodes / encodes chunks of 8 elements of a row (a
// divisor of every block), one thread per chunk, QUANT_THREADS to a group.
#define QUANT_CHUNK 8
#define QUANT_THREADS 256

// fp8 scale granularity (QuantParams::group), as core/quant_mx.h's kFp8Group*.
#define QUANT_FP8_TENSOR 0
#define QUANT_FP8_ROW 1
#define QUANT_FP8_BLOCK 128

// Scale modes of the amax kernels: what a region's amax becomes.
#define QUANT_SCALE_FP8_E4M3 0  // amax / 448
#define QUANT_SCALE_FP8_E5M2 1  // amax / 57344
#define QUANT_SCALE_INT8 2      // amax / 127
#define QUANT_SCALE_NVFP4 3     // nvfp4's tensor scale: amax / (448 * 6), or 1 when 0

// Dtype of the affine scales / biases (QuantParams::scales_dtype).
#define QUANT_SDT_F32 0
#define QUANT_SDT_F16 1
#define QUANT_SDT_BF16 2

struct QuantParams {
  quant_u32 rows;           // N (or M)
  quant_u32 cols;           // K, logical elements of a row
  quant_u32 x_stride;       // elements: quantize's x, dequantize's out
  quant_u32 data_stride;    // bytes between rows of the packed data
  quant_u32 scales_stride;  // elements between rows of scales (0: a vector, one per row)
  quant_u32 biases_stride;  // elements
  quant_u32 group;          // affine group size; fp8 granularity (QUANT_FP8_*)
  quant_u32 rule;           // MX scale rule: 0 floor, 1 ceil, 2 round
  quant_u32 scales_dtype;   // QUANT_SDT_* (affine)
  quant_u32 mode;           // QUANT_SCALE_* (amax kernels)
  quant_u32 region_rows;    // amax kernels: the rows x cols one scale covers
  quant_u32 region_cols;
};

// matmul (matmul.metal, plan_matmul). A dense weight takes the place of a
// format id (it is no format of the table: the plans static_assert the count).
#define QF_DENSE 100
#define QMM_GEMV_MAX_ROWS 16   // rows of x up to which the GEMV path runs; more: GEMM
#define QMM_GEMV_SIMDGROUPS 4  // GEMV: one W row per simdgroup, 4 per threadgroup
#define QMM_TILE 32            // GEMM: a 32 x 32 tile of out per threadgroup, K in steps of 32
#define QMM_GEMM_THREADS 128   // GEMM: 4 simdgroups, each a 16 x 16 quarter of the tile

struct MatmulParams {
  QuantParams w;         // W [N, K]: rows = N, cols = K, data / scales / biases strides, group, scales dtype
  quant_u32 m;           // rows of x and out
  quant_u32 x_stride;    // elements
  quant_u32 out_stride;  // elements
  quant_u32 has_bias;
};

// W8A8 matmul (matmul_w8a8.metal, plan_matmul_w8a8): x and W 8-bit codes; the
// GEMV for m <= QMM_GEMV_MAX_ROWS rows, QMM_TILE tiles of QMM_GEMM_THREADS beyond.
struct W8A8Params {
  quant_u32 m, n, k;     // x [m, k] codes, W [n, k] codes, out [m, n]
  quant_u32 x_stride;    // bytes between rows of x
  quant_u32 w_stride;    // bytes between rows of W
  quant_u32 out_stride;  // elements
  quant_u32 w_group;     // QUANT_FP8_TENSOR (one W scale) or QUANT_FP8_ROW (int8 too)
  quant_u32 has_bias;
};
