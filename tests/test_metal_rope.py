"""The Metal rope kernels (shaders/metal/rope/), run by the MSL simulator
through the same launch plan as the Metal executor, against the float64
reference of braze.reference.rope from the rounded inputs. Outputs start as
NaN; padding around strided outputs must stay NaN. MTLSIM_SANITIZE=1 runs
them under ASan + UBSan."""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402
from braze.reference import rope as ref  # noqa: E402

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
          "bf16": np.dtype(ml_dtypes.bfloat16)}
TOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}

# name: (tokens, q heads, k heads, head_dim, rotary_dim or None, options)
# options: interleaved, inverse, scale, pos ("i32" < 8192, "i64" < 8192,
# "big32" int32 in [2^16, 2^24), "big64" int64 up to 2^24), freq ("default" |
# "given" | "unit": 1.0 and near-1 values, where the angle is the position),
# strided (padded token / head axes; rope_qk: slices of one fused qkv buffer),
# in_place (rope_qk only; rope is out of place).
CASES = {
    "one_token_d64": (1, 1, 1, 64, None, {}),
    "odd_heads_d128": (3, 5, 3, 128, None, {"pos": "i64"}),
    "d256_head_blocks": (2, 9, 4, 256, None, {"pos": "i64", "scale": 0.5}),  # 8 heads per threadgroup
    "d80_interleaved": (4, 3, 1, 80, None, {"interleaved": True, "pos": "big32"}),
    "d256_partial": (2, 3, 1, 256, 96, {"strided": True}),
    "partial_interleaved_inverse": (5, 3, 2, 64, 32, {"interleaved": True, "inverse": True, "scale": 0.75,
                                                      "pos": "big64", "freq": "given"}),
    "strided_big_positions": (3, 7, 1, 128, None, {"strided": True, "pos": "big32", "freq": "given",
                                                   "scale": 1.25}),
    "unit_freq_2p24": (6, 1, 1, 64, None, {"pos": "big64", "freq": "unit"}),
    "in_place_partial": (3, 4, 2, 80, 48, {"strided": True, "in_place": True, "inverse": True,
                                           "pos": "i64"}),
    "in_place_interleaved": (2, 5, 1, 128, None, {"in_place": True, "interleaved": True,
                                                  "freq": "given", "pos": "big32"}),
}

test_under_sanitizers = sanitized_rerun(__file__)


@pytest.fixture(scope="module")
def lib():
    return mtlsim.rope_library()


def positions(rng, tokens, kind):
    if kind in ("big32", "big64"):  # past 2^16, up to 2^24 where float32 is exact
        p = rng.integers(2**16, 2**24, size=tokens)
        p[0] = 2**24 - 1
        if kind == "big32":
            return p.astype(np.int32)
        if tokens > 1:  # the nearest integers to large multiples of pi/2: cos or sin ~ 0
            p[1] = int(np.rint(10680000 * np.pi / 2))
        return p.astype(np.int64)
    return rng.integers(0, 8192, size=tokens).astype(np.int64 if kind == "i64" else np.int32)


def inv_freq(rng, rot, kind):
    if kind == "given":
        return (rng.uniform(0.0, 1.0, rot // 2) ** 3).astype(np.float32)
    if kind == "unit":
        f = np.ones(rot // 2, np.float32)
        f[1::2] = np.float32(1.0) - np.arange(rot // 4, dtype=np.float32) * np.float32(2.0**-24)
        return f
    return ref.default_inv_freq(np, rot, 10000.0)


def heads_view(rng, tokens, heads, dim, dt, strided, fill=None):
    """[tokens, heads, dim]; strided: a view into padded heads and head_dim."""
    shape = (tokens, heads + 3, dim + 8) if strided else (tokens, heads, dim)
    full = np.full(shape, fill, dt) if fill is not None else rng.standard_normal(shape).astype(dt)
    return full[:, 1:1 + heads, :dim] if strided else full


def f64(a):
    return np.asarray(a).astype(np.float64)


def check(name, got, want, key):
    g, w = f64(got), f64(want)
    assert g.shape == w.shape, name
    if w.size == 0:
        return
    assert np.isfinite(g).all(), f"{name}: non-finite output"
    d = np.abs(g - w)
    scale = max(float(np.abs(w).max()), 1e-30)
    assert d.max() <= TOL[key] * scale, f"{name}: max error {d.max():.3g} (scale {scale:.3g})"


def padding_is_nan(view):
    """Every element of view.base outside `view` is still NaN."""
    base = view.base
    mask = np.ones(base.shape, bool)
    mask[:, 1:1 + view.shape[1], :view.shape[2]] = False
    return bool(np.isnan(base.astype(np.float32)[mask]).all())


def make(case, key, data_seed):
    tokens, hq, hk, dim, rot, o = CASES[case]
    dt = DTYPES[key]
    rng = np.random.default_rng(data_seed)
    strided = o.get("strided", False)
    r = dim if rot is None else rot
    pos = positions(rng, tokens, o.get("pos", "i32"))
    freq = inv_freq(rng, r, o.get("freq", "default"))
    kw = {"rotary_dim": rot, "interleaved": o.get("interleaved", False),
          "inverse": o.get("inverse", False), "attention_scale": o.get("scale", 1.0)}
    return rng, tokens, hq, hk, dim, dt, strided, pos, freq, kw, o


def want(x, pos, freq, kw):
    return ref.rope(f64(x), pos, inv_freq=freq, rotary_dim=kw["rotary_dim"], interleaved=kw["interleaved"],
                    attention_scale=kw["attention_scale"], inverse=kw["inverse"])


def run_rope(lib, case, key, data_seed=1, **extra):
    rng, tokens, hq, _, dim, dt, strided, pos, freq, kw, _ = make(case, key, data_seed)
    x = heads_view(rng, tokens, hq, dim, dt, strided)
    x0 = x.copy()
    out = heads_view(rng, tokens, hq, dim, dt, strided, fill=np.nan)
    lib.run(x, pos, freq, out, **kw, **extra)
    assert np.array_equal(x.view(np.uint8), x0.view(np.uint8)), "input changed"
    if strided:
        assert padding_is_nan(out), "write outside out"
    check("out", out, want(x0, pos, freq, kw), key)
    return out


def run_rope_qk(lib, case, key, data_seed=1, **extra):
    rng, tokens, hq, hk, dim, dt, strided, pos, freq, kw, o = make(case, key, data_seed)
    if strided:  # q and k: head slices of one fused qkv buffer
        qkv = rng.standard_normal((tokens, hq + 2 * hk, dim)).astype(dt)
        q, k = qkv[:, :hq], qkv[:, hq:hq + hk]
    else:
        qkv = None
        q = rng.standard_normal((tokens, hq, dim)).astype(dt)
        k = rng.standard_normal((tokens, hk, dim)).astype(dt)
    q0, k0, qkv0 = q.copy(), k.copy(), None if qkv is None else qkv.copy()
    if o.get("in_place"):
        q_out, k_out = q, k
    else:
        q_out = heads_view(rng, tokens, hq, dim, dt, strided, fill=np.nan)
        k_out = heads_view(rng, tokens, hk, dim, dt, strided, fill=np.nan)
    lib.run(q, pos, freq, q_out, k=k, k_out=k_out, **kw, **extra)
    if qkv is not None:
        v = qkv[:, hq + hk:]
        assert np.array_equal(v.view(np.uint8), qkv0[:, hq + hk:].view(np.uint8)), "v changed"
    if not o.get("in_place"):
        assert np.array_equal(q.view(np.uint8), q0.view(np.uint8)), "q changed"
        assert np.array_equal(k.view(np.uint8), k0.view(np.uint8)), "k changed"
        if strided:
            assert padding_is_nan(q_out) and padding_is_nan(k_out), "write outside q_out / k_out"
    check("q", q_out, want(q0, pos, freq, kw), key)
    check("k", k_out, want(k0, pos, freq, kw), key)
    return q_out, k_out


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("case", [c for c in CASES if not CASES[c][5].get("in_place")])
def test_rope(lib, case, key):
    run_rope(lib, case, key)


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_rope_qk(lib, case, key):
    run_rope_qk(lib, case, key)


@simulated
def test_shuffled_schedule_gives_the_same_bits(lib):
    """Threadgroups and fibers in a seeded random order: same result, bit for bit."""
    a = run_rope_qk(lib, "d256_head_blocks", "bf16", data_seed=3)
    for seed in (1, 2, 3):
        b = run_rope_qk(lib, "d256_head_blocks", "bf16", data_seed=3, seed=seed, shuffle=True)
        for x, y in zip(a, b):
            assert np.array_equal(x.view(np.uint16), y.view(np.uint16))


@simulated
def test_sincos_near_quadrant_boundaries(lib):
    """f32, inv_freq = 1: the angle is the position itself; positions at the
    nearest integers to multiples of pi/2 (and 2^24 - 1) stress the reduction."""
    ks = np.array([1, 2, 3, 7, 355, 1000001, 5000003, 10680000, 10680001], np.float64)
    pos = np.concatenate([np.rint(ks * np.pi / 2), [2**24 - 1, 2**24 - 2, 0]]).astype(np.int64)
    t = pos.size
    x = np.random.default_rng(0).standard_normal((t, 1, 2)).astype(np.float32)
    freq = np.ones(1, np.float32)
    out = np.full_like(x, np.nan)
    lib.run(x, pos, freq, out)
    check("out", out, want(x, pos, freq, {"rotary_dim": None, "interleaved": False,
                                          "attention_scale": 1.0, "inverse": False}), "f32")
    # cos and sin themselves, to ~1e-6 absolute: rotate (1, 0) by each angle
    e = np.zeros((t, 1, 2), np.float32)
    e[:, :, 0] = 1
    cs = np.full_like(e, np.nan)
    lib.run(e, pos, freq, cs)
    ang = pos.astype(np.float32).astype(np.float64)
    assert np.abs(cs[:, 0, 0] - np.cos(ang)).max() < 1e-6
    assert np.abs(cs[:, 0, 1] - np.sin(ang)).max() < 1e-6


@simulated
def test_empty_and_rejected(lib):
    x = np.zeros((0, 2, 64), np.float32)
    lib.run(x, np.zeros(0, np.int32), ref.default_inv_freq(np, 64, 10000.0), x.copy())
    x = np.zeros((2, 2, 64), np.float32)
    with pytest.raises(mtlsim.SimError, match="rotary_dim must be even"):
        lib.run(x, np.zeros(2, np.int32), np.ones(15, np.float32), x.copy(), rotary_dim=31)
