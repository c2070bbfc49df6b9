// Numbers in error messages as the user wrote them: integers as integers,
// floats as Python's repr prints them (the shortest text that reads back to
// the same double), so `top_k=2**40` is not reported as "1.09951e+12".
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace braze {

// `single`: v came from a float32 array, so the digits that read back to that float32.
inline std::string repr_float(double v, bool single = false) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[48];
  int digits = 17;
  for (int p = 1; p <= 17; ++p) {  // the fewest significant digits that read back exactly
    snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    const double back = std::strtod(buf, nullptr);
    if (single ? float(back) == float(v) : back == v) {
      digits = p;
      break;
    }
  }
  snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  const int exp10 = std::atoi(std::strchr(buf, 'e') + 1);
  if (exp10 < -4 || exp10 >= 16) return buf;  // Python's repr switches to exponent form at the same points
  snprintf(buf, sizeof buf, "%.*f", digits - 1 - exp10 > 0 ? digits - 1 - exp10 : 0, v);
  std::string s = buf;
  if (s.find('.') == std::string::npos) s += ".0";  // 2.0, not 2: it was given as a float
  return s;
}

// A parameter the user passes as an integer (it crosses into C++ as a double).
inline std::string repr_int(double v) {
  if (std::isfinite(v) && v == std::floor(v)) {
    char buf[320];  // up to 309 digits for the largest double
    snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return repr_float(v);
}

}  // namespace braze
