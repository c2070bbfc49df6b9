// C entry for running the sampling ops in the simulator through the same
// launch plan the Metal executor uses (csrc/metal/plans/sampling.cpp).
//
// Every array is copied into a private buffer framed by red zones (filled
// with a pattern and, under ASan, poisoned), so an out-of-bounds access is
// reported. Arrays passed as the same pointer (in place) share one buffer.
// What the kernels changed is copied back only when the run succeeded.
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/sampling.h"
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
constexpr unsigned char kRedByte = 0x5a;

struct Guarded {
  std::vector<unsigned char> mem;  // red zone | data | red zone
  std::vector<unsigned char> orig;  // the data on entry
  std::size_t bytes = 0;
  void* user = nullptr;
  bool output = false;
  std::string name;

  unsigned char* data() { return mem.data() + kRed; }
  void init(void* src, std::size_t n) {
    bytes = n;
    mem.assign(n + 2 * kRed + 16, kRedByte);  // 16: a zero-size buffer stays addressable
    std::memcpy(data(), src, n);
    orig.assign(data(), data() + n);
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

const char* const kRoleNames[kSampRoles] = {"logits", "out", "temperature", "top_k", "p", "min_p",
                                             "token_ids"};

std::string run(const SamplingArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_sampling(a);
  if (!plan.error.empty()) return "plan: " + plan.error;
  if (!plan.scratch_bytes.empty()) return "sampling plans use no scratch";
  std::vector<Guarded> bufs;
  bufs.reserve(kSampRoles);
  std::map<void*, std::size_t> by_ptr;
  int role_buf[kSampRoles];
  for (int r = 0; r < kSampRoles; ++r) {
    role_buf[r] = -1;
    if (!ptrs[r]) continue;
    auto it = by_ptr.find(ptrs[r]);
    if (it == by_ptr.end()) {
      it = by_ptr.emplace(ptrs[r], bufs.size()).first;
      bufs.emplace_back();
      bufs.back().init(ptrs[r], extents[r]);
      bufs.back().user = ptrs[r];
      bufs.back().name = kRoleNames[r];
    } else if (bufs[it->second].bytes != extents[r]) {
      return std::string("aliased arrays of different extents: ") + kRoleNames[r];
    }
    bufs[it->second].output |= r == kSampY;
    role_buf[r] = int(it->second);
  }
  std::string err;
  for (const Dispatch& d : plan.dispatches) {
    std::vector<void*> bound;
    for (const BufferRef& b : d.buffers) {
      if (b.role < 0 || b.role >= kSampRoles || role_buf[b.role] < 0) {
        err = d.kernel + ": plan binds an absent buffer";
        break;
      }
      Guarded& g = bufs[std::size_t(role_buf[b.role])];
      if (b.offset > g.bytes) { err = d.kernel + ": binding offset past the buffer"; break; }
      bound.push_back(g.data() + b.offset);
    }
    if (!err.empty()) break;
    std::vector<std::uint8_t> params = d.params;  // setBytes copies too
    bound.push_back(params.data());
    err = mtlsim::dispatch(d.kernel, d.threadgroups, d.threads, bound, {}, seed, shuffle);
    if (!err.empty()) { err = d.kernel + ": " + err; break; }
  }
  for (Guarded& g : bufs) {
    std::string e = g.release();
    if (err.empty()) err = e;
  }
  if (err.empty())
    for (Guarded& g : bufs) {
      if (!g.output) continue;
      auto* user = static_cast<unsigned char*>(g.user);
      for (std::size_t i = 0; i < g.bytes; ++i)
        if (g.data()[i] != g.orig[i]) user[i] = g.data()[i];
    }
  return err;
}

}  // namespace

// ints: op, dtype, row_temperature, row_k, row_p, row_min_p, in_place, top_k;
// sizes: rows, cols, ids_len, seed, offset; strides: x, y, ids (elements);
// floats: temperature, p, min_p, repetition, frequency, presence;
// ptrs / extents by SamplingRole (null = absent).
extern "C" int mtlsim_sampling(const int* ints, const unsigned long long* sizes, const long long* strides,
                               const float* floats, void* const* ptrs, const unsigned long long* extents,
                               unsigned long long seed, int shuffle, char* err, int errlen) {
  SamplingArgs a;
  a.op = SamplingOp(ints[0]);
  a.dtype = DType(ints[1]);
  a.row_temperature = ints[2] != 0;
  a.row_k = ints[3] != 0;
  a.row_p = ints[4] != 0;
  a.row_min_p = ints[5] != 0;
  a.in_place = ints[6] != 0;
  a.top_k = ints[7];
  a.rows = sizes[0];
  a.cols = sizes[1];
  a.ids_len = sizes[2];
  a.seed = sizes[3];
  a.offset = sizes[4];
  a.x_stride = strides[0];
  a.y_stride = strides[1];
  a.ids_stride = strides[2];
  a.temperature = floats[0];
  a.p = floats[1];
  a.min_p = floats[2];
  a.repetition = floats[3];
  a.frequency = floats[4];
  a.presence = floats[5];
  std::uint64_t ext[kSampRoles];
  for (int r = 0; r < kSampRoles; ++r) ext[r] = extents[r];
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
