"""Backward formulas of the differentiable braze ops for ``torch.library.register_autograd``.

The norms and rope run their VJP kernels (``rms_norm_vjp``, ``layer_norm_vjp``;
rope's VJP is rope with ``inverse`` flipped) through the custom ops, so a
compiled backward sees them too. The activations have no VJP kernels yet: their
backward is a composition of torch ops in float32 (the derivative written out,
not autograd of the forward), cast to x's dtype.
"""
from __future__ import annotations

import math

import torch

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


def _halves(x, interleaved):
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    return x.chunk(2, dim=-1)


def _join(dg, du, interleaved):
    return torch.stack((dg, du), dim=-1).flatten(-2) if interleaved else torch.cat((dg, du), dim=-1)


def _silu_d(g):
    """(silu(g), silu'(g))"""
    sg = torch.sigmoid(g)
    return g * sg, sg * (1.0 + g * (1.0 - sg))


def _gelu_d(g, approximate):
    """(gelu(g), gelu'(g)) of the erf form or the tanh approximation."""
    if approximate == "tanh":
        k, a = math.sqrt(2.0 / math.pi), 0.044715
        t = torch.tanh(k * (g + a * g * g * g))
        return 0.5 * g * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * k * (1.0 + 3.0 * a * g * g)
    cdf = 0.5 * (1.0 + torch.erf(g * (1.0 / math.sqrt(2.0))))
    pdf = torch.exp(-0.5 * g * g) * (1.0 / math.sqrt(2.0 * math.pi))
    return g * cdf, cdf + g * pdf


def _gated(act):
    def backward(s, dy):
        x = s["x"]
        g, u = _halves(x.float(), s["interleaved"])
        dyf = dy.float()
        f, df = act(g, s)
        return {"x": _join(dyf * u * df, dyf * f, s["interleaved"]).to(x.dtype)}
    return backward


def _clamped(g, s):
    # gc = min(g, limit): no gradient past the limit (u's clip is handled below)
    alpha, limit = s["alpha"], s["limit"]
    gc = torch.clamp(g, max=limit)
    sg = torch.sigmoid(alpha * gc)
    return gc * sg, sg * (1.0 + alpha * gc * (1.0 - sg)) * (g < limit)


def _swiglu_clamped(s, dy):
    x, limit = s["x"], s["limit"]
    g, u = _halves(x.float(), s["interleaved"])
    f, df = _clamped(g, s)
    uc = torch.clamp(u, -limit, limit)
    dyf = dy.float()
    du = dyf * f * ((u > -limit) & (u < limit))
    return {"x": _join(dyf * (uc + 1.0) * df, du, s["interleaved"]).to(x.dtype)}


def _unary(act):
    def backward(s, dy):
        x = s["x"]
        return {"x": (dy.float() * act(x.float(), s)[1]).to(x.dtype)}
    return backward


BACKWARD = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "add_rms_norm": _add_rms_norm,
    "rope": _rope,
    "rope_qk": _rope_qk,
    "silu_and_mul": _gated(lambda g, s: _silu_d(g)),
    "gelu_and_mul": _gated(lambda g, s: _gelu_d(g, s["approximate"])),
    "swiglu_clamped": _swiglu_clamped,
    "silu": _unary(lambda x, s: _silu_d(x)),
    "gelu": _unary(lambda x, s: _gelu_d(x, s["approximate"])),
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
