"""The Metal norm kernels (shaders/metal/norm/), run by the MSL simulator
through the same launch plans as the Metal executor, against the float64
references of braze.reference.norm. MTLSIM_SANITIZE=1 runs them under
ASan + UBSan."""
from __future__ import annotations

import sys
import zlib
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402
from braze.reference import norm as ref  # noqa: E402

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
          "bf16": np.dtype(ml_dtypes.bfloat16)}
TOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 2e-2}
OPS = ("rms_norm", "layer_norm", "add_rms_norm", "rms_norm_gated", "rms_norm_vjp",
       "layer_norm_vjp")
# (leading dims, row length, row padding of strided views)
SHAPES = {
    "one_element": ((1,), 1, 0),
    "one_row": ((1,), 37, 0),
    "rows_1000": ((3,), 1000, 0),
    "lead_2x3": ((2, 3), 50, 0),
    "empty_lead": ((0,), 64, 0),
    "strided": ((5,), 129, 31),
    "looped_9000": ((2,), 9000, 3),   # > NORM_REG_ELEMS * NORM_MAX_THREADS: looped form
}
LONG = ((2,), 70000, 0)               # > 64k
HERE = Path(__file__).resolve().parent

test_under_sanitizers = sanitized_rerun(__file__)


@pytest.fixture(scope="module")
def lib():
    return mtlsim.norm_library()


def rows_array(rng, lead, n, pad, dtype, scale=1.0, shift=0.0):
    """[rows, n] view (rows = prod(lead)) with row stride n + pad."""
    rows = int(np.prod(lead))
    base = (rng.standard_normal((rows, n + pad)) * scale + shift).astype(dtype)
    return base[:, :n]


def poisoned(rows, n, pad, dtype):
    return np.full((rows, n + pad), np.nan, dtype)[:, :n]


def f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def check(name, got, want, key, floor=1e-30):
    """Max error and relative norm error, relative to the output's scale (or
    `floor`, the scale of the terms that cancel in it, if larger)."""
    tol = TOL[key]
    g, w = f64(got), f64(want)
    assert g.shape == w.shape, name
    if w.size == 0:
        return
    assert np.isfinite(g).all(), f"{name}: non-finite output"
    d = np.abs(g - w)
    scale = max(float(np.abs(w).max()), floor)
    assert d.max() <= tol * scale, f"{name}: max error {d.max():.3g} (scale {scale:.3g})"
    wn = float(np.linalg.norm(w))
    assert float(np.linalg.norm(d)) <= tol * max(wn, floor * np.sqrt(w.size)), \
        f"{name}: relative norm error"


def run_case(lib, op, key, lead, n, pad, variant, seed):
    dt = DTYPES[key]
    rng = np.random.default_rng(seed)
    rows = int(np.prod(lead))
    x = rows_array(rng, lead, n, pad, dt, 2.0, 0.5)
    with_weight = variant != "bare"
    w = (1.0 + 0.5 * rng.standard_normal(n)).astype(dt) if with_weight else None
    a = {"x": x, "weight": w}
    kw = {"seed": seed, "shuffle": True}
    if op in ("rms_norm", "add_rms_norm", "rms_norm_vjp"):
        kw["weight_offset"] = 1.0 if variant == "offset" else 0.0
    if op in ("layer_norm", "layer_norm_vjp") and with_weight:
        a["bias"] = (0.5 * rng.standard_normal(n)).astype(dt)
    eps = 1e-5 if op.startswith("layer") else 1e-6
    out = poisoned(rows, n, pad, dt)
    a["out"] = out
    pads = [out.base] if pad else []

    if op == "rms_norm":
        lib.run(op, a, eps=eps, **kw)
        check("y", out, ref.rms_norm(f64(x), f64(w), eps=eps, weight_offset=kw["weight_offset"]), key)
    elif op == "layer_norm":
        lib.run(op, a, eps=eps, **kw)
        check("y", out, ref.layer_norm(f64(x), f64(w), f64(a.get("bias")), eps=eps), key)
    elif op == "add_rms_norm":
        res = rows_array(rng, lead, n, pad, dt)
        h_want = (x.astype(np.float32) + res.astype(np.float32)).astype(dt)
        a["aux"] = res
        a["aux_out"] = res if variant == "offset" else poisoned(rows, n, pad, dt)  # in place
        lib.run(op, a, eps=eps, **kw)
        assert np.array_equal(f64(a["aux_out"]), f64(h_want)), "h = x + residual, one rounding"
        check("y", out, ref.rms_norm(f64(h_want), f64(w), eps=eps,
                                     weight_offset=kw["weight_offset"]), key)
    elif op == "rms_norm_gated":
        group = n // 2 if variant == "bare" and n % 2 == 0 else None
        a["aux"] = rows_array(rng, lead, n, pad, dt, 2.0)
        lib.run(op, a, eps=eps, group_size=group or 0, **kw)
        check("y", out, ref.rms_norm_gated(f64(x), f64(a["aux"]), f64(w), eps=eps,
                                           group_size=group), key)
    else:
        dy = rows_array(rng, lead, n, pad, dt)
        a["aux"] = dy
        if with_weight:
            a["dweight"] = np.full(n, np.nan, dt)
        if "bias" in a:
            a["dbias"] = np.full(n, np.nan, dt)
        lib.run(op, a, eps=eps, **kw)
        if op == "rms_norm_vjp":
            want = ref.rms_norm_vjp(f64(x), f64(w), f64(dy), eps=eps,
                                    weight_offset=kw["weight_offset"])
        else:
            want = ref.layer_norm_vjp(f64(x), f64(w), f64(a.get("bias")), f64(dy), eps=eps)
        # dx = r * (g - ...) cancels (exactly, for one element): judge it on r * |g|
        r = 1.0 / np.sqrt(np.mean(f64(x) ** 2, axis=-1, keepdims=True) + eps)
        g = f64(dy) * ((f64(w) if with_weight else 1.0) + kw.get("weight_offset", 0.0))
        check("dx", out, want[0], key, floor=float(np.max(r * np.abs(g), initial=0.0)))
        if with_weight:
            check("dweight", a["dweight"], want[1], key)
        if "dbias" in a:
            check("dbias", a["dbias"], want[2], key)
    for base in pads:  # row padding of strided outputs is never written
        assert np.isnan(f64(base[:, n:])).all(), "write into row padding"


def variants(op):
    return {"rms_norm": ("weight", "offset", "bare"), "add_rms_norm": ("weight", "offset"),
            "rms_norm_vjp": ("offset", "bare")}.get(op, ("weight", "bare"))


CASES = [pytest.param(op, key, shape, v, id=f"{op}-{key}-{shape}-{v}")
         for op in OPS for key in DTYPES for shape in SHAPES for v in variants(op)]


@simulated
@pytest.mark.parametrize("op,key,shape,variant", CASES)
def test_norm(lib, op, key, shape, variant):
    lead, n, pad = SHAPES[shape]
    run_case(lib, op, key, lead, n, pad, variant, zlib.crc32(f"{op}{key}{shape}{variant}".encode()))


@simulated
@pytest.mark.parametrize("op", OPS)
def test_norm_long_row(lib, op):
    key = "bf16" if op in ("rms_norm", "add_rms_norm") else "f32"
    run_case(lib, op, key, *LONG, "weight" if op != "rms_norm_vjp" else "offset", 7)


@simulated
def test_vjp_gradients_are_deterministic(lib):
    rng = np.random.default_rng(1)
    x, dy = (rng.standard_normal((300, 96)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(96).astype(np.float32) for _ in range(2))
    results = []
    for seed in (1, 2):
        a = {"x": x, "weight": w, "bias": b, "aux": dy, "out": np.full_like(x, np.nan),
             "dweight": np.full_like(w, np.nan), "dbias": np.full_like(b, np.nan)}
        lib.run("layer_norm_vjp", a, eps=1e-5, seed=seed, shuffle=True)
        results.append(a)
    for k in ("out", "dweight", "dbias"):
        assert np.array_equal(results[0][k], results[1][k]), k


@simulated
def test_plan_rejects_bad_group_size(lib):
    x = np.ones((2, 10), np.float32)
    a = {"x": x, "aux": x, "out": np.empty_like(x)}
    with pytest.raises(mtlsim.SimError, match="group_size must divide"):
        lib.run("rms_norm_gated", a, eps=1e-6, group_size=3)


# ---- the simulator's own checks, on planted bugs (tests/mtlsim/planted_bugs.metal)

@pytest.fixture(scope="module")
def planted():
    return mtlsim.shader_library("planted_bugs", HERE / "mtlsim" / "planted_bugs.metal")


@simulated
def test_simulator_reports_early_return_before_barrier(planted):
    out = np.full(64, np.nan, np.float32)
    planted.dispatch("reverse_early_return", (1, 1, 1), (64, 1, 1),
                     [out, np.array([64], np.uint32)], shuffle=True, seed=5)
    assert np.array_equal(out, np.arange(64)[::-1].astype(np.float32))  # correct twin
    with pytest.raises(mtlsim.SimError, match="early return before threadgroup_barrier: thread 7"):
        planted.dispatch("reverse_early_return", (1, 1, 1), (64, 1, 1),
                         [out, np.array([7], np.uint32)])


@simulated
def test_simulator_reports_out_of_range_shuffle(planted):
    out = np.full(64, np.nan, np.float32)
    planted.dispatch("shuffle_xor_mask", (2, 1, 1), (32, 1, 1), [out, np.array([5], np.uint16)])
    assert np.array_equal(out, ((np.arange(64) % 32) ^ 5) + 0.5)
    with pytest.raises(mtlsim.SimError, match="SIMD shuffle reads a lane >= 32"):
        planted.dispatch("shuffle_xor_mask", (2, 1, 1), (32, 1, 1),
                         [out, np.array([32], np.uint16)])


@simulated
def test_simulator_fills_threadgroup_memory_with_nan(planted):
    out = np.zeros(32, np.float32)
    planted.dispatch("read_unwritten", (1, 1, 1), (32, 1, 1), [out])
    assert np.isnan(out[0::2]).all() and (out[1::2] == 1.0).all()
