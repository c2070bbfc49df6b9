"""torch and Liger peers of the norm family."""
from __future__ import annotations


def _F():
    import torch.nn.functional as F

    return F


def _w(w, off):
    return w if w is None or off == 0.0 else w + off


def rms_norm(x, weight=None, *, eps=1e-6, weight_offset=0.0):
    return _F().rms_norm(x, (x.shape[-1],), _w(weight, weight_offset), eps)


def layer_norm(x, weight=None, bias=None, *, eps=1e-5):
    return _F().layer_norm(x, (x.shape[-1],), weight, bias, eps)


def add_rms_norm(x, residual, weight=None, *, eps=1e-6, weight_offset=0.0):
    h = x + residual
    return rms_norm(h, weight, eps=eps, weight_offset=weight_offset), h


def rms_norm_vjp(x, weight, dy, *, eps=1e-6, weight_offset=0.0):
    import torch

    with torch.enable_grad():
        xg = x.detach().requires_grad_()
        wg = None if weight is None else weight.detach().requires_grad_()
        y = rms_norm(xg, wg, eps=eps, weight_offset=weight_offset)
        grads = torch.autograd.grad(y, [t for t in (xg, wg) if t is not None], dy)
    return grads[0], (grads[1] if wg is not None else None)


def layer_norm_vjp(x, weight, bias, dy, *, eps=1e-5):
    import torch

    with torch.enable_grad():
        ts = [t if t is None else t.detach().requires_grad_() for t in (x, weight, bias)]
        y = layer_norm(*ts, eps=eps)
        live = [t for t in ts if t is not None]
        g = list(torch.autograd.grad(y, live, dy))
    return tuple(None if t is None else g.pop(0) for t in ts)


torch_ops = {"rms_norm": rms_norm, "layer_norm": layer_norm, "add_rms_norm": add_rms_norm,
             "rms_norm_vjp": rms_norm_vjp, "layer_norm_vjp": layer_norm_vjp}


def liger_rms_norm(x, weight=None, *, eps=1e-6, weight_offset=0.0):
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    return LigerRMSNormFunction.apply(x, weight, eps, weight_offset, "llama", False)


def liger_layer_norm(x, weight=None, bias=None, *, eps=1e-5):
    from liger_kernel.ops.layer_norm import LigerLayerNormFunction

    return LigerLayerNormFunction.apply(x, weight, bias, eps)


liger_ops = {"rms_norm": liger_rms_norm, "layer_norm": liger_layer_norm}
