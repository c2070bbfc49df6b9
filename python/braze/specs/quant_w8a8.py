"""OpSpecs of W8A8 matmul (braze.quant.matmul with quantized x): ``matmul_w8a8_<format>``
for the weight formats int8 (with int8 x), fp8_e4m3 and fp8_e5m2 (with e4m3 x), all
served by the native ``matmul_w8a8`` entry point. The parity tests' dtype is the out
dtype (``out_dtype``).

Shapes are ``(M, N, K)`` as matmul's: M covers the GEMV tiles (1, 3, 16) and the
blocked path (17, 100); N is odd; K is 32 and longer rows. Inputs: x codes as
quantize_activations makes them (int8 levels in [-127, 127]; e4m3 codes with the top
exponent bit clear: finite, |value| < 2), x_scale and w_scale uniform in
[0.001, 0.05], W codes alike (fp8 codes below NaN / inf), bias Normal(0, 1).

Tolerance (MATMUL_TOL): int8 sums are exact and the f32 epilogue rounds a few
times (float(acc), x_scale * w_scale, the fused multiply-add); fp8 products are exact
in f32 and their f32 sum errs like sqrt(K) ulp(f32) * rms(ref), testing.compare's
``atol * max(1, rms(ref))``. Bench shapes: matmul's (docs/quant.md).
"""
from __future__ import annotations

import numpy as np

from .._spec import register
from ..quant import _w8a8
from ..reference import quant_w8a8 as ref
from ._inputs import itemsize, rows
from .quant import QuantSpec
from .quant_matmul import MATMUL_BENCH, MATMUL_TOL

BACKENDS = ("cpu", "cuda", "metal")
FORMATS = _w8a8.W8A8_FORMATS


def matmul_w8a8(x, x_scale, data, scales, *, format, bias=None, out=None, out_dtype=None):
    """braze.quant.matmul with quantized x, on a weight's arrays."""
    return _w8a8._matmul_w8a8_raw(x, x_scale, data, scales, format=format, bias=bias, out=out, out_dtype=out_dtype)


def matmul_w8a8_reference(x, x_scale, data, scales, *, format, bias=None, out_dtype="bfloat16"):
    return ref.matmul_w8a8(x, x_scale, data, scales, bias, format=format, out_dtype=out_dtype)


def codes(fmt, shape, rng, strided=False):
    """Random 8-bit codes ``shape`` of ``fmt`` (int8 levels, or finite fp8 codes below 2)."""
    pad = 5 if strided else 0
    full_shape = tuple(shape[:-1]) + (shape[-1] + pad,)
    if fmt == "int8":
        full = rng.integers(-127, 128, size=full_shape, dtype=np.int8)
    else:
        full = rng.integers(0, 256, size=full_shape, dtype=np.uint8) & np.uint8(0xBF)
    return full[..., :shape[-1]]


def _inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        m, n, k = shape
        x = codes("int8" if fmt == "int8" else "fp8_e4m3", (m, k), rng, strided)
        x_scale = rng.uniform(0.001, 0.05, m).astype(np.float32)
        data = codes(fmt, (n, k), rng, strided)
        scales = rng.uniform(0.001, 0.05, 1 if case.get("scale") == "tensor" else n).astype(np.float32)
        bias = rows((n,), dtype, rng) if case.get("bias") else None
        return (x, x_scale, data, scales), dict(format=fmt, bias=bias, out_dtype=dtype)
    return make


def _cost(fmt):
    def cost(shape, dtype, case):
        m, n, k = shape
        nbytes = n * k + 4 * n + m * k + 4 * m + m * n * itemsize(dtype) + (n * itemsize(dtype) if case.get("bias")
                                                                            else 0)
        return nbytes, 2 * m * n * k
    return cost


# The CUDA GEMM's fp8 mma (m > 16 rows) sums in the tensor cores, narrower than f32 on
# Hopper (shaders/cuda/quant/w8a8.cuh promotes each 64-product step to f32, the wgmma GEMM
# of shaders/cuda/quant/gemm_tc90.cuh each 128-product stage): a design bound of 2^-11 of
# the sum of |products| per output, on top of MATMUL_TOL.
CUDA_FP8_MMA = 2.0 ** -11


def _err_bound(fmt):
    def bound(args, kwargs, backend, dtype):
        x, x_scale, data, scales = args[:4]
        m = int(np.prod(x.shape[:-1]))
        if backend != "cuda" or fmt == "int8" or m <= 16 or x.size == 0 or data.size == 0:
            return None
        xv = np.abs(ref._codes_f64(np, np.asarray(x), "e4m3")) * np.asarray(x_scale, np.float64)[..., None]
        wv = np.abs(ref._codes_f64(np, np.asarray(data), ref.W8A8_FORMATS[fmt]))
        s = np.asarray(scales, np.float64).reshape(-1)
        wv = wv * (s[0] if s.size == 1 else s[:, None])
        return CUDA_FP8_MMA * (xv @ wv.T)
    return bound


SHAPES = ((1, 7, 64), (3, 9, 32), (16, 5, 96), (17, 33, 64), (100, 19, 128))
EDGES = ((1, 3, 8), (2, 1, 40), (0, 4, 32), (3, 0, 32), (4, 5, 0), (2, 3, 65544), (33, 17, 8))

for _fmt in FORMATS:
    _cases = ({"bias": False}, {"bias": True})
    if _fmt != "int8":
        _cases += ({"bias": True, "scale": "tensor"},)
    register(QuantSpec(
        family="quant", name=f"matmul_w8a8_{_fmt}", fn=matmul_w8a8, reference=matmul_w8a8_reference,
        make_inputs=_inputs(_fmt), out_kwargs=lambda r: {"out": r}, cost=_cost(_fmt), backends=BACKENDS,
        tol=dict(MATMUL_TOL), cases=_cases, shapes=SHAPES, edge_shapes=EDGES, bench_shapes=MATMUL_BENCH,
        native="matmul_w8a8", err_bound=_err_bound(_fmt),
    ))
