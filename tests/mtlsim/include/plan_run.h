// Runs a portable launch plan (csrc/metal/plans/) in the simulator, the way
// the Metal executor runs it: one buffer per distinct array, bound in the
// plan's order, scalar parameters copied like setBytes.
//
// Every array is copied into a private buffer framed by red zones (filled
// with a pattern and, under ASan, poisoned), so an out-of-bounds access is
// reported; scratch buffers start as 0xff bytes (NaN). Arrays passed as the
// same pointer (in place) share one buffer. When the run succeeds, the bytes
// the kernels changed in output buffers are copied back: only those, since two
// arrays may be views of one buffer whose extents overlap (q and k of a fused
// qkv), and each private copy holds the other's rows unchanged.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plans/plan.h"
#include "runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define MTLSIM_POISON(p, n) __asan_poison_memory_region(p, n)
#define MTLSIM_UNPOISON(p, n) __asan_unpoison_memory_region(p, n)
#else
#define MTLSIM_POISON(p, n) ((void)(p), (void)(n))
#define MTLSIM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace mtlsim {

struct Guarded {
  static constexpr std::size_t kRed = 256;
  static constexpr unsigned char kRedByte = 0xa5;
  std::vector<unsigned char> mem;   // red zone | data | red zone
  std::vector<unsigned char> orig;  // the data on entry
  std::size_t bytes = 0;
  void* user = nullptr;
  bool output = false;
  std::string name;

  unsigned char* data() { return mem.data() + kRed; }
  void init(void* src, std::size_t n) {
    bytes = n;
    mem.assign(n + 2 * kRed + 16, kRedByte);  // 16: a zero-size buffer stays addressable
    if (src) std::memcpy(data(), src, n);
    else std::memset(data(), 0xff, n);
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

// Role r of `roles` is present[r], at ptrs[r] with extents[r] bytes, named
// names[r], and an output when outputs[r]. Returns "" or the first error.
inline std::string run_plan(const braze::metal::Plan& plan, int roles, const bool* present,
                            const char* const* names, void* const* ptrs, const std::uint64_t* extents,
                            const bool* outputs, std::uint64_t seed, bool shuffle) {
  if (!plan.error.empty()) return "plan: " + plan.error;
  std::vector<Guarded> bufs;
  bufs.reserve(std::size_t(roles) + plan.scratch_bytes.size());
  std::map<void*, std::size_t> by_ptr;
  std::vector<int> role_buf(std::size_t(roles), -1);
  for (int r = 0; r < roles; ++r) {
    if (!present[r]) continue;
    auto it = by_ptr.find(ptrs[r]);
    if (it == by_ptr.end()) {
      it = by_ptr.emplace(ptrs[r], bufs.size()).first;
      bufs.emplace_back();
      bufs.back().init(ptrs[r], extents[r]);
      bufs.back().user = ptrs[r];
      bufs.back().name = names[r];
    } else if (bufs[it->second].bytes != extents[r]) {
      return std::string("aliased arrays of different extents: ") + names[r];
    }
    bufs[it->second].output |= outputs[r];
    role_buf[std::size_t(r)] = int(it->second);
  }
  const std::size_t first_scratch = bufs.size();
  for (std::size_t s = 0; s < plan.scratch_bytes.size(); ++s) {
    bufs.emplace_back();
    bufs.back().init(nullptr, plan.scratch_bytes[s]);
    bufs.back().name = "scratch " + std::to_string(s);
  }
  std::string err;
  for (const braze::metal::Dispatch& d : plan.dispatches) {
    std::vector<void*> bound;
    for (const braze::metal::BufferRef& b : d.buffers) {
      Guarded* g = nullptr;
      if (b.role >= 0 && b.role < roles && role_buf[std::size_t(b.role)] >= 0) g = &bufs[std::size_t(role_buf[std::size_t(b.role)])];
      if (b.scratch >= 0 && first_scratch + std::size_t(b.scratch) < bufs.size()) g = &bufs[first_scratch + std::size_t(b.scratch)];
      if (!g) { err = d.kernel + ": plan binds an absent buffer"; break; }
      if (b.offset > g->bytes) { err = d.kernel + ": binding offset past the buffer"; break; }
      bound.push_back(g->data() + b.offset);
    }
    if (!err.empty()) break;
    std::vector<std::uint8_t> params = d.params;  // setBytes copies too
    bound.push_back(params.data());
    err = dispatch(d.kernel, d.threadgroups, d.threads, bound, {}, seed, shuffle);
    if (!err.empty()) { err = d.kernel + ": " + err; break; }
  }
  for (Guarded& g : bufs) {
    std::string e = g.release();
    if (err.empty()) err = e;
  }
  if (err.empty())
    for (Guarded& g : bufs) {
      if (!g.output || !g.user) continue;
      auto* user = static_cast<unsigned char*>(g.user);
      for (std::size_t i = 0; i < g.bytes; ++i)
        if (g.data()[i] != g.orig[i]) user[i] = g.data()[i];
    }
  return err;
}

}  // namespace mtlsim
