"""The norm family: RMSNorm, LayerNorm, fused residual-add + RMSNorm, gated
RMSNorm, and the VJPs of RMSNorm and LayerNorm.

Each op is a kernel because fusion saves passes over memory: a row is read
from memory once, reduced, and written once (the compositions read it two or
three times and materialize intermediates). Arithmetic is f32; outputs take the
input dtype. ``weight`` / ``bias`` must have x's dtype. The normalized axis is
the last one and must be contiguous; leading axes may be strided.

Shapes: ``x[..., H]`` with any number of leading (row) axes; ``weight`` and
``bias`` ``[H]``. Dtypes: float32, float16, bfloat16 (numpy bfloat16 is
``ml_dtypes.bfloat16``); every array of a call has x's dtype. Outputs have
x's shape, dtype, framework and device; ``out=`` arrays must match them.
"""
from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import _backends
from ._call import Call as _Call, integer as _integer, number as _number
from .reference import norm as _ref

if _TYPE_CHECKING:
    from typing import Optional, Tuple

    from ._typing import Array

__all__ = ["rms_norm", "layer_norm", "add_rms_norm", "rms_norm_gated", "rms_norm_vjp", "layer_norm_vjp"]


def rms_norm(x: "Array", weight: "Optional[Array]" = None, *, eps: float = 1e-6, weight_offset: float = 0.0,
             out: "Optional[Array]" = None) -> "Array":
    """RMSNorm: ``x * rsqrt(mean(x**2, -1) + eps) * (weight + weight_offset)``, f32 math.

    ``x[..., H]`` float32 / float16 / bfloat16; ``weight[H]`` of x's dtype, or
    None for ones; ``weight_offset=1.0`` gives the ``(1 + w)`` convention.
    Returns ``y``, x's shape and dtype. ``out`` (x's shape and dtype) must not
    overlap ``x``.
    """
    c = _Call("rms_norm", x)
    eps, weight_offset = _number("eps", eps), _number("weight_offset", weight_offset)
    if c.kernel is None:
        return c.fallback(_ref.rms_norm, (x, weight), dict(eps=eps, weight_offset=weight_offset), out)
    y = c.out(out, x.shape)
    c.kernel(c.arg(x, "x"), c.arg(weight, "weight"), c.arg(y, "out"), eps, weight_offset, c.stream)
    return c.result(y)


def layer_norm(x: "Array", weight: "Optional[Array]" = None, bias: "Optional[Array]" = None, *, eps: float = 1e-5,
               out: "Optional[Array]" = None) -> "Array":
    """LayerNorm: ``(x - mean) * rsqrt(var + eps) * weight + bias`` over the last axis
    (biased variance), f32 math.

    ``x[..., H]`` float32 / float16 / bfloat16; ``weight[H]`` and ``bias[H]`` of
    x's dtype, each None for ones / zeros. Returns ``y``, x's shape and dtype.
    """
    c = _Call("layer_norm", x)
    eps = _number("eps", eps)
    if c.kernel is None:
        return c.fallback(_ref.layer_norm, (x, weight, bias), dict(eps=eps), out)
    y = c.out(out, x.shape)
    c.kernel(c.arg(x, "x"), c.arg(weight, "weight"), c.arg(bias, "bias"), c.arg(y, "out"), eps, c.stream)
    return c.result(y)


def add_rms_norm(x: "Array", residual: "Array", weight: "Optional[Array]" = None, *, eps: float = 1e-6,
                 weight_offset: float = 0.0, out: "Optional[Array]" = None,
                 residual_out: "Optional[Array]" = None) -> "Tuple[Array, Array]":
    """Residual add + RMSNorm in one pass: ``h = x + residual`` (f32 add, rounded to the
    dtype), ``y = rms_norm(h, weight)``; returns ``(y, h)``.

    ``x[..., H]`` and ``residual`` (same shape) float32 / float16 / bfloat16,
    ``weight[H]`` or None; all one dtype. ``y`` and ``h`` have x's shape and
    dtype. ``residual_out=residual`` updates the residual stream in place, as
    inference engines do.
    """
    c = _Call("add_rms_norm", x)
    eps, weight_offset = _number("eps", eps), _number("weight_offset", weight_offset)
    if c.kernel is None:
        return c.fallback(_ref.add_rms_norm, (x, residual, weight), dict(eps=eps, weight_offset=weight_offset),
                          None if out is None and residual_out is None else (out, residual_out))
    y = c.out(out, x.shape)
    h = c.out(residual_out, x.shape, "residual_out")
    c.kernel(c.arg(x, "x"), c.arg(residual, "residual"), c.arg(weight, "weight"), c.arg(y, "out"),
             c.arg(h, "residual_out"), eps, weight_offset, c.stream)
    return c.result(y), c.result(h)


def rms_norm_gated(x: "Array", gate: "Array", weight: "Optional[Array]" = None, *, eps: float = 1e-6,
                   group_size: "Optional[int]" = None, out: "Optional[Array]" = None) -> "Array":
    """Gated RMSNorm: ``rms_norm(x) * weight * silu(gate)``, the norm taken over groups of
    ``group_size`` along the last axis (``None``: the whole row), f32 math.

    ``x[..., H]`` and ``gate`` (same shape), ``weight[H]`` or None, all one of
    float32 / float16 / bfloat16; ``group_size`` must divide H. Returns ``y``, x's shape and dtype.
    """
    c = _Call("rms_norm_gated", x)
    eps = _number("eps", eps)
    g = 0 if group_size is None else _integer("group_size", group_size)
    if group_size is not None and g <= 0:
        raise ValueError(f"group_size must be positive, got {g}")
    if c.kernel is None:
        return c.fallback(_ref.rms_norm_gated, (x, gate, weight), dict(eps=eps, group_size=group_size), out)
    y = c.out(out, x.shape)
    c.kernel(c.arg(x, "x"), c.arg(gate, "gate"), c.arg(weight, "weight"), c.arg(y, "out"), eps, g,
             c.stream)
    return c.result(y)


def rms_norm_vjp(x: "Array", weight: "Optional[Array]", dy: "Array", *, eps: float = 1e-6,
                 weight_offset: float = 0.0, out: "Optional[Tuple[Array, Optional[Array]]]" = None,
                 ) -> "Tuple[Array, Optional[Array]]":
    """Gradients ``(dx, dweight)`` of :func:`rms_norm` for the output gradient ``dy``.

    ``x[..., H]`` and ``dy`` (same shape), ``weight[H]`` or None, all one of
    float32 / float16 / bfloat16.
    ``dx`` has x's shape and dtype; ``dweight[H]`` is summed over all rows in f32
    and returned in weight's dtype (None when weight is None). ``out`` may be a
    pair ``(dx, dweight)`` to write into.
    """
    c = _Call("rms_norm_vjp", x)
    eps, weight_offset = _number("eps", eps), _number("weight_offset", weight_offset)
    dx_out, dw_out = _pair(out, 2)
    if c.kernel is None:
        return c.fallback(_ref.rms_norm_vjp, (x, weight, dy), dict(eps=eps, weight_offset=weight_offset), out)
    dx = c.out(dx_out, x.shape, "out[0]")
    dw = None if weight is None else c.out(dw_out, (x.shape[-1],), "out[1]")
    ws = _workspace(c, dw is not None)
    c.kernel(c.arg(x, "x"), c.arg(weight, "weight"), c.arg(dy, "dy"), c.arg(dx, "out[0]"), c.arg(dw, "out[1]"),
             eps, weight_offset, c.stream, **ws)
    return c.result(dx), c.result(dw)


def layer_norm_vjp(x: "Array", weight: "Optional[Array]", bias: "Optional[Array]", dy: "Array", *, eps: float = 1e-5,
                   out: "Optional[Tuple[Array, Optional[Array], Optional[Array]]]" = None,
                   ) -> "Tuple[Array, Optional[Array], Optional[Array]]":
    """Gradients ``(dx, dweight, dbias)`` of :func:`layer_norm` for the output gradient ``dy``.

    ``x[..., H]`` and ``dy`` (same shape), ``weight[H]`` / ``bias[H]`` or None,
    all one of float32 / float16 / bfloat16. ``dx`` has x's shape and dtype; ``dweight[H]`` and
    ``dbias[H]`` are summed over all rows in f32 and returned in the parameter's
    dtype (None where the parameter is None). ``out`` may be a triple to write into.
    """
    c = _Call("layer_norm_vjp", x)
    eps = _number("eps", eps)
    dx_out, dw_out, db_out = _pair(out, 3)
    if c.kernel is None:
        return c.fallback(_ref.layer_norm_vjp, (x, weight, bias, dy), dict(eps=eps), out)
    n = (x.shape[-1],)
    dx = c.out(dx_out, x.shape, "out[0]")
    dw = None if weight is None else c.out(dw_out, n, "out[1]")
    db = None if bias is None else c.out(db_out, n, "out[2]")
    ws = _workspace(c, (dw is not None) + (db is not None))
    c.kernel(c.arg(x, "x"), c.arg(weight, "weight"), c.arg(bias, "bias"), c.arg(dy, "dy"), c.arg(dx, "out[0]"),
             c.arg(dw, "out[1]"), c.arg(db, "out[2]"), eps, c.stream, **ws)
    return c.result(dx), c.result(dw), c.result(db)


def _workspace(c, grads):
    """``{"workspace": array}`` for a backend whose VJPs take scratch (CUDA),
    else ``{}``. The array comes from x's own framework on x's device (torch's
    and cupy's caching allocators, ordered on the caller's stream), so its
    lifetime is the caller's: nothing is cached or shared between calls."""
    size = getattr(_backends.module(c.backend), "norm_vjp_workspace_bytes", None)
    if size is None:
        return {}
    x = c.x
    rows = 1
    for d in x.shape[:-1]:
        rows *= int(d)
    n = size(c.op, c.fw.dtype_name(x), rows, int(x.shape[-1]) if x.ndim else 1, int(grads), c.fw.device(x)[1])
    return {"workspace": c.arg(c.fw.empty(x, (n,), "uint8"), "workspace")} if n else {}


def _pair(out, n):
    if out is None:
        return (None,) * n
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise TypeError(f"out must be a tuple of {n} arrays (or None), got {type(out).__name__}")
    return tuple(out)
