"""Reference compositions of the norm family (API.md, norm)."""
from __future__ import annotations

from ._common import compute_dtype, namespace, upcast


def _rms(xp, h, eps):
    return 1.0 / xp.sqrt(xp.mean(h * h, axis=-1, keepdims=True) + eps)


def _scale(xp, weight, weight_offset, dt):
    if weight is None:
        return 1.0 + weight_offset
    return upcast(xp, weight, dt) + weight_offset


def rms_norm(x, weight=None, *, eps=1e-6, weight_offset=0.0):
    xp = namespace(x, weight)
    dt = compute_dtype(xp, x)
    xf = upcast(xp, x, dt)
    y = xf * _rms(xp, xf, eps) * _scale(xp, weight, weight_offset, dt)
    return xp.astype(y, x.dtype)


def layer_norm(x, weight=None, bias=None, *, eps=1e-5):
    xp = namespace(x, weight, bias)
    dt = compute_dtype(xp, x)
    xf = upcast(xp, x, dt)
    mean = xp.mean(xf, axis=-1, keepdims=True)
    d = xf - mean
    y = d / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + eps)
    if weight is not None:
        y = y * upcast(xp, weight, dt)
    if bias is not None:
        y = y + upcast(xp, bias, dt)
    return xp.astype(y, x.dtype)


def add_rms_norm(x, residual, weight=None, *, eps=1e-6, weight_offset=0.0):
    """Returns ``(y, h)``: ``h = x + residual`` stored in residual's dtype, ``y = rms_norm(h)``.

    The norm reads ``h`` as stored (rounded to residual's dtype), as the fused
    kernels do, so a caller that chains layers sees the same numbers either way.
    """
    xp = namespace(x, residual, weight)
    dt = compute_dtype(xp, residual)
    h = xp.astype(upcast(xp, x, dt) + upcast(xp, residual, dt), residual.dtype)
    hf = upcast(xp, h, dt)
    y = hf * _rms(xp, hf, eps) * _scale(xp, weight, weight_offset, dt)
    return xp.astype(y, x.dtype), h


def rms_norm_gated(x, gate, weight=None, *, eps=1e-6, group_size=None):
    xp = namespace(x, gate, weight)
    dt = compute_dtype(xp, x)
    xf = upcast(xp, x, dt)
    n = x.shape[-1]
    g = n if group_size is None else group_size
    lead = tuple(x.shape[:-1])
    xg = xp.reshape(xf, lead + (n // g, g))
    yg = xg * _rms(xp, xg, eps)
    y = xp.reshape(yg, lead + (n,))
    if weight is not None:
        y = y * upcast(xp, weight, dt)
    gf = upcast(xp, gate, dt)
    y = y * (gf / (1.0 + xp.exp(-gf)))
    return xp.astype(y, x.dtype)


def _rows_sum(xp, a):
    """Sum over every axis but the last."""
    return xp.sum(xp.reshape(a, (-1, a.shape[-1])), axis=0)


def rms_norm_vjp(x, weight, dy, *, eps=1e-6, weight_offset=0.0):
    """``(dx, dweight)`` of ``y = x * r * (w + offset)``, ``r = rsqrt(mean(x^2) + eps)``.

    ``dx = r * (g - x * r^2 * mean(g * x))`` with ``g = dy * (w + offset)``;
    ``dweight = sum_rows(dy * x * r)``. ``weight=None`` returns ``dweight=None``.
    """
    xp = namespace(x, weight, dy)
    dt = compute_dtype(xp, x)
    xf, dyf = upcast(xp, x, dt), upcast(xp, dy, dt)
    r = _rms(xp, xf, eps)
    g = dyf * _scale(xp, weight, weight_offset, dt)
    dx = r * (g - xf * (r * r) * xp.mean(g * xf, axis=-1, keepdims=True))
    dw = None if weight is None else xp.astype(_rows_sum(xp, dyf * xf * r), weight.dtype)
    return xp.astype(dx, x.dtype), dw


def layer_norm_vjp(x, weight, bias, dy, *, eps=1e-5):
    """``(dx, dweight, dbias)`` of layer_norm; ``None`` for an absent weight / bias.

    With ``xhat = (x - mean) * r`` and ``g = dy * w``:
    ``dx = r * (g - mean(g) - xhat * mean(g * xhat))``.
    """
    xp = namespace(x, weight, bias, dy)
    dt = compute_dtype(xp, x)
    xf, dyf = upcast(xp, x, dt), upcast(xp, dy, dt)
    d = xf - xp.mean(xf, axis=-1, keepdims=True)
    r = 1.0 / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + eps)
    xhat = d * r
    g = dyf if weight is None else dyf * upcast(xp, weight, dt)
    dx = r * (g - xp.mean(g, axis=-1, keepdims=True)
              - xhat * xp.mean(g * xhat, axis=-1, keepdims=True))
    dw = None if weight is None else xp.astype(_rows_sum(xp, dyf * xhat), weight.dtype)
    db = None if bias is None else xp.astype(_rows_sum(xp, dyf), bias.dtype)
    return xp.astype(dx, x.dtype), dw, db
