// Exceptions that reach Python as TypeError / ValueError (see bindings/common.h).
// Every check runs before a kernel writes anything.
#pragma once
#include <stdexcept>
#include <string>

namespace braze {

struct TypeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct ValueError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace braze
