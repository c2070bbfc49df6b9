"""OpSpecs of the attention family.

Shapes (tuples the registry passes to make_inputs):

* ``append_kv``: ``(T, Hkv, D, num_blocks, block_size)``
* ``decode``: ``(B, L, Hq, Hkv, D, block_size)``: ``L`` the longest context
* ``prefill``: ``(B, T, Hq, Hkv, D)``: ``T`` the longest sequence
* ``prefill_paged``: ``(B, Tq, L, Hq, Hkv, D, block_size)``: up to ``Tq`` new
  queries at the end of up to ``L`` cached tokens
* ``merge_states``: ``(T, H, D)``

Test inputs are ragged (lengths drawn per sequence, with empty and length-1
ones), block tables shuffled over the cache with -1 past each sequence's
blocks; bench inputs give every sequence the full length. Bench shapes are
Llama-3-8B's attention (Hq 32, Hkv 8, D 128): decode B1 / B64 at 4096 tokens
and B1 at 32768; causal prefill of 512 .. 4096 tokens.

Layouts: every float input may be strided, broadcast (stride 0) or
misaligned, paged caches included: the kernels take any non-negative strides
with a contiguous head_dim, so the registry's layouts all apply.
"""
from __future__ import annotations

import numpy as np

from .. import attention
from .._spec import OpSpec, register
from ..reference import attention as ref
from ._inputs import cast, itemsize, rows

# Contexts this long (the bench shapes) are full in every sequence, so the cost model holds.
FULL_FROM = 4096
BACKENDS = ("cpu", "cuda", "metal")
EXACT = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}
# Sums over hundreds of keys and a vexp of about 2 ulp: float32 a little looser than the default.
TOL = {"float32": (5e-5, 5e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}

OPTION_CASES = ({}, {"return_lse": True}, {"window": 5}, {"window": 100000}, {"sinks": True},
                {"softcap": 4.0, "scale": 0.3},
                {"sinks": True, "window": 2, "softcap": 8.0, "return_lse": True})


def _out_kwargs(r):
    return {"out": r[0], "lse_out": r[1]} if isinstance(r, tuple) else {"out": r}


def _options(case, hq, dtype, rng):
    """The op's keyword arguments for an option case: sinks become an array [Hq]."""
    kw = {k: v for k, v in case.items() if k != "sinks"}
    if case.get("sinks"):
        kw["sinks"] = cast(rng.normal(0.5, 1.0, (hq,)), dtype)
    return kw


def _lengths(b, longest, rng, full):
    """Lengths in [0, longest]: the first the longest, then (tests) 0 and 1 among random ones."""
    if full:
        return np.full(b, longest, np.int32)
    n = rng.integers(0, longest + 1, size=b).astype(np.int32)
    n[0] = longest
    for i, edge in ((1, 0), (2, 1)):
        if i < b:
            n[i] = min(edge, longest)
    return n


def _paged_cache(kv_lens, max_len, hkv, d, bs, dtype, rng, strided):
    """k_cache, v_cache [num_blocks, bs, Hkv, D] with spare blocks, and a shuffled block_table."""
    b = len(kv_lens)
    max_blocks = (max_len + bs - 1) // bs
    num_blocks = b * max_blocks + 3
    perm = rng.permutation(num_blocks).astype(np.int32)
    table = np.full((b, max_blocks), -1, np.int32)
    for i in range(b):
        used = (int(kv_lens[i]) + bs - 1) // bs
        table[i, :used] = perm[i * max_blocks:i * max_blocks + used]
    shape = (num_blocks, bs, hkv, d)
    return rows(shape, dtype, rng, strided), rows(shape, dtype, rng, strided), table


# ---------------------------------------------------------------- append_kv
def _append_inputs(shape, dtype, rng, case, strided):
    t, hkv, d, nb, bs = shape
    cap = nb * bs
    perm = rng.permutation(cap)
    # Tests write every slot (poisoned caches come back whole); extra tokens are skipped.
    slots = np.concatenate([perm, np.full(max(0, t - cap), -1)])[:t] if t >= cap else perm[:t]
    slots = rng.permutation(slots).astype(np.int64 if case.get("slots") == "int64" else np.int32)
    k, v = rows((t, hkv, d), dtype, rng, strided), rows((t, hkv, d), dtype, rng, strided)
    kc, vc = rows((nb, bs, hkv, d), dtype, rng), rows((nb, bs, hkv, d), dtype, rng)
    return (k, v), {"k_cache": kc, "v_cache": vc, "slot_mapping": slots}


def _cache_kwargs(r):
    """The caches are append_kv's outputs: out= arrays replace them (None keeps the input's)."""
    return {k: c for k, c in zip(("k_cache", "v_cache"), r) if c is not None}


def _append_cost(shape, dtype, case):
    t, hkv, d, nb, bs = shape
    return 2 * 2 * min(t, nb * bs) * hkv * d * itemsize(dtype) + 4 * t, 0


register(OpSpec(
    family="attention", name="append_kv", fn=attention.append_kv, reference=ref.append_kv, reference_reads_values=True,
    make_inputs=_append_inputs, out_kwargs=_cache_kwargs, cost=_append_cost,
    backends=BACKENDS, tol=dict(EXACT), cases=({}, {"slots": "int64"}),
    shapes=((40, 2, 64, 4, 8), (20, 8, 128, 2, 10), (70, 1, 96, 3, 16)),
    edge_shapes=((1, 1, 64, 1, 1), (5, 2, 80, 1, 3), (3, 4, 256, 3, 1), (9, 2, 192, 2, 4)),
    bench_shapes={"decode": [(64, 8, 128, 4096, 16)], "prefill": [(4096, 8, 128, 512, 16)]},
))


# ---------------------------------------------------------------- decode
def _decode_inputs(shape, dtype, rng, case, strided):
    b, length, hq, hkv, d, bs = shape
    lens = _lengths(b, length, rng, b == 1 or length >= FULL_FROM)
    kc, vc, table = _paged_cache(lens, length, hkv, d, bs, dtype, rng, strided)
    q = rows((b, hq, d), dtype, rng, strided)
    return (q, kc, vc, table, lens), _options(case, hq, dtype, rng)


def _decode_cost(shape, dtype, case):
    b, length, hq, hkv, d, bs = shape
    return (2 * b * length * hkv * d + 2 * b * hq * d) * itemsize(dtype) + 4 * b, 4 * b * length * hq * d


register(OpSpec(
    family="attention", name="decode", fn=attention.decode, reference=ref.decode, reference_reads_values=True,
    make_inputs=_decode_inputs, out_kwargs=_out_kwargs, cost=_decode_cost, backends=BACKENDS, tol=dict(TOL),
    cases=OPTION_CASES,
    shapes=((4, 37, 8, 2, 64, 16), (3, 300, 4, 4, 128, 16), (5, 1100, 8, 1, 128, 32), (2, 50, 6, 3, 96, 7)),
    edge_shapes=((1, 1, 4, 4, 64, 16), (3, 0, 8, 2, 64, 16), (3, 9, 2, 1, 80, 1), (2, 20, 4, 2, 192, 4),
                 (2, 33, 2, 2, 256, 16), (1, 5000, 4, 1, 64, 16)),
    # the last two: one block a sequence, the pages' cost beside the rows above (issue 16: within 5%)
    bench_shapes={"decode": [(1, 4096, 32, 8, 128, 16), (64, 4096, 32, 8, 128, 16), (1, 32768, 32, 8, 128, 16),
                             (64, 4096, 32, 8, 128, 4096), (1, 32768, 32, 8, 128, 32768)],
                  # a few full sequences (the float64 oracle of B64 takes a minute here)
                  "prefill": [(4, 4096, 32, 8, 128, 16)]},
))


# ---------------------------------------------------------------- prefill
def _prefill_inputs(shape, dtype, rng, case, strided):
    b, t, hq, hkv, d = shape
    lens = _lengths(b, t, rng, b == 1)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    q = rows((n, hq, d), dtype, rng, strided)
    k, v = rows((n, hkv, d), dtype, rng, strided), rows((n, hkv, d), dtype, rng, strided)
    return (q, k, v, cu), _options(case, hq, dtype, rng)


def _prefill_cost(shape, dtype, case):
    b, t, hq, hkv, d = shape
    causal = case.get("causal", True)
    flops = 4 * b * t * t * hq * d // (2 if causal else 1)
    return b * t * (2 * hq + 2 * hkv) * d * itemsize(dtype) + 4 * (b + 1), flops


register(OpSpec(
    family="attention", name="prefill", fn=attention.prefill, reference=ref.prefill, reference_reads_values=True,
    make_inputs=_prefill_inputs, out_kwargs=_out_kwargs, cost=_prefill_cost, backends=BACKENDS, tol=dict(TOL),
    cases=OPTION_CASES + ({"causal": False}, {"causal": False, "window": 4, "sinks": True}),
    shapes=((4, 37, 8, 2, 64), (2, 130, 4, 4, 128), (3, 70, 8, 1, 96)),
    edge_shapes=((1, 1, 4, 4, 64), (3, 1, 2, 1, 80), (4, 0, 2, 2, 64), (2, 17, 4, 2, 192), (2, 9, 2, 2, 256),
                 (1, 300, 2, 1, 64)),
    bench_shapes={"decode": [(1, 16, 32, 8, 128)],
                  "prefill": [(1, 512, 32, 8, 128), (1, 1024, 32, 8, 128), (1, 2048, 32, 8, 128),
                              (1, 4096, 32, 8, 128)]},
))


# ---------------------------------------------------------------- prefill_paged
def _paged_inputs(shape, dtype, rng, case, strided):
    b, tq, length, hq, hkv, d, bs = shape
    full = b == 1
    kv_lens = _lengths(b, length, rng, full)
    new = np.minimum(_lengths(b, tq, rng, full), kv_lens).astype(np.int32)
    cu = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    kc, vc, table = _paged_cache(kv_lens, length, hkv, d, bs, dtype, rng, strided)
    q = rows((int(cu[-1]), hq, d), dtype, rng, strided)
    return (q, kc, vc, table, cu, kv_lens), _options(case, hq, dtype, rng)


def _paged_cost(shape, dtype, case):
    b, tq, length, hq, hkv, d, bs = shape
    flops = 4 * b * hq * d * (tq * length - tq * (tq - 1) // 2)
    return (2 * b * length * hkv * d + 2 * b * tq * hq * d) * itemsize(dtype) + 8 * b, flops


register(OpSpec(
    family="attention", name="prefill_paged", fn=attention.prefill_paged, reference=ref.prefill_paged, reference_reads_values=True,
    make_inputs=_paged_inputs, out_kwargs=_out_kwargs, cost=_paged_cost, backends=BACKENDS, tol=dict(TOL),
    cases=OPTION_CASES,
    shapes=((4, 9, 40, 8, 2, 64, 16), (3, 40, 200, 4, 4, 128, 16), (2, 33, 70, 6, 3, 96, 5)),
    edge_shapes=((1, 1, 1, 4, 4, 64, 16), (3, 1, 9, 2, 1, 80, 1), (3, 0, 5, 2, 2, 64, 4), (2, 12, 12, 4, 2, 192, 4),
                 (2, 5, 30, 2, 2, 256, 8)),
    bench_shapes={"decode": [(1, 1, 4096, 32, 8, 128, 16)], "prefill": [(1, 512, 4096, 32, 8, 128, 16)]},
))


# ---------------------------------------------------------------- merge_states
def _merge_inputs(shape, dtype, rng, case, strided):
    t, h, d = shape
    oa, ob = rows((t, h, d), dtype, rng, strided), rows((t, h, d), dtype, rng, strided)
    la = rng.normal(0.0, 3.0, (t, h)).astype(np.float32)
    lb = rng.normal(0.0, 3.0, (t, h)).astype(np.float32)
    flat_a, flat_b = la.reshape(-1), lb.reshape(-1)
    flat_a[::5] = -np.inf  # one side empty
    flat_b[::7] = -np.inf  # and, every 35th, both
    return (oa, la, ob, lb), {}


def _merge_cost(shape, dtype, case):
    t, h, d = shape
    return 3 * t * h * d * itemsize(dtype) + 3 * t * h * 4, 4 * t * h * d


register(OpSpec(
    family="attention", name="merge_states", fn=attention.merge_states, reference=ref.merge_states, reference_reads_values=True,
    make_inputs=_merge_inputs, out_kwargs=lambda r: {"out": r}, cost=_merge_cost, backends=BACKENDS,
    tol=dict(TOL), shapes=((7, 4, 64), (40, 8, 128), (3, 2, 96)),
    edge_shapes=((1, 1, 64), (0, 4, 64), (5, 3, 80), (2, 2, 256), (36, 1, 192)),
    bench_shapes={"decode": [(64, 32, 128)], "prefill": [(4096, 32, 128)]},
))
