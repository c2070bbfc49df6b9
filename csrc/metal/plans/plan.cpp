#include "plan.h"

namespace braze::metal {

const char* dtype_suffix(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

std::size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

}  // namespace braze::metal
