// C entry for running rope / rope_qk in the simulator through the same launch
// plan the Metal executor uses (csrc/metal/plans/rope.cpp).
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

#include "plans/rope.h"
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

const char* const kRoleNames[kRopeRoles] = {"q", "k", "positions", "inv_freq", "q_out", "k_out"};

std::string run(const RopeArgs& a, void* const* ptrs, const std::uint64_t* extents,
                std::uint64_t seed, bool shuffle) {
  const Plan plan = plan_rope(a);
  if (!plan.error.empty()) return "plan: " + plan.error;
  if (!plan.scratch_bytes.empty()) return "rope plans use no scratch";
  std::vector<Guarded> bufs;
  bufs.reserve(kRopeRoles);
  std::map<void*, std::size_t> by_ptr;
  int role_buf[kRopeRoles];
  for (int r = 0; r < kRopeRoles; ++r) {
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
    bufs[it->second].output |= r == kRopeQOut || r == kRopeKOut;
    role_buf[r] = int(it->second);
  }
  std::string err;
  for (const Dispatch& d : plan.dispatches) {
    std::vector<void*> bound;
    for (const BufferRef& b : d.buffers) {
      if (b.role < 0 || b.role >= kRopeRoles || role_buf[b.role] < 0) {
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
  // Only the bytes a buffer's kernel changed go back: q and k may be views of
  // one fused buffer whose extents overlap (each copy holds the other's rows).
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

// ints: qk, dtype, pos64, interleaved, inverse, in_place_q, in_place_k;
// sizes: tokens, dim, rot, q_heads, k_heads;
// strides: pos, q_tok, q_head, q_out_tok, q_out_head, k_tok, k_head, k_out_tok, k_out_head;
// ptrs / extents by RopeRole (null = absent).
extern "C" int mtlsim_rope(const int* ints, const unsigned long long* sizes, const long long* strides,
                           float scale, void* const* ptrs, const unsigned long long* extents,
                           unsigned long long seed, int shuffle, char* err, int errlen) {
  RopeArgs a;
  a.qk = ints[0] != 0;
  a.dtype = DType(ints[1]);
  a.pos64 = ints[2] != 0;
  a.interleaved = ints[3] != 0;
  a.inverse = ints[4] != 0;
  a.in_place_q = ints[5] != 0;
  a.in_place_k = ints[6] != 0;
  a.tokens = sizes[0];
  a.dim = sizes[1];
  a.rot = sizes[2];
  a.q_heads = sizes[3];
  a.k_heads = sizes[4];
  a.pos_stride = strides[0];
  a.q_tok = strides[1];
  a.q_head = strides[2];
  a.q_out_tok = strides[3];
  a.q_out_head = strides[4];
  a.k_tok = strides[5];
  a.k_head = strides[6];
  a.k_out_tok = strides[7];
  a.k_out_head = strides[8];
  a.scale = scale;
  std::uint64_t ext[kRopeRoles];
  for (int r = 0; r < kRopeRoles; ++r) ext[r] = extents[r];
  std::string e = run(a, ptrs, ext, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}
