// The XLA FFI side of braze: one generic handler per backend, driven by a table
// of entries (one per native entry point). An entry declares the native call's
// arrays and scalars in the nanobind binding's order and adapts them to the
// family's `prepare_*` (the same validation the Python bindings run) and its
// launcher. The table is plain C++ (no XLA headers): the trace-time check
// (braze_xla_check) runs the same prepare step on shapes alone.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/attention.h"
#include "core/norm.h"
#include "core/ops.h"
#include "core/quant.h"
#include "core/quant_mx.h"
#include "core/quant_w8a8.h"
#include "core/rope.h"
#include "core/sampling.h"

namespace braze::xla {

template <class A> using Run = void (*)(const A&, uintptr_t stream);

// A backend's kernels, one per argument block (a null entry: no kernel there).
using Launchers = std::tuple<Run<norm::NormArgs>, Run<norm::NormVjpArgs>, Run<rope::Args>,
                             Run<sampling::NormalizeArgs>, Run<sampling::ArgmaxArgs>, Run<sampling::MaskArgs>,
                             Run<sampling::PenaltyArgs>, Run<sampling::SampleArgs>, Run<sampling::PhiloxArgs>,
                             Run<ops::ActArgs>, Run<ops::EmbeddingArgs>, Run<ops::HadamardArgs>,
                             Run<attention::AppendKvArgs>, Run<attention::DecodeArgs>,
                             Run<attention::PrefillArgs>, Run<attention::MergeArgs>, Run<quant::DequantArgs>,
                             Run<quant::QuantArgs>, Run<quant::ActQuantArgs>, Run<quant::MatmulArgs>,
                             Run<quant::W8A8Args>>;

// One slot of an entry's declaration: an array read (`x`), an optional one
// (`weight?`), an array written (`>out`), one read and written in place
// (`&k_cache`), or a scalar attribute `name:k`, k one of f (double), i (int64),
// b (bool), u (uint64), s (string).
struct Slot {
  std::string name;
  char kind = 0;  // 'a' array, 'f', 'i', 'b', 'u', 's'
  bool output = false, input = true, optional = false;
};

constexpr int kMaxSlots = 16;

struct Scalar {
  double f = 0;
  int64_t i = 0;  // ints, bools and uint64 bit patterns
  std::string_view s;
};

struct Entry;

// One call's decoded arguments: arrays and scalars in declaration order.
struct Call {
  const Entry* entry = nullptr;
  Tensor arrays[kMaxSlots];
  Scalar scalars[kMaxSlots];
  const Launchers* launchers = nullptr;  // null: check only (trace time)
  uintptr_t stream = 0;

  const Tensor& a(int k) const { return arrays[k]; }
  Tensor& w(int k) { return arrays[k]; }
  double f(int k) const { return scalars[k].f; }
  int64_t i(int k) const { return scalars[k].i; }
  bool b(int k) const { return scalars[k].i != 0; }
  uint64_t u(int k) const { return uint64_t(scalars[k].i); }
  std::string s(int k) const { return std::string(scalars[k].s); }

  template <class A> void launch(const A& args) const;
};

struct Entry {
  const char* name;
  const char* decl;  // the slots, space separated
  void (*run)(Call&);
  std::vector<Slot> arrays, scalars;  // parsed from decl
};

const std::vector<Entry>& entries();
const Entry* find(std::string_view name);
// "name decl" per line, for the Python side.
const std::string& declarations();

template <class A> void Call::launch(const A& args) const {
  if (!launchers) return;
  Run<A> run = std::get<Run<A>>(*launchers);
  if (!run) throw ValueError(std::string(entry->name) + ": this backend has no kernel for it");
  run(args, stream);
}

}  // namespace braze::xla
