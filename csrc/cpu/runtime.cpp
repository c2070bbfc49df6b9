#include "cpu/runtime.h"
#include "cpu/hw_bf16.h"

#include "core/error.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include <pthread.h>
#if defined(__linux__)
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace braze::cpu {

// ---------------------------------------------------------------- ISA choice
const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx2: return "avx2";
    default: return "base";
  }
}

bool isa_built(Isa isa) {
  switch (isa) {
#if defined(BRAZE_HAVE_ISA_avx512)
    case Isa::avx512: return true;
#endif
#if defined(BRAZE_HAVE_ISA_avx2)
    case Isa::avx2: return true;
#endif
    case Isa::base: return true;
    default: return false;
  }
}

bool isa_supported(Isa isa) {
  if (!isa_built(isa)) return false;
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  if (isa == Isa::avx512)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma");
  if (isa == Isa::avx2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return isa == Isa::base;
}

Isa best_isa() {
  for (Isa i : {Isa::avx512, Isa::avx2})
    if (isa_supported(i)) return i;
  return Isa::base;
}

static std::atomic<int> g_isa{-1};

Isa active_isa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    Isa i = best_isa();
    if (const char* env = std::getenv("BRAZE_CPU_ISA")) {
      for (Isa c : {Isa::base, Isa::avx2, Isa::avx512})
        if (std::string(env) == isa_name(c) && isa_supported(c)) i = c;
    }
    v = int(i);
    g_isa.store(v);
  }
  return Isa(v);
}

void set_isa(Isa isa) { g_isa.store(int(isa)); }

// ---------------------------------------------------------------- thread pool
namespace {

int default_threads() {
  if (const char* env = std::getenv("BRAZE_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
#endif
  return std::max(1u, std::thread::hardware_concurrency());
}

// True on a thread while it runs pool tasks (every worker, and a caller inside
// run()): a parallel_for from there runs inline, as the pool is busy with the
// enclosing job and waiting for it would never end.
thread_local bool tls_in_task = false;

struct InTask {
  bool saved = tls_in_task;
  InTask() { tls_in_task = true; }
  ~InTask() { tls_in_task = saved; }
};

// Spins `pred` for up to spin_us() microseconds; false if it never held. A pool
// thread that sleeps on a condition variable needs a wake-up from the kernel
// (tens of microseconds on a virtual machine's idle vCPU), which costs more than
// a decode-sized op; spinning a while first, as OpenMP runtimes and llama.cpp's
// thread pool do, hands the next job over in well under a microsecond.
int64_t spin_us() {
  static const int64_t us = [] {
    const char* env = std::getenv("BRAZE_SPIN_US");
    return env ? std::max<int64_t>(0, std::atoll(env)) : int64_t(100);
  }();
  return us;
}

template <class Pred> bool spin_until(const Pred& pred) {
  const int64_t us = spin_us();
  if (us == 0) return pred();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  for (int i = 1;; ++i) {
    if (pred()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

// Workers spin, then sleep on a condition variable, between jobs; a job hands
// out task indices through one atomic counter, and the caller works too. The
// job's fields are written before generation_ is bumped (release), and a worker
// reads them after it sees the new generation (acquire).
class Pool {
 public:
  explicit Pool(int n) { resize(n); }

  int size() const { return int(workers_.size()) + 1; }

  // New workers start from the current generation: a worker that took an
  // earlier job for a new one would decrement active_ for it, and run() could
  // then return before the work is done, or never.
  void resize(int n) {
    std::lock_guard<std::mutex> one_job(job_mutex_);
    stop();
    quit_.store(false);
    const uint64_t g = generation_.load();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, g] { loop(i, g); });
  }

  void run(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
    std::lock_guard<std::mutex> one_job(job_mutex_);  // callers from several Python threads queue up
    {
      std::lock_guard<std::mutex> lk(m_);
      fn_ = &fn;
      tasks_ = tasks;
      next_.store(0);
      active_.store(int(workers_.size()));
      error_ = nullptr;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    {
      InTask in;
      work(0);
    }
    if (!spin_until([this] { return active_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lk(m_);
      done_cv_.wait(lk, [this] { return active_.load(std::memory_order_acquire) == 0; });
    }
    std::exception_ptr err;
    {
      std::lock_guard<std::mutex> lk(m_);
      fn_ = nullptr;
      std::swap(err, error_);
    }
    if (err) std::rethrow_exception(err);  // the first one; every worker has finished
  }

 private:
  // A task that throws ends the job: the exception is kept for run() to
  // rethrow, and tasks not yet started are skipped.
  void work(int worker) {
    for (int64_t t; (t = next_.fetch_add(1)) < tasks_;) {
      try {
        (*fn_)(t, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lk(m_);
        if (!error_) error_ = std::current_exception();
        next_.store(tasks_);
      }
    }
  }

  void loop(int worker, uint64_t seen) {
    tls_in_task = true;
    for (;;) {
      const auto ready = [&] { return quit_.load(std::memory_order_acquire) ||
                                      generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(ready)) {
        std::unique_lock<std::mutex> lk(m_);
        cv_.wait(lk, ready);
      }
      if (quit_.load(std::memory_order_acquire)) return;
      seen = generation_.load(std::memory_order_acquire);
      work(worker);
      // the last one out tells a caller that may be asleep (under m_: it cannot
      // miss the notification between checking active_ and waiting)
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lk(m_);
        done_cv_.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(m_);
      quit_.store(true);
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex job_mutex_, m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int)>* fn_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> quit_{false};
  std::exception_ptr error_;
};

// The pool is made on first use. A forked child has only the thread that
// called fork: the parent's workers do not exist there and its locks may be
// held by them, so the child abandons the whole slot (never joins, never
// unlocks, never destroys) and makes a pool of its own on first use.
struct Slot {
  std::mutex m;
  std::atomic<Pool*> pool{nullptr};
};
std::atomic<Slot*> g_slot{new Slot};  // leaked on purpose: workers may outlive static teardown
std::atomic<int> g_threads{0};        // set_num_threads' count; 0 = default_threads()

void forget_pool_in_child() { g_slot.store(new Slot); }

Pool& pool() {
  static const bool registered = (pthread_atfork(nullptr, nullptr, forget_pool_in_child), true);
  (void)registered;
  Slot* s = g_slot.load(std::memory_order_acquire);
  if (Pool* p = s->pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard<std::mutex> lk(s->m);
  if (!s->pool.load(std::memory_order_relaxed)) {
    const int n = g_threads.load();
    s->pool.store(new Pool(n > 0 ? n : default_threads()), std::memory_order_release);
  }
  return *s->pool.load(std::memory_order_relaxed);
}

}  // namespace

int num_threads() { return pool().size(); }

namespace {
// The last-level cache as the OS describes this CPU's view of it (sysfs; glibc's
// sysconf can report the whole package's L3 instead of the share a core sees).
int64_t llc_bytes() {
#if defined(__linux__)
  for (const char* level : {"3", "2"}) {
    std::ifstream f(std::string("/sys/devices/system/cpu/cpu0/cache/index") + level + "/size");
    int64_t v = 0;
    std::string unit;
    if (f >> v && v > 0) {
      f >> unit;
      return v << (unit == "K" ? 10 : unit == "M" ? 20 : 0);
    }
  }
#endif
  return int64_t(32) << 20;
}
std::atomic<int64_t> g_stream_min{-1};
}  // namespace

int64_t stream_min_bytes() {
  static const int64_t fallback = llc_bytes() / 2;
  const int64_t v = g_stream_min.load(std::memory_order_relaxed);
  return v < 0 ? fallback : v;
}

void set_stream_min_bytes(int64_t bytes) { g_stream_min.store(bytes < 0 ? -1 : bytes); }

namespace {
std::atomic<bool> g_int8_act{true};
}
bool quant_int8_activations() { return g_int8_act.load(std::memory_order_relaxed); }
void set_quant_int8_activations(bool on) { g_int8_act.store(on, std::memory_order_relaxed); }

bool cpu_has_vnni() {
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
bool cpu_has_avx512bf16() {
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  return isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}
bool cpu_has_amx() {
#if defined(BRAZE_HAVE_AMX) && defined(__linux__) && defined(__x86_64__)
  static const bool ok = [] {
    if (!isa_supported(Isa::avx512)) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((d >> 24) & 1u) || !((d >> 25) & 1u)) return false;  // AMX-TILE, AMX-INT8
    // Linux enables the 8 KiB tile state per process on request (kernel 5.16+); a kernel
    // or hypervisor without it refuses, and the first tile instruction would fault.
    constexpr int kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtiledata = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) != 0) return false;
    unsigned long perm = 0;
    return syscall(SYS_arch_prctl, kGetXcompPerm, &perm) == 0 && ((perm >> kXtiledata) & 1u);
  }();
  return ok;
#else
  return false;
#endif
}

namespace {
// A kernel choice that is on where the CPU has its feature, until set; setting
// it on where the CPU lacks it is a ValueError naming `on`. `env`, where named,
// set to 0 turns the default off.
struct FeatureSwitch {
  std::atomic<int> v{-1};  // -1: not chosen yet
  bool (*has)();
  const char* lacks;
  const char* env = nullptr;
  bool get() {
    int c = v.load(std::memory_order_relaxed);
    if (c < 0) {
      const char* e = env ? std::getenv(env) : nullptr;
      c = has() && !(e && std::string(e) == "0") ? 1 : 0;
      v.store(c, std::memory_order_relaxed);
    }
    return c == 1;
  }
  void set(bool on) {
    if (on && !has()) throw ValueError(lacks);
    v.store(on ? 1 : 0, std::memory_order_relaxed);
  }
};
FeatureSwitch g_vnni{-1, cpu_has_vnni, "on: this CPU (or build) has no AVX-512 VNNI"};
FeatureSwitch g_hw_bf16{-1, cpu_has_avx512bf16, "on: this CPU (or build) has no AVX-512 BF16"};
FeatureSwitch g_amx{-1, cpu_has_amx, "on: this CPU, OS (or build) has no AMX-INT8", "BRAZE_CPU_AMX"};
}  // namespace
bool quant_amx() { return g_amx.get(); }
void set_quant_amx(bool on) { g_amx.set(on); }
namespace {
std::atomic<bool> g_amx_emulated{false};
}
bool quant_amx_emulated() { return g_amx_emulated.load(std::memory_order_relaxed); }
void set_quant_amx_emulated(bool on) { g_amx_emulated.store(on, std::memory_order_relaxed); }
bool quant_vnni() { return g_vnni.get(); }
void set_quant_vnni(bool on) { g_vnni.set(on); }
bool hw_bf16() { return g_hw_bf16.get(); }
void set_hw_bf16(bool on) { g_hw_bf16.set(on); }

void set_num_threads(int n) {
  g_threads.store(std::max(1, n));
  pool().resize(std::max(1, n));
}

void parallel_for(int64_t tasks, const std::function<void(int64_t, int)>& fn) {
  if (tasks <= 0) return;
  if (tasks == 1 || tls_in_task || num_threads() == 1) {
    for (int64_t t = 0; t < tasks; ++t) fn(t, 0);
    return;
  }
  pool().run(tasks, fn);
}

void parallel_rows(int64_t rows, int64_t bytes_per_row, const std::function<void(int64_t, int64_t)>& fn) {
  if (rows <= 0) return;
  constexpr int64_t kMinBytes = 1 << 17;  // below this, waking threads costs more than it saves
  int64_t threads = num_threads();
  int64_t total = rows * std::max<int64_t>(bytes_per_row, 1);
  int64_t chunks = std::min<int64_t>({rows, total / kMinBytes, threads * 4});
  if (chunks <= 1) {
    fn(0, rows);
    return;
  }
  // Round to a multiple of the thread count so static shares stay even.
  if (chunks > threads) chunks -= chunks % threads;
  parallel_for(chunks, [&](int64_t c, int) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

int64_t pool_self_test(const std::string& kind) {
  if (kind == "nested") {
    std::atomic<int64_t> inner{0};
    parallel_for(16, [&](int64_t, int) { parallel_for(16, [&](int64_t, int) { inner.fetch_add(1); }); });
    return inner.load();
  }
  if (kind == "throw") {
    std::atomic<int64_t> ran{0};
    parallel_for(64, [&](int64_t t, int) {
      if (t == 13) throw ValueError("task 13 failed");
      ran.fetch_add(1);
    });
    return ran.load();
  }
  throw ValueError("kind must be 'nested' or 'throw', got '" + kind + "'");
}

}  // namespace braze::cpu
