"""What the registry parity tests (tests/test_<family>.py, backend "metal")
do not cover for the Metal backend, run by the MSL simulator: braze._metal
built from the same module, bindings, core checks and launch plans as on a
Mac, with the simulator's executor. Shuffled schedules must give the same
bits; long rows take the looped kernels; the simulator's own checks catch
planted bugs. MTLSIM_SANITIZE=1 reruns these and the Metal parity tests
under ASan + UBSan."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import testing
from braze.reference import rope as rope_ref
from braze.reference import sampling as sampling_ref

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import RELAUNCH, simulated  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture
def metal():
    """Host arrays run on the simulated Metal backend inside this fixture."""
    mtlsim.set_schedule(0, False)
    with testing.simulated_metal(mtlsim.metal_module()):
        yield
    mtlsim.set_schedule(0, False)


def shuffled_runs(fn, seeds=(1, 2, 3)):
    """fn() once in order, then under shuffled schedules: the results."""
    mtlsim.set_schedule(0, False)
    out = [fn()]
    for s in seeds:
        mtlsim.set_schedule(s, True)
        out.append(fn())
    mtlsim.set_schedule(0, False)
    return out


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@simulated
def test_the_module_is_the_metal_backend(metal):
    x = np.random.default_rng(0).standard_normal((3, 40)).astype(np.float32)
    assert "simulator" in mtlsim.metal_module().library_path()
    y = braze.norm.rms_norm(x)
    assert np.allclose(y, x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6), atol=1e-5)


@simulated
@pytest.mark.parametrize("n", [9000, 70000])  # > NORM_REG_ELEMS * NORM_MAX_THREADS: the looped form
# (one row: the simulator runs a fiber per thread, 1024 of them a row)
def test_norm_long_rows(metal, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((1, n)).astype(BF16)
    r = rng.standard_normal((1, n)).astype(BF16)
    w = rng.standard_normal(n).astype(BF16)
    y, h = braze.norm.add_rms_norm(x, r, w)
    h64 = x.astype(np.float64) + r.astype(np.float64)
    h64 = h64.astype(BF16).astype(np.float64)
    want = h64 / np.sqrt((h64 ** 2).mean(-1, keepdims=True) + 1e-6) * w.astype(np.float64)
    assert np.abs(y.astype(np.float64) - want).max() <= 2e-2 * max(1.0, np.abs(want).max())
    dy = rng.standard_normal((1, n)).astype(np.float32)
    xf = x.astype(np.float32)
    dx, dw = braze.norm.rms_norm_vjp(xf, w.astype(np.float32), dy)
    cdx, cdw = (np.asarray(v) for v in _on_cpu(braze.norm.rms_norm_vjp, xf, w.astype(np.float32), dy))
    assert np.allclose(dx, cdx, rtol=1e-4, atol=1e-5) and np.allclose(dw, cdw, rtol=1e-4, atol=1e-4)


def _on_cpu(fn, *args, **kw):
    from braze import _backends

    route = _backends.ROUTE.pop("cpu")
    try:
        return fn(*args, **kw)
    finally:
        _backends.ROUTE["cpu"] = route


@simulated
def test_vjp_gradients_are_deterministic(metal):
    rng = np.random.default_rng(1)
    x, dy = (rng.standard_normal((300, 96)).astype(np.float32) for _ in range(2))
    w, b = (rng.standard_normal(96).astype(np.float32) for _ in range(2))
    runs = shuffled_runs(lambda: braze.norm.layer_norm_vjp(x, w, b, dy), seeds=(1, 2))
    for other in runs[1:]:
        assert all(same_bits(p, q) for p, q in zip(runs[0], other))


@simulated
def test_rope_qk_shuffled_and_in_place(metal):
    """A fused qkv buffer: q and k are views of it, rotated in place in one launch."""
    rng = np.random.default_rng(3)
    qkv = rng.standard_normal((2, 9 + 4 + 4, 256)).astype(BF16)
    pos = np.array([5, 70000], np.int64)

    def run():
        buf = qkv.copy()
        q, k = buf[:, :9], buf[:, 9:13]
        braze.rope.rope_qk(q, k, pos, attention_scale=0.5, q_out=q, k_out=k)
        return buf

    runs = shuffled_runs(run)
    assert all(same_bits(runs[0], r) for r in runs[1:])
    want_q = rope_ref.rope(qkv[:, :9].astype(np.float64), pos, attention_scale=0.5)
    got = runs[0].astype(np.float64)
    assert np.abs(got[:, :9] - want_q).max() < 2e-2 * np.abs(want_q).max()
    assert same_bits(runs[0][:, 13:], qkv[:, 13:])  # v untouched


@simulated
def test_sincos_near_quadrant_boundaries(metal):
    """f32, inv_freq = 1: the angle is the position; positions at the nearest
    integers to multiples of pi/2 (and 2^24 - 1) stress the reduction."""
    ks = np.array([1, 2, 3, 7, 355, 1000001, 5000003, 10680000, 10680001], np.float64)
    pos = np.concatenate([np.rint(ks * np.pi / 2), [2**24 - 1, 2**24 - 2, 0]]).astype(np.int64)
    e = np.zeros((pos.size, 1, 2), np.float32)
    e[:, :, 0] = 1
    cs = braze.rope.rope(e, pos, inv_freq=np.ones(1, np.float32))
    ang = pos.astype(np.float32).astype(np.float64)
    assert np.abs(cs[:, 0, 0] - np.cos(ang)).max() < 1e-6
    assert np.abs(cs[:, 0, 1] - np.sin(ang)).max() < 1e-6


@simulated
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp", "argmax"])
def test_normalize_vocab_128256_shuffled(metal, op):
    x = np.random.default_rng(5).standard_normal((1, 128256)).astype(np.float16) * 4
    fn = getattr(braze.sampling, op)
    runs = shuffled_runs(lambda: fn(x), seeds=(7,))
    assert same_bits(runs[0], runs[1])
    assert np.allclose(runs[0], _on_cpu(fn, x), rtol=1e-5, atol=1e-5)


@simulated
@pytest.mark.parametrize("op,kw", [("top_k_mask", {"k": 40}), ("top_p_mask", {"p": 0.7}),
                                   ("min_p_mask", {"p": 0.05}), ("apply_penalties", {"repetition": 1.3})])
def test_masks_in_place_shuffled(metal, op, kw):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 3000)).astype(np.float32)
    if op == "apply_penalties":
        kw = dict(kw, token_ids=rng.integers(-1, 3000, (6, 50)).astype(np.int32))
    fn = getattr(braze.sampling, op)

    def run():
        buf = x.copy()
        fn(buf, **kw, out=buf)
        return buf

    runs = shuffled_runs(run, seeds=(2,))
    assert same_bits(runs[0], runs[1])
    assert same_bits(runs[0], _on_cpu(fn, x, **kw))


@simulated
@pytest.mark.parametrize("rows,seed,offset", [(64, 2**40 + 3, 11), (1, 2**64 - 1, 2**64 - 1),
                                              (16, 0xDEADBEEF12345678, 2**32 + 5)])
def test_sample_uniforms_and_tokens_match_the_cpu(metal, rows, seed, offset):
    """The same Philox draws as the CPU backend, bit for bit, hence the same
    tokens, except for a draw that lands within a few f32 roundings of a
    cumulative sum (the Metal kernel sums in f32, the CPU in double:
    shaders/metal/sampling/sample.metal); seen in 1 row of 1000 in one run."""
    assert same_bits(braze.sampling.philox_uniform(rows, seed=seed, offset=offset),
                     sampling_ref.philox_uniform(rows, seed=seed, offset=offset))
    rng = np.random.default_rng(rows)
    x = (rng.standard_normal((rows, 2100)) * 3).astype(np.float16)
    for kw in ({}, {"top_k": 40, "top_p": 0.7}, {"temperature": 0.7, "min_p": 0.05}):
        got = braze.sampling.sample(x, seed=seed, offset=offset, **kw)
        cpu = _on_cpu(braze.sampling.sample, x, seed=seed, offset=offset, **kw)
        assert np.sum(got != cpu) <= max(1, rows // 100), kw
        assert ((got >= 0) & (got < 2100)).all()


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


@simulated
@pytest.mark.parametrize("transpose", [0, 1])
def test_simdgroup_matrix_multiply_accumulate(planted, transpose):
    rng = np.random.default_rng(7 + transpose)
    m = rng.standard_normal(256).astype(np.float32)
    a, b, c = (m[i * 64:(i + 1) * 64].reshape(8, 8).astype(np.float64) for i in range(3))
    planted.dispatch("matrix_mma", (2, 1, 1), (32, 1, 1), [m, np.array([transpose, 0, 0], np.uint32)])
    want = a @ (b.T if transpose else b) + c
    np.testing.assert_allclose(m[192:].reshape(8, 8), want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(m[:192].reshape(3, 8, 8), np.stack([a, b, c]).astype(np.float32))  # inputs untouched


@simulated
def test_simdgroup_matrix_fill_and_diagonal(planted):
    m = np.zeros(64, np.float16)
    planted.dispatch("matrix_fill", (1, 1, 1), (32, 1, 1), [m])
    assert np.array_equal(m.reshape(8, 8), np.full((8, 8), 1.0, np.float16))


@simulated
@pytest.mark.parametrize("mode,lanes,message", [
    (1, 16, "divergent SIMD-group functions"),
    (2, 3, "need all 32 lanes of the simdgroup"),
    (3, 1, "operands differ across the lanes"),
])
def test_simulator_reports_divergent_simdgroup_matrix_calls(planted, mode, lanes, message):
    m = np.zeros(256, np.float32)
    planted.dispatch("matrix_mma", (1, 1, 1), (32, 1, 1), [m, np.array([0, 0, mode], np.uint32)])  # uniform: fine
    with pytest.raises(mtlsim.SimError, match=message):
        planted.dispatch("matrix_mma", (1, 1, 1), (32, 1, 1), [m, np.array([0, lanes, mode], np.uint32)],
                         shuffle=True, seed=mode)


# ---- MTLSIM_SANITIZE=1: everything above and the bfloat16 Metal parity tests, in a
# child process that preloads ASan (it must be the first library loaded).
SANITIZED = ["tests/test_metal.py", "tests/test_norm.py", "tests/test_rope.py", "tests/test_sampling.py"]


@pytest.mark.skipif(not RELAUNCH, reason="only with MTLSIM_SANITIZE=1")
def test_under_sanitizers():
    r = subprocess.run([sys.executable, "-m", "pytest", *SANITIZED, "-q", "-p", "no:cacheprovider",
                        "-k", "metal and (bfloat16 or not parity)"],
                       env=mtlsim.sanitizer_env(), capture_output=True, text=True, cwd=HERE.parent)
    assert r.returncode == 0, (r.stdout + r.stderr)[-8000:]
    assert " passed" in r.stdout, r.stdout[-2000:]
