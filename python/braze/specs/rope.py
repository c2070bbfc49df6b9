"""OpSpecs of the rope family.

``rope`` shapes are ``x``'s: ``(tokens..., heads, head_dim)``. ``rope_qk``
shapes are ``(tokens..., q_heads, k_heads, head_dim)``. Option cases are
symbolic where they depend on the shape (``rotary_dim: "part"``); positions are
random per token, not an arange.
"""
from __future__ import annotations

import numpy as np

from .. import rope
from .._spec import OpSpec, register
from ..reference import rope as ref
from ._inputs import cast, itemsize, numel

BACKENDS = ("cpu", "cuda", "metal")
CASES = (
    {},
    {"interleaved": True},
    {"rotary_dim": "part"},
    {"rotary_dim": "part", "interleaved": True},
    {"inverse": True, "attention_scale": 0.75, "positions": "int64"},
    {"inv_freq": "given", "positions": "large"},
)
# head_dim 64, 80, 96, 128, 256; several token axes in one
SHAPES = ((5, 4, 64), (3, 2, 3, 80), (9, 2, 96), (6, 8, 128), (2, 3, 256))
EDGE = ((1, 1, 64), (7, 5, 128), (3, 64), (0, 4, 64), (2, 0, 3, 96), (4, 3, 2))
QK_SHAPES = ((5, 4, 2, 64), (3, 2, 6, 2, 80), (9, 4, 1, 96), (6, 8, 2, 128), (2, 4, 4, 256))
QK_EDGE = ((1, 32, 8, 128), (7, 5, 3, 128), (4, 2, 64), (0, 4, 2, 64), (3, 1, 1, 2))
QK_BENCH = {"decode": [(1, 32, 8, 128)], "prefill": [(4096, 32, 8, 128), (16384, 32, 8, 128)]}
BENCH = {"decode": [(1, 32, 128)], "prefill": [(4096, 32, 128), (16384, 32, 128)]}


def _rotary_dim(d, case):
    if case.get("rotary_dim") != "part":
        return None
    return max(2, (d // 2) & ~1) if d > 2 else d


def _positions(tokens, rng, case):
    kind = case.get("positions", "int32")
    if kind == "large":  # past 2**16, up to 2**24 where float32 stays exact
        return rng.integers(0, 2**24, size=tokens).astype(np.int64)
    return rng.integers(0, 8192, size=tokens).astype(np.int64 if kind == "int64" else np.int32)


def _options(d, rng, case):
    rd = _rotary_dim(d, case)
    kw = {k: v for k, v in case.items() if k in ("interleaved", "inverse", "attention_scale")}
    if rd is not None:
        kw["rotary_dim"] = rd
    if case.get("inv_freq") == "given":
        r = d if rd is None else rd
        kw["inv_freq"] = (rng.uniform(0.0, 1.0, r // 2) ** 3).astype(np.float32)
    return kw


def _heads(shape, dtype, rng, strided):
    """Normal data of ``shape``; with ``strided``, a view into a larger buffer
    (padded heads and head_dim) so token and head strides are not the packed ones."""
    shape = tuple(shape)
    if not strided:
        return cast(rng.normal(0, 1, shape), dtype)
    full = cast(rng.normal(0, 1, shape[:-2] + (shape[-2] + 3, shape[-1] + 8)), dtype)
    return full[..., 1:1 + shape[-2], : shape[-1]]


def _rope_inputs(shape, dtype, rng, case, strided):
    x = _heads(shape, dtype, rng, strided)
    pos = _positions(shape[:-2], rng, case)
    return (x, pos), _options(shape[-1], rng, case)


def _qk_inputs(shape, dtype, rng, case, strided):
    """q and k; with ``strided``, both are head slices of one fused qkv buffer."""
    lead, hq, hk, d = tuple(shape[:-3]), shape[-3], shape[-2], shape[-1]
    if strided:
        qkv = cast(rng.normal(0, 1, lead + (hq + 2 * hk, d)), dtype)
        q, k = qkv[..., :hq, :], qkv[..., hq:hq + hk, :]
    else:
        q, k = cast(rng.normal(0, 1, lead + (hq, d)), dtype), cast(rng.normal(0, 1, lead + (hk, d)), dtype)
    return (q, k, _positions(lead, rng, case)), _options(d, rng, case)


def _cost(elems, tokens, d, dtype, case):
    rd = _rotary_dim(d, case) or d
    pos_bytes = 8 if case.get("positions") in ("int64", "large") else 4
    freq = 4 * (rd // 2) if case.get("inv_freq") == "given" else 0
    return 2 * elems * itemsize(dtype) + tokens * pos_bytes + freq, 6 * (elems // d) * rd // 2 * 2


def _rope_cost(shape, dtype, case):
    return _cost(numel(shape), numel(shape[:-2]), shape[-1], dtype, case)


def _qk_cost(shape, dtype, case):
    lead, hq, hk, d = shape[:-3], shape[-3], shape[-2], shape[-1]
    tokens = numel(lead)
    return _cost(tokens * (hq + hk) * d, tokens, d, dtype, case)


register(OpSpec(
    family="rope", name="rope", fn=rope.rope, reference=ref.rope,
    make_inputs=_rope_inputs, out_kwargs=lambda r: {"out": r}, cost=_rope_cost,
    backends=BACKENDS, cases=CASES, shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH, vjp="rope",
    doc="The VJP of rope is rope with inverse=True.",
))

register(OpSpec(
    family="rope", name="rope_qk", fn=rope.rope_qk, reference=ref.rope_qk,
    make_inputs=_qk_inputs, out_kwargs=lambda r: {"q_out": r[0], "k_out": r[1]}, cost=_qk_cost,
    backends=BACKENDS, cases=CASES, shapes=QK_SHAPES, edge_shapes=QK_EDGE, bench_shapes=QK_BENCH, vjp="rope_qk",
    doc="The VJP of rope_qk is rope_qk with inverse=True.",
))
