"""OpSpecs of the sampling family."""
from __future__ import annotations

import numpy as np

from .. import sampling
from .._spec import OpSpec, register
from ..reference import sampling as ref
from ._inputs import itemsize, numel, rows

BACKENDS = ("cpu", "cuda", "metal")  # metal: proven by the MSL simulator (docs/metal.md)
SHAPES = ((4, 128), (16, 1000), (8, 4096))
EDGE = ((1, 1), (1, 7), (3, 33), (0, 64), (5, 1), (2, 70000))
BENCH = {"decode": [(1, 32000), (1, 128256)], "prefill": [(64, 32000), (64, 128256)]}
SOFTMAX_BENCH = {"decode": BENCH["decode"], "prefill": BENCH["prefill"] + [(4096, 32000)]}
EXACT = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}
# Outputs are float32 whatever the input: the error is f32 math on exact inputs.
F32_OUT = {d: (2e-5, 2e-5) for d in ("float32", "float16", "bfloat16")}


def _param(value, n, rng, kind):
    """A case value; "rows" means a per-row array [n]."""
    if value != "rows":
        return value
    if kind == "temperature":
        return rng.uniform(0.5, 1.5, n).astype(np.float32)
    if kind == "k":
        return rng.integers(0, 12, n).astype(np.int32)
    if kind == "p":
        return rng.uniform(0.3, 1.0, n).astype(np.float32)
    return rng.uniform(0.0, 0.3, n).astype(np.float32)  # min_p


def _logits(shape, dtype, rng, strided):
    return rows(shape, dtype, rng, strided, scale=2.0)


def _kw(case, n, rng, kinds):
    return {k: _param(v, n, rng, kinds.get(k, k)) for k, v in case.items()}


def _row_bytes(shape, dtype, out_size):
    return numel(shape) * (itemsize(dtype) + out_size)


# ---------------------------------------------------------------- softmax, log_softmax, logsumexp
def _normalize_inputs(shape, dtype, rng, case, strided):
    return (_logits(shape, dtype, rng, strided),), _kw(case, shape[0], rng, {})


for _name, _out in (("softmax", 4), ("log_softmax", 4), ("logsumexp", 0)):
    register(OpSpec(
        family="sampling", name=_name, fn=getattr(sampling, _name), reference=getattr(ref, _name),
        make_inputs=_normalize_inputs, out_kwargs=lambda r: {"out": r},
        cost=lambda shape, dtype, case, _o=_out: (_row_bytes(shape, dtype, _o) + 4 * shape[0], 12 * numel(shape)),
        backends=BACKENDS, tol=dict(F32_OUT),
        cases=({}, {"temperature": 0.7}, {"temperature": "rows"}),
        shapes=SHAPES, edge_shapes=EDGE, bench_shapes=SOFTMAX_BENCH if _name == "softmax" else BENCH,
    ))

# ---------------------------------------------------------------- argmax
register(OpSpec(
    family="sampling", name="argmax", fn=sampling.argmax, reference=ref.argmax,
    make_inputs=lambda shape, dtype, rng, case, strided: ((_logits(shape, dtype, rng, strided),), {}),
    out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (_row_bytes(shape, dtype, 0) + 4 * shape[0], numel(shape)),
    backends=BACKENDS, tol=dict(EXACT), shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))


# ---------------------------------------------------------------- masks
def _mask_inputs(shape, dtype, rng, case, strided):
    case = dict(case)
    value = _param(case.pop("k", case.pop("p", None)), shape[0], rng, case.pop("kind"))
    return (_logits(shape, dtype, rng, strided), value), _kw(case, shape[0], rng, {})


def _mask_cost(shape, dtype, case):
    return _row_bytes(shape, dtype, itemsize(dtype)), 8 * numel(shape)


for _name, _cases in (
    ("top_k_mask", ({"kind": "k", "k": 5}, {"kind": "k", "k": 0}, {"kind": "k", "k": 100}, {"kind": "k", "k": "rows"})),
    ("top_p_mask", ({"kind": "p", "p": 0.9}, {"kind": "p", "p": 0.5, "temperature": 0.7}, {"kind": "p", "p": 1.0},
                    {"kind": "p", "p": "rows", "temperature": "rows"})),
    ("min_p_mask", ({"kind": "min_p", "p": 0.1}, {"kind": "min_p", "p": 0.02, "temperature": 1.5},
                    {"kind": "min_p", "p": "rows"})),
):
    register(OpSpec(
        family="sampling", name=_name, fn=getattr(sampling, _name), reference=getattr(ref, _name),
        make_inputs=_mask_inputs, out_kwargs=lambda r: {"out": r}, cost=_mask_cost,
        backends=BACKENDS, tol=dict(EXACT), cases=_cases, shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
    ))


# ---------------------------------------------------------------- apply_penalties
def _penalty_inputs(shape, dtype, rng, case, strided):
    x = _logits(shape, dtype, rng, strided)
    ids = rng.integers(-1, max(shape[-1], 1), (shape[0], 24)).astype(np.int32)
    return (x, ids), dict(case)


# Bytes: the bench calls it out of place, so the whole row must be read and
# written (a copy, plus a scattered update of the <= L seen tokens, which hit the
# cache), and the ids read: 4 * L per row. In place (out=logits, as engines call
# it) only the seen logits would move; the bench does not time that form. Being
# a copy, braze lands near 100% of the copy ceiling; readings above it are not
# bytes left uncounted: decode rows (one row, in cache) beat a DRAM copy, and on
# a shared 2-core machine per-row memcpys measured 1.0-1.3x the ceiling's
# 256 MiB memcpy of the same bytes per second.
def _penalty_cost(shape, dtype, case):
    ids_len = 24  # _penalty_inputs
    return _row_bytes(shape, dtype, itemsize(dtype)) + 4 * ids_len * shape[0], 4 * ids_len * shape[0]


register(OpSpec(
    family="sampling", name="apply_penalties", fn=sampling.apply_penalties, reference=ref.apply_penalties,
    make_inputs=_penalty_inputs, out_kwargs=lambda r: {"out": r},
    cost=_penalty_cost,
    backends=BACKENDS,
    cases=({"repetition": 1.3, "frequency": 0.2, "presence": 0.5}, {"repetition": 0.8},
           {"frequency": -0.5, "presence": 1.0}),
    shapes=SHAPES, edge_shapes=EDGE, bench_shapes=BENCH,
))


# ---------------------------------------------------------------- sample
def _sample_inputs(shape, dtype, rng, case, strided):
    kinds = {"temperature": "temperature", "top_k": "k", "top_p": "p", "min_p": "min_p"}
    return (_logits(shape, dtype, rng, strided),), {"seed": 1234, "offset": 7, **_kw(case, shape[0], rng, kinds)}


register(OpSpec(
    family="sampling", name="sample", fn=sampling.sample, reference=ref.sample,
    make_inputs=_sample_inputs, out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (_row_bytes(shape, dtype, 0) + 4 * shape[0], 20 * numel(shape)),
    backends=BACKENDS, tol=dict(EXACT),
    cases=({}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.1}, {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05},
           {"temperature": 0.0}, {"temperature": "rows", "top_k": "rows", "top_p": "rows", "min_p": "rows"}),
    shapes=SHAPES, edge_shapes=EDGE,
    bench_shapes={"decode": BENCH["decode"], "prefill": BENCH["prefill"]},
    doc="parity: the same token as the reference sampler given the same Philox uniforms",
))


# ---------------------------------------------------------------- philox_uniform
register(OpSpec(
    family="sampling", name="philox_uniform", fn=sampling.philox_uniform, reference=ref.philox_uniform,
    make_inputs=lambda shape, dtype, rng, case, strided: ((shape[0],), {"seed": 2**40 + 3, "offset": 11, **case}),
    out_kwargs=lambda r: {"out": r},
    cost=lambda shape, dtype, case: (4 * shape[0], 40 * shape[0]),
    dtypes=("float32",), backends=BACKENDS, tol={"float32": (0.0, 0.0)},
    cases=({}, {"seed": 0, "offset": 2**63}), shapes=((1000,),), edge_shapes=((0,), (1,)),
    bench_shapes={"decode": [(1,)], "prefill": [(4096,)]},
    doc="the uniform each row of sample draws; bit-identical to the numpy twin",
))
