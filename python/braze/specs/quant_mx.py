"""OpSpecs of the quant family's split-layout formats (MX, nvfp4, fp8, int8,
MLX affine), GGUF's fp4 blocks, and quantize_activations.

``dequantize_<format>``: random packed codes with sane scales (every code is
valid; fp8 codes include NaN and inf, which must come back as such), the cost
the packed bytes and scales read plus the output written. Bench shapes as the
GGML formats' (Llama-3-8B projections). ``quantize_activations_<format>``:
activations ``[M, K]``, decode (1 and 16 tokens of 4096 / 8192) and prefill
(4096 x 8192); the torch peer is the composition a user writes (amax, divide,
clamp, cast: braze.bench.peers.quant).
"""
from __future__ import annotations

import numpy as np

from .. import quant
from .._arrays import _np_dtype
from .._spec import register
from ..reference import quant_mx as ref
from ._inputs import itemsize, rows
from .quant import BACKENDS, BENCH, EXACT, QuantSpec, dtype_name, view_as

_MX_BITS = {"mxfp4": 4, "mxfp6_e2m3": 6, "mxfp6_e3m2": 6, "mxfp8_e4m3": 8, "mxfp8_e5m2": 8}
_AFFINE_GROUP = 64
ACT_BENCH = {"decode": [(1, 4096), (16, 8192)], "prefill": [(4096, 8192)]}


def _bytes_per_row(fmt, k):
    if fmt in _MX_BITS:
        return k * _MX_BITS[fmt] // 8 + k // 32
    if fmt == "nvfp4":
        return k // 2 + k // 16
    if fmt in ("fp8_e4m3", "fp8_e5m2", "int8"):
        return k + 4
    if fmt.startswith("affine"):
        return k * int(fmt[6:]) // 8 + 2 * (k // _AFFINE_GROUP) * 2
    return k // 32 * 17 if fmt == "mxfp4_gguf" else k // 64 * 36


def _padded(rng, n, width, dtype, strided, lo=0, hi=256):
    full = rng.integers(lo, hi, size=(n, width + (5 if strided else 0))).astype(dtype)
    return full[:, :width]


def _deq_inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        n, k = shape
        kw = dict(format=fmt, k=k, dtype=dtype)
        if fmt in _MX_BITS:
            arrays = (_padded(rng, n, k * _MX_BITS[fmt] // 8, np.uint8, strided),
                      _padded(rng, n, k // 32, np.uint8, False, 118, 136))
        elif fmt == "nvfp4":
            arrays = (_padded(rng, n, k // 2, np.uint8, strided), _padded(rng, n, k // 16, np.uint8, False, 0x20, 0x60),
                      np.array([0.0123], np.float32))
        elif fmt in ("fp8_e4m3", "fp8_e5m2"):
            arrays = (_padded(rng, n, k, np.uint8, strided), rng.uniform(0.001, 0.1, n).astype(np.float32))
        elif fmt == "int8":
            arrays = (_padded(rng, n, k, np.int8, strided, -128, 128), rng.uniform(0.001, 0.1, n).astype(np.float32))
        elif fmt.startswith("affine"):
            words = k * int(fmt[6:]) // 32
            data = _padded(rng, n, words, np.uint32, strided, 0, 2**32)
            sdt = _np_dtype(dtype)
            arrays = (data, (rng.normal(0, 0.01, (n, k // _AFFINE_GROUP))).astype(np.float32).astype(sdt),
                      (rng.normal(0, 0.05, (n, k // _AFFINE_GROUP))).astype(np.float32).astype(sdt))
            kw["group_size"] = _AFFINE_GROUP
        else:  # GGUF blocks: scale bytes in a sane range
            block, nbytes = (32, 17) if fmt == "mxfp4_gguf" else (64, 36)
            raw = _padded(rng, n, k // block * nbytes, np.uint8, strided)
            for j in range(0, k // block * nbytes, nbytes):  # block by block: a strided view has no 3-D view
                if fmt == "mxfp4_gguf":
                    raw[:, j] = rng.integers(118, 136, n)
                else:
                    raw[:, j:j + 4] = rng.integers(0x20, 0x60, (n, 4))
            arrays = (raw,)
        return arrays, kw
    return make


def dequantize_arrays(*arrays, format, k, dtype="float32", group_size=None, out=None):
    """braze.quant.dequantize on the arrays of a format (data, then scales, biases / tensor scale)."""
    data, rest = arrays[0], list(arrays[1:])
    scales = rest.pop(0) if rest else None
    biases = rest.pop(0) if format.startswith("affine") else None
    tensor_scale = rest.pop(0) if format == "nvfp4" else None
    return quant._dequantize_raw(data, format=format, k=k, dtype=dtype, out=out, scales=scales, biases=biases,
                                 tensor_scale=tensor_scale, group_size=group_size)


def dequantize_reference(*arrays, format, k, dtype="float32", group_size=None):
    a = list(arrays) + [None] * 3
    if format.startswith("affine"):
        return ref.dequantize(a[0], a[1], a[2], None, format=format, k=k, dtype=dtype, group_size=group_size)
    return ref.dequantize(a[0], a[1], None, a[2] if format == "nvfp4" else None, format=format, k=k, dtype=dtype)


def _deq_cost(fmt):
    def cost(shape, dtype, case):
        n, k = shape
        return n * _bytes_per_row(fmt, k) + n * k * itemsize(dtype), 2 * n * k
    return cost


def _shapes(block):
    return ((4, 2 * block), (16, 4 * block), (7, 12 * block))


def _edges(block):
    return ((1, block), (0, 2 * block), (5, 3 * block), (1, block * (70016 // block)))


_BLOCK = dict({f: 32 for f in _MX_BITS}, nvfp4=16, fp8_e4m3=8, fp8_e5m2=8, int8=8, mxfp4_gguf=32, nvfp4_gguf=64,
              **{f"affine{b}": _AFFINE_GROUP for b in ref.AFFINE_BITS})

for _fmt, _block in _BLOCK.items():
    register(QuantSpec(
        family="quant", name=f"dequantize_{_fmt}", fn=dequantize_arrays, reference=dequantize_reference,
        make_inputs=_deq_inputs(_fmt), out_kwargs=lambda r: {"out": r}, cost=_deq_cost(_fmt),
        backends=BACKENDS, tol=dict(EXACT), shapes=_shapes(_block), edge_shapes=_edges(_block),
        bench_shapes=BENCH, layouts=("contiguous", "strided"),
    ))


# ---------------------------------------------------------------- activations
def _signed(a):
    """uint8 outputs as int8 (the registry poisons integer out= arrays with -7)."""
    return view_as(a, "int8") if dtype_name(a) == "uint8" else a


def quantize_activations(x, *, format, out=None):
    """braze.quant.quantize_activations, its uint8 outputs viewed as int8."""
    if out is None:
        xq, sx = quant.quantize_activations(x, format)
        return _signed(xq), _signed(sx)
    xq, sx = out
    uq = view_as(xq, "uint8") if xq is not None and dtype_name(xq) == "int8" and format != "int8" else xq
    us = view_as(sx, "uint8") if sx is not None and dtype_name(sx) == "int8" else sx
    gq, gs = quant.quantize_activations(x, format, out=(uq, us))
    return (xq if xq is not None else _signed(gq)), (sx if sx is not None else _signed(gs))


def quantize_activations_reference(x, *, format):
    xq, sx = ref.quantize_activations(np.asarray(x, np.float32), format)
    return _signed(xq), _signed(sx)


def _act_cost(fmt):
    def cost(shape, dtype, case):
        m, k = shape
        out = {"fp8_e4m3": k + 4, "int8": k + 4, "mxfp8_e4m3": k + k // 32, "nvfp4": k // 2 + k // 16}[fmt]
        return m * k * itemsize(dtype) + m * out, 3 * m * k
    return cost


def _act_inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        return (rows(shape, dtype, rng, strided, scale=3.0),), dict(format=fmt)
    return make


for _fmt in ref.ACT_FORMATS:
    _b = {"fp8_e4m3": 1, "int8": 1, "mxfp8_e4m3": 32, "nvfp4": 16}[_fmt]
    register(QuantSpec(
        family="quant", name=f"quantize_activations_{_fmt}", fn=quantize_activations,
        reference=quantize_activations_reference, make_inputs=_act_inputs(_fmt),
        out_kwargs=lambda r: {"out": r}, cost=_act_cost(_fmt), backends=BACKENDS, tol=dict(EXACT),
        shapes=((4, 256), (16, 1024), (7, 96)), edge_shapes=((1, 32), (0, 64), (3, 32 if _b > 1 else 37), (1, 16384)),
        bench_shapes=ACT_BENCH, layouts=("contiguous", "strided"), native="quantize_activations",
    ))
