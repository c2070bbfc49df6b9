"""W8A8: braze.quant.matmul with quantized x (int8 levels or e4m3 codes from
quantize_activations, one f32 scale per row) and an int8 / fp8 weight
(docs/quant.md, "W8A8")."""
from __future__ import annotations

from .._call import Call

W8A8_FORMATS = ("int8", "fp8_e4m3", "fp8_e5m2")
OUT_DTYPES = ("float32", "float16", "bfloat16")
CODE_DTYPES = ("int8", "uint8")
INT8_MAX_K = 131072  # csrc/core/quant_w8a8.h: int32 sums of K products of levels in [-127, 127]


def _dtype_of(a, name):
    from .._arrays import framework

    return framework(a, name).dtype_name(a)


def _out_dtype(out, out_dtype):
    if out_dtype is not None:
        name = out_dtype if isinstance(out_dtype, str) else str(getattr(out_dtype, "name", out_dtype))
        name = name.replace("torch.", "")
        if name not in OUT_DTYPES:
            raise ValueError(f"out_dtype must be one of {OUT_DTYPES}, got {out_dtype!r}")
    else:
        name = None
    if out is not None:
        got = _dtype_of(out, "out")
        if name is not None and got != name:
            raise ValueError(f"out has dtype {got} but out_dtype is {name}: they must agree")
        return got
    return name or "bfloat16"


def _rows_1d(a, m, name, lead):
    """``a`` (shape ``lead`` or ``[m]``) as a 1-D ``[m]`` array sharing its memory."""
    shape = tuple(int(s) for s in a.shape)
    if shape == (m,):
        return a
    if shape != lead:
        raise ValueError(f"{name} must have x's leading shape {lead} (one scale per row), got {shape}")
    return a.reshape(m) if type(a).__module__.split(".")[0] != "numpy" else a.reshape(-1)


def matmul(x, qw, x_scale, bias, out, out_dtype):
    """The public matmul's W8A8 branch: checks, then _matmul_w8a8_raw."""
    from ._tensor import QuantizedTensor

    xd = _dtype_of(x, "x")
    if xd not in CODE_DTYPES:
        raise ValueError(f"x_scale applies to quantized x (int8 levels or uint8 e4m3 codes from "
                         f"quantize_activations); x is {xd}: pass float x without x_scale")
    if x_scale is None:
        raise ValueError(f"x_scale is required: x holds {xd} codes (quantize_activations returns (xq, x_scale))")
    if not isinstance(qw, QuantizedTensor) or qw.format not in W8A8_FORMATS:
        what = f"format {qw.format!r}" if isinstance(qw, QuantizedTensor) else type(qw).__name__
        raise ValueError(f"qw: quantized x multiplies a QuantizedTensor of format {', '.join(W8A8_FORMATS)}; "
                         f"got {what}")
    shape = tuple(int(s) for s in getattr(x, "shape", ()))
    n, k = qw.shape
    if not shape or shape[-1] != k:
        raise ValueError(f"x: K = {shape[-1] if shape else None} (its last axis) does not match the weight's "
                         f"K = {k} (qw [{n}, {k}])")
    return _matmul_w8a8_raw(x, x_scale, qw.data, qw.scales, format=qw.format, bias=bias, out=out,
                            out_dtype=out_dtype)


def _matmul_w8a8_raw(x, x_scale, data, scales, *, format, bias=None, out=None, out_dtype=None):
    """W8A8 matmul on the arrays themselves (the registry's and the torch op's entry point):
    ``x [..., K]`` codes, ``x_scale`` (one per row of x), ``data [N, K]`` codes + ``scales``."""
    from . import _rows_of

    if format not in W8A8_FORMATS:
        raise ValueError(f"format: quantized x multiplies weights of format {', '.join(W8A8_FORMATS)}; "
                         f"got {format!r}")
    od = _out_dtype(out, out_dtype)
    c = Call("matmul_w8a8", x, "x")
    shape = tuple(int(s) for s in x.shape)
    if len(shape) < 1:
        raise ValueError("x must be [..., K] with at least one axis, got a 0-d array")
    lead, k, n = shape[:-1], shape[-1], int(data.shape[0])
    m = 1
    for s in lead:
        m *= s
    if not hasattr(x_scale, "shape"):
        raise TypeError(f"x_scale must be an array (float32, one scale per row of x), got {type(x_scale).__name__}")
    xs = _rows_1d(x_scale, m, "x_scale", lead)
    if c.kernel is None:
        from ..reference import quant_w8a8 as _ref

        return c.fallback(_ref.matmul_w8a8, (x, x_scale, data, scales, bias), dict(format=format, out_dtype=od), out)
    if out is not None and tuple(int(s) for s in out.shape) != lead + (n,):
        raise ValueError(f"out must have shape {lead + (n,)} (x's leading axes, N), got {tuple(out.shape)}")
    y = c.out(out, lead + (n,), dtype=od)
    if len(shape) == 2:
        x2 = x
    elif type(x).__module__.split(".")[0] in ("numpy", "torch"):
        x2 = _rows_of(x, m, k, "x")
    else:
        x2 = x.reshape(m, k)
    c.kernel(format, c.arg(x2, "x"), c.arg(xs, "x_scale"), c.arg(data, "data"), c.arg(scales, "scales"),
             c.arg(bias, "bias"), c.arg(_rows_of(y, m, n, "out"), "out"), c.stream)
    return c.result(y)
