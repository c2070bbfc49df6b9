// Parameters of the rope kernels, shared verbatim by the MSL kernels and the
// C++ launch plans (csrc/metal/plans/rope.cpp), so both agree on the layout.
#pragma once

#ifdef __METAL_VERSION__
typedef uint rope_u32;
#else
typedef unsigned int rope_u32;  // 32 bits on every host the plans build for
static_assert(sizeof(rope_u32) == 4, "rope_u32 must be 32 bits");
#endif

#define ROPE_MAX_THREADS 256   // threads per threadgroup, at most
#define ROPE_HEADS_PER_THREAD 4  // heads one thread rotates with one cos / sin

#define ROPE_INTERLEAVED 1u  // pairs (x[2i], x[2i+1]); else (x[i], x[i + rot/2])
#define ROPE_COPY_REST 2u    // rot < dim and out of place: copy x[rot:] to y[rot:]

// One rotated array: `heads` rows of `dim` elements per token; strides in
// elements (token and head axes may be strided, the last axis is contiguous).
struct RopePart {
  rope_u32 heads;
  rope_u32 x_tok, x_head;
  rope_u32 y_tok, y_head;
};

struct RopeParams {
  rope_u32 tokens;
  rope_u32 dim;            // head_dim
  rope_u32 half;           // rotary_dim / 2: pairs per head
  rope_u32 pos_stride;     // elements between consecutive tokens' positions
  rope_u32 heads_per_group;  // heads one threadgroup covers (grid y)
  rope_u32 flags;          // ROPE_*
  float scale;             // attention_scale: multiplies cos and sin
  float sin_sign;          // -1 for inverse, else 1
  RopePart q;              // the array of rope, or q of rope_qk
  RopePart k;              // k of rope_qk (heads == 0 for rope)
};
