// C entry for running a norm op in the simulator through the same launch plan
// the Metal executor uses (csrc/metal/plans/norm.cpp).
//
// Every array is copied into a private buffer framed by red zones (filled
// with a pattern and, under ASan, poisoned), so an out-of-bounds access is
// reported; scratch buffers start as NaN. Outputs are copied back.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/norm.h"
#include "runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define MTLSIM_POISON(p, n) __asan_poison_memory_region(p, n)
#define MTLSIM_UNPOISON(p, n) __asan_unpoison_memory_region(p, n)
#else
#define MTLSIM_POISON(p, n) ((void)(p), (void)(n))
#define MTLSIM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace {

using namespace braze::metal;

constexpr std::size_t kRed = 256;
constexpr unsigned char kRedByte = 0xa5;

struct Shadow {
  std::vector<unsigned char> mem;  // red zone | data | red zone
  std::size_t bytes = 0;
  void* user = nullptr;
  bool output = false;
  std::string name;

  unsigned char* data() { return mem.data() + kRed; }
  void init(void* src, std::size_t n, unsigned char fill) {
    bytes = n;
    mem.assign(n + 2 * kRed + 16, kRedByte);  // 16: keeps a zero-size buffer addressable
    if (src) std::memcpy(data(), src, n);
    else std::memset(data(), fill, n);
    MTLSIM_POISON(mem.data(), kRed);
    MTLSIM_POISON(data() + n, mem.size() - kRed - n);
  }
  std::string release() {  // "" or the reason the red zones are dirty
    MTLSIM_UNPOISON(mem.data(), mem.size());
    for (std::size_t i = 0; i < mem.size(); ++i) {
      if (i >= kRed && i < kRed + bytes) continue;
      if (mem[i] != kRedByte) return "write out of bounds of " + name;
    }
    return "";
  }
};

const char* const kRoleNames[kNormRoles] = {"x",   "weight",       "bias",    "aux",
                                            "out", "residual_out", "dweight", "dbias"};

std::string run(const NormArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_norm(a);
  if (!plan.error.empty()) return "plan: " + plan.error;
  std::vector<Shadow> shadows;
  std::map<void*, std::size_t> by_ptr;
  int role_shadow[kNormRoles];
  shadows.reserve(kNormRoles + plan.scratch_bytes.size());
  for (int r = 0; r < kNormRoles; ++r) {
    role_shadow[r] = -1;
    if (!a.present[r]) continue;
    const bool out = r == kNormOut || r == kNormAuxOut || r == kNormDWeight || r == kNormDBias;
    auto it = by_ptr.find(ptrs[r]);
    if (it == by_ptr.end()) {  // an in-place residual shares the residual's buffer
      it = by_ptr.emplace(ptrs[r], shadows.size()).first;
      shadows.emplace_back();
      shadows.back().init(ptrs[r], extents[r], 0);
      shadows.back().user = ptrs[r];
      shadows.back().name = kRoleNames[r];
    } else if (shadows[it->second].bytes != extents[r]) {
      return std::string("aliased arrays of different extents: ") + kRoleNames[r];
    }
    shadows[it->second].output |= out;
    role_shadow[r] = int(it->second);
  }
  const std::size_t first_scratch = shadows.size();
  for (std::size_t s = 0; s < plan.scratch_bytes.size(); ++s) {
    shadows.emplace_back();
    shadows.back().init(nullptr, plan.scratch_bytes[s], 0xff);
    shadows.back().name = "scratch " + std::to_string(s);
  }
  std::string err;
  for (const Dispatch& d : plan.dispatches) {
    std::vector<void*> bufs;
    for (const BufferRef& b : d.buffers) {
      Shadow* s = nullptr;
      if (b.role >= 0 && b.role < kNormRoles && role_shadow[b.role] >= 0) s = &shadows[role_shadow[b.role]];
      if (b.scratch >= 0 && first_scratch + b.scratch < shadows.size()) s = &shadows[first_scratch + b.scratch];
      if (!s) { err = d.kernel + ": plan binds an absent buffer"; break; }
      if (b.offset > s->bytes) { err = d.kernel + ": binding offset past the buffer"; break; }
      bufs.push_back(s->data() + b.offset);
    }
    if (!err.empty()) break;
    std::vector<std::uint8_t> params = d.params;  // setBytes copies too
    bufs.push_back(params.data());
    err = mtlsim::dispatch(d.kernel, d.threadgroups, d.threads, bufs, {}, seed, shuffle);
    if (!err.empty()) { err = d.kernel + ": " + err; break; }
  }
  for (Shadow& s : shadows) {
    std::string e = s.release();
    if (err.empty()) err = e;
  }
  if (err.empty())
    for (Shadow& s : shadows)
      if (s.output && s.user) std::memcpy(s.user, s.data(), s.bytes);
  return err;
}

}  // namespace

extern "C" int mtlsim_norm(int op, int dtype, unsigned long long rows, unsigned long long n,
                           const long long* strides, const int* present, float eps,
                           float weight_offset, unsigned long long group_size, void* const* ptrs,
                           const unsigned long long* extents, unsigned long long seed, int shuffle,
                           char* err, int errlen) {
  NormArgs a;
  a.op = NormOp(op);
  a.dtype = DType(dtype);
  a.rows = rows;
  a.n = n;
  std::uint64_t ext[kNormRoles];
  for (int r = 0; r < kNormRoles; ++r) {
    a.row_stride[r] = strides[r];
    a.present[r] = present[r] != 0;
    ext[r] = extents[r];
  }
  a.eps = eps;
  a.weight_offset = weight_offset;
  a.group_size = group_size;
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
