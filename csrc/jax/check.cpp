// The C entry points the Python side reaches through ctypes (the symbols live
// in braze._cpu, so no second copy of the kernels is loaded): the table's
// declarations, and the trace-time check, which runs an entry's prepare step
// on shapes and dtypes alone, so a bad argument raises the kernel's own
// TypeError / ValueError while jax traces, not when XLA runs the call.
#include <cstring>

#include "jax/table.h"

#define BRAZE_XLA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
braze::DType dtype_named(const std::string& n) {
  using braze::DType;
  static const std::pair<const char*, DType> names[] = {
      {"float32", DType::f32}, {"float16", DType::f16}, {"bfloat16", DType::bf16}, {"float64", DType::f64},
      {"int8", DType::i8},     {"int16", DType::i16},   {"int32", DType::i32},     {"int64", DType::i64},
      {"uint8", DType::u8},    {"uint16", DType::u16},  {"uint32", DType::u32},    {"uint64", DType::u64},
      {"bool", DType::b1}};
  for (auto& [k, t] : names)
    if (n == k) return t;
  return DType::other;
}

int fail(char* err, size_t len, int code, const char* what) {
  std::strncpy(err, what, len - 1);
  err[len - 1] = 0;
  return code;
}
}  // namespace

BRAZE_XLA_EXPORT const char* braze_xla_declarations() { return braze::xla::declarations().c_str(); }

// present: bit k set when array slot k is given. dtypes: the given arrays'
// dtype names, space separated; dims: per given array its ndim, then its
// shape. f / i: each scalar slot's value as a double and as an int64; strings:
// the string slots' values, '\n' separated. Returns 0, or 1 (TypeError) /
// 2 (ValueError) / 3 (anything else) with the message in err.
BRAZE_XLA_EXPORT int braze_xla_check(const char* op, int64_t present, const char* dtypes, const int64_t* dims,
                                     const double* f, const int64_t* i, const char* strings, char* err,
                                     size_t errlen) {
  using namespace braze;
  const xla::Entry* e = xla::find(op);
  if (!e) return fail(err, errlen, 2, "no such entry");
  xla::Call c;
  c.entry = e;
  std::string dt(dtypes), st(strings);
  size_t dpos = 0, spos = 0;
  for (size_t k = 0; k < e->arrays.size(); ++k) {
    Tensor& t = c.arrays[k];
    t.name = e->arrays[k].name.c_str();
    if (!(present >> k & 1)) continue;
    size_t end = dt.find(' ', dpos);
    t.dtype = dtype_named(dt.substr(dpos, end - dpos));
    dpos = end == std::string::npos ? dt.size() : end + 1;
    t.ndim = int(*dims++);
    if (t.ndim > kMaxDims) return fail(err, errlen, 2, (std::string(t.name) + " has too many axes").c_str());
    for (int d = 0; d < t.ndim; ++d) t.shape[d] = *dims++;
    int64_t s = 1;
    for (int d = t.ndim - 1; d >= 0; --d) t.stride[d] = s, s *= t.shape[d] > 0 ? t.shape[d] : 1;
    // distinct, aligned, never-dereferenced addresses: the overlap checks see separate arrays
    t.data = t.base = reinterpret_cast<void*>(uintptr_t(k + 1) << 40);
    t.device = Device::none;  // no device: prepare reads no values (sampling does, on the CPU)
    t.present = true;
  }
  std::string svals[xla::kMaxSlots];
  for (size_t k = 0; k < e->scalars.size(); ++k) {
    c.scalars[k].f = f[k];
    c.scalars[k].i = i[k];
    if (e->scalars[k].kind == 's') {
      size_t end = st.find('\n', spos);
      svals[k] = st.substr(spos, end - spos);
      spos = end == std::string::npos ? st.size() : end + 1;
      c.scalars[k].s = svals[k];
    }
  }
  try {
    e->run(c);  // no launchers: prepare only
  } catch (const TypeError& x) {
    return fail(err, errlen, 1, x.what());
  } catch (const ValueError& x) {
    return fail(err, errlen, 2, x.what());
  } catch (const std::exception& x) {
    return fail(err, errlen, 3, x.what());
  }
  return 0;
}
