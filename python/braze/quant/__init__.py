"""The quant family: weight formats as they ship (GGUF blocks, ...), each with one
codec shared by every backend.

``quantize(w, format)`` turns a float ``[N, K]`` weight into a
:class:`QuantizedTensor`; ``dequantize(qw)`` turns it back into float32 /
float16 / bfloat16 ``[N, K]``; ``QuantizedTensor.from_gguf`` wraps the bytes of
a GGUF tensor without copying, and ``load_gguf(path)`` memory-maps a whole file.
``matmul(x, qw)`` is ``x @ W.T`` reading the packed weight itself (docs/quant.md).

Why kernels: a GGML block is a handful of bit fields and one or two scales; a
composition of array ops makes an intermediate array per field (nibbles, high
bits, scale unpacking), each the size of the output, where the kernel reads the
packed bytes once and writes the output once.

GGML formats (q8_0, q4_0, q4_1, q5_0, q5_1, q2_K .. q8_K, iq4_nl, iq4_xs)
dequantize bit-exactly as ``gguf.quants`` does (float32 math, one rounding to
the output dtype), and q8_0, q4_0, q4_1, q5_0, q5_1 quantize bit-exactly as it does.
"""
from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._call import Call as _Call
from ..reference import quant as _ref
from ._formats import FORMATS as _FORMATS, format_info as _format_info
from ._gguf import load_gguf
from ._mx import quantize_activations
from ._tensor import QuantizedTensor
from . import _mx, _w8a8

if _TYPE_CHECKING:
    from typing import Optional

    from .._typing import Array

__all__ = ["QuantizedTensor", "quantize", "dequantize", "matmul", "load_gguf", "formats", "quantize_activations",
           "int8_activations", "set_int8_activations"]

_OUT_DTYPES = ("float32", "float16", "bfloat16")


def int8_activations() -> bool:
    """Whether the CPU ``matmul`` (x [M, K] float32 / float16 / bfloat16, any M)
    quantizes x to int8 per block for the formats where ggml does (the legacy and K-quant GGUF
    formats, iq4_nl / iq4_xs, mxfp4_gguf): True by default (``set_int8_activations``)."""
    from .. import _cpu

    return bool(_cpu.quant_int8_activations())


def set_int8_activations(on: bool) -> None:
    """CPU ``matmul`` activations (x [M, K] float32 / float16 / bfloat16, any M),
    for the whole process: True (the default) quantizes x per block to int8 and uses integer dot
    products, as ggml does (its rounding moves a product by at most
    max|x_blk| / 254 * sum|W| per block; docs/quant.md); False keeps x in float32, exact to f32
    rounding as on CUDA and Metal, at a lower speed (above 16 rows, the f32 GEMM). CUDA and Metal always use float x."""
    if not isinstance(on, bool):
        raise TypeError(f"on must be a bool, got {type(on).__name__}")
    from .. import _cpu

    _cpu.set_quant_int8_activations(on)


def formats() -> "dict":
    """Every format name -> its record (block elements, block bytes, layout, group,
    whether dequantize / quantize are built): the table of csrc/core/quant/formats.h.
    ``data`` of a block-layout format is uint8 ``[N, K / block * block_bytes]``; float32
    / float16 / bfloat16 come back from ``dequantize``."""
    return dict(_FORMATS)


def _dtype_name(dtype):
    name = dtype if isinstance(dtype, str) else str(getattr(dtype, "name", dtype)).replace("torch.", "")
    if name not in _OUT_DTYPES:
        raise ValueError(f"dtype must be one of {_OUT_DTYPES}, got {dtype!r}")
    return name


def dequantize(qw: QuantizedTensor, *, dtype: str = "float32", out: "Optional[Array]" = None) -> "Array":
    """The float weight ``[N, K]`` (float32 / float16 / bfloat16, ``dtype``) of a
    QuantizedTensor: float32 math, one rounding to ``dtype``. ``out``: an array of
    that shape and dtype in the weight's framework, written and returned."""
    if not isinstance(qw, QuantizedTensor):
        raise TypeError(f"qw must be a QuantizedTensor, got {type(qw).__name__}")
    return _dequantize_raw(qw.data, format=qw.format, k=qw.shape[1], dtype=_dtype_name(dtype), out=out,
                          scales=qw.scales, biases=qw.biases, tensor_scale=qw.tensor_scale,
                          group_size=qw.group_size)


def _dequantize_raw(data, *, format, k, dtype="float32", out=None, scales=None, biases=None, tensor_scale=None,
                   group_size=None):
    """dequantize on the arrays themselves (the registry's entry point)."""
    c = _Call("dequantize", data, "data")
    if c.kernel is None:
        if _format_info(format).group not in ("ggml", "kquants", "iquants"):  # quant-mx's formats
            from ..reference import quant_mx as _ref_mx

            return c.fallback(_ref_mx.dequantize, (data, scales, biases, tensor_scale),
                              dict(format=format, k=k, dtype=dtype, group_size=group_size), out)
        if scales is not None or biases is not None or tensor_scale is not None:
            raise NotImplementedError(f"no reference composition for {format} on {c.backend} yet")
        return c.fallback(_ref.dequantize, (data,), dict(format=format, dtype=dtype), out)
    y = c.out(out, (data.shape[0], k), dtype=dtype)
    c.kernel(format, k, c.arg(data, "data"), c.arg(scales, "scales"), c.arg(biases, "biases"),
             c.arg(tensor_scale, "tensor_scale"), c.arg(y, "out"), group_size or 0, c.stream)
    return c.result(y)


def quantize(w: "Array", format: str, *, group_size: "Optional[int]" = None,
             scale_rule: "Optional[str]" = None, granularity: "Optional[str]" = None) -> QuantizedTensor:
    """``w [N, K]`` float32 / float16 / bfloat16 -> a QuantizedTensor of ``format``
    (GGML formats: uint8 GGUF blocks ``[N, K / block * block_bytes]``). K must be a
    multiple of the format's block. GGML formats take no ``group_size`` or
    ``scale_rule`` (their blocks fix both)."""
    fmt = _format_info(format)
    if fmt.layout == "blocks" and (group_size is not None or scale_rule is not None or granularity is not None):
        raise ValueError(f"{format} fixes its block and scale rule: group_size and scale_rule must be None")
    shape = tuple(getattr(w, "shape", ()))
    if len(shape) != 2:
        raise ValueError(f"w must be [N, K], got shape {shape}")
    if shape[1] % fmt.block:
        raise ValueError(f"w: K = {shape[1]} is not a multiple of {format}'s block of {fmt.block} elements")
    c = _Call("quantize", w, "w")
    if fmt.layout == "split":  # MX, nvfp4, fp8, int8, affine: _mx.py
        return _mx.quantize_split(c, w, fmt, shape, group_size, scale_rule, granularity)
    data = c.fw.empty(w, (shape[0], fmt.row_bytes(shape[1])), "uint8")
    data = _quantize_raw(w, format=format, out=data)
    return QuantizedTensor(format, shape, data)


def _quantize_raw(w, *, format, out=None):
    """quantize into ``out`` (uint8 blocks), the registry's entry point."""
    c = _Call("quantize", w, "w")
    if c.kernel is None:
        if _format_info(format).group != "ggml":
            raise NotImplementedError(f"no reference quantizer for {format} on {c.backend}")
        return c.fallback(_ref.quantize_ggml, (w,), dict(format=format), out)
    if out is None:
        out = c.fw.empty(w, (w.shape[0], _format_info(format).row_bytes(w.shape[1])), "uint8")
    else:
        c.out(out, None, "out")
    c.kernel(format, c.arg(w, "w"), c.arg(out, "data"), None, None, None, 0, 0, c.stream)
    return c.result(out)


def matmul(x: "Array", qw: "QuantizedTensor | Array", *, x_scale: "Optional[Array]" = None,
           bias: "Optional[Array]" = None, out: "Optional[Array]" = None,
           out_dtype: "Optional[str]" = None) -> "Array":
    """``x @ W.T (+ bias)``: ``x [..., K]`` (any leading axes; rows may be strided)
    float32 / float16 / bfloat16, ``W [N, K]`` a QuantizedTensor of any format (read
    packed: never dequantized to memory) or a plain float array of x's dtype. Returns
    ``[..., N]`` of x's dtype: float32 accumulation, ``bias [N]`` (x's dtype) added in
    float32, one rounding. On the CPU, by default (``int8_activations``) x is quantized to
    int8 blocks for the GGML formats, as llama.cpp does. ``out``: an
    array of that shape and dtype (written and returned).

    W8A8: ``x`` int8 levels or uint8 e4m3 codes and ``x_scale`` (f32, one per row), as
    ``quantize_activations(x, "int8" | "fp8_e4m3")`` returns them, with a weight of format
    ``int8`` (int8 x) or ``fp8_e4m3`` / ``fp8_e5m2`` (e4m3 x) scaled per row or per tensor:
    ``y = x_scale[m] * w_scale[n] * sum_k xq wq (+ bias)``, summed exactly in int32 (int8;
    K <= 131072) or in float32 (fp8), scaled in float32, one rounding to ``out_dtype``
    (float32 / float16 / bfloat16; default bfloat16, or ``out``'s dtype). ``bias`` has the
    out dtype. docs/quant.md, "W8A8"."""
    if x_scale is not None or str(getattr(x, "dtype", "")).replace("torch.", "") in _w8a8.CODE_DTYPES:
        return _w8a8.matmul(x, qw, x_scale, bias, out, out_dtype)
    if out_dtype is not None and _w8a8._out_dtype(None, out_dtype) != _name_of_dtype(x, "x"):
        raise ValueError(f"out_dtype applies to quantized x (W8A8); float x gives its own dtype "
                         f"{_name_of_dtype(x, 'x')}, got out_dtype {out_dtype!r}")
    if isinstance(qw, QuantizedTensor):
        fmt, (n, k) = qw.format, qw.shape
        data, scales, biases, tensor_scale, group = qw.data, qw.scales, qw.biases, qw.tensor_scale, qw.group_size
    else:
        if not hasattr(qw, "shape") or not hasattr(qw, "__dlpack__"):
            raise TypeError(f"qw must be a QuantizedTensor or a float array [N, K], got {type(qw).__name__}")
        if len(qw.shape) != 2:
            raise ValueError(f"qw must be [N, K], got shape {tuple(qw.shape)}")
        fmt, (n, k) = "", (int(qw.shape[0]), int(qw.shape[1]))
        data, scales, biases, tensor_scale, group = qw, None, None, None, None
        xd, wd = _name_of_dtype(x, "x"), _name_of_dtype(qw, "qw")
        if xd != wd:
            raise TypeError(f"qw (a dense weight) must have x's dtype {xd}, got {wd}")
    shape = tuple(getattr(x, "shape", ()))
    if not shape:
        raise ValueError(f"x must be [..., K] with at least one axis, got shape {shape}")
    if shape[-1] != k:
        raise ValueError(f"x: K = {shape[-1]} (its last axis) does not match the weight's K = {k} (qw [{n}, {k}])")
    return _matmul_raw(x, data, scales, biases, tensor_scale, format=fmt, bias=bias, group_size=group, out=out)


def _name_of_dtype(a, name):
    from .._arrays import framework

    return framework(a, name).dtype_name(a)


def _rows_of(a, m, n, name):
    """``a [..., n]`` as ``[m, n]`` sharing its memory (out= arrays are written through it)."""
    if len(a.shape) == 2:
        return a
    if type(a).__module__.split(".")[0] == "torch":
        try:
            return a.view(m, n)
        except RuntimeError:
            pass
    else:
        try:
            v = a.view()
            v.shape = (m, n)
            return v
        except (AttributeError, ValueError):
            pass
    raise ValueError(f"{name}'s leading axes must merge into one without a copy (its rows [{m}, {n}])")


def _matmul_raw(x, data, scales=None, biases=None, tensor_scale=None, *, format="", bias=None, group_size=None,
                out=None):
    """matmul on the arrays themselves (the registry's and the torch op's entry point):
    format "" is a dense ``data [N, K]``."""
    c = _Call("matmul", x, "x")
    shape = tuple(x.shape)
    if len(shape) < 1:
        raise ValueError("x must be [..., K] with at least one axis, got a 0-d array")
    if format:
        _format_info(format)  # ValueError naming the format before anything else
    if c.kernel is None:
        return c.fallback(_ref.matmul, (x, data, scales, biases, tensor_scale, bias),
                          dict(format=format, group_size=group_size), out)
    lead, k, n = shape[:-1], shape[-1], int(data.shape[0])
    m = 1
    for s in lead:
        m *= int(s)
    if out is not None and tuple(out.shape) != lead + (n,):
        raise ValueError(f"out must have shape {lead + (n,)} (x's leading axes, N), got {tuple(out.shape)}")
    y = c.out(out, lead + (n,))
    if len(shape) == 2:
        x2 = x
    elif type(x).__module__.split(".")[0] in ("numpy", "torch"):
        x2 = _rows_of(x, m, k, "x")  # a ValueError where the rows are not one strided axis: no silent copy
    else:
        x2 = x.reshape(m, k)  # JAX / MLX / CuPy values: the framework's reshape
    c.kernel(format, c.arg(x2, "x"), c.arg(data, "data"), c.arg(scales, "scales"), c.arg(biases, "biases"),
             c.arg(tensor_scale, "tensor_scale"), c.arg(bias, "bias"), c.arg(_rows_of(y, m, n, "out"), "out"),
             group_size or 0, c.stream)
    return c.result(y)
