"""The ops family: registry parity on every backend, plus what the registry cannot say:
in-place forms, out-of-range ids, the Hadamard tables, the erf of the reference, the
activation VJPs against torch autograd and at the clamps' edges, errors."""
import math
import os
import re

import numpy as np
import pytest

import braze
from braze import _spec, testing
from braze.reference import ops as ref
from conftest import backend_params, cpu_isa, on_backend, parity_test

SPECS = _spec.ops("ops")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

test_parity = parity_test(SPECS)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("dtype", _spec.FLOAT_DTYPES)
def test_every_cpu_isa(isa, dtype):
    """Each instruction-set build of the CPU kernels agrees with the reference."""
    with cpu_isa(isa):
        for spec in SPECS:
            for shape in spec.shapes[:2] + spec.edge_shapes[:4]:
                for case in spec.cases:
                    res = testing.check(spec, "cpu", dtype, shape, case)
                    assert res.ok, f"{spec.name} {shape} {case} on {isa}: {res.message}"


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_case_strided(spec):
    """The registry test strides only the first option case; here every case (interleaved, int64 ids, ...)."""
    shape = spec.shapes[1]
    for case in spec.cases:
        res = testing.check(spec, "cpu", "bfloat16", shape, case, "strided", seed=5)
        assert res.ok, f"{spec.name} {case}: {res.message}"


# ---------------------------------------------------------------- in place
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name,kw", [("silu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
                                     ("hadamard", {}), ("hadamard", {"scale": 2.0})])
def test_in_place(name, kw, dtype):
    spec = _spec.get(name)
    shape = (5, 12 * 64) if name == "hadamard" else (5, 300)
    (x,), _ = spec.make_inputs(shape, dtype, np.random.default_rng(1), {}, False)
    want = spec.reference(testing.to_numpy64(x), **kw)
    got = spec.fn(x, **kw, out=x)
    assert got is x
    assert testing.compare(x, want, spec.tolerance(dtype)).ok


# ---------------------------------------------------------------- embedding
@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("id_dtype", [np.int32, np.int64])
def test_out_of_range_ids_write_zeros_and_read_nothing(backend, id_dtype):
    """The table sits between NaN rows: an id just outside it that were read
    would bring NaN (or anything) into the output instead of zeros."""
    rng = np.random.default_rng(2)
    vocab, dim = 40, 24
    buf = np.full((vocab + 8, dim), np.nan, np.float32)
    buf[4:4 + vocab] = rng.normal(size=(vocab, dim))
    table = buf[4:4 + vocab]
    bad = [-1, vocab, vocab + 1, -4, np.iinfo(np.int32).min, np.iinfo(np.int32).max]
    if id_dtype is np.int64:
        bad += [2**40, -(2**40), np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    ids = np.array(bad + [0, vocab - 1, 7], id_dtype)
    with on_backend(backend):
        (bi, bt), _ = testing.convert_inputs((ids, table), {}, backend)
        out = testing.to_numpy64(braze.ops.embedding(bi, bt))
    assert np.array_equal(out[: len(bad)], np.zeros((len(bad), dim)))
    assert np.array_equal(out[len(bad):], table[[0, vocab - 1, 7]].astype(np.float64))


def test_embedding_scalar_and_empty_ids():
    table = np.random.default_rng(3).normal(size=(10, 6)).astype(np.float32)
    assert np.array_equal(braze.ops.embedding(np.array(3, np.int32), table), table[3])
    assert braze.ops.embedding(np.zeros((0, 5), np.int64), table).shape == (0, 5, 6)


def test_embedding_check():
    table = np.ones((10, 4), np.float32)
    out = np.full((3, 4), 7.0, np.float32)
    assert np.array_equal(braze.ops.embedding(np.array([0, 9, 2]), table, check=True), np.ones((3, 4)))
    for ids, bad in (([1, 10, 2], 10), ([-1, 3, 2], -1)):
        with pytest.raises(ValueError, match=rf"ids: id {bad} is outside \[0, 10\)"):
            braze.ops.embedding(np.array(ids, np.int32), table, check=True, out=out)
    assert np.all(out == 7.0)


# ---------------------------------------------------------------- hadamard
def header_matrices():
    """The sign masks of csrc/core/hadamard.h as +-1 matrices."""
    text = open(os.path.join(ROOT, "csrc", "core", "hadamard.h")).read()
    out = {}
    for m, body in re.findall(r"#define BRAZE_HADAMARD_(\d+) \{([^}]*)\}", text):
        m = int(m)
        masks = [int(v.strip().rstrip("u"), 16) for v in body.split(",")]
        out[m] = np.array([[-1 if (masks[i] >> j) & 1 else 1 for j in range(m)] for i in range(m)])
    return out


def test_header_tables_are_the_paley_matrices():
    tables = header_matrices()
    assert sorted(tables) == [12, 20, 28]
    for m, h in tables.items():
        assert np.array_equal(h, ref.hadamard_matrix(m)), m
        assert np.array_equal(h @ h.T, m * np.eye(m, dtype=np.int64)), m


@pytest.mark.parametrize("n", [1, 2, 8, 12, 24, 20, 40, 28, 112])
def test_reference_hadamard_is_the_kronecker_product(n):
    m, length = ref.hadamard_split(n)
    dense = np.kron(ref.hadamard_matrix(m), ref.sylvester_matrix(length)) / math.sqrt(n)
    x = np.random.default_rng(n).normal(size=(3, n))
    np.testing.assert_allclose(ref.hadamard(x), x @ dense.T, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("n", [1, 4, 16, 64, 12, 48, 20, 160, 28, 448, 28 * 64])
def test_hadamard_kernel_is_orthonormal(isa, n):
    """Transforming the identity's rows gives the matrix M (its transpose); M M^T = I
    checks the kernel without the reference."""
    with cpu_isa(isa):
        mt = braze.ops.hadamard(np.eye(n, dtype=np.float32))
    np.testing.assert_allclose(mt @ mt.T, np.eye(n), atol=5e-6)
    assert np.all(np.abs(np.abs(mt) * math.sqrt(n) - 1) < 1e-5)


# ---------------------------------------------------------------- numerics
def test_erf_series_matches_math_erf():
    z = np.concatenate([np.linspace(-9, 9, 200001), [0.0, -0.0, 1e-300, -1e-12, 2.999999999, 3.0, 30.0, -30.0]])
    got = ref.erf_series(np, z)
    want = np.array([math.erf(v) for v in z])
    assert np.all(np.abs(got - want) <= 1e-13 * np.maximum(np.abs(want), 1e-300) + 1e-300)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_accuracy_over_a_dense_range(isa, approximate):
    """The kernels' gelu (f32 math) on every 1/64 from -12 to 12 against float64
    forms that keep the tiny values of negative g (erfc; 1 + tanh z = 2 / (1 + e^-2z)),
    wherever the result is above 1e-30 (smaller ones may flush to zero): within
    about 2e-7 * (1 + x) relative, x the size of the exponent (g^2 / 2 or 2z),
    since f32 rounds the exponent before the exp."""
    g = np.arange(-12 * 64, 12 * 64 + 1, dtype=np.float32) / 64
    g64 = g.astype(np.float64)
    if approximate == "none":
        want = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in g64])
        bound = 4e-7 + 2e-7 * g64 * g64 / 2
    else:
        want = g64 / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (g64 + 0.044715 * g64**3)))
        bound = 1e-6 + 2e-7 * 2 * math.sqrt(2 / math.pi) * np.abs(g64 + 0.044715 * g64**3)
    with cpu_isa(isa):
        got = braze.ops.gelu(g, approximate=approximate).astype(np.float64)
    normal = np.abs(want) >= 1e-30
    rel = np.abs(got - want)[normal] / np.abs(want)[normal]
    assert np.all(rel <= np.broadcast_to(bound, g.shape)[normal]), float(rel.max())


def test_nan_propagates_through_the_clamps():
    x = np.zeros((1, 8), np.float32)
    x[0, 0] = np.nan  # a gate (interleaved)
    x[0, 3] = np.nan  # an up
    y = braze.ops.swiglu_clamped(x)
    want = ref.swiglu_clamped(x.astype(np.float64))
    assert np.array_equal(np.isnan(y), np.isnan(want)) and np.isnan(y[0, :2]).all()


# ---------------------------------------------------------------- activation VJPs
VJP_CASES = [("silu_and_mul", {}), ("silu_and_mul", {"interleaved": True}), ("gelu_and_mul", {}),
             ("gelu_and_mul", {"approximate": "tanh", "interleaved": True}), ("swiglu_clamped", {}),
             ("swiglu_clamped", {"alpha": 1.0, "limit": 3.0, "interleaved": False}), ("silu", {}), ("gelu", {}),
             ("gelu", {"approximate": "tanh"})]


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("name,kw", VJP_CASES)
def test_vjp_matches_torch_autograd_of_the_composition(name, kw, isa):
    """dx of the kernel (float32) against torch.autograd through torch's own
    composition (F.silu, F.gelu, clamp, sigmoid) in float64 on the same inputs."""
    torch = pytest.importorskip("torch")
    from braze.bench.peers import ops as peers

    rng = np.random.default_rng(4)
    n = 2 * 333
    x = (rng.normal(size=(6, n)) * 4).astype(np.float32)  # a tenth of swiglu's beyond the limit 7
    dy = rng.normal(size=(6, n // 2 if name.endswith("_mul") or name == "swiglu_clamped" else n)).astype(np.float32)
    with cpu_isa(isa):
        got = getattr(braze.ops, name + "_vjp")(x, dy, **kw)
    want = peers.torch_ops[name + "_vjp"](torch.from_numpy(x).double(), torch.from_numpy(dy).double(), **kw).numpy()
    assert got.shape == x.shape and got.dtype == x.dtype
    res = testing.compare(got, want, _spec.get(name + "_vjp").tolerance("float32"))
    assert res.ok, res.message


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.parametrize("interleaved", [True, False])
def test_swiglu_clamped_vjp_at_the_limits(backend, interleaved):
    """No gradient for a gate at or past the limit, none for an up at or past
    +-limit (whose dg then uses the clipped up), and the full one just inside."""
    limit, alpha = 3.0, 1.5
    below = float(np.nextafter(np.float32(limit), np.float32(0)))
    g = np.array([limit, below, limit + 1, -limit, 0.5, 0.5, 0.5, 0.5, 0.5, np.inf, 1.0, 1.0], np.float32)
    u = np.array([0.5, 0.5, 0.5, 0.5, limit, -limit, -below, limit + 2, -limit - 2, 0.5, np.inf, -np.inf],
                 np.float32)
    x = (np.stack((g, u), axis=-1).reshape(-1) if interleaved else np.concatenate((g, u)))[None]
    dy = np.full((1, g.size), 2.0, np.float32)
    with on_backend(backend):
        (bx, bdy), _ = testing.convert_inputs((x, dy), {}, backend)
        dx = testing.to_numpy64(braze.ops.swiglu_clamped_vjp(bx, bdy, alpha=alpha, limit=limit,
                                                             interleaved=interleaved))[0]
    dg, du = (dx[0::2], dx[1::2]) if interleaved else (dx[:g.size], dx[g.size:])
    g64, u64 = g.astype(np.float64), u.astype(np.float64)
    gc = np.minimum(g64, limit)
    s = 1 / (1 + np.exp(-alpha * gc))
    want_dg = np.where(g64 < limit, 2 * (np.clip(u64, -limit, limit) + 1) * s * (1 + alpha * gc * (1 - s)), 0.0)
    want_du = np.where(np.abs(u64) < limit, 2 * gc * s, 0.0)
    np.testing.assert_allclose(dg, want_dg, rtol=2e-6, atol=0)
    np.testing.assert_allclose(du, want_du, rtol=2e-6, atol=0)
    assert dg[0] == 0 and dg[2] == 0 and dg[9] == 0 and dg[1] != 0  # the gate at, past and far past the limit
    assert du[4] == 0 and du[5] == 0 and du[7] == 0 and du[10] == 0 and du[6] != 0


def test_vjp_of_nan():
    """A NaN gate gives NaN in dg (the masks multiply, as in the reference); a NaN up, NaN in dg only."""
    x = np.zeros((1, 8), np.float32)
    x[0, 0] = np.nan  # a gate (interleaved)
    x[0, 3] = np.nan  # an up
    dy = np.ones((1, 4), np.float32)
    dx = braze.ops.swiglu_clamped_vjp(x, dy)
    want = ref.swiglu_clamped_vjp(x.astype(np.float64), dy.astype(np.float64))
    assert np.array_equal(np.isnan(dx), np.isnan(want)) and np.isnan(dx[0, [0, 2]]).all()


def test_torch_peers_match_the_reference():
    torch = pytest.importorskip("torch")
    from braze.bench import peers

    for spec in SPECS:
        fn = peers.torch_op(spec)
        if fn is spec.reference:
            continue
        for case in spec.cases:
            args, kw = spec.make_inputs(tuple(spec.shapes[0]), "float32", np.random.default_rng(0), case, False)
            want = spec.reference(*[testing.to_numpy64(a) for a in args], **kw)
            got = fn(*[torch.from_numpy(np.ascontiguousarray(a)) for a in args], **kw)
            res = testing.compare(got, want, spec.tolerance("float32"))
            assert res.ok, f"{spec.name} {case}: {res.message}"


# ---------------------------------------------------------------- errors: named, and nothing written
def untouched(exc, match, fn, *outs):
    with pytest.raises(exc, match=match):
        fn()
    for o in outs:
        assert np.all(o == 7.0), "output written before the error"


X = np.random.default_rng(9).normal(size=(4, 64)).astype(np.float32)


def sevens(shape, dtype=np.float32):
    return np.full(shape, 7.0, dtype)


@pytest.mark.parametrize("name", ["silu_and_mul", "gelu_and_mul", "swiglu_clamped"])
def test_gated_odd_last_axis(name):
    o = sevens((4, 31))
    untouched(ValueError, "x: the last axis of a gated op .* must be even, got 63",
              lambda: getattr(braze.ops, name)(X[:, :63], out=o), o)


def test_gated_out_shape_and_dtype():
    o = sevens((4, 64))
    untouched(ValueError, r"out must have shape \(4, 32\) \(x's shape with the last axis halved\), got \(4, 64\)",
              lambda: braze.ops.silu_and_mul(X, out=o), o)
    o = sevens((4, 32), np.float16)
    untouched(TypeError, "out must be float32, got float16", lambda: braze.ops.silu_and_mul(X, out=o), o)


def test_gated_out_may_not_overlap_x():
    x = X.copy()
    untouched(ValueError, "out overlaps x", lambda: braze.ops.silu_and_mul(x, out=x[:, :32]))


def test_options_checked():
    o = sevens((4, 32))
    untouched(ValueError, "approximate must be 'none' or 'tanh', got 'erf'",
              lambda: braze.ops.gelu_and_mul(X, approximate="erf", out=o), o)
    untouched(TypeError, "interleaved must be a bool, got int", lambda: braze.ops.silu_and_mul(X, interleaved=1, out=o), o)
    untouched(ValueError, "limit must be a number > 0, got -1.0", lambda: braze.ops.swiglu_clamped(X, limit=-1, out=o), o)
    untouched(ValueError, "alpha must be a finite number, got nan",
              lambda: braze.ops.swiglu_clamped(X, alpha=float("nan"), out=o), o)
    untouched(TypeError, "alpha must be a real number", lambda: braze.ops.swiglu_clamped(X, alpha="1", out=o), o)


def test_activation_dtype():
    untouched(TypeError, "x must be float32, float16 or bfloat16, got float64", lambda: braze.ops.silu(X.astype(np.float64)))


@pytest.mark.parametrize("name,kw", VJP_CASES[::2])
def test_vjp_dy_checked(name, kw):
    """dy: its shape (the forward output's), its dtype (x's), apart from out; named, nothing written."""
    fn = getattr(braze.ops, name + "_vjp")
    h = X.shape[-1] // 2 if name.endswith("_mul") or name == "swiglu_clamped" else X.shape[-1]
    o = sevens(X.shape)
    untouched(ValueError, rf"dy must have shape \(4, {h}\) \(.*\), got \(4, {h + 1}\)",
              lambda: fn(X, np.ones((4, h + 1), np.float32), **kw, out=o), o)
    untouched(TypeError, "dy must be float32, got float16", lambda: fn(X, np.ones((4, h), np.float16), **kw, out=o), o)
    untouched(TypeError, "dy must be float32, got float64", lambda: fn(X, np.ones((4, h)), **kw, out=o), o)
    o = sevens((4, 62))
    untouched(ValueError, r"out must have shape \(4, 64\) \(that of x\), got \(4, 62\)",
              lambda: fn(X, np.ones((4, h), np.float32), **kw, out=o), o)
    buf = np.ones((4, 2 * X.shape[-1]), np.float32)
    untouched(ValueError, "out overlaps dy", lambda: fn(X, buf[:, :h], **kw, out=buf[:, :X.shape[-1]]))


def test_ids_of_a_float_dtype():
    o = sevens((3, 64))
    untouched(TypeError, "ids must be int32 or int64, got float32",
              lambda: braze.ops.embedding(np.zeros(3, np.float32), X, out=o), o)


def test_table_not_2d():
    untouched(ValueError, r"table must be 2-D \[vocab, dim\], got shape \(2, 4, 64\)",
              lambda: braze.ops.embedding(np.zeros(3, np.int32), np.zeros((2, 4, 64), np.float32)))
    untouched(ValueError, r"table must be 2-D", lambda: braze._cpu.embedding(
        np.zeros(3, np.int32), np.zeros(64, np.float32), np.zeros((3, 64), np.float32)))


def test_embedding_out_checked():
    ids = np.array([0, 1, 2], np.int64)
    o = sevens((3, 63))
    untouched(ValueError, r"out must have shape \(3, 64\) \(ids' shape \+ \(dim,\)\)",
              lambda: braze.ops.embedding(ids, X, out=o), o)
    o = sevens((3, 64), np.float16)
    untouched(TypeError, "out must be float32, got float16", lambda: braze.ops.embedding(ids, X, out=o), o)
    table = X.copy()
    untouched(ValueError, "out overlaps table", lambda: braze.ops.embedding(ids, table, out=table[:3]))


@pytest.mark.parametrize("n", [3, 100, 36, 65536, 28 * 2048, 0])
def test_hadamard_size_outside_the_set_lists_the_sizes(n):
    x = np.ones((2, n), np.float32)
    o = sevens((2, n))
    untouched(ValueError, r"x: hadamard needs a last axis n = m \* 2\*\*k with m in \{1, 12, 20, 28\} and n <= 32768 "
              r"\(1, 2, 4, \.\.\., 32768; 12, 24, \.\.\., 24576; 20, 40, \.\.\., 20480; 28, 56, \.\.\., 28672\), "
              rf"got {n}", lambda: braze.ops.hadamard(x, out=o), o)


def test_hadamard_scale_and_out():
    x = np.ones((2, 64), np.float32)
    o = sevens((2, 64))
    untouched(ValueError, "scale must be a finite number", lambda: braze.ops.hadamard(x, scale=float("inf"), out=o), o)
    buf = np.ones((3, 64), np.float32)
    untouched(ValueError, "out overlaps x", lambda: braze.ops.hadamard(buf[:2], out=buf[1:]))
    o = sevens((2, 32))
    untouched(ValueError, r"out must have shape \(2, 64\)", lambda: braze.ops.hadamard(x, out=o), o)
