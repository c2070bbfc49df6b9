"""The ops family's MSL shaders (shaders/metal/ops/), run directly by the MSL
simulator against float64 compositions: every kernel and dtype, gated halves
and interleaved pairs, strided / broadcast / misaligned rows, in place,
out-of-range ids, every Hadamard order m and its register variants. The
launch geometry below mirrors csrc/metal/plans/ops.cpp; the registry parity
tests run the plans themselves through the simulated braze._metal."""
from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import RELAUNCH, sanitized_rerun, simulated  # noqa: E402

OPS = ROOT / "shaders" / "metal" / "ops"
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": BF16}
RTOL = {"f32": 2e-6, "f16": 1e-3, "bf16": 8e-3}  # output rounding (f32: the kernels' f32 math)

ACT_PARAMS = np.dtype([("rows", "<u4"), ("cols", "<u4"), ("x_stride", "<u4"), ("y_stride", "<u4"),
                       ("dy_stride", "<u4"),  # the VJP kernels only
                       ("flags", "<u4"), ("alpha", "<f4"), ("limit", "<f4")])
EMB_PARAMS = np.dtype([(f, "<u4") for f in ("tokens", "vocab", "dim", "ids_stride", "table_stride", "y_stride")])
HAD_PARAMS = np.dtype([(f, "<u4") for f in ("rows", "n", "lane_bits", "simd_bits", "x_stride", "y_stride")]
                      + [("scale", "<f4")])
ACT_MAX_THREADS, ACT_ELEMS = 256, 4

test_under_sanitizers = sanitized_rerun(__file__)

_libs: dict[str, mtlsim.Library] = {}


def lib(name):
    if name not in _libs:
        _libs[name] = mtlsim.shader_library(f"ops_{name}", OPS / f"{name}.metal")
    return _libs[name]


def params(dtype, **kw):
    p = np.zeros(1, dtype)
    for k, v in kw.items():
        p[k] = v
    return p


def strided(rng, rows, cols, stride, dt, offset=0, scale=1.0):
    """rows x cols values inside a buffer of row stride `stride`, starting `offset`
    elements in (an offset of 1 misaligns the data): (buffer view, values)."""
    buf = np.full(offset + max(rows, 1) * stride + cols, np.nan, np.float32).astype(dt)
    view = buf[offset:]
    vals = (rng.standard_normal((rows, cols)) * scale).astype(dt)
    for r in range(rows):
        view[r * stride:r * stride + cols] = vals[r]
    return view, vals


def rows_of(buf, rows, cols, stride):
    return np.stack([buf[r * stride:r * stride + cols] for r in range(rows)]) if rows else np.zeros((0, cols))


def column_grid(cols, rows):
    threads = min(ACT_MAX_THREADS, (cols + 31) // 32 * 32)
    return (-(-cols // (threads * ACT_ELEMS)), rows, 1), (threads, 1, 1)


# ---- float64 compositions ----------------------------------------------------

_erfc = np.frompyfunc(math.erfc, 1, 1)


def sigmoid(v):
    with np.errstate(over="ignore"):  # exp(-v) = inf gives the right 0
        return 1.0 / (1.0 + np.exp(-v))


def act64(kind, g):
    if kind == "silu":
        return g * sigmoid(g)
    if kind == "gelu":
        return 0.5 * g * _erfc(-g / math.sqrt(2.0)).astype(np.float64)  # 1 + erf(v) = erfc(-v), exact in the tail
    # gelu_tanh: g/2 (1 + tanh(w)) = g sigmoid(2w), which keeps the negative tail
    return g * sigmoid(2.0 * math.sqrt(2.0 / math.pi) * (g + 0.044715 * g ** 3))


def gated64(kind, g, u, alpha, limit):
    if kind == "swiglu_clamped":
        gc = np.minimum(g, limit)
        return gc * sigmoid(alpha * gc) * (np.clip(u, -limit, limit) + 1.0)
    return act64(kind, g) * u


def close(got, want, dt, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    tol = RTOL[dt] * (np.abs(want) + 1e-3)
    bad = ~(np.abs(got - want) <= tol)
    assert not bad.any(), f"{what}: {bad.sum()} bad, e.g. got {got[bad][:4]} want {want[bad][:4]}"


# ---- activations ----------------------------------------------------------------

UNGATED = {"silu": "silu", "gelu": "gelu", "gelu_tanh": "gelu_tanh"}
GATED = {"silu_and_mul": "silu", "gelu_and_mul": "gelu", "gelu_and_mul_tanh": "gelu_tanh",
         "swiglu_clamped": "swiglu_clamped"}


@simulated
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kernel", list(GATED))
@pytest.mark.parametrize("interleaved", [False, True])
def test_gated(kernel, dt, interleaved):
    rng = np.random.default_rng(len(kernel) + 7 * interleaved)
    rows, cols = 3, 1100  # two column blocks, the last partial
    xs, ys = 2 * cols + 5, cols + 3
    x, xv = strided(rng, rows, 2 * cols, xs, DTYPES[dt], offset=1, scale=3.0)
    y = np.full(rows * ys, np.nan, np.float32).astype(DTYPES[dt])
    alpha, limit = 1.702, 2.5
    grid, threads = column_grid(cols, rows)
    p = params(ACT_PARAMS, rows=rows, cols=cols, x_stride=xs, y_stride=ys, flags=int(interleaved),
               alpha=alpha, limit=limit)
    lib("act").dispatch(f"{kernel}_{dt}", grid, threads, [x, y, p])
    x64 = xv.astype(np.float64)
    g, u = (x64[:, 0::2], x64[:, 1::2]) if interleaved else (x64[:, :cols], x64[:, cols:])
    close(rows_of(y, rows, cols, ys), gated64(GATED[kernel], g, u, alpha, limit), dt, kernel)
    for r in range(rows):  # the gaps between rows stay untouched
        assert np.isnan(y[r * ys + cols:(r + 1) * ys].astype(np.float32)).all()


@simulated
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("kernel", list(UNGATED))
def test_ungated_strided_and_in_place(kernel, dt):
    rng = np.random.default_rng(len(kernel))
    rows, cols, xs = 4, 37, 40
    x, xv = strided(rng, rows, cols, xs, DTYPES[dt], offset=1, scale=4.0)
    want = act64(UNGATED[kernel], xv.astype(np.float64))
    grid, threads = column_grid(cols, rows)
    y = np.zeros(rows * cols, DTYPES[dt])
    lib("act").dispatch(f"{kernel}_{dt}", grid, threads,
                        [x, y, params(ACT_PARAMS, rows=rows, cols=cols, x_stride=xs, y_stride=cols)])
    close(y.reshape(rows, cols), want, dt, kernel)
    lib("act").dispatch(f"{kernel}_{dt}", grid, threads,  # in place: y is x
                        [x, x, params(ACT_PARAMS, rows=rows, cols=cols, x_stride=xs, y_stride=xs)])
    close(rows_of(x, rows, cols, xs), want, dt, kernel + " in place")


@simulated
def test_activation_tails_and_nan():
    """Large |g|, the far negative tail of gelu (relative accuracy where
    1 + erf underflows), NaN propagating through swiglu_clamped's clamps."""
    g = np.array([-80, -30, -12, -9, -5.5, -3, -1e-3, 0, 1e-6, 0.7, 6, 30, 1e30], np.float32)
    n = g.size
    for kernel in UNGATED:
        y = np.zeros(n, np.float32)
        lib("act").dispatch(f"{kernel}_f32", *column_grid(n, 1),
                            [g, y, params(ACT_PARAMS, rows=1, cols=n, x_stride=n, y_stride=n)])
        want = act64(UNGATED[kernel], g.astype(np.float64))
        assert np.allclose(y, want, rtol=2e-6, atol=1e-30), (kernel, y, want)
    x = np.array([[np.nan, 1.0, 9.0, 1.0], [1.0, np.nan, 1.0, 9.0]], np.float32)  # interleaved (g, u)
    y = np.zeros((2, 2), np.float32)
    lib("act").dispatch("swiglu_clamped_f32", *column_grid(2, 2),
                        [x, y, params(ACT_PARAMS, rows=2, cols=2, x_stride=4, y_stride=2, flags=1,
                                      alpha=1.702, limit=7.0)])
    assert np.isnan(y[:, 0]).all()
    want = gated64("swiglu_clamped", np.array([9.0, 1.0]), np.array([1.0, 9.0]), 1.702, 7.0)
    assert np.allclose(y[:, 1], want, rtol=2e-6)


@simulated
def test_broadcast_rows():
    rng = np.random.default_rng(3)
    cols, rows = 300, 5
    x = rng.standard_normal(2 * cols).astype(np.float16)  # one row, x_stride 0
    y = np.zeros((rows, cols), np.float16)
    lib("act").dispatch("silu_and_mul_f16", *column_grid(cols, rows),
                        [x, y, params(ACT_PARAMS, rows=rows, cols=cols, x_stride=0, y_stride=cols)])
    x64 = x.astype(np.float64)
    close(y, np.broadcast_to(gated64("silu", x64[:cols], x64[cols:], 0, 0), (rows, cols)), "f16", "broadcast")


# ---- embedding ------------------------------------------------------------------

@simulated
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ids_dtype", [np.int32, np.int64])
def test_embedding(dt, ids_dtype):
    rng = np.random.default_rng(11)
    vocab, dim, ts, ys = 50, 1030, 1040, 1033
    table, tv = strided(rng, vocab, dim, ts, DTYPES[dt], offset=1)
    big = 2 ** 40 if ids_dtype == np.int64 else 2 ** 31 - 1
    want_ids = [0, 49, -1, 50, 7, big, -big, 3]
    ids = np.zeros(2 * len(want_ids), ids_dtype)  # ids stride 2
    ids[::2] = want_ids
    ids[1::2] = 1  # never read
    tokens = len(want_ids)
    y = np.full(tokens * ys, np.nan, np.float32).astype(DTYPES[dt])
    kernel = ("embedding_i64_" if ids_dtype == np.int64 else "embedding_") + dt
    lib("embedding").dispatch(kernel, *column_grid(dim, tokens),
                              [ids, table, y, params(EMB_PARAMS, tokens=tokens, vocab=vocab, dim=dim,
                                                     ids_stride=2, table_stride=ts, y_stride=ys)])
    got = rows_of(y, tokens, dim, ys)
    for t, i in enumerate(want_ids):
        want = tv[i] if 0 <= i < vocab else np.zeros(dim, DTYPES[dt])
        assert got[t].tobytes() == want.tobytes(), (t, i)


# ---- hadamard -------------------------------------------------------------------

def _tables(path, prefix):
    src = path.read_text()
    return {m: [int(v, 16) for v in re.findall(r"0x([0-9a-f]+)u",
                                               re.search(rf"#define {prefix}_{m} \{{([^}}]*)\}}", src).group(1))]
            for m in (12, 20, 28)}


def test_msl_hadamard_tables_match_core():
    core = _tables(ROOT / "csrc" / "core" / "hadamard.h", "BRAZE_HADAMARD")
    msl = _tables(OPS / "hadamard_tables.h", "OPS_HADAMARD")
    assert msl == core
    for m, rows in msl.items():
        h = sign_matrix(rows, m)
        assert (h @ h.T == m * np.eye(m)).all()


def sign_matrix(rows, m):
    return np.array([[-1.0 if (rows[i] >> j) & 1 else 1.0 for j in range(m)] for i in range(m)])


H_M = {1: np.ones((1, 1)), **{m: sign_matrix(r, m) for m, r in _tables(OPS / "hadamard_tables.h", "OPS_HADAMARD").items()}}


def hadamard64(x, m, k, scale):
    """scale * (H_m kron H_{2^k}) x over rows: Sylvester butterflies on the
    [m, 2^k] view's last axis (one bit at a time), then H_m on its first."""
    z = x.reshape(x.shape[0], m, 1 << k)
    for b in range(k):
        z = z.reshape(x.shape[0], m, -1, 2, 1 << b)
        z = np.stack([z[:, :, :, 0] + z[:, :, :, 1], z[:, :, :, 0] - z[:, :, :, 1]], axis=3)
    z = np.einsum("ij,rjc->ric", H_M[m], z.reshape(x.shape[0], m, 1 << k))
    return scale * z.reshape(x.shape)


def test_hadamard_composition_is_the_kronecker_product():
    """The float64 composition above against the dense (H_m kron H_{2^k}),
    Sylvester H[i, j] = (-1)^popcount(i & j)."""
    rng = np.random.default_rng(0)
    for m, k in ((1, 5), (12, 3), (20, 1), (28, 2)):
        i = np.arange(1 << k)
        syl = np.where(np.bitwise_count(i[:, None] & i[None, :]) & 1, -1.0, 1.0)
        x = rng.standard_normal((2, m << k))
        assert np.allclose(hadamard64(x, m, k, 0.5), 0.5 * x @ np.kron(H_M[m], syl).T)


def hadamard_launch(m, k):
    """(kernel prefix, lane_bits, simd_bits): csrc/metal/plans/ops.cpp's split."""
    lane = min(k, 5)
    reg = min(k - lane, {1: 3, 12: 1}.get(m, 0))
    simd = k - lane - reg
    if simd > 5:
        reg, simd = reg + simd - 5, 5
    e = 1 << reg
    name = "hadamard_" if (m, e) == (1, 8) else f"hadamard_e{e}_" if m == 1 else f"hadamard_m{m}_e{e}_"
    return name, lane, simd


def run_hadamard(x, y, m, k, rows, xs, ys, dt, scale, **kw):
    name, lane, simd = hadamard_launch(m, k)
    p = params(HAD_PARAMS, rows=rows, n=m << k, lane_bits=lane, simd_bits=simd, x_stride=xs, y_stride=ys,
               scale=scale)
    lib("hadamard").dispatch(name + dt, (rows, 1, 1), (32 << simd, 1, 1), [x, y, p], **kw)


# every register variant of m = 1, lanes partly idle (k < 5), one and 32 simdgroups
HAD_CASES = [(1, k) for k in (0, 1, 3, 5, 6, 7, 8, 10, 13, 14, 15)] + \
            [(12, k) for k in (0, 2, 5, 6, 9, 11)] + [(20, k) for k in (0, 3, 5, 10)] + \
            [(28, k) for k in (0, 1, 5, 7, 10)]


@simulated
@pytest.mark.parametrize("m,k", HAD_CASES, ids=lambda v: str(v))
def test_hadamard_f32(m, k):
    n = m << k
    rows = 2 if n > 4096 else 3
    rng = np.random.default_rng(n)
    xs, ys = n + 3, n + 1
    x, xv = strided(rng, rows, n, xs, np.float32, offset=1)
    y = np.full(rows * ys, np.nan, np.float32)
    scale = 1.0 / math.sqrt(n)
    run_hadamard(x, y, m, k, rows, xs, ys, "f32", scale)
    want = hadamard64(xv.astype(np.float64), m, k, scale)
    got = rows_of(y, rows, n, ys)
    assert np.abs(got - want).max() <= 2e-6 * max(1.0, np.abs(want).max()) * math.log2(2 * n)
    for r in range(rows):
        assert np.isnan(y[r * ys + n:(r + 1) * ys]).all()


@simulated
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("m,k", [(1, 9), (12, 6), (20, 2), (28, 5)], ids=lambda v: str(v))
def test_hadamard_half_types_in_place(m, k, dt):
    n = m << k
    rng = np.random.default_rng(n + len(dt))
    x = rng.standard_normal((3, n)).astype(DTYPES[dt])
    want = hadamard64(x.astype(np.float64), m, k, 0.5)
    run_hadamard(x, x, m, k, 3, n, n, dt, 0.5)
    assert np.abs(x.astype(np.float64) - want).max() <= 2 * RTOL[dt] * np.abs(want).max()


@simulated
@pytest.mark.parametrize("m,k", [(1, 12), (28, 10), (12, 11)], ids=lambda v: str(v))
def test_hadamard_shuffled_schedule_same_bits(m, k):
    """The simdgroup-bit butterflies in threadgroup memory: barriers suffice."""
    n = m << k
    x = np.random.default_rng(5).standard_normal((2, n)).astype(np.float32)
    runs = []
    for seed, shuffle in ((0, False), (1, True), (2, True)):
        y = np.zeros_like(x)
        run_hadamard(x, y, m, k, 2, n, n, "f32", 1.0, seed=seed, shuffle=shuffle)
        runs.append(y.tobytes())
    assert runs[0] == runs[1] == runs[2]


@simulated
def test_hadamard_broadcast_rows():
    x = np.random.default_rng(2).standard_normal(20 << 4).astype(BF16)
    y = np.zeros((4, x.size), BF16)
    run_hadamard(x, y, 20, 4, 4, 0, x.size, "bf16", 1.0)
    want = hadamard64(x.astype(np.float64)[None], 20, 4, 1.0)
    assert np.abs(y.astype(np.float64) - want).max() <= 2 * RTOL["bf16"] * np.abs(want).max()

