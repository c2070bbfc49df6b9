"""The attention family on Metal (shaders/metal/attention/), run through the
simulated braze._metal (the real shaders, plans, bindings and core checks):
each op against the CPU kernels on small shapes, every option (scale, window,
sinks, softcap, lse) and GQA 1 and 4, ragged batches with empty and length-1
sequences, shuffled block tables, every head_dim; the host checks of the index
arrays raise the CPU backend's errors and write nothing; shuffled fiber
schedules give the same bits. The registry parity tests (tests/test_attention.py,
backend "metal") run the same kernels against the float64 reference."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from braze import attention, testing
from braze._arrays import BF16

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402
from test_attention import paged as _paged  # noqa: E402

test_under_sanitizers = sanitized_rerun(__file__)

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
DTYPES = list(NP)
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}  # one rounding of the output apart
OPTIONS = [{}, {"return_lse": True}, {"window": 3, "return_lse": True}, {"sinks": True, "return_lse": True},
           {"softcap": 4.0, "scale": 0.3}, {"sinks": True, "window": 2, "softcap": 8.0, "return_lse": True}]


def on_metal(fn, *a, **kw):
    with testing.simulated_metal(mtlsim.metal_module()):
        return fn(*a, **kw)


def kwargs(case, hq, dtype, rng):
    kw = {k: v for k, v in case.items() if k != "sinks"}
    if case.get("sinks"):
        kw["sinks"] = rng.normal(0.5, 1.0, hq).astype(NP[dtype])
    return kw


def close(got, want, dtype):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    tol = TOL[dtype]
    np.testing.assert_allclose(got[0].astype(np.float32), want[0].astype(np.float32), rtol=tol, atol=tol)
    for g, w in zip(got[1:], want[1:]):  # lse: float32 in both, -inf where nothing is visible
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


def paged(rng, lens, hkv, d, bs, dtype):
    """test_attention's paged caches, in `dtype` (a name)."""
    return _paged(rng, lens, hkv, d, bs, NP[dtype])


def ragged(rng, lens, hq, hkv, d, dtype):
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    return [rng.normal(size=(n, h, d)).astype(NP[dtype]) for h in (hq, hkv, hkv)] + [cu]


# ---------------------------------------------------------------- decode
@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2)])
@pytest.mark.parametrize("ci", range(len(OPTIONS)))
def test_decode_matches_cpu(dtype, hq, hkv, ci):
    rng = np.random.default_rng(ci * 7 + hq)
    kc, vc, table, lens = paged(rng, [37, 0, 1, 20], hkv, 64, 5 if ci % 2 else 16, dtype)
    q = rng.normal(size=(4, hq, 64)).astype(NP[dtype])
    kw = kwargs(OPTIONS[ci], hq, dtype, rng)
    close(on_metal(attention.decode, q, kc, vc, table, lens, **kw), attention.decode(q, kc, vc, table, lens, **kw),
          dtype)


# ---------------------------------------------------------------- prefill
@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 1)])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("ci", range(len(OPTIONS)))
def test_prefill_matches_cpu(dtype, hq, hkv, causal, ci):
    rng = np.random.default_rng(ci * 5 + hq + causal)
    q, k, v, cu = ragged(rng, [11, 0, 1, 17], hq, hkv, 64, dtype)
    kw = dict(kwargs(OPTIONS[ci], hq, dtype, rng), causal=causal)
    close(on_metal(attention.prefill, q, k, v, cu, **kw), attention.prefill(q, k, v, cu, **kw), dtype)


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 1)])
@pytest.mark.parametrize("ci", range(len(OPTIONS)))
def test_prefill_paged_matches_cpu(dtype, hq, hkv, ci):
    rng = np.random.default_rng(ci * 3 + hq)
    kv_lens, new = [21, 0, 3, 9, 12], [6, 0, 1, 9, 12]  # a prefix, nothing, one token, all new
    kc, vc, table, lens = paged(rng, kv_lens, hkv, 64, 4 if ci % 2 else 16, dtype)
    cu = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    q = rng.normal(size=(int(cu[-1]), hq, 64)).astype(NP[dtype])
    kw = kwargs(OPTIONS[ci], hq, dtype, rng)
    close(on_metal(attention.prefill_paged, q, kc, vc, table, cu, lens, **kw),
          attention.prefill_paged(q, kc, vc, table, cu, lens, **kw), dtype)


@simulated
@pytest.mark.parametrize("d", [64, 80, 96, 128, 192, 256])
def test_every_head_dim(d):
    """Prefill's 8-column matrix chunks (d / 8 of them, 256: the threadgroup memory's limit) and decode's lanes."""
    rng = np.random.default_rng(d)
    q, k, v, cu = ragged(rng, [9, 3], 2, 1, d, "float16")
    kw = {"sinks": rng.normal(size=2).astype(np.float16), "return_lse": True}
    close(on_metal(attention.prefill, q, k, v, cu, **kw), attention.prefill(q, k, v, cu, **kw), "float16")
    kc, vc, table, lens = paged(rng, [40, 7], 1, d, 16, "bfloat16")
    qd = rng.normal(size=(2, 2, d)).astype(BF16)
    close(on_metal(attention.decode, qd, kc, vc, table, lens, return_lse=True),
          attention.decode(qd, kc, vc, table, lens, return_lse=True), "bfloat16")


@simulated
def test_strided_views():
    """q, k, v as views of one fused qkv array; out and lse_out into strided views."""
    rng = np.random.default_rng(11)
    qkv = rng.normal(size=(14, 4 + 2 * 2, 80)).astype(np.float32)
    q, k, v = qkv[:, :4], qkv[:, 4:6], qkv[:, 6:]
    cu = np.array([0, 6, 14], np.int32)
    out = np.zeros((14, 4, 2 * 80), np.float32)[:, :, :80]
    lse = np.zeros((4, 14), np.float32).T
    on_metal(attention.prefill, q, k, v, cu, out=out, lse_out=lse)
    want, want_lse = attention.prefill(q, k, v, cu, return_lse=True)
    close((out, lse), (want, want_lse), "float32")


# ---------------------------------------------------------------- append_kv, merge_states
@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("slot_dtype", [np.int32, np.int64])
def test_append_kv_matches_cpu(dtype, slot_dtype):
    rng = np.random.default_rng(1)
    k, v = (rng.normal(size=(9, 2, 96)).astype(NP[dtype]) for _ in range(2))
    slots = np.array([5, -1, 0, 11, 3, -1, 8, 1, 2], slot_dtype)
    caches = [rng.normal(size=(4, 3, 2, 96)).astype(NP[dtype]) for _ in range(2)]
    want = attention.append_kv(k, v, *(c.copy() for c in caches), slots)
    got = on_metal(attention.append_kv, k, v, *(c.copy() for c in caches), slots)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
def test_merge_states_matches_cpu(dtype):
    rng = np.random.default_rng(2)
    oa, ob = (rng.normal(size=(6, 3, 64)).astype(NP[dtype]) for _ in range(2))
    la, lb = (rng.normal(0, 3, (6, 3)).astype(np.float32) for _ in range(2))
    la[0, :2] = -np.inf  # one side empty, then both
    lb[0, 1:] = -np.inf
    want = attention.merge_states(oa, la, ob, lb)
    got = on_metal(attention.merge_states, oa, la, ob, lb)
    close(got, want, dtype)
    assert np.isneginf(got[1][0, 1]) and (got[0][0, 1].astype(np.float32) == 0).all()


# ---------------------------------------------------------------- index values, schedules
@simulated
def test_bad_index_values_raise_the_cpu_errors_and_write_nothing():
    """core's check_*: the CPU backend's very messages."""
    rng = np.random.default_rng(4)
    kc, vc, table, lens = paged(rng, [20, 5], 1, 64, 8, "float32")
    q = rng.normal(size=(2, 2, 64)).astype(np.float32)
    bad_table = np.where(table == table[0, 1], 1000, table).astype(np.int32)
    cases = [(dict(kv_lens=np.array([20, 99], np.int32)),
              r"kv_lens\[1\] = 99 is outside \[0, 24\] \(block_table's 3 blocks of 8\)"),
             (dict(block_table=bad_table), r"block_table\[0, 1\] = 1000 is not a block of the cache \(8 blocks\)")]
    for change, message in cases:
        args = dict(q=q, k_cache=kc, v_cache=vc, block_table=table, kv_lens=lens)
        args.update(change)
        out = np.full((2, 2, 64), 7.0, np.float32)
        with pytest.raises(ValueError, match=message) as metal:
            on_metal(attention.decode, **args, out=out)
        with pytest.raises(ValueError) as cpu:
            attention.decode(**args, out=out.copy())
        assert str(metal.value) == str(cpu.value)
        assert (out == 7.0).all()
    caches = [np.zeros((2, 4, 1, 64), np.float32) for _ in range(2)]
    kv = rng.normal(size=(2, 1, 64)).astype(np.float32)
    with pytest.raises(ValueError, match=r"slot_mapping\[1\] = 8 is outside the cache's 8 slots"):
        on_metal(attention.append_kv, kv, kv, *caches, np.array([0, 8], np.int32))
    assert not any(c.any() for c in caches)
    qp = rng.normal(size=(5, 2, 64)).astype(np.float32)
    out = np.full((5, 2, 64), 7.0, np.float32)
    with pytest.raises(ValueError, match="cu_seqlens must not decrease"):
        on_metal(attention.prefill, qp, qp[:, :1], qp[:, :1], np.array([0, 3, 2, 5], np.int32), out=out)
    with pytest.raises(ValueError, match="less than the sequence's"):
        on_metal(attention.prefill_paged, qp, kc, vc, table, np.array([0, 5, 5], np.int32),
                 np.array([4, 5], np.int32), out=out)
    assert (out == 7.0).all()


@simulated
def test_shuffled_schedules_give_the_same_bits():
    rng = np.random.default_rng(6)
    q, k, v, cu = ragged(rng, [13, 1, 6], 4, 2, 64, "float16")
    kc, vc, table, lens = paged(rng, [45, 2], 2, 64, 8, "float16")
    qd = rng.normal(size=(2, 4, 64)).astype(np.float16)
    runs = []
    for seed, shuffle in ((0, False), (1, True), (2, True)):
        mtlsim.set_schedule(seed, shuffle)
        try:
            p = on_metal(attention.prefill, q, k, v, cu, window=4, return_lse=True)
            d = on_metal(attention.decode, qd, kc, vc, table, lens, return_lse=True)
        finally:
            mtlsim.set_schedule(0, False)
        runs.append(b"".join(a.tobytes() for a in (*p, *d)))
    assert runs[1] == runs[0] and runs[2] == runs[0]
