"""OpSpecs of the ops family.

Shapes are x's for the activations (``[..., 2H]`` for the gated ones: the
output is ``[..., H]``) and for ``hadamard``; ``embedding`` shapes are
``(*ids.shape, vocab, dim)``. Bench shapes come from real models: Llama-3-8B
(intermediate 14336, hidden 4096), Llama-3-70B (intermediate 28672), gpt-oss-120b
(expert intermediate 2880, gate and up interleaved), Qwen3-0.6B (vocab 151936,
hidden 1024), Llama-2 (vocab 32000, hidden 4096).
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import ops
from .._spec import OpSpec, register
from ..reference import ops as ref
from ._inputs import cast, itemsize, numel, rows

BACKENDS = ("cpu", "cuda", "metal")  # metal: proven by the MSL simulator
EXACT = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}

GATED_SHAPES = ((4, 256), (3, 5, 96), (16, 1000), (8, 4096))
GATED_EDGE = ((1, 2), (1, 14), (3, 34), (0, 64), (2, 0, 16), (5, 2), (2, 140000))
GATED_BENCH = {"decode": [(1, 2 * 14336)], "prefill": [(4096, 2 * 14336), (2048, 2 * 28672), (16384, 2 * 14336)]}
SWIGLU_BENCH = {"decode": [(1, 2 * 2880)], "prefill": [(4096, 2 * 2880), (16384, 2 * 2880)]}
SHAPES = ((4, 128), (3, 5, 96), (16, 1000), (8, 4096))
EDGE = ((1, 1), (1, 7), (3, 33), (0, 64), (2, 0, 16), (5, 1), (2, 70000))
BENCH = {"decode": [(1, 14336)], "prefill": [(4096, 14336), (2048, 28672)]}

# Per output element, counting an exp or a division as one flop (gelu: the erf form's polynomial).
ACT_FLOPS = {"silu_and_mul": 5, "gelu_and_mul": 20, "swiglu_clamped": 9, "silu": 4, "gelu": 19,
             "silu_and_mul_vjp": 10, "gelu_and_mul_vjp": 27, "swiglu_clamped_vjp": 16, "silu_vjp": 8,
             "gelu_vjp": 25}


def _act_cost(name, gated, vjp=False):
    """Bytes of x and y (the VJP: x, dy and dx); flops per output element of the forward."""
    def cost(shape, dtype, case):
        n = numel(shape)
        out = n // 2 if gated else n
        return (2 * n + out if vjp else n + out) * itemsize(dtype), ACT_FLOPS[name] * out
    return cost


def _act_inputs(scale, vjp=False):
    """x (scale: its spread); for a VJP also dy, the forward output's shape."""
    def make(shape, dtype, rng, case, strided):
        x = rows(shape, dtype, rng, strided, scale=scale)
        if not vjp:
            return (x,), dict(case)
        out = tuple(shape[:-1]) + (shape[-1] // 2 if vjp == "gated" else shape[-1],)
        return (x, rows(out, dtype, rng, strided)), dict(case)
    return make


for _name, _gated, _cases, _scale, _bench in (
    ("silu_and_mul", True, ({}, {"interleaved": True}), 2.0, GATED_BENCH),
    # the tanh form first (the one benchmarked): Gemma's GeGLU, and the only one Liger has
    ("gelu_and_mul", True, ({"approximate": "tanh"}, {}, {"interleaved": True},
                            {"approximate": "tanh", "interleaved": True}), 2.0, GATED_BENCH),
    # scale 4: a tenth of the gates and ups lie beyond the default limit 7
    ("swiglu_clamped", True, ({}, {"interleaved": False}, {"alpha": 1.0, "limit": 3.0}), 4.0, SWIGLU_BENCH),
    ("silu", False, ({},), 2.0, BENCH),
    ("gelu", False, ({}, {"approximate": "tanh"}), 2.0, BENCH),
):
    _shapes = dict(shapes=GATED_SHAPES if _gated else SHAPES, edge_shapes=GATED_EDGE if _gated else EDGE,
                   bench_shapes=_bench)
    register(OpSpec(
        family="ops", name=_name, fn=getattr(ops, _name), reference=getattr(ref, _name),
        make_inputs=_act_inputs(_scale), out_kwargs=lambda r: {"out": r},
        cost=_act_cost(_name, _gated), backends=BACKENDS, cases=_cases, vjp=_name + "_vjp", **_shapes,
    ))
    # dx from x and dy (shapes are x's); the forward's cases, tolerances as its
    register(OpSpec(
        family="ops", name=_name + "_vjp", fn=getattr(ops, _name + "_vjp"), reference=getattr(ref, _name + "_vjp"),
        make_inputs=_act_inputs(_scale, "gated" if _gated else "plain"), out_kwargs=lambda r: {"out": r},
        cost=_act_cost(_name + "_vjp", _gated, vjp=True), backends=BACKENDS, cases=_cases, **_shapes,
    ))


# ---------------------------------------------------------------- embedding
# Large tables (benchmarks) are shared by the input sets that are alive at
# once: rotating 0.6-1 GiB tables buys nothing for a gather of a few rows, and
# a weak reference frees the table with the last set that holds it.
_big_tables = weakref.WeakValueDictionary()


def _table(vocab, dim, dtype, rng, strided):
    """Normal rows [vocab, dim]; with ``strided``, rows padded apart."""
    if vocab * dim * itemsize(dtype) < (64 << 20) or strided:
        return rows((vocab, dim), dtype, rng, strided)
    key = (vocab, dim, dtype)
    table = _big_tables.get(key)
    if table is None:
        table = _big_tables[key] = cast(rng.standard_normal((vocab, dim), dtype=np.float32), dtype)
    return table


def _ids(lead, vocab, rng, case, strided):
    """Ids in [-2, vocab + 2): some outside the table, which must give zero rows;
    int64 ids also include +-2**40 (past any int32). With ``strided``, every
    other id of a larger array."""
    wide = tuple(lead[:-1]) + (2 * lead[-1],) if strided and lead else tuple(lead)
    ids = np.asarray(rng.integers(-2, vocab + 2, size=wide))
    if case.get("ids") == "int64":
        ids = ids.astype(np.int64)
        flat = ids.reshape(-1)
        flat[::7] = 2**40
        flat[3::11] = -(2**40)
    else:
        ids = ids.astype(np.int32)
    return ids[..., ::2] if strided and lead else ids


def _emb_inputs(shape, dtype, rng, case, strided):
    *lead, vocab, dim = shape
    return (_ids(lead, vocab, rng, case, strided), _table(vocab, dim, dtype, rng, strided)), {}


def _emb_cost(shape, dtype, case):
    *lead, vocab, dim = shape
    tokens = numel(lead)
    return 2 * tokens * dim * itemsize(dtype) + tokens * (8 if case.get("ids") == "int64" else 4), 0


register(OpSpec(
    family="ops", name="embedding", fn=ops.embedding, reference=ref.embedding,
    make_inputs=_emb_inputs, out_kwargs=lambda r: {"out": r}, cost=_emb_cost,
    backends=BACKENDS, tol=dict(EXACT), cases=({}, {"ids": "int64"}),
    shapes=((8, 100, 64), (3, 5, 1000, 96), (33, 5000, 256), (16, 300, 4096)),
    edge_shapes=((1, 50, 64), (1, 1, 1), (0, 50, 64), (3, 50, 33), (2, 3, 5, 16), (4, 0, 16), (2, 6, 70000),
                 (10, 48)),
    bench_shapes={"decode": [(1, 151936, 1024)], "prefill": [(4096, 151936, 1024), (4096, 32000, 4096)]},
))


# ---------------------------------------------------------------- hadamard
def _had_cost(shape, dtype, case):
    n = shape[-1]
    m, length = ref.hadamard_split(n)
    return 2 * numel(shape) * itemsize(dtype), numel(shape) * (length.bit_length() - 1 + (m if m > 1 else 0) + 1)


register(OpSpec(
    family="ops", name="hadamard", fn=ops.hadamard, reference=ref.hadamard,
    make_inputs=lambda shape, dtype, rng, case, strided: ((rows(shape, dtype, rng, strided),), dict(case)),
    out_kwargs=lambda r: {"out": r}, cost=_had_cost, backends=BACKENDS, cases=({}, {"scale": 0.5}),
    shapes=((4, 64), (3, 5, 128), (6, 12 * 64), (5, 20 * 32), (4, 28 * 16), (2, 4096), (3, 1024)),
    edge_shapes=((1, 1), (3, 2), (2, 4), (2, 12), (3, 24), (2, 20), (2, 28), (2, 56), (0, 64), (2, 0, 16),
                 (2, 32768), (1, 28 * 1024), (2, 20 * 1024), (2, 12 * 2048)),
    bench_shapes={"decode": [(1, 4096)], "prefill": [(16384, 4096), (4096, 28 * 512), (2048, 28 * 1024)]},
))
