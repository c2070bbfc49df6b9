"""The sampling family: registry parity, Philox bits, tie rules, the sampler's
distribution (chi-square), rows that cannot be sampled, per-row parameters and errors."""
import contextlib
import math

import numpy as np
import pytest

import braze
from braze import _spec, testing
from braze.reference import sampling as ref
from conftest import cpu_isa, cuda_ready, parity_test

S = braze.sampling
SPECS = _spec.ops("sampling")


test_parity = parity_test(SPECS)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_every_cpu_isa(isa):
    with cpu_isa(isa):
        for spec in SPECS:
            for dtype in spec.dtypes:
                for case in spec.cases:
                    res = testing.check(spec, "cpu", dtype, (3, 1000), case, seed=5)
                    assert res.ok, f"{spec.name} {dtype} {case} on {isa}: {res.message}"


@contextlib.contextmanager
def streaming_stores():
    """Every CPU output written around the cache (the path large outputs take)."""
    braze._cpu.set_stream_min_bytes(0)
    try:
        yield
    finally:
        braze._cpu.set_stream_min_bytes(-1)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_streaming_stores(isa):
    with cpu_isa(isa), streaming_stores():
        for spec in (s for s in SPECS if s.name in ("softmax", "log_softmax")):
            for dtype in spec.dtypes:
                for shape, strided in (((3, 1000), False), ((5, 77), True), ((2, 70000), False)):
                    for case in spec.cases:
                        res = testing.check(spec, "cpu", dtype, shape, case, strided, seed=6)
                        assert res.ok, f"{spec.name} {dtype} {shape} {case} on {isa}: {res.message}"
        # outputs at every alignment: the non-temporal body starts at a vector boundary
        x = _logits(3, 1000)
        want = ref.softmax(x.astype(np.float64))
        buf = np.full(3 * 1000 + 16, np.nan, np.float32)
        for off in range(16):
            out = buf[off:off + 3000].reshape(3, 1000)
            assert S.softmax(x, out=out) is out
            np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-9)


def test_softmax_rows_whose_max_rises_everywhere():
    """The statistics pass rescales a lane's sum each time its max rises:
    ascending rows do so at every step, huge ranges underflow most terms."""
    n = 4099
    rows = np.stack([np.linspace(-30, 30, n), np.linspace(30, -30, n), np.full(n, 3.0),
                     np.linspace(-1e4, 1e4, n), np.where(np.arange(n) % 3, -np.inf, np.arange(n) * 0.01)])
    x = rows.astype(np.float32)
    for t in (1.0, 0.3, 7.0):
        want = ref.softmax(x.astype(np.float64), temperature=t)
        np.testing.assert_allclose(S.softmax(x, temperature=t), want, rtol=2e-6, atol=1e-12)
        np.testing.assert_allclose(S.logsumexp(x, temperature=t), ref.logsumexp(x.astype(np.float64), temperature=t),
                                   rtol=1e-6)
        got = S.log_softmax(x, temperature=t)
        want = ref.log_softmax(x.astype(np.float64), temperature=t)
        fin = np.isfinite(want)
        assert np.array_equal(np.isfinite(got), fin)
        np.testing.assert_allclose(got[fin], want[fin], rtol=2e-6, atol=2e-4)


# Rows the CUDA backend splits over a cluster of CTAs (sm_90): rows longer than
# one CTA holds, split further while the GPU has room (2 x 40000: 5 CTAs of 4
# packs per thread; f32 2 x 20000: 5 of 2); f32 2 x 131072 fills 8 CTAs exactly, 2 x 131080 needs more
# and takes the looped form.
SPLIT_SHAPES = ((1, 128256), (64, 128256), (3, 70000), (2, 40000), (2, 20000), (300, 70000), (2, 131072),
                (2, 131080))


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
@pytest.mark.parametrize("dtype", _spec.FLOAT_DTYPES)
@pytest.mark.parametrize("shape", SPLIT_SHAPES, ids=["x".join(map(str, s)) for s in SPLIT_SHAPES])
def test_cuda_split_rows(shape, dtype):
    for spec in (s for s in SPECS if s.name in ("softmax", "log_softmax", "logsumexp")):
        for case in spec.cases:
            res = testing.check(spec, "cuda", dtype, shape, case, seed=8)
            assert res.ok, f"{spec.name} {shape} {dtype} {case}: {res.message}"


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
def test_cuda_split_rows_special_values():
    """NaN, +inf and all -inf rows whose odd values sit in one CTA of the split."""
    import torch

    x = _logits(5, 128256)
    x[1, 100000] = np.nan
    x[2, 70000] = np.inf
    x[3, :] = -np.inf
    x[4, :120000] = -np.inf
    t = torch.from_numpy(x).cuda()
    sm = S.softmax(t).cpu().numpy()
    assert np.isnan(sm[1:4]).all() and np.isfinite(sm[[0, 4]]).all()
    np.testing.assert_allclose(sm[[0, 4]], ref.softmax(x[[0, 4]].astype(np.float64)), rtol=2e-5, atol=1e-9)
    lse = S.logsumexp(t).cpu().numpy()
    assert lse[3] == -np.inf and np.isnan(lse[[1, 2]]).all()
    np.testing.assert_allclose(lse[[0, 4]], ref.logsumexp(x[[0, 4]].astype(np.float64)), rtol=1e-6)


# ---------------------------------------------------------------- Philox
def test_philox_known_answers():
    """Known-answer vectors of Philox4x32-10 (Random123's kat_vectors)."""
    cases = [
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
        ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
         [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
    ]
    for ctr, key, want in cases:
        assert ref.philox4x32_10(ctr, key).tolist() == want


@pytest.mark.parametrize("seed,offset", [(0, 0), (1, 0), (0, 1), (123456789, 42), (2**64 - 1, 2**63 + 5), (2**32, 2**32 + 1)])
def test_philox_uniforms_bit_identical(seed, offset):
    got = S.philox_uniform(1000, seed=seed, offset=offset)
    want = ref.row_uniforms(seed, offset, 1000)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert 0.0 <= got.min() and got.max() < 1.0


# ---------------------------------------------------------------- tie rules and masks
def test_top_k_keeps_ties_at_the_boundary():
    x = np.array([[3, 2, 2, 2, 1, 0], [5, 4, 3, 2, 1, 0]], np.float32)
    y = S.top_k_mask(x, 2)
    ninf = -np.inf
    assert np.array_equal(y, [[3, 2, 2, 2, ninf, ninf], [5, 4, ninf, ninf, ninf, ninf]])
    assert np.array_equal(y, ref.top_k_mask(x, 2))


def test_top_p_keeps_ties_and_the_smallest_set():
    x = np.log(np.array([[0.4, 0.2, 0.2, 0.2], [0.1, 0.6, 0.25, 0.05]], np.float64)).astype(np.float32)
    ninf = -np.inf
    # 0.4 alone covers 0.3; 0.45 needs one 0.2 and keeps its ties.
    assert np.array_equal(S.top_p_mask(x, 0.3), [[x[0, 0], ninf, ninf, ninf], [ninf, x[1, 1], ninf, ninf]])
    assert np.array_equal(S.top_p_mask(x, 0.45), [x[0], [ninf, x[1, 1], ninf, ninf]])
    assert np.array_equal(S.top_p_mask(x, 0.8), [x[0], [ninf, x[1, 1], x[1, 2], ninf]])


def test_min_p_threshold():
    x = np.log(np.array([[0.5, 0.3, 0.1, 0.1]], np.float64)).astype(np.float32)
    # kept: prob >= 0.5 * max = 0.25
    assert np.array_equal(S.min_p_mask(x, 0.5), [[x[0, 0], x[0, 1], -np.inf, -np.inf]])


def test_masks_and_penalties_in_place():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 300)).astype(np.float32)
    for fn, args in ((S.top_k_mask, (7,)), (S.top_p_mask, (0.8,)), (S.min_p_mask, (0.1,))):
        want = fn(x, *args)
        buf = x.copy()
        assert fn(buf, *args, out=buf) is buf and np.array_equal(buf, want)
    ids = rng.integers(-1, 300, (4, 40)).astype(np.int32)
    want = S.apply_penalties(x, ids, repetition=1.2, frequency=0.1, presence=0.3)
    buf = x.copy()
    assert S.apply_penalties(buf, ids, repetition=1.2, frequency=0.1, presence=0.3, out=buf) is buf
    assert np.array_equal(buf, want)


def test_penalties_count_repeats():
    x = np.array([[2.0, -2.0, 1.0, 0.5]], np.float32)
    ids = np.array([[0, 1, 1, -1, 0, 0]], np.int32)
    y = S.apply_penalties(x, ids, repetition=2.0, frequency=0.25, presence=0.5)
    np.testing.assert_allclose(y, [[2 / 2 - 3 * 0.25 - 0.5, -2 * 2 - 2 * 0.25 - 0.5, 1.0, 0.5]], rtol=1e-6)


# ---------------------------------------------------------------- sample
def _logits(b=32, v=5000, seed=0):
    return (np.random.default_rng(seed).normal(size=(b, v)) * 2).astype(np.float32)


def test_sample_is_deterministic_per_seed_and_varies():
    x = _logits()
    a = S.sample(x, top_p=0.95, seed=11, offset=3)
    assert np.array_equal(a, S.sample(x, top_p=0.95, seed=11, offset=3))
    assert not np.array_equal(a, S.sample(x, top_p=0.95, seed=11, offset=4))
    assert not np.array_equal(a, S.sample(x, top_p=0.95, seed=12, offset=3))
    assert a.dtype == np.int32 and a.shape == (32,) and (a >= 0).all() and (a < 5000).all()


def test_top_k_1_and_temperature_0_are_argmax():
    x = _logits()
    x[3, 10] = x[3, 20] = x[3].max() + 1  # a tie: the first max wins
    am = S.argmax(x)
    assert am[3] == 10
    assert np.array_equal(am, np.argmax(x, axis=-1))
    for seed in range(3):
        assert np.array_equal(S.sample(x, top_k=1, seed=seed), am)
        assert np.array_equal(S.sample(x, temperature=0.0, top_p=0.5, seed=seed), am)


def _expected_probs(logits, temperature, top_k, top_p, min_p):
    """The sampler's distribution, by the rules (sort-based, independent of the kernels)."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    keep = np.ones_like(p, bool)
    if top_k:
        keep &= logits >= np.sort(logits)[::-1][top_k - 1]
    keep &= p >= min_p * p.max()
    q = np.where(keep, p, 0)
    order = np.argsort(-q, kind="stable")
    cum = np.cumsum(q[order]) / q.sum()
    if top_p < 1:
        cut = q[order][np.searchsorted(cum, top_p)]
        keep &= q >= cut
    q = np.where(keep, p, 0)
    return q / q.sum()


def _chi2_critical(df, z=3.719):  # Wilson-Hilferty, upper 1e-4 tail
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


@pytest.mark.parametrize("kw", [
    {}, {"top_k": 3}, {"top_p": 0.7}, {"min_p": 0.2}, {"top_k": 5, "top_p": 0.8, "min_p": 0.05},
    {"temperature": 0.5}, {"temperature": 2.0, "top_k": 6, "top_p": 0.9, "min_p": 0.02},
], ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()) or "plain")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_sample_distribution_chi_square(kw, dtype):
    base = np.log(np.array([0.3, 0.05, 0.2, 0.01, 0.15, 0.12, 0.08, 0.04, 0.03, 0.02]))
    logits = np.asarray(base, np.float32).astype(testing.BF16 if dtype == "bfloat16" else np.float32)
    n = 40000
    x = np.broadcast_to(logits, (n, base.size)).copy()
    tokens = S.sample(x, seed=2024, offset=1, **kw)
    counts = np.bincount(tokens, minlength=base.size)
    full = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, **kw}
    probs = _expected_probs(testing.to_numpy64(logits), **full)
    assert counts[probs == 0].sum() == 0, f"filtered tokens drawn: {counts} vs {probs}"
    live = probs > 0
    expect = probs[live] * n
    chi2 = float(((counts[live] - expect) ** 2 / expect).sum())
    df = max(int(live.sum()) - 1, 1)
    assert chi2 < _chi2_critical(df), f"chi2 {chi2:.1f} with {df} df; counts {counts}, probs {np.round(probs, 4)}"


def test_unsamplable_rows():
    x = _logits(6, 100)
    x[1, 7] = np.nan
    x[2, :] = -np.inf
    x[3, 5] = np.inf
    x[4, :] = np.nan
    tok = S.sample(x, seed=1, top_p=0.9)
    assert tok.tolist()[1:5] == [-1, -1, -1, -1]
    assert 0 <= tok[0] < 100 and 0 <= tok[5] < 100
    assert S.argmax(x).tolist()[1:5] == [-1, -1, -1, -1]
    assert np.array_equal(tok, ref.sample(x.astype(np.float64), seed=1, top_p=0.9))
    for fn, arg in ((S.top_k_mask, 3), (S.top_p_mask, 0.5), (S.min_p_mask, 0.3)):
        y = fn(x, arg)
        np.testing.assert_array_equal(y[1:5], x[1:5])  # copied unchanged (NaN == NaN here)
        assert np.isfinite(y[0]).sum() < 100
    sm = S.softmax(x)
    assert np.isnan(sm[1:5]).all() and np.isfinite(sm[[0, 5]]).all()
    lse = S.logsumexp(x)
    assert lse[2] == -np.inf and np.isnan(lse[[1, 3, 4]]).all()


def test_per_row_parameters_match_scalars():
    x = _logits(8, 2000)
    rng = np.random.default_rng(3)
    t = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    t[2] = 0.0
    k = rng.integers(0, 40, 8).astype(np.int32)
    p = rng.uniform(0.5, 1.0, 8).astype(np.float32)
    mp = rng.uniform(0.0, 0.1, 8).astype(np.float32)
    tok = S.sample(x, temperature=t, top_k=k, top_p=p, min_p=mp, seed=9)
    for i in range(8):
        one = S.sample(x, temperature=float(t[i]), top_k=int(k[i]), top_p=float(p[i]), min_p=float(mp[i]), seed=9)
        assert tok[i] == one[i]
    sm = S.softmax(x, temperature=t[[0, 1, 3, 4, 5, 6, 7, 0]])
    np.testing.assert_allclose(sm[1], S.softmax(x, temperature=float(t[1]))[1], rtol=1e-6, atol=1e-9)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 300, dtype=torch.bfloat16)
    tok = S.sample(x, top_k=20, seed=3)
    assert isinstance(tok, torch.Tensor) and tok.dtype == torch.int32
    assert torch.equal(tok, torch.from_numpy(S.sample(x.float().numpy(), top_k=20, seed=3)))
    torch.testing.assert_close(S.softmax(x), torch.softmax(x.float(), -1), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("call,exc,name", [
    (lambda x: S.softmax(x.astype(np.int32)), TypeError, "logits"),
    (lambda x: S.softmax(x[0]), ValueError, "logits"),
    (lambda x: S.softmax(x, temperature=0.0), ValueError, "temperature"),
    (lambda x: S.softmax(x, temperature=np.ones(4)), TypeError, "temperature"),
    (lambda x: S.softmax(x, temperature=np.ones(3, np.float32)), ValueError, "temperature"),
    (lambda x: S.softmax(x, out=np.empty((4, 50), np.float16)), TypeError, "out"),
    (lambda x: S.top_k_mask(x, -1), ValueError, "k"),
    (lambda x: S.top_k_mask(x, np.array([1, -2, 3, 4], np.int32)), ValueError, "k[1]"),
    (lambda x: S.top_k_mask(x, 1.5), TypeError, "k"),
    (lambda x: S.top_p_mask(x, 0.0), ValueError, "p"),
    (lambda x: S.min_p_mask(x, 1.5), ValueError, "p"),
    (lambda x: S.sample(x, top_p=1.5), ValueError, "top_p"),
    (lambda x: S.sample(x, top_k=-3), ValueError, "top_k"),
    (lambda x: S.sample(x, min_p=-0.1), ValueError, "min_p"),
    (lambda x: S.sample(x, temperature=-1.0), ValueError, "temperature"),
    (lambda x: S.sample(x, temperature=float("nan")), ValueError, "temperature"),
    (lambda x: S.sample(x, seed=-1), ValueError, "seed"),
    (lambda x: S.sample(x, top_k=np.zeros(4, np.int64)), TypeError, "top_k"),
    (lambda x: S.sample(x, out=np.empty(4, np.int64)), TypeError, "out"),
    (lambda x: S.sample(x[:, :0]), ValueError, "logits"),
    (lambda x: S.apply_penalties(x, np.zeros((4, 3), np.int64)), TypeError, "token_ids"),
    (lambda x: S.apply_penalties(x, np.full((4, 3), 50, np.int32)), ValueError, "token_ids"),
    (lambda x: S.apply_penalties(x, np.zeros((3, 3), np.int32)), ValueError, "token_ids"),
    (lambda x: S.apply_penalties(x, np.zeros((4, 3), np.int32), repetition=0.0), ValueError, "repetition"),
])
def test_errors_name_the_argument(call, exc, name):
    x = _logits(4, 50)
    with pytest.raises(exc, match=name.replace("[", r"\[")):
        call(x)


def test_bad_out_is_left_untouched():
    x = _logits(4, 50)
    out = np.full((4, 50), 7.0, np.float32)
    with pytest.raises(ValueError, match="temperature"):
        S.softmax(x, temperature=-2.0, out=out)
    with pytest.raises(ValueError, match="out"):
        S.softmax(x, out=out[:3])
    assert (out == 7.0).all()


# ---------------------------------------------------------------- sampler paths, tokens pinned to the reference
def _pinned_rows(kind, shape, seed):
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return (rng.normal(size=shape) * 2).astype(np.float32)
    if kind == "peaky":
        return (rng.normal(size=shape) * 6).astype(np.float32)
    if kind == "ties":  # many equal values at every threshold
        return np.round(rng.normal(size=shape) * 1.5).astype(np.float32)
    x = (rng.normal(size=shape) * 2).astype(np.float32)  # special rows
    x[:, ::5] = -np.inf
    x[1, shape[1] // 3] = np.nan
    x[2] = -np.inf
    x[3, 7] = np.inf
    return x


# top_k goes through the block-max bound, min_p through the log(min_p) bound,
# top_p / plain through the block sums and the mass histogram; flat rows and a
# large k through the radix select.
_PINNED_MIXES = [{}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.05}, {"top_k": 50, "top_p": 0.9, "min_p": 0.05},
                 {"temperature": 0.8, "top_p": 0.5}, {"temperature": 0.8, "top_k": 7, "top_p": 0.9, "min_p": 0.05},
                 {"min_p": 0.001, "top_p": 0.95}, {"top_k": 3000}]


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("kind", ["normal", "peaky", "ties", "special"])
def test_sample_tokens_match_the_reference(isa, kind):
    x = _pinned_rows(kind, (6, 20000), 17)
    x64 = x.astype(np.float64)
    with cpu_isa(isa):
        for kw in _PINNED_MIXES:
            for seed in (0, 5, 123):
                tok = S.sample(x, seed=seed, offset=2, **kw)
                want = ref.sample(x64, seed=seed, offset=2, **kw)
                assert np.array_equal(tok, want), f"{kind} {kw} seed {seed}: {tok} vs {want}"
        if kind == "special":
            assert S.sample(x, top_k=50).tolist()[1:4] == [-1, -1, -1]


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_sample_flat_rows_take_the_radix_select(isa):
    x = np.zeros((3, 9000), np.float32)
    x[1, 100:200] = 1.0  # a 100-way tie at the top
    with cpu_isa(isa):
        for kw in ({"top_k": 50}, {"top_p": 0.5}, {"top_k": 50, "top_p": 0.3}):
            for seed in (1, 2):
                assert np.array_equal(S.sample(x, seed=seed, **kw), ref.sample(x.astype(np.float64), seed=seed, **kw))


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_argmax_long_rows_split_over_threads(isa):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 300001)).astype(np.float32)
    x[0, 150000] = x[0, 150001] = x[0, 299999] = 9.0  # ties across the parts: the first wins
    x[1, 250000] = np.nan  # a NaN in the last part only
    with cpu_isa(isa):
        assert S.argmax(x).tolist() == [150000, -1]
        assert S.argmax(x[:1]).tolist() == [150000]
        y = x[1:].copy()
        y[0, 250000] = -np.inf
        y[0, 300000] = np.inf
        assert S.argmax(y).tolist() == [-1]
        y[0, 300000] = 0
        assert S.argmax(y).tolist() == [int(np.argmax(y[0]))]
