// Simulator runtime: runs every Metal thread of a threadgroup as a ucontext
// fiber. A fiber runs until it reaches a collective (threadgroup_barrier or a
// SIMD-group function) or returns; the scheduler then resolves collectives
// that every participant has reached. Misuse is reported, never hung on.
#include "runtime.h"

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define MTLSIM_ASAN 1
#else
#define MTLSIM_ASAN 0
#endif

namespace mtlsim {
namespace {

constexpr unsigned kSimdWidth = 32;
constexpr std::size_t kMaxThreadgroupMemory = 32768;  // Apple GPU limit
constexpr std::size_t kStackSize = MTLSIM_ASAN ? (256u << 10) : (64u << 10);

enum class State { ready, at_barrier, at_simd, done };

struct Fiber {
  ucontext_t ctx;
  char* stack = nullptr;
  State state = State::ready;
  unsigned index = 0;
  ThreadCtx tc;
  std::size_t tg_cursor = 0;
  SimdSlot slot;
  void* asan_fake = nullptr;
};

struct Launch {
  Entry entry = nullptr;
  std::vector<Fiber> fibers;
  ucontext_t sched;
  Fiber* cur = nullptr;
  std::vector<char> arena;
  std::size_t static_base = 0;
  std::vector<char*> tg_args;
  std::string error;
  unsigned group[3] = {0, 0, 0};
  void* sched_fake = nullptr;
  const void* sched_bottom = nullptr;
  std::size_t sched_size = 0;
};
Launch* g = nullptr;

std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}

void fail(const std::string& what) {
  if (!g->error.empty()) return;
  char where[96];
  std::snprintf(where, sizeof where, " (threadgroup %u,%u,%u)", g->group[0], g->group[1],
                g->group[2]);
  g->error = what + where;
}

void to_scheduler(Fiber* f, bool dying) {
#if MTLSIM_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &f->asan_fake, g->sched_bottom, g->sched_size);
#endif
  swapcontext(&f->ctx, &g->sched);
#if MTLSIM_ASAN
  __sanitizer_finish_switch_fiber(f->asan_fake, &g->sched_bottom, &g->sched_size);
#endif
  (void)dying;
}

void fiber_main() {
#if MTLSIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g->sched_bottom, &g->sched_size);
#endif
  Fiber* f = g->cur;
  g->entry(f->tc);
  f->state = State::done;
  to_scheduler(f, true);
}

void resume(Fiber* f) {
  g->cur = f;
#if MTLSIM_ASAN
  __sanitizer_start_switch_fiber(&g->sched_fake, f->stack, kStackSize);
#endif
  swapcontext(&g->sched, &f->ctx);
#if MTLSIM_ASAN
  __sanitizer_finish_switch_fiber(g->sched_fake, nullptr, nullptr);
#endif
  g->cur = nullptr;
}

constexpr std::size_t kGuard = 4096;

// Fiber stacks, kept for the life of the process: one guard page (overflow
// faults instead of corrupting) below each stack.
char* stack_pool(unsigned nthreads) {
  static char* pool = nullptr;
  static unsigned have = 0;
  if (nthreads <= have) return pool;
  const std::size_t per = kStackSize + kGuard;
  void* m = mmap(nullptr, per * nthreads, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  char* p = static_cast<char*>(m);
  for (unsigned i = 0; i < nthreads; ++i) mprotect(p + i * per, kGuard, PROT_NONE);
  if (pool) munmap(pool, per * have);
  pool = p;
  have = nthreads;
  return pool;
}

std::string thread_name(const Fiber& f) { return "thread " + std::to_string(f.index); }

// Resolves the SIMD collective of simdgroup `sg` if all its live lanes wait.
bool resolve_simd(unsigned sg, unsigned nthreads) {
  unsigned first = sg * kSimdWidth, last = std::min(first + kSimdWidth, nthreads);
  unsigned live = 0, waiting = 0;
  for (unsigned i = first; i < last; ++i) {
    State s = g->fibers[i].state;
    if (s != State::done) live |= 1u << (i - first);
    if (s == State::at_simd) waiting |= 1u << (i - first);
  }
  if (waiting == 0 || waiting != live) return false;
  SimdSlot slots[kSimdWidth];
  const Fiber* lead = nullptr;
  for (unsigned i = first; i < last; ++i) {
    const Fiber& f = g->fibers[i];
    slots[i - first] = f.slot;
    if (f.state != State::at_simd) continue;
    if (!lead) { lead = &f; continue; }
    if (f.slot.fn != lead->slot.fn || f.slot.site != lead->slot.site) {
      fail("divergent SIMD-group functions: " + thread_name(f) + " and " + thread_name(*lead) +
           " of one simdgroup reached different SIMD-group calls");
      return false;
    }
  }
  SimdGroupView view{slots, live};
  for (unsigned i = first; i < last; ++i) {
    Fiber& f = g->fibers[i];
    if (f.state != State::at_simd) continue;
    if (f.slot.fn) f.slot.fn(view, i - first);
    std::memcpy(f.slot.out, slots[i - first].out, sizeof f.slot.out);
    f.state = State::ready;
  }
  return true;
}

void run_threadgroup(std::mt19937_64* rng) {
  const unsigned n = unsigned(g->fibers.size());
  std::fill(g->arena.begin(), g->arena.end(), char(0xff));  // NaN in every float width
  for (Fiber& f : g->fibers) {
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackSize;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_main, 0);
    f.state = State::ready;
    f.tg_cursor = g->static_base;
    f.slot = SimdSlot();
  }
  std::vector<Fiber*> order;
  for (;;) {
    order.clear();
    for (Fiber& f : g->fibers)
      if (f.state == State::ready) order.push_back(&f);
    if (rng) std::shuffle(order.begin(), order.end(), *rng);
    for (Fiber* f : order) {
      resume(f);
      if (!g->error.empty()) return;
    }
    unsigned done = 0, at_barrier = 0;
    for (const Fiber& f : g->fibers) {
      done += f.state == State::done;
      at_barrier += f.state == State::at_barrier;
    }
    if (done == n) return;
    bool progressed = false;
    if (at_barrier == n) {
      for (Fiber& f : g->fibers) f.state = State::ready;
      progressed = true;
    } else if (at_barrier > 0 && at_barrier + done == n) {
      const Fiber* gone = nullptr;
      for (const Fiber& f : g->fibers)
        if (f.state == State::done) { gone = &f; break; }
      fail("early return before threadgroup_barrier: " + thread_name(*gone) + " returned while " +
           std::to_string(at_barrier) + " threads wait at a barrier");
      return;
    }
    for (unsigned sg = 0; sg * kSimdWidth < n; ++sg) {
      progressed |= resolve_simd(sg, n);
      if (!g->error.empty()) return;
    }
    if (!progressed) {
      unsigned at_simd = n - done - at_barrier;
      fail("deadlock: divergent control flow around collectives (" + std::to_string(at_barrier) +
           " threads at threadgroup_barrier, " + std::to_string(at_simd) +
           " at SIMD-group functions, " + std::to_string(done) + " returned)");
      return;
    }
  }
}

}  // namespace

Registrar::Registrar(const char* host_name, Entry e) { registry()[host_name] = e; }

SimdSlot& simd_slot() { return g->cur->slot; }

void simd_wait() {
  Fiber* f = g->cur;
  f->state = State::at_simd;
  to_scheduler(f, false);
}

void tg_barrier() {
  Fiber* f = g->cur;
  f->state = State::at_barrier;
  to_scheduler(f, false);
}

void simd_fail(const char* what, unsigned lane, unsigned arg) {
  fail(std::string(what) + " (lane " + std::to_string(lane) + ", argument " +
       std::to_string(arg) + ")");
}

void* tg_alloc(std::size_t size, std::size_t align) {
  Fiber* f = g->cur;
  std::size_t at = (f->tg_cursor + align - 1) / align * align;
  if (at + size > kMaxThreadgroupMemory) {
    fail("threadgroup memory exceeds 32 KiB");
    to_scheduler(f, false);  // never resumed: the launch is abandoned
  }
  f->tg_cursor = at + size;
  return g->arena.data() + at;
}

bool has_kernel(const std::string& kernel) { return registry().count(kernel) != 0; }

std::string dispatch(const std::string& kernel, const unsigned grid[3], const unsigned tg[3],
                     const std::vector<void*>& buffers, const std::vector<std::size_t>& tg_args,
                     std::uint64_t seed, bool shuffle) {
  auto it = registry().find(kernel);
  if (it == registry().end()) return "no kernel named '" + kernel + "' in the simulated library";
  const unsigned nthreads = tg[0] * tg[1] * tg[2];
  if (nthreads == 0 || nthreads > 1024) return "threads per threadgroup must be in [1, 1024]";
  Launch launch;
  Launch* saved = g;
  g = &launch;
  launch.entry = it->second;
  std::size_t dyn = 0;
  std::vector<std::size_t> offsets;
  for (std::size_t b : tg_args) {
    offsets.push_back(dyn);
    dyn += (b + 15) / 16 * 16;
  }
  launch.static_base = dyn;
  launch.arena.assign(kMaxThreadgroupMemory, 0);
  for (std::size_t o : offsets) launch.tg_args.push_back(launch.arena.data() + o);
  std::string err;
  if (dyn > kMaxThreadgroupMemory) err = "threadgroup memory exceeds 32 KiB";
  char* stacks = err.empty() ? stack_pool(nthreads) : nullptr;
  if (err.empty() && !stacks) err = "cannot map fiber stacks";
  std::vector<std::uint64_t> groups;
  if (err.empty()) {
    launch.fibers.resize(nthreads);
    for (unsigned i = 0; i < nthreads; ++i) {
      launch.fibers[i].stack = stacks + std::size_t(i) * (kStackSize + kGuard) + kGuard;
      launch.fibers[i].index = i;
    }
    for (std::uint64_t z = 0; z < grid[2]; ++z)
      for (std::uint64_t y = 0; y < grid[1]; ++y)
        for (std::uint64_t x = 0; x < grid[0]; ++x) groups.push_back(x | y << 21 | z << 42);
  }
  std::mt19937_64 rng(seed);
  if (shuffle) std::shuffle(groups.begin(), groups.end(), rng);
  const unsigned sgs = (nthreads + kSimdWidth - 1) / kSimdWidth;
  for (std::uint64_t gid : groups) {
    const unsigned G[3] = {unsigned(gid & 0x1fffff), unsigned(gid >> 21 & 0x1fffff),
                           unsigned(gid >> 42)};
    std::memcpy(launch.group, G, sizeof G);
    for (unsigned i = 0; i < nthreads; ++i) {
      ThreadCtx& c = launch.fibers[i].tc;
      const unsigned T[3] = {i % tg[0], i / tg[0] % tg[1], i / (tg[0] * tg[1])};
      c.buffers = buffers.data();
      c.tg_args = launch.tg_args.data();
      for (int d = 0; d < 3; ++d) {
        c.builtin[int(Builtin::thread_position_in_grid)][d] = G[d] * tg[d] + T[d];
        c.builtin[int(Builtin::thread_position_in_threadgroup)][d] = T[d];
        c.builtin[int(Builtin::threadgroup_position_in_grid)][d] = G[d];
        c.builtin[int(Builtin::threads_per_threadgroup)][d] = tg[d];
        c.builtin[int(Builtin::threadgroups_per_grid)][d] = grid[d];
        c.builtin[int(Builtin::threads_per_grid)][d] = grid[d] * tg[d];
        c.builtin[int(Builtin::thread_index_in_threadgroup)][d] = d ? 0 : i;
        c.builtin[int(Builtin::thread_index_in_simdgroup)][d] = d ? 0 : i % kSimdWidth;
        c.builtin[int(Builtin::simdgroup_index_in_threadgroup)][d] = d ? 0 : i / kSimdWidth;
        c.builtin[int(Builtin::simdgroups_per_threadgroup)][d] = d ? 0 : sgs;
        c.builtin[int(Builtin::threads_per_simdgroup)][d] = d ? 0 : kSimdWidth;
      }
    }
    run_threadgroup(shuffle ? &rng : nullptr);
    if (!launch.error.empty()) break;
  }
  if (err.empty()) err = launch.error;
#if MTLSIM_ASAN
  for (const Fiber& f : launch.fibers)  // frames of fibers abandoned on an error
    if (f.state != State::done) __asan_unpoison_memory_region(f.stack, kStackSize);
#endif
  g = saved;
  return err;
}

}  // namespace mtlsim

extern "C" __attribute__((visibility("default"))) int mtlsim_dispatch(const char* kernel, const unsigned* grid, const unsigned* tg,
                               void* const* buffers, int nbuffers, const unsigned long long* tg_args,
                               int ntg_args, unsigned long long seed, int shuffle, char* err,
                               int errlen) {
  std::vector<void*> b(buffers, buffers + nbuffers);
  std::vector<std::size_t> t(tg_args, tg_args + ntg_args);
  std::string e = mtlsim::dispatch(kernel, grid, tg, b, t, seed, shuffle != 0);
  std::snprintf(err, std::size_t(errlen), "%s", e.c_str());
  return e.empty() ? 0 : 1;
}

// Whether the library holds a kernel of this host name (the registry test asks).
extern "C" __attribute__((visibility("default"))) int mtlsim_has_kernel(const char* kernel) {
  return mtlsim::has_kernel(kernel) ? 1 : 0;
}
