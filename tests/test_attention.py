"""The attention family: registry parity (every option, ragged batches, shuffled
block tables), torch SDPA agreement, merge exactness, the paged write and bad input."""
import math
import os

import numpy as np
import pytest
from conftest import cpu_isa, cuda_ready, parity_test

from braze import _cpu, _spec, attention, testing
from braze.reference import attention as ref

SPECS = _spec.ops("attention")
test_parity = parity_test(SPECS)


def paged(rng, lens, hkv, d, bs, dtype=np.float32):
    """Caches with spare blocks and a shuffled block table for sequences of `lens` tokens."""
    mb = max(1, max((n + bs - 1) // bs for n in lens))
    nb = len(lens) * mb + 2
    perm = rng.permutation(nb).astype(np.int32)
    table = np.full((len(lens), mb), -1, np.int32)
    for i, n in enumerate(lens):
        used = (n + bs - 1) // bs
        table[i, :used] = perm[i * mb:i * mb + used]
    kc = rng.normal(size=(nb, bs, hkv, d)).astype(dtype)
    vc = rng.normal(size=(nb, bs, hkv, d)).astype(dtype)
    return kc, vc, table, np.asarray(lens, np.int32)


# ---------------------------------------------------------------- torch SDPA
def test_decode_matches_torch_sdpa():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    lens = [300, 1, 77]
    kc, vc, table, kv_lens = paged(rng, lens, 2, 128, 16)
    q = rng.normal(size=(3, 8, 128)).astype(np.float32)
    got = attention.decode(q, kc, vc, table, kv_lens)
    for b, n in enumerate(lens):
        k = torch.from_numpy(ref._gather(np, kc, table[b], n)).transpose(0, 1)[None]
        v = torch.from_numpy(ref._gather(np, vc, table[b], n)).transpose(0, 1)[None]
        want = F.scaled_dot_product_attention(torch.from_numpy(q[b])[None, :, None], k, v, enable_gqa=True)
        np.testing.assert_allclose(got[b], want[0, :, 0].numpy(), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("causal", [True, False])
def test_prefill_matches_torch_sdpa(causal):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    cu = np.array([0, 50, 51, 180], np.int32)
    q = rng.normal(size=(180, 6, 64)).astype(np.float32)
    k = rng.normal(size=(180, 3, 64)).astype(np.float32)
    v = rng.normal(size=(180, 3, 64)).astype(np.float32)
    got = attention.prefill(q, k, v, cu, causal=causal)
    for s, e in zip(cu[:-1], cu[1:]):
        qt, kt, vt = (torch.from_numpy(x[s:e]).transpose(0, 1)[None] for x in (q, k, v))
        want = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=True)
        np.testing.assert_allclose(got[s:e], want[0].transpose(0, 1).numpy(), rtol=2e-5, atol=2e-5)


# ---------------------------------------------------------------- semantics
def test_merge_of_two_halves_is_the_whole():
    """decode over the first blocks and over the rest, merged, equals decode over all keys."""
    rng = np.random.default_rng(2)
    kc, vc, table, kv_lens = paged(rng, [160, 96], 2, 64, 16)
    q = rng.normal(size=(2, 4, 64)).astype(np.float32)
    whole, lse = attention.decode(q, kc, vc, table, kv_lens, return_lse=True)
    first = np.full_like(kv_lens, 64)
    oa, la = attention.decode(q, kc, vc, table, first, return_lse=True)
    ob, lb = attention.decode(q, kc, vc, np.ascontiguousarray(table[:, 4:]), kv_lens - first, return_lse=True)
    o, lm = attention.merge_states(oa, la, ob, lb)
    np.testing.assert_allclose(o, whole, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lm, lse, rtol=1e-5, atol=1e-5)


def test_sinks_alone_give_zero_output_and_their_lse():
    rng = np.random.default_rng(3)
    kc, vc, table, _ = paged(rng, [16], 1, 64, 16)
    q = rng.normal(size=(1, 2, 64)).astype(np.float32)
    sinks = np.array([0.5, -1.0], np.float32)
    o, lse = attention.decode(q, kc, vc, table, np.zeros(1, np.int32), sinks=sinks, return_lse=True)
    assert np.all(o == 0)
    np.testing.assert_allclose(lse[0], sinks, rtol=1e-6)
    o, lse = attention.decode(q, kc, vc, table, np.zeros(1, np.int32), return_lse=True)
    assert np.all(o == 0) and np.all(lse == -np.inf)


def test_decode_splits_long_contexts_exactly():
    """One long sequence is split over the threads; the merged result matches the reference."""
    rng = np.random.default_rng(4)
    kc, vc, table, kv_lens = paged(rng, [9000], 1, 128, 16)
    q = rng.normal(size=(1, 8, 128)).astype(np.float32)
    got, lse = attention.decode(q, kc, vc, table, kv_lens, window=7000, return_lse=True)
    want, wlse = ref.decode(q.astype(np.float64), kc.astype(np.float64), vc.astype(np.float64), table, kv_lens,
                            window=7000, return_lse=True)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(lse, wlse, rtol=2e-6)


@pytest.mark.parametrize("isa", _cpu.isas_supported())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_isa_build(isa, dtype):
    with cpu_isa(isa):
        for name, shape in (("decode", (3, 300, 8, 2, 80, 16)), ("prefill", (3, 70, 8, 1, 96)),
                            ("prefill_paged", (2, 20, 50, 4, 2, 64, 8)), ("merge_states", (5, 3, 64))):
            spec = _spec.get(name)
            case = spec.cases[-1]
            res = testing.check(spec, "cpu", dtype, shape, case, seed=5)
            assert res.ok, f"{name}: {res.message}"


def test_append_kv_leaves_other_slots_alone():
    rng = np.random.default_rng(6)
    kc = rng.normal(size=(4, 8, 2, 64)).astype(np.float32)
    vc = rng.normal(size=(4, 8, 2, 64)).astype(np.float32)
    k0, v0 = kc.copy(), vc.copy()
    k = rng.normal(size=(3, 2, 64)).astype(np.float32)
    v = rng.normal(size=(3, 2, 64)).astype(np.float32)
    slots = np.array([17, -1, 3], np.int32)
    rk, rv = attention.append_kv(k, v, kc, vc, slots)
    assert rk is kc and rv is vc
    k0[17 // 8, 17 % 8], v0[17 // 8, 17 % 8] = k[0], v[0]
    k0[0, 3], v0[0, 3] = k[2], v[2]
    assert np.array_equal(kc, k0) and np.array_equal(vc, v0)


# ---------------------------------------------------------------- bad input
def decode_args(rng, hq=4, hkv=2, d=64):
    kc, vc, table, lens = paged(rng, [20, 5], hkv, d, 8)
    return rng.normal(size=(2, hq, d)).astype(np.float32), kc, vc, table, lens


def poisoned(shape, dtype=np.float32):
    return np.full(shape, 7.0, dtype)


@pytest.mark.parametrize("mutate,exc,match", [
    (lambda a: dict(a, q=np.random.default_rng(0).normal(size=(2, 3, 64)).astype(np.float32)), ValueError,
     "kv heads must divide"),
    (lambda a: dict(a, q=a["q"].astype(np.float16)), TypeError, "k_cache must be float16"),
    (lambda a: dict(a, q=np.zeros((2, 4, 128), np.float32)[:, :, ::2]), ValueError, "head_dim .* contiguous"),
    (lambda a: dict(a, kv_lens=np.array([20, 25], np.int32)), ValueError, r"kv_lens\[1\] = 25"),
    (lambda a: dict(a, kv_lens=np.array([20, -1], np.int32)), ValueError, r"kv_lens\[1\] = -1"),
    (lambda a: dict(a, block_table=np.where(a["block_table"] >= 0, a["block_table"] + 100, -1).astype(np.int32)),
     ValueError, r"block_table\[0, 0\] = 1\d\d is not a block"),
    (lambda a: dict(a, block_table=a["block_table"].astype(np.int64)), TypeError, "block_table must be int32"),
    (lambda a: dict(a, kv_lens=np.array([20, 5, 1], np.int32)), ValueError, "kv_lens must have shape"),
])
def test_decode_bad_input_names_the_argument(mutate, exc, match):
    rng = np.random.default_rng(7)
    q, kc, vc, table, lens = decode_args(rng)
    a = mutate(dict(q=q, k_cache=kc, v_cache=vc, block_table=table, kv_lens=lens))
    out = poisoned(a["q"].shape, a["q"].dtype)
    with pytest.raises(exc, match=match):
        attention.decode(a["q"], a["k_cache"], a["v_cache"], a["block_table"], a["kv_lens"], out=out)
    assert np.all(out == 7.0)


def test_head_dim_outside_the_set_is_refused():
    rng = np.random.default_rng(8)
    q, kc, vc, table, lens = decode_args(rng, d=32)
    with pytest.raises(ValueError, match="q: head_dim must be one of 64, 80, 96, 128, 192, 256, got 32"):
        attention.decode(q, kc, vc, table, lens)


def test_outputs_of_wrong_shape_or_dtype_are_refused_before_writing():
    rng = np.random.default_rng(9)
    q, kc, vc, table, lens = decode_args(rng)
    out = poisoned(q.shape)
    with pytest.raises(ValueError, match="out must have shape"):
        attention.decode(q, kc, vc, table, lens, out=poisoned((2, 4, 32)))
    with pytest.raises(TypeError, match="lse_out must be float32"):
        attention.decode(q, kc, vc, table, lens, out=out, lse_out=poisoned((2, 4), np.float64))
    with pytest.raises(ValueError, match="lse_out must have shape"):
        attention.decode(q, kc, vc, table, lens, out=out, lse_out=poisoned((4, 2)))
    with pytest.raises(ValueError, match="out overlaps q"):
        attention.decode(q, kc, vc, table, lens, out=q)
    with pytest.raises(ValueError, match="window must be a positive"):
        attention.decode(q, kc, vc, table, lens, window=0)
    with pytest.raises(ValueError, match="softcap must be"):
        attention.decode(q, kc, vc, table, lens, softcap=-1.0)
    with pytest.raises(ValueError, match="sinks must have shape"):
        attention.decode(q, kc, vc, table, lens, sinks=np.zeros(3, np.float32), out=out)
    assert np.all(out == 7.0)


def test_prefill_bad_cu_seqlens():
    rng = np.random.default_rng(10)
    q = rng.normal(size=(10, 2, 64)).astype(np.float32)
    out = poisoned(q.shape)
    for cu, match in (([0, 6, 4, 10], "must not decrease"), ([1, 10], r"cu_seqlens\[0\] must be 0"),
                      ([0, 4, 9], "must be q's token count 10")):
        with pytest.raises(ValueError, match=match):
            attention.prefill(q, q, q, np.array(cu, np.int32), out=out)
    with pytest.raises(ValueError, match="k must have q's 10 tokens"):
        attention.prefill(q, q[:9], q[:9], np.array([0, 10], np.int32), out=out)
    assert np.all(out == 7.0)


def test_prefill_paged_needs_room_for_its_queries():
    rng = np.random.default_rng(11)
    kc, vc, table, lens = paged(rng, [4, 8], 2, 64, 4)
    q = rng.normal(size=(7, 2, 64)).astype(np.float32)
    out = poisoned(q.shape)
    with pytest.raises(ValueError, match=r"kv_lens\[0\] = 4 is less than the sequence's 5 new queries"):
        attention.prefill_paged(q, kc, vc, table, np.array([0, 5, 7], np.int32), lens, out=out)
    assert np.all(out == 7.0)


def test_append_kv_bad_slots_write_nothing():
    rng = np.random.default_rng(12)
    kc = np.zeros((2, 4, 1, 64), np.float32)
    vc = np.zeros((2, 4, 1, 64), np.float32)
    k = rng.normal(size=(3, 1, 64)).astype(np.float32)
    for slots, match in (([0, 8, 1], r"slot_mapping\[1\] = 8 is outside"), ([0, -2, 1], r"slot_mapping\[1\] = -2")):
        with pytest.raises(ValueError, match=match):
            attention.append_kv(k, k, kc, vc, np.array(slots, np.int32))
    with pytest.raises(ValueError, match="k_cache: .Hkv, head_dim. = .1, 64. differs"):
        attention.append_kv(np.zeros((3, 2, 64), np.float32), np.zeros((3, 2, 64), np.float32), kc, vc,
                            np.array([0, 1, 2], np.int32))
    with pytest.raises(ValueError, match="slot_mapping must have shape"):
        attention.append_kv(k, k, kc, vc, np.array([0, 1], np.int32))
    assert not kc.any() and not vc.any()


def test_merge_states_bad_lse():
    o = np.zeros((3, 2, 64), np.float32)
    with pytest.raises(TypeError, match="lse_a must be float32"):
        attention.merge_states(o, np.zeros((3, 2)), o, np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="lse_b must have shape"):
        attention.merge_states(o, np.zeros((3, 2), np.float32), o, np.zeros((2, 3), np.float32))


def test_default_scale_is_inverse_sqrt_head_dim():
    rng = np.random.default_rng(13)
    q, kc, vc, table, lens = decode_args(rng, d=96)
    np.testing.assert_allclose(attention.decode(q, kc, vc, table, lens),
                               attention.decode(q, kc, vc, table, lens, scale=1 / math.sqrt(96)), rtol=0, atol=0)


# ---------------------------------------------------------------- CUDA flash prefill
# f16 / bf16 prefill with head_dim <= 128 runs the tensor-core kernel (flash.cuh):
# 64-row query tiles, 64-key tiles. These shapes put tile edges inside and
# across sequences (T 1, 63, 65, 200), with empty sequences and every option.
needs_cuda = pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
FLASH_DIMS = (64, 80, 96, 128)
FLASH_CASES = ({}, {"causal": False}, {"return_lse": True}, {"window": 37}, {"sinks": True},
               {"softcap": 5.0, "scale": 0.2}, {"causal": False, "window": 20, "return_lse": True},
               {"sinks": True, "window": 70, "softcap": 8.0, "return_lse": True})
FLASH_GROUPS = (1, 4, 8)
FLASH_TOL = {"float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


def _np_dtype(dtype):
    from braze._arrays import BF16
    return BF16 if dtype == "bfloat16" else np.dtype(np.float16)


def _host(rng, shape, dtype):
    return rng.normal(size=shape).astype(np.float32).astype(_np_dtype(dtype))


def _on_cuda(*arrays):
    return tuple(testing.torch_view(a, "cuda") for a in arrays)


def _flash_kwargs(case, hq, dtype, rng):
    kw = {k: v for k, v in case.items() if k != "sinks"}
    if case.get("sinks"):
        kw["sinks"] = rng.normal(0.5, 1.0, (hq,)).astype(np.float32).astype(_np_dtype(dtype))
    return kw


def _check_outputs(got, want, dtype):
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for name, g, w in zip(("out", "lse"), got, want):
        res = testing.compare(g, w, FLASH_TOL[dtype] if name == "out" else (1e-4, 1e-4), name)
        assert res.ok, res.message


# The CPU's query tiles: up to 4 W rows (q heads of a group x queries) take the
# transposed-score path, fewer than 5 and more than 4 W the dot-product one.
# Groups 1, 3, 8 and 64 make tiles of 64 / 63 / 64 / 64 rows (AVX-512; on AVX2
# 64 rows is more than 4 W), sequences of 0 and 1 token make tiles of 1-4 rows.
@pytest.mark.parametrize("isa", _cpu.isas_supported())
@pytest.mark.parametrize("ci", range(len(FLASH_CASES)))
@pytest.mark.parametrize("group", (1, 3, 8, 64))
def test_cpu_prefill_tiles_match_reference(group, ci, isa):
    case, hkv = FLASH_CASES[ci], 1 if group == 64 else 2
    hq, d = hkv * group, (64, 80)[ci % 2]
    rng = np.random.default_rng(60 + ci)
    lens = (70, 0, 1, 33)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    q, k, v = (rng.normal(size=(n, h, d)).astype(np.float32) for h in (hq, hkv, hkv))
    kw = {k_: x for k_, x in case.items() if k_ != "sinks"}
    if case.get("sinks"):
        kw["sinks"] = rng.normal(0.5, 1.0, (hq,)).astype(np.float32)
    want = ref.prefill(*(x.astype(np.float64) for x in (q, k, v)), cu,
                       **{k_: (x.astype(np.float64) if k_ == "sinks" else x) for k_, x in kw.items()})
    with cpu_isa(isa):
        got = attention.prefill(q, k, v, cu, **kw)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for name, g, w in zip(("out", "lse"), got, want):
        res = testing.compare(g, w, (2e-5, 2e-5), name)
        assert res.ok, res.message


# A thread packs a kv head's keys and values once for all the query tiles of a call
# (HeadRows in csrc/cpu/attention.cpp), in a buffer every dtype shares: later calls on
# the same buffers, changed in place, and calls of other dtypes between them must read
# their own values (with the paged cache too).
@pytest.mark.parametrize("paged", [False, True], ids=["ragged", "paged"])
def test_cpu_prefill_reads_keys_changed_between_calls(paged):
    rng = np.random.default_rng(8)
    T, hq, hkv, d, bs = 100, 4, 1, 64, 16  # one kv head: every task of every call binds the same one
    cu = np.array([0, T], np.int32)
    blocks = (T + bs - 1) // bs
    shape = (blocks, bs, hkv, d) if paged else (T, hkv, d)
    table = np.arange(blocks, dtype=np.int32)[::-1].copy()  # logical block i in block blocks - 1 - i
    bufs = {}
    for dtype in ("float32", "bfloat16", "float32", "bfloat16"):
        nd = np.dtype(np.float32) if dtype == "float32" else _np_dtype(dtype)
        q, k, v = bufs.setdefault(dtype, (_host(rng, (T, hq, d), dtype).astype(nd), np.zeros(shape, nd),
                                          np.zeros(shape, nd)))
        fresh = [_host(rng, (T, hkv, d), dtype).astype(nd) for _ in range(2)]
        for buf, new in zip((k, v), fresh):  # in place: the same buffers as the dtype's last call
            if paged:
                buf[table] = np.pad(new, ((0, blocks * bs - T), (0, 0), (0, 0))).reshape(shape)
            else:
                buf[...] = new
        if paged:
            got = attention.prefill_paged(q, k, v, table[None], cu, np.array([T], np.int32))
        else:
            got = attention.prefill(q, k, v, cu)
        want = ref.prefill(*(x.astype(np.float64) for x in (q, *fresh)), cu)
        res = testing.compare(got, want, (2e-5, 2e-5) if dtype == "float32" else FLASH_TOL[dtype], "out")
        assert res.ok, f"{dtype}: {res.message}"


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("ci", range(len(FLASH_CASES)))
@pytest.mark.parametrize("d", FLASH_DIMS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("lens", [(200, 0, 1, 63, 65, 128), (1,), (63,), (300, 0, 1, 127, 129, 256, 5, 383)],
                         ids=["ragged", "t1", "t63", "ragged_windows"])
def test_cuda_flash_prefill_matches_reference(lens, dtype, d, ci):
    case, group, hkv = FLASH_CASES[ci], FLASH_GROUPS[ci % 3], 2
    hq = hkv * group
    rng = np.random.default_rng(20 + ci)
    n = sum(lens)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    q, k, v = _host(rng, (n, hq, d), dtype), _host(rng, (n, hkv, d), dtype), _host(rng, (n, hkv, d), dtype)
    kw = _flash_kwargs(case, hq, dtype, rng)
    want = ref.prefill(*(x.astype(np.float64) for x in (q, k, v)), cu,
                       **{k_: (x.astype(np.float64) if k_ == "sinks" else x) for k_, x in kw.items()})
    kw_cuda = {k_: (testing.torch_view(x, "cuda") if k_ == "sinks" else x) for k_, x in kw.items()}
    got = attention.prefill(*_on_cuda(q, k, v, cu), **kw_cuda)
    _check_outputs(got, want, dtype)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("ci", range(len(FLASH_CASES)))
@pytest.mark.parametrize("d", FLASH_DIMS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_flash_prefill_paged_matches_reference(dtype, d, ci):
    case = {k: v for k, v in FLASH_CASES[ci].items() if k != "causal"}  # prefill_paged is causal
    group, hkv = FLASH_GROUPS[ci % 3], 2
    hq = hkv * group
    rng = np.random.default_rng(40 + ci)
    kv_lens = [300, 5, 1, 70, 0, 129]
    new = [200, 5, 1, 3, 0, 65]  # 200 of 300: a prefix of cached keys before the queries
    kc, vc, table, lens = paged(rng, kv_lens, hkv, d, 16, np.float32)
    kc, vc = kc.astype(_np_dtype(dtype)), vc.astype(_np_dtype(dtype))
    cu = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    q = _host(rng, (int(cu[-1]), hq, d), dtype)
    kw = _flash_kwargs(case, hq, dtype, rng)
    want = ref.prefill_paged(q.astype(np.float64), kc.astype(np.float64), vc.astype(np.float64), table, cu, lens,
                             **{k_: (x.astype(np.float64) if k_ == "sinks" else x) for k_, x in kw.items()})
    kw_cuda = {k_: (testing.torch_view(x, "cuda") if k_ == "sinks" else x) for k_, x in kw.items()}
    got = attention.prefill_paged(*_on_cuda(q, kc, vc, table, cu, lens), **kw_cuda)
    _check_outputs(got, want, dtype)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_flash_prefill_matches_torch_sdpa(dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(60)
    t, hq, hkv, d = 1000, 8, 2, 128
    q, k, v = _on_cuda(_host(rng, (t, hq, d), dtype), _host(rng, (t, hkv, d), dtype), _host(rng, (t, hkv, d), dtype))
    got = attention.prefill(q, k, v, torch.tensor([0, t], dtype=torch.int32, device="cuda"))
    want = F.scaled_dot_product_attention(*(x.transpose(0, 1)[None] for x in (q, k, v)), is_causal=True,
                                          enable_gqa=True)[0].transpose(0, 1)
    res = testing.compare(got, want, FLASH_TOL[dtype])
    assert res.ok, res.message


# On Hopper, ragged prefill of head_dim 128 runs the wgmma kernel (flash_tc90.cuh) through 3-D tensor
# maps over the caller's strides; what a map cannot express (and out not 4-byte aligned) falls back to
# flash.cuh or, unaligned, the attend kernel. These layouts cover both sides: q, k, v as head slices
# of one fused qkv buffer (token stride (Hq + 2 Hkv) 128), k / v head-major ([H, T, D] transposed: the
# head stride above the token stride), q 8 bytes off 16-byte alignment (attend kernel), out and
# lse_out strided views of NaN-filled buffers (whose other elements must stay NaN), out at an odd
# element offset with odd strides (flash.cuh), softcap (the wgmma kernel's tanh instantiation); every
# output against the float64 reference.
TC90_LAYOUTS = ("fused_qkv", "head_major_kv", "unaligned_q", "strided_out", "odd_out", "softcap")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("layout", TC90_LAYOUTS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_prefill_d128_layouts_match_reference(dtype, layout, causal):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(70 + TC90_LAYOUTS.index(layout))
    lens, hq, hkv, d = (130, 0, 1, 257, 64), 8, 2, 128
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    q, k, v = _host(rng, (n, hq, d), dtype), _host(rng, (n, hkv, d), dtype), _host(rng, (n, hkv, d), dtype)
    kw = {"causal": causal, "return_lse": True}
    if layout == "softcap":
        kw.update(softcap=6.0, scale=0.15)
    want = ref.prefill(*(x.astype(np.float64) for x in (q, k, v)), cu, **kw)
    qd, kd, vd, cud = _on_cuda(q, k, v, cu)
    if layout == "fused_qkv":
        qkv = torch.cat([qd, kd, vd], dim=1)  # [n, hq + 2 hkv, d]
        qd, kd, vd = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    elif layout == "head_major_kv":
        kd, vd = (x.transpose(0, 1).contiguous().transpose(0, 1) for x in (kd, vd))
    elif layout == "unaligned_q":
        buf = torch.zeros((n * hq * d + 4,), dtype=qd.dtype, device="cuda")
        buf[4:] = qd.reshape(-1)
        qd = buf[4:].view(n, hq, d)
        assert qd.data_ptr() % 16 == 8
    if layout in ("strided_out", "odd_out"):
        off = 1 if layout == "odd_out" else 0
        obuf = torch.full((n, hq, d + 1 + 7 * (1 - off)), float("nan"), dtype=qd.dtype, device="cuda")
        lbuf = torch.full((hq, n + 3), float("nan"), dtype=torch.float32, device="cuda")
        got = attention.prefill(qd, kd, vd, cud, out=obuf[:, :, off:off + d], lse_out=lbuf[:, :n].T, **kw)
        assert got[0].data_ptr() == obuf[:, :, off:].data_ptr()
        rest = obuf[:, :, :off].isnan().all() and obuf[:, :, off + d:].isnan().all()
        assert bool(rest) and bool(lbuf[:, n:].isnan().all())
    else:
        got = attention.prefill(qd, kd, vd, cud, **kw)
    _check_outputs(got, want, dtype)


# Past 8192 tokens the Hopper kernel takes its other schedule (csrc/cuda/attention_tc90.cu: S, softmax,
# PV in turn rather than the two warpgroups taking turns): a long sequence beside short and empty ones.
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("causal", [True, False])
def test_cuda_prefill_d128_long_matches_reference(causal):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(90 + causal)
    lens, hq, hkv, d = (8000, 300, 0, 129), 4, 2, 128
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    assert n > 8192
    q, k, v = (_host(rng, (n, h, d), "bfloat16") for h in (hq, hkv, hkv))
    kw = {"causal": causal, "return_lse": True}
    q64, k64, v64 = (torch.from_numpy(x.astype(np.float64)).cuda() for x in (q, k, v))
    want = tuple(w.cpu().numpy() for w in ref.prefill(q64, k64, v64, cu, **kw))  # float64 on the GPU
    del q64, k64, v64
    _check_outputs(attention.prefill(*_on_cuda(q, k, v, cu), **kw), want, "bfloat16")


# The CUDA decode kernel (decode.cuh: tensor cores, per-warp cp.async rings)
# runs f16 / bf16 decode with head_dim 64 / 80 / 96 / 128: long, short, empty
# and one-token sequences (the long one split across CTAs and merged), every
# option, block sizes 16 and 32.
@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("ci", range(len(FLASH_CASES)))
@pytest.mark.parametrize("d", FLASH_DIMS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cuda_decode_kernel_matches_reference(dtype, d, ci):
    case = {k: v for k, v in FLASH_CASES[ci].items() if k != "causal"}  # decode attends to the whole cache
    group, hkv, bs = FLASH_GROUPS[ci % 3], 2, (16, 32)[ci % 2]
    hq = hkv * group
    rng = np.random.default_rng(80 + ci)
    kc, vc, table, lens = paged(rng, [3000, 5, 1, 0, 129, 64], hkv, d, bs, np.float32)
    kc, vc = kc.astype(_np_dtype(dtype)), vc.astype(_np_dtype(dtype))
    q = _host(rng, (len(lens), hq, d), dtype)
    kw = _flash_kwargs(case, hq, dtype, rng)
    want = ref.decode(q.astype(np.float64), kc.astype(np.float64), vc.astype(np.float64), table, lens,
                      **{k_: (x.astype(np.float64) if k_ == "sinks" else x) for k_, x in kw.items()})
    kw_cuda = {k_: (testing.torch_view(x, "cuda") if k_ == "sinks" else x) for k_, x in kw.items()}
    got = attention.decode(*_on_cuda(q, kc, vc, table, lens), **kw_cuda)
    _check_outputs(got, want, dtype)


@pytest.mark.cuda
@needs_cuda
def test_cuda_prefill_simt_and_flash_agree(tmp_path):
    """BRAZE_CUDA_PREFILL=simt (read once per process, so a child process) runs the
    attend kernel; the default runs the flash kernel: the same attention."""
    import subprocess
    import sys
    rng = np.random.default_rng(61)
    lens = (130, 1, 0, 77)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    n = int(cu[-1])
    arrays = {"q": _host(rng, (n, 8, 128), "bfloat16"), "k": _host(rng, (n, 2, 128), "bfloat16"),
              "v": _host(rng, (n, 2, 128), "bfloat16")}
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a.astype(np.float32))
    np.save(tmp_path / "cu.npy", cu)
    script = (
        "import sys, numpy as np, torch\n"
        "from braze import attention\n"
        "p = sys.argv[1]\n"
        "q, k, v = (torch.from_numpy(np.load(f'{p}/{n}.npy')).to('cuda', torch.bfloat16) for n in 'qkv')\n"
        "cu = torch.from_numpy(np.load(f'{p}/cu.npy')).to('cuda')\n"
        "o, lse = attention.prefill(q, k, v, cu, window=90, return_lse=True)\n"
        "np.save(f'{p}/o.npy', o.float().cpu().numpy()); np.save(f'{p}/lse.npy', lse.cpu().numpy())\n")
    env = dict(os.environ, BRAZE_CUDA_PREFILL="simt")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True)
    q, k, v, cu_d = _on_cuda(arrays["q"], arrays["k"], arrays["v"], cu)
    o, lse = attention.prefill(q, k, v, cu_d, window=90, return_lse=True)
    res = testing.compare(o, np.load(tmp_path / "o.npy"), FLASH_TOL["bfloat16"])
    assert res.ok, res.message
    res = testing.compare(lse, np.load(tmp_path / "lse.npy"), (1e-4, 1e-4), "lse")
    assert res.ok, res.message

