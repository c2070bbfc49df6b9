"""Reference composition of W8A8 matmul (braze.quant.matmul with quantized x).

``y[m, n] = x_scale[m] * w_scale[n] * sum_k xq[m, k] wq[n, k] (+ bias[n])``: the
codes decoded by the element tables (int8 levels as they are; e4m3 / e5m2 codes by
their definition, quant_mx.elem_values), the scales applied, the product and the
bias in float64, one rounding to ``out_dtype``. Array-API code: it runs in the
caller's framework on the caller's device. The codes may also come as float64
arrays of their values (int8) or code numbers (fp8), as the registry's oracle
passes every input (braze.testing).
"""
from __future__ import annotations

import numpy as np

from ._common import namespace
from .quant_mx import elem_values

W8A8_FORMATS = {"int8": None, "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}


def _dev(a):
    from array_api_compat import device

    return device(a)


def _codes_f64(xp, codes, elem):
    """Values (float64) of 8-bit codes: int8 levels, or fp8 codes of ``elem``."""
    if elem is None:
        return xp.astype(codes, xp.float64)
    table = xp.asarray(elem_values(elem).astype(np.float64), device=_dev(codes))
    idx = xp.astype(xp.astype(codes, xp.uint8), xp.int64)
    return xp.reshape(xp.take(table, xp.reshape(idx, (-1,))), idx.shape)


def out_dtype_of(xp, like, name):
    mod = type(like).__module__.split(".")[0]
    if mod == "numpy":
        from .._arrays import _np_dtype

        return _np_dtype(name)
    if mod == "torch":
        import torch

        return getattr(torch, name)
    return getattr(xp, name)


def matmul_w8a8(x, x_scale, data, scales, bias=None, *, format, out_dtype="bfloat16"):
    """``x [..., K]`` codes (int8 for an int8 weight, e4m3 for fp8 weights), ``x_scale``
    ``[...]`` (one per row), ``data [N, K]`` codes of ``format`` with ``scales`` ``[1]``
    or ``[N]`` -> ``[..., N]`` in ``out_dtype``."""
    if format not in W8A8_FORMATS:
        raise ValueError(f"format must be one of {', '.join(map(repr, W8A8_FORMATS))}, got {format!r}")
    xp = namespace(x, x_scale, data, scales, bias)
    lead = tuple(x.shape[:-1])
    xe = None if format == "int8" else "e4m3"
    xv = _codes_f64(xp, x, xe) * xp.reshape(xp.astype(x_scale, xp.float64), lead + (1,))
    s = xp.reshape(xp.astype(scales, xp.float64), (-1,))
    wv = _codes_f64(xp, data, W8A8_FORMATS[format])
    wv = wv * (s[0] if s.shape[0] == 1 and wv.shape[0] != 1 else xp.reshape(s, (-1, 1)))
    y = xp.matmul(xv, xp.permute_dims(wv, (1, 0)))
    if bias is not None:
        y = y + xp.astype(bias, xp.float64)
    return xp.astype(y, out_dtype_of(xp, x, out_dtype))
