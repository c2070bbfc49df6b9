"""The Metal sampling kernels (shaders/metal/sampling/), run by the MSL
simulator through the same launch plan as the Metal executor, against the
float64 reference of braze.reference.sampling on the rounded inputs. Outputs
start as NaN (or a poison index). MTLSIM_SANITIZE=1 runs them under ASan +
UBSan."""
from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402
from braze.reference import sampling as ref  # noqa: E402

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}
POISON = -7  # int outputs start here (never a token, never -1)

test_under_sanitizers = sanitized_rerun(__file__)


@pytest.fixture(scope="module")
def lib():
    return mtlsim.sampling_library()


# ---------------------------------------------------------------- inputs
def logits(rng, rows, cols, key, *, strided=False, special=(), scale=2.0):
    """[rows, cols] normal logits of dtype `key`; strided: a view into rows
    padded by 5. special: row kinds put in the first rows, in order:
    "neginf" (some -inf), "nan" (one NaN), "allneginf", "posinf" (one +inf),
    "ties" (the max 9.0 at three places), "inf_nan" (-inf everywhere but one NaN)."""
    dt = DTYPES[key]
    full = (rng.standard_normal((rows, cols + (5 if strided else 0))) * scale).astype(dt)
    x = full[:, :cols]
    for r, kind in enumerate(special):
        if r >= rows:
            break
        if kind == "neginf":
            x[r, rng.choice(cols, max(1, cols // 3), replace=False)] = -np.inf
        elif kind == "nan":
            x[r, rng.integers(cols)] = np.nan
        elif kind == "allneginf":
            x[r] = -np.inf
        elif kind == "posinf":
            x[r, rng.integers(cols)] = np.inf
        elif kind == "ties":  # wide rows: the ties fall on one thread (1024 threads)
            at = (rng.integers(1024) + np.arange(3) * 1024 if cols > 3072
                  else rng.choice(cols, min(cols, 3), replace=False))
            x[r, at] = dt.type(9.0)
        elif kind == "inf_nan":
            x[r] = -np.inf
            x[r, rng.integers(cols)] = np.nan
    return x


def f64(a):
    return np.asarray(a).astype(np.float64)


def row_param(rng, rows, kind, lo, hi, dtype=np.float32):
    """A scalar (kind "scalar": the midpoint) or a per-row array."""
    if kind == "scalar":
        return float(np.float32((lo + hi) / 2)) if dtype == np.float32 else int((lo + hi) // 2)
    if dtype == np.int32:
        return rng.integers(lo, hi, rows).astype(np.int32)
    return rng.uniform(lo, hi, rows).astype(np.float32)


def poisoned(shape, dtype, strided=False):
    """An output full of NaN (float) or POISON (int); strided: a view into padded rows."""
    fill = POISON if np.dtype(dtype).kind == "i" else np.nan
    if strided and len(shape) == 2:
        return np.full((shape[0], shape[1] + 3), fill, dtype)[:, :shape[1]]
    return np.full(shape, fill, dtype)


def padding_untouched(view):
    if view.base is None or view.base.shape == view.shape:
        return True
    pad = np.asarray(view.base)[:, view.shape[1]:]
    return bool(np.isnan(pad.astype(np.float32)).all())


# ---------------------------------------------------------------- softmax, log_softmax, logsumexp, argmax
# name: (rows, cols, strided, temperature ("one" 1.0, "scalar" 0.7, "rows" per row), special rows)
NORM_CASES = {
    "one_row": (1, 1000, False, "one", ()),
    "vocab_1": (5, 1, False, "rows", ("nan", "allneginf")),
    "odd_vocab_strided": (6, 77, True, "scalar", ("neginf", "nan", "allneginf", "posinf", "ties", "inf_nan")),
    "per_row_temperature": (7, 1000, False, "rows", ("ties", "neginf")),
    "wide_strided": (4, 4133, True, "rows", ("neginf", "nan", "ties")),
}


def temperature_of(rng, rows, kind):
    if kind == "one":
        return 1.0
    if kind == "scalar":
        return 0.7
    return rng.uniform(0.5, 1.5, rows).astype(np.float32)


def check_float(name, got, want, atol=2e-5, rtol=2e-5):
    got, want = f64(got), f64(want)
    assert got.shape == want.shape, name
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{name}: NaN pattern differs"
    g, w = got[~nan], want[~nan]
    inf = np.isinf(w)
    assert np.array_equal(g[inf], w[inf]), f"{name}: infinities differ"
    d = np.abs(g[~inf] - w[~inf])
    if d.size:
        lim = atol + rtol * np.abs(w[~inf])
        assert (d <= lim).all(), f"{name}: max error {d.max():.3g}"


def run_normalize(lib, case, key, op, *, shuffle=False, seed=11):
    rows, cols, strided, tkind, special = NORM_CASES[case]
    rng = np.random.default_rng(seed)
    x = logits(rng, rows, cols, key, strided=strided, special=special)
    x0 = x.copy()
    t = temperature_of(rng, rows, tkind)
    if op == "logsumexp":
        out = poisoned((rows,), np.float32)
    else:
        out = poisoned((rows, cols), np.float32, strided)
    lib.run(op, x, out, temperature=t, shuffle=shuffle, sim_seed=seed)
    assert np.array_equal(x.view(np.uint8), x0.view(np.uint8)), "logits changed"
    assert padding_untouched(out), "write outside out"
    with np.errstate(all="ignore"):
        want = getattr(ref, op)(f64(x0), temperature=t if np.isscalar(t) else f64(t))
    check_float(f"{op} {case} {key}", out, want)


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("case", NORM_CASES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_normalize(lib, op, case, key):
    run_normalize(lib, case, key, op)


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("case", NORM_CASES)
def test_argmax(lib, case, key):
    rows, cols, strided, _, special = NORM_CASES[case]
    rng = np.random.default_rng(5)
    x = logits(rng, rows, cols, key, strided=strided, special=special)
    out = poisoned((rows,), np.int32)
    lib.run("argmax", x, out)
    np.testing.assert_array_equal(out, ref.argmax(f64(x)))
    if "ties" in special:  # the tied max is at several indices: the first wins
        assert out[special.index("ties")] == np.flatnonzero(f64(x[special.index("ties")]) == 9.0)[0]


@simulated
def test_vocab_128256(lib):
    rng = np.random.default_rng(3)
    x = logits(rng, 1, 128256, "bf16", special=("ties",))
    for op in ("softmax", "logsumexp"):
        out = poisoned((1, 128256) if op == "softmax" else (1,), np.float32)
        lib.run(op, x, out, temperature=0.8)
        check_float(op, out, getattr(ref, op)(f64(x), temperature=0.8))
    idx = poisoned((1,), np.int32)
    lib.run("argmax", x, idx)
    np.testing.assert_array_equal(idx, ref.argmax(f64(x)))


@simulated
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp"])
def test_normalize_shuffled(lib, op):
    """Threadgroups and runnable threads in a seeded random order."""
    run_normalize(lib, "wide_strided", "f16", op, shuffle=True, seed=23)


@simulated
def test_plan_rejects(lib):
    x = np.zeros((2, 0), np.float32)
    with pytest.raises(mtlsim.SimError, match="at least one column"):
        lib.run("softmax", x, np.zeros((2, 0), np.float32))


# ---------------------------------------------------------------- masks
# name: (rows, cols, strided, special rows, coarse: values on a 0.5 grid, so ties abound)
MASK_SHAPES = {
    "one_row": (1, 1000, False, (), False),
    "vocab_1": (4, 1, False, ("nan", "allneginf"), False),
    "odd_vocab_strided": (6, 77, True, ("neginf", "nan", "allneginf", "posinf", "ties", "inf_nan"), False),
    "coarse_ties": (8, 300, False, ("neginf",), True),
    "wide_strided": (3, 4133, True, ("ties", "neginf"), False),
}
# op: option cases (k / p: a value or "rows"; temperature likewise)
MASK_CASES = {
    "top_k_mask": [{"k": 5}, {"k": 0}, {"k": 1}, {"k": 100}, {"k": "rows"}],
    "top_p_mask": [{"p": 0.9}, {"p": 0.5, "temperature": 0.7}, {"p": 1.0}, {"p": "rows", "temperature": "rows"}],
    "min_p_mask": [{"p": 0.1}, {"p": 0.02, "temperature": 1.5}, {"p": 0.0}, {"p": "rows"}],
}


def mask_args(rng, op, case, rows):
    kw = {}
    if "k" in case:
        kw["top_k"] = rng.integers(0, 12, rows).astype(np.int32) if case["k"] == "rows" else case["k"]
    if "p" in case:
        lo, hi = (0.3, 1.0) if op == "top_p_mask" else (0.0, 0.3)
        kw["p"] = rng.uniform(lo, hi, rows).astype(np.float32) if case["p"] == "rows" else case["p"]
    if "temperature" in case:
        t = case["temperature"]
        kw["temperature"] = rng.uniform(0.5, 1.5, rows).astype(np.float32) if t == "rows" else t
    return kw


def mask_reference(op, x, kw):
    a = lambda v: f64(v) if isinstance(v, np.ndarray) else v  # noqa: E731
    if op == "top_k_mask":
        return ref.top_k_mask(f64(x), a(kw["top_k"]))
    return getattr(ref, op)(f64(x), a(kw["p"]), temperature=a(kw.get("temperature", 1.0)))


def mask_inputs(shape, key, seed):
    rows, cols, strided, special, coarse = MASK_SHAPES[shape]
    rng = np.random.default_rng(seed)
    x = logits(rng, rows, cols, key, strided=strided, special=special)
    if coarse:
        x[...] = (np.round(f64(x) * 2) / 2).astype(x.dtype)
    return rng, x


def check_exact(name, got, want):
    assert np.array_equal(f64(got), f64(want), equal_nan=True), (
        f"{name}: {int((f64(got) != f64(want)).sum())} elements differ")


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("shape", MASK_SHAPES)
@pytest.mark.parametrize("op", MASK_CASES)
def test_masks(lib, op, shape, key):
    for ci, case in enumerate(MASK_CASES[op]):
        rng, x = mask_inputs(shape, key, 100 + ci)
        x0 = x.copy()
        kw = mask_args(rng, op, case, x.shape[0])
        out = poisoned(x.shape, x.dtype, strided=MASK_SHAPES[shape][2])
        lib.run(op, x, out, **kw)
        assert np.array_equal(x.view(np.uint8), x0.view(np.uint8)), "logits changed"
        assert padding_untouched(out), "write outside out"
        with np.errstate(all="ignore"):
            want = mask_reference(op, x0, kw).astype(x.dtype)
        check_exact(f"{op} {shape} case {case}", out, want)


@simulated
@pytest.mark.parametrize("op", MASK_CASES)
def test_masks_in_place_shuffled(lib, op):
    """out is logits (strided rows), with threads and threadgroups in a seeded random order."""
    rng, x = mask_inputs("wide_strided", "bf16", 7)
    x0, base0 = x.copy(), x.base.copy()
    kw = mask_args(rng, op, MASK_CASES[op][-1], x.shape[0])
    lib.run(op, x, x, shuffle=True, sim_seed=99, **kw)
    check_exact(f"{op} in place", x, mask_reference(op, x0, kw).astype(x.dtype))
    pad = np.s_[:, x.shape[1]:]
    assert np.array_equal(x.base[pad].view(np.uint16), base0[pad].view(np.uint16)), "write outside the rows"


# ---------------------------------------------------------------- apply_penalties
ULP = {"f32": 2.0**-22, "f16": 2.0**-10, "bf16": 2.0**-7}
PENALTY_CASES = [{"repetition": 1.3, "frequency": 0.2, "presence": 0.5}, {"repetition": 0.8},
                 {"frequency": -0.5, "presence": 1.0}]


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("shape", ["one_row", "vocab_1", "odd_vocab_strided", "wide_strided"])
def test_apply_penalties(lib, shape, key):
    for ci, case in enumerate(PENALTY_CASES):
        rng, x = mask_inputs(shape, key, 200 + ci)
        rows, cols = x.shape
        ids = rng.integers(-1, cols, (rows, 24 + 5)).astype(np.int32)[:, :24]  # strided rows
        ids[:, :6] = ids[:, 6:12]  # repeated tokens: counts > 1
        x0 = x.copy()
        in_place = ci == 2
        out = x if in_place else poisoned(x.shape, x.dtype, strided=MASK_SHAPES[shape][2])
        lib.run("apply_penalties", x, out, ids=ids, **case)
        with np.errstate(all="ignore"):
            want = ref.apply_penalties(f64(x0), ids, **case)
        g, w = f64(out), f64(want.astype(x.dtype))
        seen = np.zeros(x.shape, bool)
        for r in range(rows):
            seen[r, ids[r][ids[r] >= 0]] = True
        assert np.array_equal(g[~seen], f64(x0)[~seen], equal_nan=True), "unseen logits changed"
        # f32 math, one rounding to the dtype: a few roundings of the operands' size
        rep = case.get("repetition", 1.0)
        size = (np.abs(f64(x0)) * max(rep, 1 / rep) + 24 * abs(case.get("frequency", 0.0))
                + abs(case.get("presence", 0.0)) + np.abs(w))[seen]
        with np.errstate(invalid="ignore"):
            d = np.abs(g[seen] - w[seen])
        assert np.array_equal(np.isnan(g[seen]), np.isnan(w[seen])), f"{shape} {case}: NaN pattern"
        ok = np.isnan(d) | (d <= 2 * ULP[key] * size) | (g[seen] == w[seen])
        assert ok.all(), f"{shape} {case}: max error {np.nanmax(d):.3g}"
        if not in_place:
            assert padding_untouched(out), "write outside out"


# ---------------------------------------------------------------- philox_uniform, sample
@simulated
@pytest.mark.parametrize("rows,seed,offset", [(1000, 2**40 + 3, 11), (1000, 0, 2**63), (0, 1, 2),
                                              (1, 2**64 - 1, 2**64 - 1), (300, 0xDEADBEEF12345678, 2**32 + 5)])
def test_philox_uniform(lib, rows, seed, offset):
    out = poisoned((rows,), np.float32)
    lib.run("philox_uniform", None, out, seed=seed, offset=offset)
    want = ref.philox_uniform(rows, seed=seed, offset=offset)
    assert np.array_equal(out.view(np.uint32), want.view(np.uint32)), "uniforms are not bit-identical"


# the spec's option cases (top_p: "rows" in [0.3, 1), top_k in [0, 12), min_p in [0, 0.3))
SAMPLE_CASES = [{}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.1},
                {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05}, {"temperature": 0.0},
                {"top_k": 1}, {"temperature": "rows", "top_k": "rows", "top_p": "rows", "min_p": "rows"}]
SAMPLE_RANGES = {"temperature": (0.5, 1.5, np.float32), "top_k": (0, 12, np.int32), "top_p": (0.3, 1.0, np.float32),
                 "min_p": (0.0, 0.3, np.float32)}


def sample_args(rng, case, rows):
    kw = {}
    for name, v in case.items():
        if v == "rows":
            lo, hi, dt = SAMPLE_RANGES[name]
            v = rng.integers(lo, hi, rows).astype(dt) if dt == np.int32 else rng.uniform(lo, hi, rows).astype(dt)
        kw[name] = v
    return kw


def cpu_sample(x, kw, seed, offset):
    """braze.sampling.sample on numpy (the CPU backend, or the reference where it is not built)."""
    import braze.sampling as bs
    return np.asarray(bs.sample(np.ascontiguousarray(x), seed=seed, offset=offset, **kw))


@simulated
@pytest.mark.parametrize("key", DTYPES)
@pytest.mark.parametrize("shape", MASK_SHAPES)
def test_sample(lib, shape, key):
    for ci, case in enumerate(SAMPLE_CASES):
        rng, x = mask_inputs(shape, key, 300 + ci)
        kw = sample_args(rng, case, x.shape[0])
        seed, offset = 1234 + ci, 7 * ci
        out = poisoned((x.shape[0],), np.int32)
        lib.run("sample", x, out, temperature=kw.get("temperature", 1.0), top_k=kw.get("top_k", 0),
                p=kw.get("top_p", 1.0), min_p=kw.get("min_p", 0.0), seed=seed, offset=offset)
        a = {n: f64(v) if isinstance(v, np.ndarray) and v.dtype != np.int32 else v for n, v in kw.items()}
        with np.errstate(all="ignore"):
            want = ref.sample(f64(x), seed=seed, offset=offset, **a)
        np.testing.assert_array_equal(out, want, err_msg=f"{shape} {case}")
        np.testing.assert_array_equal(out, cpu_sample(x, kw, seed, offset), err_msg=f"{shape} {case} (CPU)")


@simulated
def test_sample_many_draws_shuffled(lib):
    """Many rows of one wide vocab (different uniforms), shuffled schedule, top_p and top_k."""
    rng = np.random.default_rng(17)
    x = logits(rng, 24, 2100, "f16", strided=True)
    for kw in ({}, {"top_k": 40, "top_p": 0.7}):
        out = poisoned((24,), np.int32)
        lib.run("sample", x, out, top_k=kw.get("top_k", 0), p=kw.get("top_p", 1.0), seed=99, offset=3,
                shuffle=True, sim_seed=5)
        np.testing.assert_array_equal(out, ref.sample(f64(x), seed=99, offset=3, **kw))
    assert len(set(out.tolist())) > 5  # the draws differ by row
