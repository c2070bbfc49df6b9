"""Backward formulas of the differentiable braze ops for ``jax.custom_vjp``
and ``mx.custom_function``; the same choices as ``_torch_grads``: the norms and
the activations run their VJP kernels (``rms_norm_vjp``, ``layer_norm_vjp``,
``silu_and_mul_vjp``, ...), rope's VJP is rope with ``inverse`` flipped
(``dx = scale * R(-angle) dy``).

Each entry: backward(args, out, g, ops) -> {argument name: cotangent}, where
``args`` holds the call's arguments by name (arrays and scalars), ``out`` its
outputs, ``g`` their cotangents and ``ops`` the functions of the registry
(``OPS`` of the integration). Arguments it leaves out (positions,
``inv_freq``) get a zero cotangent.
"""
from __future__ import annotations

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


def _act(name, options):
    """An activation's backward: its VJP kernel ``name_vjp`` with the forward's options."""
    def backward(args, out, dy, ops):
        return {"x": ops[name + "_vjp"](args["x"], dy, **_kw(args, options))}
    return backward


# The activations' options, as their public functions name them.
ACT_OPTIONS = {"silu_and_mul": ("interleaved",), "gelu_and_mul": ("approximate", "interleaved"),
               "swiglu_clamped": ("alpha", "limit", "interleaved"), "silu": (), "gelu": ("approximate",)}

BACKWARD = {
    "rms_norm": _rms_norm,
    "layer_norm": _layer_norm,
    "add_rms_norm": _add_rms_norm,
    "rope": _rope,
    "rope_qk": _rope_qk,
    **{name: _act(name, options) for name, options in ACT_OPTIONS.items()},
}
