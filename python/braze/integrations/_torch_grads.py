"""Backward formulas of the differentiable braze ops for ``torch.library.register_autograd``.

The norms, the activations and rope run their VJP kernels (``rms_norm_vjp``,
``layer_norm_vjp``, ``silu_and_mul_vjp``, ...; rope's VJP is rope with
``inverse`` flipped) through the custom ops, so a compiled backward sees them too.
"""
from __future__ import annotations

import torch

from . import _grads

_NONE_DIMS = 8  # integrations.torch.NONE_SHAPE's length: a None output


def _grad(t):
    return None if t is None or t.dim() == _NONE_DIMS else t


def _ops():
    return torch.ops.braze


# Each entry: (names of the schema arguments to save, backward(saved, grads) -> {argument name: grad}).
def _rms_norm(s, dy):
    dx, dw = _ops().rms_norm_vjp(s["x"], s["weight"], dy.contiguous(), s["eps"], s["weight_offset"])
    return {"x": dx, "weight": _grad(dw)}


def _layer_norm(s, dy):
    dx, dw, db = _ops().layer_norm_vjp(s["x"], s["weight"], s["bias"], dy.contiguous(), s["eps"])
    return {"x": dx, "weight": _grad(dw), "bias": _grad(db)}


def _add_rms_norm(s, dy, dh):
    # h = x + residual (rounded), y = rms_norm(h): both inputs get dL/dh
    dhy, dw = _ops().rms_norm_vjp(s["out1"], s["weight"], dy.contiguous(), s["eps"], s["weight_offset"])
    d = dhy + dh
    return {"x": d, "residual": d, "weight": _grad(dw)}


def _rope_args(s):
    return (s["inv_freq"], s["base"], s["rotary_dim"], s["interleaved"], s["attention_scale"], not s["inverse"])


def _rope(s, dy):
    # y = scale * R(angle) x, so dx = scale * R(-angle) dy
    return {"x": _ops().rope(dy.contiguous(), s["positions"], *_rope_args(s))}


def _rope_qk(s, dq, dk):
    gq, gk = _ops().rope_qk(dq.contiguous(), dk.contiguous(), s["positions"], *_rope_args(s))
    return {"q": gq, "k": gk}


class _Ops:
    """``_grads``' ops table over torch.ops.braze (dy made contiguous)."""

    def __getitem__(self, name):
        return lambda x, dy, **kw: getattr(_ops(), name)(x, dy.contiguous(), **kw)


def _shared(name):
    """``_grads``' backward of ``name`` (an activation: its VJP kernel) on the saved arguments."""
    return lambda s, dy: _grads.BACKWARD[name](s, None, dy, _Ops())


BACKWARD = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "add_rms_norm": _add_rms_norm,
    "rope": _rope,
    "rope_qk": _rope_qk,
    **{name: _shared(name) for name in _grads.ACT_OPTIONS},
}


def _lib():
    from .torch import _LIB

    return _LIB


def register(op, d):
    """Registers the backward of op (its qualified name; ``d`` its OpDesc) where BACKWARD has one."""
    backward = BACKWARD.get(d.spec.name)
    if backward is None:
        return
    from .torch import _names

    names = [n for n, _ in _names(d)]

    def setup_context(ctx, inputs, output):
        ctx.saved = dict(zip(names, inputs))
        outs = output if isinstance(output, tuple) else (output,)
        ctx.saved.update({f"out{i}": o for i, o in enumerate(outs)})

    def bwd(ctx, *grads):
        got = backward(ctx.saved, *grads)
        return tuple(got.get(n) for n in names)

    torch.library.register_autograd(op, bwd, setup_context=setup_context, lib=_lib())
