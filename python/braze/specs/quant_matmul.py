"""OpSpecs of braze.quant.matmul: ``matmul_<format>`` for every weight format and
``matmul_dense``, all served by the native ``matmul`` entry point.

Shapes are ``(M, N, K)``: x ``[M, K]``, W ``[N, K]``, out ``[M, N]``. M covers the
GEMV path (1, 3, 16 rows) and the GEMM path (17, 64); N is odd (not a multiple
of any tile); K is one block, a few blocks and a long row. W is the dequantize
spec's random packed weight (fp8 codes held below the exponent that makes NaN /
inf, so that every product is finite); x is Normal(0, 1), bias Normal(0, 1).

Tolerance: the float64 reference rounds once; the kernels sum in float32, so
their error grows like sqrt(K) * |x| * |W| ulp(f32): testing.compare's
``atol * max(1, rms(ref))`` term is exactly that scale (rms of a random dot
product is sqrt(K) * rms(x) * rms(W)). Half-precision outputs add one rounding
(rtol). The CPU's int8 activations (INT8_X) add at most ``int8_x_bound``, and the
CUDA GEMM's W rounded to x's 16-bit dtype at most u |x| |W| (err_bound).
See docs/quant.md.

Bench shapes: an 8B model's MLP down projection, N x K = 4096 x 14336, at M = 1
and 8 (decode) and 4096 (prefill), all timed as GPU time on CUDA; the CPU times
N x K = 4096 x 4096 at M = 1, 8 and 64 and 4096 x 14336 at M = 1 and 8. Bytes: the packed weight read once, x read, out written.
"""
from __future__ import annotations

import numpy as np

from .. import quant
from .._spec import register
from . import quant_mx as mx
from ._inputs import itemsize, rows
from .quant import QuantSpec, random_blocks
from ..reference import quant as ref

MATMUL_TOL = {"float32": (2e-5, 2e-5), "float16": (1e-3, 1.5e-3), "bfloat16": (8e-3, 8e-3)}
# On CUDA every row is a "prefill" row (GPU time), the GEMV rows too: their goal
# is the weight read rate, which per-call Python overhead would hide. The CPU
# times a 4096 x 4096 weight (a prefill of 4096 rows would take minutes there).
_DOWN = [(1, 4096, 14336), (8, 4096, 14336), (4096, 4096, 14336)]
MATMUL_BENCH = {"decode": _DOWN[:2], "prefill": _DOWN[2:], "cuda:prefill": _DOWN,
                "cpu:decode": [(1, 4096, 4096), (8, 4096, 4096), (1, 4096, 14336), (8, 4096, 14336)], "cpu:prefill": [(64, 4096, 4096)]}
BACKENDS = ("cpu", "cuda", "metal")
_CASES = ({"bias": False}, {"bias": True})


def _block(fmt):
    if fmt == "dense":
        return 1
    return ref.BLOCKS[fmt][0] if fmt in ref.BLOCKS else mx._BLOCK[fmt]


def _finite_fp8(fmt, data):
    """fp8 element codes with the top exponent bit cleared: no NaN / inf, |value| < 2."""
    mask = {"fp8_e4m3": 0xBF, "mxfp8_e4m3": 0xBF, "fp8_e5m2": 0xBF, "mxfp8_e5m2": 0xBF}.get(fmt)
    if mask is not None:
        data &= np.uint8(mask)
    return data


def weight(fmt, n, k, dtype, rng, strided=False):
    """(data, scales, biases, tensor_scale, group_size) of a random W [n, k] in ``fmt``."""
    if fmt == "dense":
        return rows((n, k), dtype, rng, strided, scale=0.5), None, None, None, None
    if fmt in ref.BLOCKS:
        return random_blocks(fmt, n, k, rng, strided), None, None, None, None
    arrays, kw = mx._deq_inputs(fmt)((n, k), dtype, rng, {}, strided)
    data, rest = _finite_fp8(fmt, arrays[0]), list(arrays[1:])
    scales = rest.pop(0) if rest else None
    if fmt in mx._MX_BITS:  # e8m0 block scales of at most 2^0: a K-long dot stays inside float16's range
        scales = np.minimum(scales, np.uint8(127))
    elif fmt == "mxfp4_gguf":  # the same for the scale byte that leads each 17-byte block
        for j in range(0, data.shape[1], 17):
            data[:, j] = np.minimum(data[:, j], np.uint8(127))
    biases = rest.pop(0) if fmt.startswith("affine") else None
    tensor_scale = rest.pop(0) if fmt == "nvfp4" else None
    return data, scales, biases, tensor_scale, kw.get("group_size")


def matmul_arrays(x, data, scales=None, biases=None, tensor_scale=None, *, format="", bias=None, group_size=None,
                  out=None):
    """braze.quant.matmul on a weight's arrays (format "" a dense ``data``)."""
    return quant._matmul_raw(x, data, scales, biases, tensor_scale, format=format, bias=bias, group_size=group_size,
                             out=out)


def matmul_reference(x, data, scales=None, biases=None, tensor_scale=None, *, format="", bias=None, group_size=None):
    return ref.matmul(x, data, scales, biases, tensor_scale, bias, format=format, group_size=group_size)


# The CPU quantizes x to int8 for these formats (any number of rows: the GEMV kernel
# in slabs of 16 rows), in blocks of this many elements (csrc/cpu/quant_dot.h;
# docs/quant.md), as ggml's CPU kernels do; with the switch off, f32 x.
INT8_X = {"q8_0": 32, "q4_0": 32, "q4_1": 32, "q5_0": 32, "q5_1": 32, "iq4_nl": 32, "mxfp4_gguf": 32,
          "q2_K": 256, "q3_K": 256, "q4_K": 256, "q5_K": 256, "q6_K": 256, "iq4_xs": 256}


def int8_x_bound(x, w, xb):
    """``[M, N]``: the most int8 activations can move ``x @ w.T``. Each element of a block
    of ``xb`` moves by at most d / 2 = max|x_blk| / 254 (d = max / 127, rounded to nearest),
    times 1 + 2^-10 for d's and x / d's float32 roundings; summed against |w| of the block."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    m, k = x.shape
    amax = np.abs(x).reshape(m, k // xb, xb).max(axis=2)
    wsum = np.abs(w).reshape(w.shape[0], k // xb, xb).sum(axis=2)
    return (amax / 254.0 * (1 + 2.0 ** -10)) @ wsum.T


def int8_x_active(fmt, m, backend="cpu"):
    """Whether ``m`` rows of ``fmt`` take the CPU's int8-activation kernel now."""
    if backend != "cpu" or fmt not in INT8_X or m <= 0:
        return False
    from .. import _cpu

    return bool(_cpu.quant_int8_activations())


# The CUDA GEMM (m > 16 rows, f16 / bf16 x) rounds decoded W to x's dtype, its
# tensor cores' operand type (shaders/cuda/quant/gemm.cuh): each product moves
# by at most u |x W| (u: the unit roundoff; f16's subnormal spacing adds 2^-25 |x|).
CUDA_W_ROUNDING = {"float16": (2.0 ** -11, 2.0 ** -25), "bfloat16": (2.0 ** -8, 0.0)}


def cuda_w_rounding(fmt, m, backend, dtype):
    """Whether ``m`` rows of ``fmt`` in ``dtype`` take the CUDA GEMM that rounds W to ``dtype``."""
    return backend == "cuda" and fmt != "dense" and m > 16 and dtype in CUDA_W_ROUNDING


def _err_bound(fmt):
    def bound(args, kwargs, backend, dtype):
        x, data = args[0], args[1]
        m = int(np.prod(x.shape[:-1]))
        int8 = fmt in INT8_X and int8_x_active(fmt, m, backend)
        wround = cuda_w_rounding(fmt, m, backend, dtype)
        if not (int8 or wround) or x.size == 0:
            return None
        if fmt in ref.BLOCKS:
            w = ref.dequantize(data, format=fmt, dtype="float64")
        else:
            from ..reference import quant_mx as ref_mx

            w = ref_mx.dequantize(data, *args[2:5], format=fmt, k=x.shape[-1], group_size=kwargs.get("group_size"))
        x2 = np.asarray(x, np.float64).reshape(-1, x.shape[-1])
        total = np.zeros((x2.shape[0], w.shape[0]))
        if int8:
            total += int8_x_bound(x2, w, INT8_X[fmt])
        if wround:
            u, sub = CUDA_W_ROUNDING[dtype]
            total += np.abs(x2) @ (u * np.abs(np.asarray(w, np.float64)) + sub).T
        return total
    return bound


def _inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        m, n, k = shape
        data, scales, biases, tensor_scale, group = weight(fmt, n, k, dtype, rng, strided)
        x = rows((m, k), dtype, rng, strided)
        b = rows((n,), dtype, rng) if case.get("bias") else None
        return (x, data, scales, biases, tensor_scale), dict(format="" if fmt == "dense" else fmt, bias=b,
                                                               group_size=group)
    return make


def weight_bytes(fmt, n, k, dtype):
    if fmt == "dense":
        return n * k * itemsize(dtype)
    if fmt in ref.BLOCKS:
        block, nbytes = ref.BLOCKS[fmt]
        return n * (k // block) * nbytes
    return n * mx._bytes_per_row(fmt, k)


def _cost(fmt):
    def cost(shape, dtype, case):
        m, n, k = shape
        io = (m * k + m * n + (n if case.get("bias") else 0)) * itemsize(dtype)
        return weight_bytes(fmt, n, k, dtype) + io, 2 * m * n * k
    return cost


def _shapes(block):
    k = max(block, 32)
    return ((1, 7, 4 * k), (3, 9, 2 * k), (16, 5, 3 * k), (17, 33, 2 * k), (64, 19, 4 * k))


def _edges(block):
    k = max(block, 32) if block > 1 else 37
    return ((1, 3, block if block > 1 else 1), (2, 1, k), (0, 4, k), (3, 0, k), (5, 7, 8 * max(block, 32) * 8),
            (33, 17, block if block > 1 else 5))


FORMATS = ["dense"] + list(ref.BLOCKS) + list(mx._BLOCK)

for _fmt in FORMATS:
    _b = _block(_fmt)
    register(QuantSpec(
        family="quant", name=f"matmul_{_fmt}", fn=matmul_arrays, reference=matmul_reference,
        make_inputs=_inputs(_fmt), out_kwargs=lambda r: {"out": r}, cost=_cost(_fmt), backends=BACKENDS,
        tol=dict(MATMUL_TOL), cases=_CASES, shapes=_shapes(_b), edge_shapes=_edges(_b),
        bench_shapes=MATMUL_BENCH, layouts=("contiguous", "strided", "broadcast", "misaligned"), native="matmul",
        err_bound=None if _fmt == "dense" else _err_bound(_fmt),
    ))

from . import quant_w8a8  # noqa: E402,F401  matmul of quantized x (W8A8), which takes MATMUL_TOL / MATMUL_BENCH
