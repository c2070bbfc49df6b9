"""Backward formulas of the differentiable braze ops for ``jax.custom_vjp``
and ``mx.custom_function``, written once over a small namespace of array
functions (``Fns``: jnp's or mlx.core's); the same choices as ``_torch_grads``: the norms run their VJP kernels
(``rms_norm_vjp``, ``layer_norm_vjp``), rope's VJP is rope with ``inverse``
flipped (``dx = scale * R(-angle) dy``), and the activations, which have no
VJP kernels, write their derivative out in float32, cast to x's dtype.

Each entry: backward(args, out, g, ops) -> {argument name: cotangent}, where
``args`` holds the call's arguments by name (arrays and scalars), ``out`` its
outputs, ``g`` their cotangents and ``ops`` the JAX functions of the registry
(``OPS`` of the integration). Arguments it leaves out (positions,
``inv_freq``) get a zero cotangent.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Fns:
    """The array functions the activation derivatives need, from one framework."""
    sigmoid: Callable
    erf: Callable
    tanh: Callable
    exp: Callable
    minimum: Callable
    clip: Callable
    split: Callable        # split(x) -> the two halves of the last axis
    interleave: Callable   # interleave(a, b) -> a and b alternating along the last axis
    concat: Callable       # concat(a, b) along the last axis
    f32: Callable          # x as float32
    cast: Callable         # cast(x, like) -> x in like's dtype


_NORM_KW = ("eps", "weight_offset")


def _kw(args, names):
    return {n: args[n] for n in names if n in args}


def _rms_norm(args, out, dy, ops):
    dx, dw = ops["rms_norm_vjp"](args["x"], args.get("weight"), dy, **_kw(args, _NORM_KW))
    return {"x": dx, "weight": dw}


def _layer_norm(args, out, dy, ops):
    dx, dw, db = ops["layer_norm_vjp"](args["x"], args.get("weight"), args.get("bias"), dy, **_kw(args, ("eps",)))
    return {"x": dx, "weight": dw, "bias": db}


def _add_rms_norm(args, out, g, ops):
    # h = x + residual (rounded), y = rms_norm(h): both inputs get dL/dh
    dy, dh = g
    dhy, dw = ops["rms_norm_vjp"](out[1], args.get("weight"), dy, **_kw(args, _NORM_KW))
    d = dhy + dh
    return {"x": d, "residual": d, "weight": dw}


_ROPE_KW = ("inv_freq", "base", "rotary_dim", "interleaved", "attention_scale")


def _rope(args, out, dy, ops):
    kw = dict(_kw(args, _ROPE_KW), inverse=not args.get("inverse", False))
    return {"x": ops["rope"](dy, args["positions"], **kw)}


def _rope_qk(args, out, g, ops):
    kw = dict(_kw(args, _ROPE_KW), inverse=not args.get("inverse", False))
    dq, dk = ops["rope_qk"](g[0], g[1], args["positions"], **kw)
    return {"q": dq, "k": dk}


def _halves(fn, x, interleaved):
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    return fn.split(x)


def _join(fn, dg, du, interleaved):
    return fn.interleave(dg, du) if interleaved else fn.concat(dg, du)


def _silu_d(fn, g):
    """(silu(g), silu'(g))"""
    sg = fn.sigmoid(g)
    return g * sg, sg * (1.0 + g * (1.0 - sg))


def _gelu_d(fn, g, approximate):
    """(gelu(g), gelu'(g)) of the erf form or the tanh approximation."""
    if approximate == "tanh":
        k, a = math.sqrt(2.0 / math.pi), 0.044715
        t = fn.tanh(k * (g + a * g * g * g))
        return 0.5 * g * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * k * (1.0 + 3.0 * a * g * g)
    cdf = 0.5 * (1.0 + fn.erf(g * (1.0 / math.sqrt(2.0))))
    pdf = fn.exp(-0.5 * g * g) * (1.0 / math.sqrt(2.0 * math.pi))
    return g * cdf, cdf + g * pdf


def _gated(fn, act, interleaved_default=False):
    def backward(args, out, dy, ops):
        x = args["x"]
        il = args.get("interleaved", interleaved_default)
        g, u = _halves(fn, fn.f32(x), il)
        dyf = fn.f32(dy)
        f, df = act(g, args)
        return {"x": fn.cast(_join(fn, dyf * u * df, dyf * f, il), x)}
    return backward


def _swiglu_clamped(fn):
    def backward(args, out, dy, ops):
        # gc = min(g, limit): no gradient past the limit; u is clipped to [-limit, limit]
        x = args["x"]
        alpha, limit, il = args.get("alpha", 1.702), args.get("limit", 7.0), args.get("interleaved", True)
        g, u = _halves(fn, fn.f32(x), il)
        gc = fn.minimum(g, limit)
        sg = fn.sigmoid(alpha * gc)
        f, df = gc * sg, sg * (1.0 + alpha * gc * (1.0 - sg)) * (g < limit)
        uc = fn.clip(u, -limit, limit)
        dyf = fn.f32(dy)
        du = dyf * f * ((u > -limit) & (u < limit))
        return {"x": fn.cast(_join(fn, dyf * (uc + 1.0) * df, du, il), x)}
    return backward


def _unary(fn, act):
    def backward(args, out, dy, ops):
        x = args["x"]
        return {"x": fn.cast(fn.f32(dy) * act(fn.f32(x), args)[1], x)}
    return backward


def backward_table(fn):
    """op name -> backward, the activations' derivatives written with ``fn``."""
    return {
        "rms_norm": _rms_norm,
        "layer_norm": _layer_norm,
        "add_rms_norm": _add_rms_norm,
        "rope": _rope,
        "rope_qk": _rope_qk,
        "silu_and_mul": _gated(fn, lambda g, a: _silu_d(fn, g)),
        "gelu_and_mul": _gated(fn, lambda g, a: _gelu_d(fn, g, a.get("approximate", "none"))),
        "swiglu_clamped": _swiglu_clamped(fn),
        "silu": _unary(fn, lambda x, a: _silu_d(fn, x)),
        "gelu": _unary(fn, lambda x, a: _gelu_d(fn, x, a.get("approximate", "none"))),
    }
