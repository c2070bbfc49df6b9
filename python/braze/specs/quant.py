"""OpSpecs of the quant family: one ``dequantize_<format>`` and, where it
quantizes with a reference of its own, ``quantize_<format>`` per format, all
served by the native ``dequantize`` / ``quantize`` entry points; ``matmul_<format>``
(served by ``matmul``) in specs/quant_matmul.py.

Shapes are the weight's ``[N, K]``. Inputs of dequantize are random GGUF blocks
whose float16 scale fields hold sane values (random bytes elsewhere: every bit
pattern of the other fields is a valid block). Bench shapes are real weight
matrices of Llama-3-8B: 1024 x 4096 (k / v projections), 4096 x 4096 (q / o),
4096 x 14336 and 14336 x 4096 (MLP).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import quant
from .._spec import OpSpec, register
from ..reference import quant as ref
from ._inputs import itemsize, numel, rows

EXACT = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}
BACKENDS = ("cpu", "cuda", "metal")
BENCH = {"decode": [(1024, 4096)], "prefill": [(4096, 4096), (4096, 14336), (14336, 4096)]}


@dataclass(frozen=True)
class QuantSpec(OpSpec):
    """An OpSpec whose native entry point serves many formats (the format is an argument)."""

    native: str = "dequantize"
    host_reference: bool = True

    @property
    def kernel(self):
        return self.native


def _shapes(block):
    return ((4, 8 * block), (16, 4 * block), (7, 12 * block)) if block == 32 else \
        ((4, block), (16, 4 * block), (7, 3 * block))


def _edges(block):
    return ((1, block), (0, 2 * block), (3, 0), (5, 3 * block), (1, block * (70016 // block)))


def random_blocks(fmt, n, k, rng, strided=False, scale=0.02):
    """uint8 ``[n, bytes(k)]`` of random blocks with finite float16 scales of about
    ``scale`` (q8_K: a float32 scale); with ``strided``, a view of rows padded apart."""
    block, nbytes = ref.BLOCKS[fmt]
    nb = k // block
    pad = 5 if strided else 0
    full = rng.integers(0, 256, size=(n, nb * nbytes + pad), dtype=np.uint8)
    b = full[:, :nb * nbytes].reshape(n, nb, nbytes)
    for off in ref.F16_FIELDS[fmt]:
        b[..., off:off + 2] = (rng.normal(0, scale, (n, nb, 1))).astype(np.float16).view(np.uint8)
    if fmt == "q8_K":
        b[..., 0:4] = rng.normal(0, scale / 64, (n, nb, 1)).astype(np.float32).view(np.uint8)
    return full[:, :nb * nbytes]


def view_as(a, dtype):
    """a's bits as ``dtype`` (a numpy dtype name of the same width): numpy arrays and torch tensors alike."""
    if isinstance(a, np.ndarray):
        return a.view(dtype)
    import torch

    return a.view(getattr(torch, dtype))


def dtype_name(a):
    return str(getattr(a, "dtype", "")).replace("torch.", "")


def dequantize_bytes(data, *, format, k, dtype="float32", out=None):
    """``data`` (GGUF blocks of ``format``) -> ``[N, k]`` in ``dtype``: braze.quant.dequantize on raw bytes."""
    return quant._dequantize_raw(data, format=format, k=k, dtype=dtype, out=out)


def dequantize_reference(data, *, format, k, dtype="float32"):
    return ref.dequantize(data, format=format, dtype=dtype)


def quantize_bytes(w, *, format, out=None):
    """``w [N, K]`` -> GGUF blocks, viewed as int8 (the registry's out= poison, -7, is no uint8)."""
    got = quant._quantize_raw(w, format=format, out=None if out is None else view_as(out, "uint8"))
    return out if out is not None else view_as(got, "int8")


def quantize_reference(w, *, format):
    return ref.quantize_ggml(np.asarray(w, np.float32), format).view(np.int8)


def _deq_inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        n, k = shape
        return (random_blocks(fmt, n, k, rng, strided),), dict(format=fmt, k=k, dtype=dtype, **case)
    return make


def _deq_cost(fmt):
    block, nbytes = ref.BLOCKS[fmt]

    def cost(shape, dtype, case):
        n, k = shape
        return n * (k // block) * nbytes + n * k * itemsize(dtype), 2 * n * k
    return cost


def _q_inputs(fmt):
    def make(shape, dtype, rng, case, strided):
        return (rows(shape, dtype, rng, strided),), dict(format=fmt, **case)
    return make


def _q_cost(fmt):
    block, nbytes = ref.BLOCKS[fmt]

    def cost(shape, dtype, case):
        n, k = shape
        return n * (k // block) * nbytes + n * k * itemsize(dtype), 4 * n * k
    return cost


for _fmt, (_block, _) in ref.BLOCKS.items():
    register(QuantSpec(
        family="quant", name=f"dequantize_{_fmt}", fn=dequantize_bytes, reference=dequantize_reference,
        make_inputs=_deq_inputs(_fmt), out_kwargs=lambda r: {"out": r}, cost=_deq_cost(_fmt),
        backends=BACKENDS, tol=dict(EXACT), shapes=_shapes(_block), edge_shapes=_edges(_block),
        bench_shapes=BENCH, layouts=("contiguous", "strided"),
    ))

for _fmt in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1"):
    register(QuantSpec(
        family="quant", name=f"quantize_{_fmt}", fn=quantize_bytes, reference=quantize_reference,
        make_inputs=_q_inputs(_fmt), out_kwargs=lambda r: {"out": r}, cost=_q_cost(_fmt),
        backends=BACKENDS, tol=dict(EXACT), shapes=_shapes(32), edge_shapes=_edges(32),
        bench_shapes=BENCH, native="quantize",
    ))

from . import quant_mx  # noqa: E402,F401  the split formats and quantize_activations
from . import quant_matmul  # noqa: E402,F401  matmul of every format
