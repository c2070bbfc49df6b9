// The quant family's format table, the one source of truth: the C++ enum, the
// name lookup, the byte counts the checks use and the table Python reads
// (braze._cpu._quant_formats) all derive from BRAZE_QUANT_FORMATS.
//
// block / block_bytes describe the `data` array: `block` logical elements of a
// row take `block_bytes` bytes. Layout `blocks`: scales live inside each block
// (GGUF's array of structs, as the file stores it). Layout `split`: scales,
// biases, tensor scale are arrays of their own (MX, nvfp4, fp8, int8, MLX
// affine, where `block` is the packing unit of the elements alone).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace braze::quant {

enum class Layout : uint8_t { blocks, split };
// A group shares one codec header (csrc/core/quant/<group>.h) and one kernel registration.
enum class Group : uint8_t { ggml, kquants, iquants, mx, nvfp4, fp8, int8, affine };

// X(name, block elements, block bytes, layout, group)
#define BRAZE_QUANT_FORMATS(X)                  \
  X(q8_0, 32, 34, blocks, ggml)                 \
  X(q4_0, 32, 18, blocks, ggml)                 \
  X(q4_1, 32, 20, blocks, ggml)                 \
  X(q5_0, 32, 22, blocks, ggml)                 \
  X(q5_1, 32, 24, blocks, ggml)                 \
  X(q2_K, 256, 84, blocks, kquants)             \
  X(q3_K, 256, 110, blocks, kquants)            \
  X(q4_K, 256, 144, blocks, kquants)            \
  X(q5_K, 256, 176, blocks, kquants)            \
  X(q6_K, 256, 210, blocks, kquants)            \
  X(q8_K, 256, 292, blocks, kquants)            \
  X(iq4_nl, 32, 18, blocks, iquants)            \
  X(iq4_xs, 256, 136, blocks, iquants)          \
  X(mxfp4, 32, 16, split, mx)                   \
  X(mxfp6_e2m3, 32, 24, split, mx)              \
  X(mxfp6_e3m2, 32, 24, split, mx)              \
  X(mxfp8_e4m3, 32, 32, split, mx)              \
  X(mxfp8_e5m2, 32, 32, split, mx)              \
  X(mxfp4_gguf, 32, 17, blocks, mx)             \
  X(nvfp4, 16, 8, split, nvfp4)                 \
  X(nvfp4_gguf, 64, 36, blocks, nvfp4)          \
  X(fp8_e4m3, 1, 1, split, fp8)                 \
  X(fp8_e5m2, 1, 1, split, fp8)                 \
  X(int8, 1, 1, split, int8)                    \
  X(affine2, 32, 8, split, affine)              \
  X(affine3, 32, 12, split, affine)             \
  X(affine4, 32, 16, split, affine)             \
  X(affine5, 32, 20, split, affine)             \
  X(affine6, 32, 24, split, affine)             \
  X(affine8, 32, 32, split, affine)

#define BRAZE_QUANT_ENUM(name, block, bytes, layout, group) name,
enum class QFormat : uint8_t { BRAZE_QUANT_FORMATS(BRAZE_QUANT_ENUM) };
#undef BRAZE_QUANT_ENUM

struct FormatInfo {
  const char* name;
  Format blocks;  // how `data` packs a row (core/dtype.h)
  Layout layout;
  Group group;
};

#define BRAZE_QUANT_INFO(name, block, bytes, layout, group) \
  FormatInfo{#name, Format(block, bytes), Layout::layout, Group::group},
constexpr FormatInfo kFormats[] = {BRAZE_QUANT_FORMATS(BRAZE_QUANT_INFO)};
#undef BRAZE_QUANT_INFO
constexpr int kNumFormats = int(sizeof(kFormats) / sizeof(kFormats[0]));

constexpr const FormatInfo& info(QFormat f) { return kFormats[int(f)]; }

inline const char* group_name(Group g) {
  switch (g) {
    case Group::ggml: return "ggml";
    case Group::kquants: return "kquants";
    case Group::iquants: return "iquants";
    case Group::mx: return "mx";
    case Group::nvfp4: return "nvfp4";
    case Group::fp8: return "fp8";
    case Group::int8: return "int8";
    case Group::affine: return "affine";
  }
  return "?";
}

// false when `name` is no format of the table.
inline bool find_format(const char* name, QFormat& out) {
  for (int i = 0; i < kNumFormats; ++i)
    if (std::strcmp(kFormats[i].name, name) == 0) {
      out = QFormat(i);
      return true;
    }
  return false;
}

}  // namespace braze::quant
