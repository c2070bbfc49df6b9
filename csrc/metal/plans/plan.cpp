#include "plan.h"

#include <algorithm>

namespace braze::metal {

const char* dtype_suffix(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    default: return "?";
  }
}

BufferRef Plan::array(const void* ptr, std::uint64_t bytes, bool output) {
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    if (arrays[i].ptr != ptr) continue;
    arrays[i].bytes = std::max(arrays[i].bytes, bytes);
    arrays[i].output = arrays[i].output || output;
    return BufferRef{int(i), -1, -1, 0};
  }
  arrays.push_back(PlanArray{ptr, bytes, output});
  return BufferRef{int(arrays.size() - 1), -1, -1, 0};
}

std::uint64_t row_bytes(std::int64_t rows, std::int64_t cols, std::int64_t stride, DType t) {
  if (rows <= 0 || cols <= 0) return 0;
  return std::uint64_t(Format(t).bytes(std::int64_t(rows - 1) * stride + cols));
}

}  // namespace braze::metal
