// braze._metal: the six norm ops on Apple GPUs. Arguments are validated by the
// backend-neutral core (core/norm.h, the same checks as every backend); the
// launch is the portable plan (plans/norm.cpp) run by the executor.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "bindings/common.h"
#include "bindings/exceptions.h"
#include "core/norm.h"
#include "executor.h"
#include "plans/norm.h"

namespace nb = nanobind;
using namespace braze;
using bind::Array;
using bind::OptArray;

namespace {

// numpy arrays (CPU, unified memory) and DLPack device-8 arrays both run
// here, but not mixed in one call.
void require_metal_devices(std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;
    if (t->device != Device::cpu && t->device != Device::metal)
      throw ValueError(std::string(t->name) + " is neither a host nor a Metal array");
    if (first && t->device != first->device)
      throw ValueError(std::string(t->name) + " and " + first->name + " are on different devices");
    if (!first) first = t;
  }
}

metal::DType metal_dtype(DType d) {
  switch (d) {
    case DType::f32: return metal::DType::f32;
    case DType::f16: return metal::DType::f16;
    case DType::bf16: return metal::DType::bf16;
    default: throw TypeError("Metal norm kernels take float32, float16 or bfloat16");
  }
}

void run(const norm::Args& a) {
  if (a.w || a.b || a.dw || a.db) {
    if (a.wdtype != a.dtype) throw TypeError("Metal norm kernels take weight / bias in x's dtype");
  }
  using metal::NormRole;
  metal::NormArgs p;
  p.op = metal::NormOp(int(a.op));  // same order as norm::Op
  p.dtype = metal_dtype(a.dtype);
  p.rows = std::uint64_t(a.rows);
  p.n = std::uint64_t(a.cols);
  p.eps = a.eps;
  p.weight_offset = a.w_offset;
  p.group_size = a.op == norm::Op::rms_norm_gated && a.group != a.cols ? std::uint64_t(a.group) : 0;
  const std::uint64_t es = metal::dtype_size(p.dtype);
  const bool on_device = a.device == Device::metal;
  metal::ArgBuffer roles[metal::kNormRoles];
  auto set = [&](int role, const void* ptr, std::int64_t stride, bool row, bool out) {
    if (!ptr) return;
    p.present[role] = true;
    p.row_stride[role] = row ? stride : 0;
    metal::ArgBuffer& b = roles[role];
    b.ptr = const_cast<void*>(ptr);
    b.device_buffer = on_device;
    b.output = out;
    b.bytes = row ? (a.rows ? (std::uint64_t(a.rows - 1) * std::uint64_t(stride) + p.n) * es : 0)
                  : p.n * es;
  };
  set(metal::kNormX, a.x, a.x_stride, true, false);
  set(metal::kNormAux, a.r, a.r_stride, true, false);
  set(metal::kNormWeight, a.w, 0, false, false);
  set(metal::kNormBias, a.b, 0, false, false);
  set(metal::kNormOut, a.y, a.y_stride, true, true);
  set(metal::kNormAuxOut, a.h, a.h_stride, true, true);
  set(metal::kNormDWeight, a.dw, 0, false, true);
  set(metal::kNormDBias, a.db, 0, false, true);
  const metal::Plan plan = metal::plan_norm(p);
  if (!plan.error.empty()) throw ValueError(plan.error);
  nb::gil_scoped_release nogil;
  metal::execute(plan, roles, metal::kNormRoles);
}

Tensor T(const char* name, const OptArray& a, bool bf16) { return bind::tensor(name, a, bf16); }

}  // namespace

NB_MODULE(_metal, m) {
  bind::register_exceptions(m);
  m.def("rms_norm", [](Array x, OptArray w, Array out, double eps, double w_offset, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tw = T("weight", w, bf16), to = T("out", out, bf16);
    require_metal_devices({&tx, &tw, &to});
    run(norm::prepare_rms_norm(tx, tw, to, eps, w_offset));
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("out"), nb::arg("eps"),
     nb::arg("weight_offset"), nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("layer_norm", [](Array x, OptArray w, OptArray b, Array out, double eps, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tw = T("weight", w, bf16), tb = T("bias", b, bf16),
           to = T("out", out, bf16);
    require_metal_devices({&tx, &tw, &tb, &to});
    run(norm::prepare_layer_norm(tx, tw, tb, to, eps));
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("out"),
     nb::arg("eps"), nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("add_rms_norm", [](Array x, Array res, OptArray w, Array out, Array res_out, double eps,
                           double w_offset, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tr = T("residual", res, bf16), tw = T("weight", w, bf16),
           to = T("out", out, bf16), th = T("residual_out", res_out, bf16);
    require_metal_devices({&tx, &tr, &tw, &to, &th});
    run(norm::prepare_add_rms_norm(tx, tr, tw, to, th, eps, w_offset));
  }, nb::arg("x"), nb::arg("residual"), nb::arg("weight").none(), nb::arg("out"),
     nb::arg("residual_out"), nb::arg("eps"), nb::arg("weight_offset"), nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("rms_norm_gated", [](Array x, Array gate, OptArray w, Array out, double eps,
                             int64_t group_size, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tg = T("gate", gate, bf16), tw = T("weight", w, bf16),
           to = T("out", out, bf16);
    require_metal_devices({&tx, &tg, &tw, &to});
    run(norm::prepare_rms_norm_gated(tx, tg, tw, to, eps, group_size));
  }, nb::arg("x"), nb::arg("gate"), nb::arg("weight").none(), nb::arg("out"), nb::arg("eps"),
     nb::arg("group_size"), nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("rms_norm_vjp", [](Array x, OptArray w, Array dy, Array dx, OptArray dw, double eps,
                           double w_offset, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tw = T("weight", w, bf16), tdy = T("dy", dy, bf16),
           tdx = T("dx", dx, bf16), tdw = T("dweight", dw, bf16);
    require_metal_devices({&tx, &tw, &tdy, &tdx, &tdw});
    run(norm::prepare_rms_norm_vjp(tx, tw, tdy, tdx, tdw, eps, w_offset));
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("dy"), nb::arg("dx"),
     nb::arg("dweight").none(), nb::arg("eps"), nb::arg("weight_offset"), nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("layer_norm_vjp", [](Array x, OptArray w, OptArray b, Array dy, Array dx, OptArray dw,
                             OptArray db, double eps, bool bf16, uintptr_t /*stream*/) {
    Tensor tx = T("x", x, bf16), tw = T("weight", w, bf16), tb = T("bias", b, bf16),
           tdy = T("dy", dy, bf16), tdx = T("dx", dx, bf16), tdw = T("dweight", dw, bf16),
           tdb = T("dbias", db, bf16);
    require_metal_devices({&tx, &tw, &tb, &tdy, &tdx, &tdw, &tdb});
    run(norm::prepare_layer_norm_vjp(tx, tw, tb, tdy, tdx, tdw, tdb, eps));
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("dy"),
     nb::arg("dx"), nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("eps"),
     nb::arg("bf16") = false, nb::arg("stream") = 0);

  m.def("library_path", &metal::library_path, "Where braze.metallib was loaded from.");
}
