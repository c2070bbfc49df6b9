"""OpSpecs of the norm family."""
from __future__ import annotations

from .. import norm
from .._spec import DEFAULT_TOL, OpSpec, register
from ..reference import norm as ref
from ._inputs import itemsize, numel, rows, vector

BACKENDS = ("cpu", "cuda", "metal")
SHAPES = ((4, 128), (3, 5, 96), (16, 1000), (8, 4096))
EDGE = ((1, 1), (1, 7), (3, 33), (0, 64), (2, 0, 16), (5, 1), (2, 70000))
BENCH = {"decode": [(1, 8192)], "prefill": [(4096, 4096), (16384, 8192), (65536, 4096)]}


def _weight(n, dtype, rng, case):
    return None if case.get("weight", True) is None else vector(n, dtype, rng)


def _bytes(shape, dtype, reads, writes, vectors=1, vector_writes=0):
    n, h, s = numel(shape), shape[-1], itemsize(dtype)
    return (reads + writes) * n * s + (vectors + vector_writes) * h * s


# ---------------------------------------------------------------- rms_norm
def _rms_inputs(shape, dtype, rng, case, strided):
    x = rows(shape, dtype, rng, strided)
    return (x, _weight(shape[-1], dtype, rng, case)), {"eps": 1e-6, **{k: v for k, v in case.items() if k != "weight"}}


register(OpSpec(
    family="norm", name="rms_norm", fn=norm.rms_norm, reference=ref.rms_norm,
    make_inputs=_rms_inputs, out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 1, 1), 4 * numel(shape)),
    backends=BACKENDS, cases=({}, {"weight": None}, {"weight_offset": 1.0}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH, vjp="rms_norm_vjp",
))


# ---------------------------------------------------------------- layer_norm
def _ln_inputs(shape, dtype, rng, case, strided):
    x = rows(shape, dtype, rng, strided, loc=0.5)
    w = _weight(shape[-1], dtype, rng, case)
    b = None if case.get("bias", True) is None else vector(shape[-1], dtype, rng, loc=0.0)
    return (x, w, b), {"eps": 1e-5}


register(OpSpec(
    family="norm", name="layer_norm", fn=norm.layer_norm, reference=ref.layer_norm,
    make_inputs=_ln_inputs, out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 1, 1, vectors=2), 7 * numel(shape)),
    backends=BACKENDS, cases=({}, {"weight": None, "bias": None}, {"bias": None}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH, vjp="layer_norm_vjp",
))


# ---------------------------------------------------------------- add_rms_norm
def _add_inputs(shape, dtype, rng, case, strided):
    x = rows(shape, dtype, rng, strided)
    res = rows(shape, dtype, rng, False, scale=2.0)
    return (x, res, _weight(shape[-1], dtype, rng, case)), {"eps": 1e-6}


register(OpSpec(
    family="norm", name="add_rms_norm", fn=norm.add_rms_norm, reference=ref.add_rms_norm,
    make_inputs=_add_inputs, out_kwargs=lambda r: {"out": r[0], "residual_out": r[1]},
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 2, 2), 5 * numel(shape)),
    backends=BACKENDS, cases=({}, {"weight": None}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))


# ---------------------------------------------------------------- rms_norm_gated
def _gated_inputs(shape, dtype, rng, case, strided):
    x = rows(shape, dtype, rng, strided)
    gate = rows(shape, dtype, rng, False, scale=2.0)
    g = case.get("group_size")
    if g is not None and shape[-1] % g:
        g = None
    return (x, gate, _weight(shape[-1], dtype, rng, case)), {"eps": 1e-6, "group_size": g}


register(OpSpec(
    family="norm", name="rms_norm_gated", fn=norm.rms_norm_gated, reference=ref.rms_norm_gated,
    make_inputs=_gated_inputs, out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 2, 1), 12 * numel(shape)),
    backends=BACKENDS, cases=({}, {"group_size": 16}, {"weight": None}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))


# ---------------------------------------------------------------- VJPs
def _rms_vjp_inputs(shape, dtype, rng, case, strided):
    x = rows(shape, dtype, rng, strided)
    dy = rows(shape, dtype, rng, False)
    return (x, _weight(shape[-1], dtype, rng, case), dy), {"eps": 1e-6, **{k: v for k, v in case.items() if k != "weight"}}


def _pair_out(r):
    return {"out": tuple(r)}


# dx carries a factor rsqrt(var + eps), up to 1/sqrt(eps) ~ 316 on a flat row,
# so one rounding of the f32 math can show as ~2e-5 where the exact dx is 0.
VJP_TOL = {**DEFAULT_TOL, "float32": (1e-4, 2e-5)}


register(OpSpec(
    family="norm", name="rms_norm_vjp", fn=norm.rms_norm_vjp, reference=ref.rms_norm_vjp,
    make_inputs=_rms_vjp_inputs, out_kwargs=_pair_out, tol=VJP_TOL,
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 2, 1, vectors=1, vector_writes=1), 10 * numel(shape)),
    backends=BACKENDS, cases=({}, {"weight": None}, {"weight_offset": 1.0}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))


def _ln_vjp_inputs(shape, dtype, rng, case, strided):
    (x, w, b), kw = _ln_inputs(shape, dtype, rng, case, strided)
    return (x, w, b, rows(shape, dtype, rng, False)), kw


register(OpSpec(
    family="norm", name="layer_norm_vjp", fn=norm.layer_norm_vjp, reference=ref.layer_norm_vjp,
    make_inputs=_ln_vjp_inputs, out_kwargs=_pair_out, tol=VJP_TOL,
    cost=lambda shape, dtype, case: (_bytes(shape, dtype, 2, 1, vectors=2, vector_writes=2), 14 * numel(shape)),
    backends=BACKENDS, cases=({}, {"weight": None, "bias": None}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))
