"""Rope family: registry parity on every claimed backend, the inverse and qk
identities, in-place and fused-qkv views, positions, MLX parity, errors, and
the frequency scalings against scalar evaluations of their formulas."""
import math

import numpy as np
import pytest

import braze
from braze import _spec, testing
from braze.reference import rope as ref
from conftest import cpu_isa, parity_test

SPECS = [s for s in _spec.ops("rope")]


test_parity = parity_test(SPECS, strided_cases=(0, 2))


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_every_cpu_isa(isa):
    with cpu_isa(isa):
        for spec in SPECS:
            for dtype in _spec.FLOAT_DTYPES:
                for shape in (spec.shapes[1], spec.edge_shapes[1]):
                    for case in spec.cases:
                        res = testing.check(spec, "cpu", dtype, shape, case, strided=True)
                        assert res.ok, f"{spec.name} {shape} {case} {dtype} on {isa}: {res.message}"


def _x(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def _pos(n, seed=1, high=100_000, dtype=np.int32):
    return np.random.default_rng(seed).integers(0, high, size=n).astype(dtype)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotary_dim", [None, 32])
def test_inverse_undoes_rope(interleaved, rotary_dim):
    x, p = _x((11, 3, 96)), _pos(11)
    kw = dict(interleaved=interleaved, rotary_dim=rotary_dim)
    y = braze.rope.rope(x, p, **kw)
    assert not np.allclose(y, x)
    back = braze.rope.rope(y, p, inverse=True, **kw)
    np.testing.assert_allclose(back, x, rtol=0, atol=2e-5)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_qk_equals_two_ropes(interleaved):
    q, k, p = _x((9, 32, 128), 2), _x((9, 8, 128), 3), _pos(9, high=5000, dtype=np.int64)
    kw = dict(interleaved=interleaved, attention_scale=1.25)
    rq, rk = braze.rope.rope_qk(q, k, p, **kw)
    np.testing.assert_array_equal(rq, braze.rope.rope(q, p, **kw))
    np.testing.assert_array_equal(rk, braze.rope.rope(k, p, **kw))


def test_in_place_on_a_fused_qkv_buffer():
    """q and k are head slices of one [tokens, q+k+v heads, D] buffer, rotated in
    place without copies; v is untouched."""
    qkv = _x((6, 4 + 2 + 2, 64), 4).astype(braze._arrays.BF16)
    before = qkv.copy()
    q, k = qkv[:, :4], qkv[:, 4:6]
    p = _pos(6, high=70_000)
    want_q, want_k = ref.rope(testing.to_numpy64(q), p), ref.rope(testing.to_numpy64(k), p)
    gq, gk = braze.rope.rope_qk(q, k, p, q_out=q, k_out=k)
    assert gq is q and gk is k
    tol = _spec.get("rope_qk").tolerance("bfloat16")
    assert testing.compare(qkv[:, :4], want_q, tol).ok
    assert testing.compare(qkv[:, 4:6], want_k, tol).ok
    np.testing.assert_array_equal(qkv[:, 6:].view(np.uint16), before[:, 6:].view(np.uint16))


@pytest.mark.cuda
@pytest.mark.skipif(not __import__("conftest").cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("interleaved", [False, True])
def test_cuda_fused_qkv_in_place(dtype, interleaved):
    torch = pytest.importorskip("torch")
    qkv = torch.randn(33, 32 + 8 + 8, 128, device="cuda").to(getattr(torch, dtype))
    keep = qkv.clone()
    q, k = qkv[:, :32], qkv[:, 32:40]
    p = torch.randint(0, 2**20, (33,), device="cuda", dtype=torch.int32)
    pn = p.cpu().numpy()
    want_q = ref.rope(keep[:, :32].double().cpu().numpy(), pn, interleaved=interleaved)
    want_k = ref.rope(keep[:, 32:40].double().cpu().numpy(), pn, interleaved=interleaved)
    gq, gk = braze.rope.rope_qk(q, k, p, q_out=q, k_out=k, interleaved=interleaved)
    assert gq is q and gk is k
    tol = _spec.get("rope_qk").tolerance(dtype)
    assert testing.compare(qkv[:, :32], want_q, tol).ok
    assert testing.compare(qkv[:, 32:40], want_k, tol).ok
    assert torch.equal(qkv[:, 40:], keep[:, 40:])


def test_rope_in_place_partial_rotary_dim():
    x = _x((5, 3, 80))
    keep = x.copy()
    p = _pos(5)
    y = braze.rope.rope(x, p, rotary_dim=48, out=x)
    assert y is x
    np.testing.assert_array_equal(x[..., 48:], keep[..., 48:])
    np.testing.assert_allclose(x, ref.rope(keep.astype(np.float64), p, rotary_dim=48), atol=2e-5)


def test_positions_int32_int64_and_strided():
    x = _x((2, 7, 4, 64))
    p64 = _pos((2, 7), dtype=np.int64)
    y64 = braze.rope.rope(x, p64)
    np.testing.assert_array_equal(braze.rope.rope(x, p64.astype(np.int32)), y64)
    wide = np.zeros((2, 14), np.int64)
    wide[:, ::2] = p64
    np.testing.assert_array_equal(braze.rope.rope(x, wide[:, ::2]), y64)
    # each token uses its own position: permuting tokens permutes the output
    perm = np.random.default_rng(0).permutation(7)
    np.testing.assert_array_equal(braze.rope.rope(np.ascontiguousarray(x[:, perm]), np.ascontiguousarray(p64[:, perm])), y64[:, perm])


@pytest.mark.parametrize("position", [65_537, 1_000_003, 2**24 - 1])
def test_large_positions_match_the_oracle(position):
    x = _x((3, 2, 128))
    p = np.array([position, position - 1, 17], np.int64)
    y = braze.rope.rope(x, p)
    np.testing.assert_allclose(y, ref.rope(x.astype(np.float64), p), rtol=0, atol=3e-6)


def test_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    q, k = torch.randn(5, 4, 64), torch.randn(5, 2, 64)
    p = torch.tensor([3, 1, 4, 1, 5], dtype=torch.int64)
    gq, gk = braze.rope.rope_qk(q, k, p)
    assert isinstance(gq, torch.Tensor)
    np.testing.assert_allclose(gq.numpy(), ref.rope(q.double().numpy(), p.numpy()), atol=2e-5)
    np.testing.assert_allclose(gk.numpy(), ref.rope(k.double().numpy(), p.numpy()), atol=2e-5)


@pytest.mark.parametrize("traditional", [False, True])
def test_matches_mlx_fast_rope(traditional):
    mx = pytest.importorskip("mlx.core")
    x = _x((1, 4, 16, 64))  # [batch, heads, tokens, D] in MLX's layout
    offset = 37
    want = np.array(mx.fast.rope(mx.array(x), 64, traditional=traditional, base=10000.0, scale=1.0,
                                 offset=offset))
    xt = np.ascontiguousarray(x[0].transpose(1, 0, 2))  # [tokens, heads, D]
    got = braze.rope.rope(xt, offset + np.arange(16, dtype=np.int32), interleaved=traditional)
    np.testing.assert_allclose(got.transpose(1, 0, 2)[None], want, atol=1e-4)


# ---------------------------------------------------------------- errors
def _untouched(out):
    return np.isnan(out).all()


@pytest.mark.parametrize("kwargs,positions,exc,name", [
    ({}, np.arange(4, dtype=np.int32), ValueError, "positions"),              # wrong shape
    ({}, np.arange(5, dtype=np.float32), TypeError, "positions"),             # wrong dtype
    ({"rotary_dim": 33}, np.arange(5, dtype=np.int32), ValueError, "rotary_dim"),
    ({"rotary_dim": 66}, np.arange(5, dtype=np.int32), ValueError, "rotary_dim"),
    ({"inv_freq": np.ones(31, np.float32)}, np.arange(5, dtype=np.int32), ValueError, "inv_freq"),
    ({"inv_freq": np.ones(32, np.float64)}, np.arange(5, dtype=np.int32), TypeError, "inv_freq"),
    ({"rotary_dim": 2.0}, np.arange(5, dtype=np.int32), TypeError, "rotary_dim"),
])
def test_bad_arguments_raise_naming_them(kwargs, positions, exc, name):
    x = _x((5, 3, 64))
    out = np.full_like(x, np.nan)
    with pytest.raises(exc, match=name):
        braze.rope.rope(x, positions, out=out, **kwargs)
    assert _untouched(out)


def test_qk_errors_leave_outputs_untouched():
    q, k = _x((4, 4, 64)), _x((4, 2, 64))
    qo, ko = np.full_like(q, np.nan), np.full_like(k, np.nan)
    p = np.arange(4, dtype=np.int64)
    with pytest.raises(ValueError, match="k"):
        braze.rope.rope_qk(q, _x((4, 2, 32)), p, q_out=qo, k_out=ko)
    with pytest.raises(ValueError, match="k_out"):
        braze.rope.rope_qk(q, k, p, q_out=qo, k_out=np.full((4, 3, 64), np.nan, np.float32))
    with pytest.raises(ValueError, match="q_out"):  # q_out over k's memory
        qkv = _x((4, 8, 64))
        braze.rope.rope_qk(qkv[:, :2], qkv[:, 2:4], p, q_out=qkv[:, 1:3], k_out=ko)
    with pytest.raises(ValueError, match="contiguous"):
        braze.rope.rope_qk(q, np.asfortranarray(k), p, q_out=qo, k_out=ko)
    assert _untouched(qo) and _untouched(ko)


def test_odd_head_dim_needs_rotary_dim():
    x = _x((2, 3, 7))
    with pytest.raises(ValueError, match="rotary_dim"):
        braze.rope.rope(x, np.arange(2, dtype=np.int32))
    y = braze.rope.rope(x, np.arange(2, dtype=np.int32), rotary_dim=6)
    np.testing.assert_array_equal(y[..., 6], x[..., 6])


# ---------------------------------------------------------------- frequencies
def _plain(d, base):
    return [base ** (-2.0 * i / d) for i in range(d // 2)]


def test_frequencies_default():
    f, s = braze.rope.frequencies(128, base=500000.0)
    assert f.dtype == np.float32 and f.shape == (64,) and s == 1.0
    assert f[0] == 1.0 and f[1] == np.float32(500000.0 ** (-2 / 128))
    np.testing.assert_array_equal(f, np.float32(_plain(128, 500000.0)))
    np.testing.assert_array_equal(f, ref.default_inv_freq(np, 128, 500000.0))


def test_frequencies_linear():
    f, s = braze.rope.frequencies(64, scaling={"type": "linear", "factor": 4.0})
    np.testing.assert_array_equal(f, np.float32([v / 4.0 for v in _plain(64, 10000.0)]))
    assert f[0] == 0.25 and s == 1.0


def test_frequencies_ntk():
    f, s = braze.rope.frequencies(128, scaling={"type": "ntk", "factor": 8.0})
    new_base = 10000.0 * 8.0 ** (128 / 126)
    np.testing.assert_allclose(f, _plain(128, new_base), rtol=1e-6)
    assert f[-1] == pytest.approx(new_base ** (-126 / 128), rel=1e-6) and s == 1.0


def test_frequencies_banded():
    """The Llama 3.1 settings: factor 8, low 1, high 4, original context 8192, base 500000."""
    sc = {"type": "banded", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position": 8192}
    f, s = braze.rope.frequencies(128, base=500000.0, scaling=sc)
    want = []
    for v in _plain(128, 500000.0):
        wavelen = 2 * math.pi / v
        if wavelen < 8192 / 4.0:
            want.append(v)
        elif wavelen > 8192 / 1.0:
            want.append(v / 8.0)
        else:
            t = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            want.append((1 - t) * v / 8.0 + t * v)
    np.testing.assert_allclose(f, want, rtol=1e-6)
    assert f[0] == 1.0                                   # high frequencies kept
    assert f[-1] == np.float32(_plain(128, 500000.0)[-1] / 8)  # low frequencies divided by factor
    mid = [i for i, v in enumerate(_plain(128, 500000.0)) if 2048 < 2 * math.pi / v < 8192]
    assert mid and all(_plain(128, 500000.0)[i] / 8 < f[i] < _plain(128, 500000.0)[i] for i in mid)
    assert s == 1.0


@pytest.mark.parametrize("mscale,mscale_all_dim,want_scale", [
    (1.0, 0.0, 0.1 * math.log(40.0) + 1.0),  # 1.36888794541
    (1.0, 1.0, 1.0),
    (0.707, 1.0, (0.0707 * math.log(40.0) + 1.0) / (0.1 * math.log(40.0) + 1.0)),
])
def test_frequencies_yarn(mscale, mscale_all_dim, want_scale):
    d, base, factor, L = 64, 10000.0, 40.0, 4096
    sc = {"type": "yarn", "factor": factor, "original_max_position": L, "mscale": mscale,
          "mscale_all_dim": mscale_all_dim}
    f, s = braze.rope.frequencies(d, base=base, scaling=sc)
    assert s == pytest.approx(want_scale, rel=1e-12)
    if mscale == 1.0 and mscale_all_dim == 0.0:
        assert s == pytest.approx(1.3688879454, rel=1e-9)

    def corr(rot):
        return d * math.log(L / (rot * 2 * math.pi)) / (2 * math.log(base))

    lo, hi = max(math.floor(corr(32)), 0), min(math.ceil(corr(1)), d - 1)
    assert (lo, hi) == (10, 23)  # c(32) = 10.47, c(1) = 22.51 for these settings
    want = []
    for i, v in enumerate(_plain(d, base)):
        ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        want.append(v / factor * ramp + v * (1 - ramp))
    np.testing.assert_allclose(f, want, rtol=1e-6)
    assert f[0] == 1.0 and f[-1] == np.float32(_plain(d, base)[-1] / factor)


def test_frequencies_feed_rope():
    inv, scale = braze.rope.frequencies(64, scaling={"type": "yarn", "factor": 4.0, "original_max_position": 2048})
    x, p = _x((4, 2, 64)), _pos(4, high=8000)
    y = braze.rope.rope(x, p, inv_freq=inv, attention_scale=scale)
    np.testing.assert_allclose(y, ref.rope(x.astype(np.float64), p, inv_freq=inv, attention_scale=scale),
                               atol=3e-5)


@pytest.mark.parametrize("rotary_dim,scaling,exc", [
    (63, None, ValueError),
    (64, {"type": "llama3", "factor": 8.0}, ValueError),
    (64, {"type": "linear"}, ValueError),
    (64, {"type": "linear", "factor": 2.0, "beta": 1}, ValueError),
    (64, "linear", TypeError),
    (64, {"type": "banded", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0,
          "original_max_position": 8192}, ValueError),
])
def test_frequencies_errors(rotary_dim, scaling, exc):
    with pytest.raises(exc):
        braze.rope.frequencies(rotary_dim, scaling=scaling)
