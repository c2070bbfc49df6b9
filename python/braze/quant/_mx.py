"""The split-layout formats (MX, nvfp4, fp8, int8, MLX affine): quantize into
their arrays, wrap MLX's arrays, and quantize activations.

Storage (API.md, quant): MX ``data`` uint8 ``[N, K * bits / 8]`` (codes LSB
first) + ``scales`` uint8 e8m0 ``[N, K / 32]``; nvfp4 ``data`` uint8
``[N, K / 2]`` + ``scales`` uint8 e4m3 ``[N, K / 16]`` + ``tensor_scale`` f32
``[1]``; fp8 ``data`` uint8 codes ``[N, K]`` + f32 ``scales`` ``[1]`` (per
tensor), ``[N]`` (per row) or ``[ceil(N/128), ceil(K/128)]`` (per 128 x 128
block); int8 ``data`` int8 ``[N, K]`` + f32 ``[N]``; affine ``data`` uint32
``[N, K * bits / 32]`` + ``scales``, ``biases`` ``[N, K / group_size]`` in the
weight's dtype, exactly what ``mlx.core.quantize`` returns.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Optional

from .._call import Call

if TYPE_CHECKING:
    from .._typing import Array

SCALE_RULES = ("floor", "ceil", "round")
GRANULARITIES = ("tensor", "row", "block")
ACT_FORMATS = ("fp8_e4m3", "int8", "mxfp8_e4m3", "nvfp4")
_ELEM_BITS = {"mxfp4": 4, "mxfp6_e2m3": 6, "mxfp6_e3m2": 6, "mxfp8_e4m3": 8, "mxfp8_e5m2": 8}


def _int_arg(name, v):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise TypeError(f"{name} must be an int, got {type(v).__name__}")
    return int(v)


def affine_bits(fmt):
    return int(fmt.name[len("affine"):])


def split_arrays(c, w, fmt, n, k, group_size, scale_rule, granularity):
    """New arrays for quantize of a split format: (data, scales, biases,
    tensor_scale, group, rule index), each checked argument named."""
    g = fmt.group
    if g != "mx" and scale_rule is not None:
        raise ValueError(f"scale_rule applies to the MX formats only; {fmt.name} takes None")
    if g != "fp8" and granularity is not None:
        raise ValueError(f"granularity applies to fp8 formats only; {fmt.name} takes None")
    if g != "affine" and group_size is not None:
        raise ValueError(f"group_size applies to the affine formats only; {fmt.name} fixes its blocks")
    rule = 0
    biases = tensor_scale = None
    group = 0
    wdt = c.fw.dtype_name(w)
    if g == "mx":
        if scale_rule is None:
            scale_rule = "floor"
        if scale_rule not in SCALE_RULES:
            raise ValueError(f"scale_rule must be one of {SCALE_RULES}, got {scale_rule!r}")
        rule = SCALE_RULES.index(scale_rule)
        data = c.fw.empty(w, (n, k * _ELEM_BITS[fmt.name] // 8), "uint8")
        scales = c.fw.empty(w, (n, k // 32), "uint8")
    elif g == "nvfp4":
        data = c.fw.empty(w, (n, k // 2), "uint8")
        scales = c.fw.empty(w, (n, k // 16), "uint8")
        tensor_scale = c.fw.empty(w, (1,), "float32")
    elif g == "fp8":
        granularity = "row" if granularity is None else granularity
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
        data = c.fw.empty(w, (n, k), "uint8")
        shape = {"tensor": (1,), "row": (n,), "block": (-(-n // 128), -(-k // 128))}[granularity]
        if granularity == "tensor" and n == 1:
            shape = (1,)
        scales = c.fw.empty(w, shape, "float32")
    elif g == "int8":
        data = c.fw.empty(w, (n, k), "int8")
        scales = c.fw.empty(w, (n,), "float32")
    elif g == "affine":
        group = 64 if group_size is None else _int_arg("group_size", group_size)
        if group not in (32, 64, 128):
            raise ValueError(f"group_size must be 32, 64 or 128, got {group}")
        if k % group:
            raise ValueError(f"w: K = {k} is not a multiple of group_size {group}")
        data = c.fw.empty(w, (n, k * affine_bits(fmt) // 32), "uint32")
        scales = c.fw.empty(w, (n, k // group), wdt)
        biases = c.fw.empty(w, (n, k // group), wdt)
    else:
        raise ValueError(f"{fmt.name} is not a split-layout format")
    return data, scales, biases, tensor_scale, group, rule


def from_mlx(cls, wq, scales, biases, *, group_size, bits, mode="affine"):
    """MLX's ``(wq, scales, biases)`` of ``mlx.core.quantize`` as a QuantizedTensor, no copy."""
    if mode != "affine":
        raise ValueError(f"mode must be 'affine' (MLX's affine quantization), got {mode!r}")
    bits = _int_arg("bits", bits)
    group_size = _int_arg("group_size", group_size)
    if bits not in (2, 3, 4, 5, 6, 8):
        raise ValueError(f"bits must be one of 2, 3, 4, 5, 6, 8, got {bits}")
    if group_size not in (32, 64, 128):
        raise ValueError(f"group_size must be 32, 64 or 128, got {group_size}")
    for name, a in (("wq", wq), ("scales", scales), ("biases", biases)):
        if not hasattr(a, "shape") or not hasattr(a, "__dlpack__"):
            raise TypeError(f"{name} must be an array, got {type(a).__name__}")
        if len(a.shape) != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(a.shape)}")
    n, words = (int(s) for s in wq.shape)
    k = words * 32 // bits
    if words * 32 % bits:
        raise ValueError(f"wq: {words} words a row is not a whole number of {bits}-bit elements")
    if k % group_size:
        raise ValueError(f"wq: K = {k} is not a multiple of group_size {group_size}")
    for name, a in (("scales", scales), ("biases", biases)):
        if tuple(int(s) for s in a.shape) != (n, k // group_size):
            raise ValueError(f"{name} must be [N, K / group_size] = {[n, k // group_size]}, got {list(a.shape)}")
    return cls(f"affine{bits}", (n, k), wq, scales, biases, group_size=group_size)


def quantize_activations(x: "Array", format: str, *, out: "Optional[tuple]" = None) -> "tuple":
    """``x [M, K]`` float32 / float16 / bfloat16 -> ``(xq, sx)`` in one pass:

    * ``"fp8_e4m3"``: per token, ``sx`` f32 ``[M]`` = amax / 448, ``xq`` uint8
      e4m3 codes ``[M, K]`` (``x / sx`` rounded to nearest even, saturating);
    * ``"int8"``: per token, ``sx`` = amax / 127, ``xq`` int8 (rounded half to even);
    * ``"mxfp8_e4m3"``: blocks of 32, ``sx`` uint8 e8m0 ``[M, K / 32]`` (OCP's
      floor rule), ``xq`` uint8 codes ``[M, K]``;
    * ``"nvfp4"``: blocks of 16, ``sx`` uint8 e4m3 ``[M, K / 16]`` (tensor scale
      1, so block maxima above 2688 saturate), ``xq`` uint8 ``[M, K / 2]``.

    ``out``: an ``(xq, sx)`` pair of arrays of those shapes and dtypes, written and returned.
    """
    if not isinstance(format, str):
        raise TypeError(f"format must be a str, got {type(format).__name__}")
    if format not in ACT_FORMATS:
        raise ValueError(f"format must be one of {', '.join(repr(f) for f in ACT_FORMATS)}; got {format!r}")
    shape = tuple(getattr(x, "shape", ()))
    if len(shape) != 2:
        raise ValueError(f"x must be [M, K], got shape {shape}")
    m, k = (int(s) for s in shape)
    c = Call("quantize_activations", x, "x")
    if out is not None and (not isinstance(out, tuple) or len(out) != 2):
        raise TypeError("out must be a tuple (xq, sx) of two arrays, or None")
    if c.kernel is None:
        from ..reference import quant_mx as _ref

        return c.fallback(_ref.quantize_activations, (x,), dict(format=format), out)
    if format in ("fp8_e4m3", "int8"):
        q_shape, q_dtype, s_shape, s_dtype = (m, k), "int8" if format == "int8" else "uint8", (m,), "float32"
    else:
        block = 32 if format == "mxfp8_e4m3" else 16
        q_shape, q_dtype, s_shape, s_dtype = (m, k if block == 32 else k // 2), "uint8", (m, k // block), "uint8"
    xq = c.out(None if out is None else out[0], q_shape, "xq", q_dtype)
    sx = c.out(None if out is None else out[1], s_shape, "sx", s_dtype)
    c.kernel(format, c.arg(x, "x"), c.arg(xq, "xq"), c.arg(sx, "sx"), c.stream)
    return c.result(xq), c.result(sx)


def quantize_split(c, w, fmt, shape, group_size, scale_rule, granularity):
    """quantize of a split-layout format: new arrays in w's framework, filled by the kernel."""
    from ._tensor import QuantizedTensor

    n, k = (int(s) for s in shape)
    data, scales, biases, tensor_scale, group, rule = split_arrays(c, w, fmt, n, k, group_size, scale_rule,
                                                                   granularity)
    if c.kernel is None:
        raise NotImplementedError(f"no reference quantizer for {fmt.name} on {c.backend}")
    c.kernel(fmt.name, c.arg(w, "w"), c.arg(data, "data"), c.arg(scales, "scales"), c.arg(biases, "biases"),
             c.arg(tensor_scale, "tensor_scale"), group, rule, c.stream)
    res = c.result
    return QuantizedTensor(fmt.name, (n, k), res(data), res(scales), None if biases is None else res(biases),
                           None if tensor_scale is None else res(tensor_scale), group or None)
