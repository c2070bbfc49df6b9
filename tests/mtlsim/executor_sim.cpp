// The Metal executor of the simulated braze._metal (csrc/metal/module.cpp built
// on Linux by tests/mtlsim/build.py): runs a launch plan the way
// csrc/metal/executor.mm does, on the MSL simulator.
//
// Every plan array is copied into a private buffer framed by red zones (filled
// with a pattern and, under ASan, poisoned), so an out-of-bounds access is
// reported; scratch buffers start as 0xff bytes (NaN). Arrays with the same
// pointer (in place) share one buffer. When the run succeeds, the bytes the
// kernels changed in output buffers are copied back: only those, since two
// arrays may be views of one allocation whose extents overlap (q and k of a
// fused qkv), and each private copy holds the other's rows unchanged.
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor.h"
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

std::uint64_t g_seed = 0;  // the schedule: mtlsim_set_schedule
bool g_shuffle = false;

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
  void init(const void* src, std::size_t n) {
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

std::string run(const braze::metal::Plan& plan, braze::TensorList arrays) {
  using namespace braze::metal;
  std::vector<Guarded> bufs(plan.arrays.size() + plan.scratch_bytes.size() + plan.constants.size());
  for (std::size_t i = 0; i < plan.arrays.size(); ++i) {
    const PlanArray& a = plan.arrays[i];
    const braze::Tensor* owner = nullptr;
    for (const braze::Tensor* t : arrays)
      if (t->defined() && t->data == a.ptr) owner = t;
    if (!owner) return "plan binds an array that is not an argument of the call";
    bufs[i].init(a.ptr, a.bytes);
    bufs[i].user = const_cast<void*>(a.ptr);
    bufs[i].output = a.output;
    bufs[i].name = owner->name;
  }
  const std::size_t first_scratch = plan.arrays.size();
  const std::size_t first_constant = first_scratch + plan.scratch_bytes.size();
  for (std::size_t s = 0; s < plan.scratch_bytes.size(); ++s) {
    bufs[first_scratch + s].init(nullptr, plan.scratch_bytes[s]);
    bufs[first_scratch + s].name = "scratch " + std::to_string(s);
  }
  for (std::size_t c = 0; c < plan.constants.size(); ++c) {
    bufs[first_constant + c].init(plan.constants[c].data(), plan.constants[c].size());
    bufs[first_constant + c].name = "constant " + std::to_string(c);
  }
  std::string err;
  for (const Dispatch& d : plan.dispatches) {
    std::vector<void*> bound;
    for (const BufferRef& b : d.buffers) {
      std::size_t i = b.scratch >= 0    ? first_scratch + std::size_t(b.scratch)
                      : b.constant >= 0 ? first_constant + std::size_t(b.constant)
                                        : std::size_t(b.array);
      if (b.array < 0 && b.scratch < 0 && b.constant < 0) i = bufs.size();
      if (i >= bufs.size()) { err = d.kernel + ": plan binds an absent buffer"; break; }
      if (b.offset > bufs[i].bytes) { err = d.kernel + ": binding offset past the buffer"; break; }
      bound.push_back(bufs[i].data() + b.offset);
    }
    if (!err.empty()) break;
    std::vector<std::uint8_t> params = d.params;  // setBytes copies too
    bound.push_back(params.data());
    err = mtlsim::dispatch(d.kernel, d.threadgroups, d.threads, bound, {}, g_seed, g_shuffle);
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

}  // namespace

namespace braze::metal {

void execute(const Plan& plan, TensorList arrays) {
  if (!plan.error.empty()) throw std::runtime_error(plan.error);
  const std::string err = run(plan, arrays);
  if (!err.empty()) throw std::runtime_error("mtlsim: " + err);
}

std::string library_path() { return "the MSL simulator (tests/mtlsim)"; }

}  // namespace braze::metal

// Threadgroup schedule of the following launches: seed, and whether the
// simulator shuffles the order in which fibers run between barriers.
extern "C" __attribute__((visibility("default"))) void mtlsim_set_schedule(unsigned long long seed, int shuffle) {
  g_seed = seed;
  g_shuffle = shuffle != 0;
}
