#include "bindings/families.h"

namespace braze::bind {

namespace {
// The VJPs' scratch (CUDA): a contiguous 1-D uint8 array on x's device, which
// the caller allocates (braze.norm sizes it with the backend's
// norm_vjp_workspace_bytes); the launcher checks it is big enough.
void set_workspace(norm::NormVjpArgs& a, const Tensor& ws, const Tensor& x) {
  if (!ws.defined()) return;
  if (ws.dtype != DType::u8 || ws.ndim != 1 || (ws.shape[0] > 1 && ws.stride[0] != 1))
    throw ValueError("workspace must be a contiguous 1-D uint8 array");
  if (ws.device != x.device || ws.device_id != x.device_id)
    throw ValueError("workspace is not on x's device");
  a.workspace = ws.data;
  a.workspace_bytes = ws.shape[0];
}
}  // namespace

void bind_norm(nb::module_& m, const NormLaunchers& l) {
  const Launcher<norm::NormArgs> fwd = l.forward;
  const Launcher<norm::NormVjpArgs> vjp = l.vjp;
  m.def("rms_norm", [fwd](Array x, OptArray w, Array out, double eps, double w_offset, uintptr_t stream) {
    Tensor tx = tensor("x", x), tw = tensor("weight", w), to = tensor("out", out);
    auto a = norm::prepare_rms_norm(tx, tw, to, eps, w_offset);
    fwd.run(a, {&tx, &tw, &to}, stream);
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("out"), nb::arg("eps"), nb::arg("weight_offset"),
     nb::arg("stream") = 0);

  m.def("layer_norm", [fwd](Array x, OptArray w, OptArray b, Array out, double eps, uintptr_t stream) {
    Tensor tx = tensor("x", x), tw = tensor("weight", w), tb = tensor("bias", b),
           to = tensor("out", out);
    auto a = norm::prepare_layer_norm(tx, tw, tb, to, eps);
    fwd.run(a, {&tx, &tw, &tb, &to}, stream);
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("out"), nb::arg("eps"),
     nb::arg("stream") = 0);

  m.def("add_rms_norm", [fwd](Array x, Array res, OptArray w, Array out, Array res_out, double eps,
                              double w_offset, uintptr_t stream) {
    Tensor tx = tensor("x", x), tr = tensor("residual", res), tw = tensor("weight", w),
           to = tensor("out", out), th = tensor("residual_out", res_out);
    auto a = norm::prepare_add_rms_norm(tx, tr, tw, to, th, eps, w_offset);
    fwd.run(a, {&tx, &tr, &tw, &to, &th}, stream);
  }, nb::arg("x"), nb::arg("residual"), nb::arg("weight").none(), nb::arg("out"), nb::arg("residual_out"),
     nb::arg("eps"), nb::arg("weight_offset"), nb::arg("stream") = 0);

  m.def("rms_norm_gated", [fwd](Array x, Array gate, OptArray w, Array out, double eps, int64_t group_size,
                                uintptr_t stream) {
    Tensor tx = tensor("x", x), tg = tensor("gate", gate), tw = tensor("weight", w),
           to = tensor("out", out);
    auto a = norm::prepare_rms_norm_gated(tx, tg, tw, to, eps, group_size);
    fwd.run(a, {&tx, &tg, &tw, &to}, stream);
  }, nb::arg("x"), nb::arg("gate"), nb::arg("weight").none(), nb::arg("out"), nb::arg("eps"),
     nb::arg("group_size"), nb::arg("stream") = 0);

  m.def("rms_norm_vjp", [vjp](Array x, OptArray w, Array dy, Array dx, OptArray dw, double eps, double w_offset,
                              uintptr_t stream, OptArray workspace) {
    Tensor tx = tensor("x", x), tw = tensor("weight", w), tdy = tensor("dy", dy),
           tdx = tensor("dx", dx), tdw = tensor("dweight", dw), tws = tensor("workspace", workspace);
    auto a = norm::prepare_rms_norm_vjp(tx, tw, tdy, tdx, tdw, eps, w_offset);
    set_workspace(a, tws, tx);
    vjp.run(a, {&tx, &tw, &tdy, &tdx, &tdw, &tws}, stream);
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("dy"), nb::arg("dx"), nb::arg("dweight").none(),
     nb::arg("eps"), nb::arg("weight_offset"), nb::arg("stream") = 0,
     nb::arg("workspace").none() = nb::none());

  m.def("layer_norm_vjp", [vjp](Array x, OptArray w, OptArray b, Array dy, Array dx, OptArray dw, OptArray db,
                                double eps, uintptr_t stream, OptArray workspace) {
    Tensor tx = tensor("x", x), tw = tensor("weight", w), tb = tensor("bias", b),
           tdy = tensor("dy", dy), tdx = tensor("dx", dx), tdw = tensor("dweight", dw),
           tdb = tensor("dbias", db), tws = tensor("workspace", workspace);
    auto a = norm::prepare_layer_norm_vjp(tx, tw, tb, tdy, tdx, tdw, tdb, eps);
    set_workspace(a, tws, tx);
    vjp.run(a, {&tx, &tw, &tb, &tdy, &tdx, &tdw, &tdb, &tws}, stream);
  }, nb::arg("x"), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("dy"), nb::arg("dx"),
     nb::arg("dweight").none(), nb::arg("dbias").none(), nb::arg("eps"), nb::arg("stream") = 0,
     nb::arg("workspace").none() = nb::none());
}

}  // namespace braze::bind
