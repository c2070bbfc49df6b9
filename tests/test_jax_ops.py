"""braze ops under jax through XLA FFI: every registry op wrapped, jit against
eager braze and the reference, grad through custom_vjp against grad of the
reference composition, vmap, and bad arguments raising at trace time."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", False)

import braze  # noqa: E402
from braze import _spec, testing  # noqa: E402

bj = pytest.importorskip("braze.integrations.jax", exc_type=ImportError)
from braze.integrations import _jax_grads  # noqa: E402

SPECS = _spec.ops()


def _gpu():
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def _int32(v):
    """int64 arrays as jax holds them without jax_enable_x64 (int32), for eager and jit alike."""
    if isinstance(v, np.ndarray) and v.dtype == np.int64 and not jax.config.jax_enable_x64:
        return v.astype(np.int32)
    return v


def _inputs(spec, dtype="float32", case=0, seed=0, shape=None):
    rng = np.random.default_rng(seed)
    args, kwargs = spec.make_inputs(shape or spec.shapes[0], dtype, rng, spec.cases[case], False)
    return [_int32(a) for a in args], {k: _int32(v) for k, v in kwargs.items()}


def _split(args, kwargs):
    """(the arrays, a function rebuilding the call from them): arrays are jit arguments, the rest static."""
    flat = [("a", i, v) for i, v in enumerate(args)] + [("k", k, v) for k, v in kwargs.items()]
    arrays = [np.ascontiguousarray(v) for _, _, v in flat if isinstance(v, np.ndarray)]

    def rebuild(*arrs):
        it = iter(arrs)
        a = [next(it) if isinstance(v, np.ndarray) else v for _, _, v in flat[:len(args)]]
        k = {n: next(it) if isinstance(v, np.ndarray) else v for _, n, v in flat[len(args):]}
        return a, k
    return arrays, rebuild


def _jitted(spec, args, kwargs):
    arrays, rebuild = _split(args, kwargs)

    def run(*arrs):
        a, k = rebuild(*arrs)
        return bj.call(spec.name, *a, **k)
    return jax.jit(run)(*[jnp.asarray(a) for a in arrays])


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def test_every_registry_op_has_a_jax_function():
    missing = [s.name for s in SPECS if s.name not in bj.OPS]
    assert not missing, f"registry ops with no JAX function: {missing}"


def _nb_kinds(fn):
    """'a' (array) or 's' (scalar) per parameter of a nanobind entry point, stream and workspace left out."""
    sig = fn.__nb_signature__[0][0]
    body, depth, parts, cur = sig[sig.index("(") + 1:sig.rindex(")")], 0, [], ""
    for ch in body:
        depth += ch in "[(" and 1 or ch in "])" and -1 or 0
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    named = [(p.split(":")[0].strip(), p.split(":", 1)[1]) for p in parts if ":" in p]
    return [("a" if "ndarray" in t else "s") for n, t in named if n not in ("stream", "workspace")]


def test_the_ffi_table_mirrors_the_native_entry_points():
    """Each FFI entry's slots are the nanobind entry point's parameters: arrays and scalars, in order."""
    from braze import _cpu

    for native, slots in bj.DECLS.items():
        ours = ["a" if s.kind == "a" else "s" for s in slots if s.name != "workspace"]
        assert ours == _nb_kinds(getattr(_cpu, native)), native


def _numpy_adapter(spec):
    """The registry's quantize specs call numpy-only adapters (byte views) after the kernel: no JAX wrapping
    through them yet (docs/jax.md, "Not covered")."""
    return spec.name.startswith("quantize_q") or (spec.name.startswith("quantize_activations_")
                                                  and spec.name != "quantize_activations_int8")


@pytest.mark.parametrize("spec", [pytest.param(s, marks=pytest.mark.xfail(
    strict=True, raises=AttributeError, reason="numpy-only registry adapter")) if _numpy_adapter(s) else s
    for s in SPECS], ids=lambda s: s.name)
def test_jit_matches_eager_and_reference(spec):
    for case in range(len(spec.cases)):
        args, kwargs = _inputs(spec, case=case)
        got = _tuple(_jitted(spec, args, kwargs))
        eager = _tuple(spec.fn(*args, **kwargs))
        with testing.force_reference():
            ref = _tuple(spec.fn(*args, **kwargs))
        assert len(got) == len(eager)
        for i, (g, e, r) in enumerate(zip(got, eager, ref)):
            if e is None:
                assert g is None
                continue
            g = np.asarray(g)
            assert g.shape == e.shape and g.dtype == e.dtype, (i, g.shape, e.shape, g.dtype, e.dtype)
            np.testing.assert_array_equal(g, e, err_msg=f"{spec.name} case {case} out[{i}]: jit != eager")
            if not spec.host_reference or spec.family == "quant":
                # the CPU GEMV's int8 activations add a bounded error by design (OpSpec.err_bound)
                args64 = [testing.to_numpy64(a) if isinstance(a, np.ndarray) else a for a in args]
                bound = spec.err_bound(args64, kwargs, "cpu", "float32") if spec.err_bound else None
                res = testing.compare(g, r, spec.tolerance("float32"), f"out[{i}]", bound)
                assert res.ok, f"{spec.name} case {case}: {res.message}"


@pytest.mark.parametrize("name", ["rms_norm", "add_rms_norm", "silu_and_mul", "rope_qk", "softmax"])
def test_jit_bfloat16(name):
    spec = _spec.get(name)
    args, kwargs = _inputs(spec, "bfloat16")
    got = _tuple(_jitted(spec, args, kwargs))
    eager = _tuple(spec.fn(*args, **kwargs))
    for g, e in zip(got, eager):
        assert str(g.dtype) == str(e.dtype)
        np.testing.assert_array_equal(np.asarray(g).astype(np.float32), np.asarray(e).astype(np.float32))


# ---------------------------------------------------------------- grad
def _grad_case(name):
    spec = _spec.get(name)
    args, kwargs = _inputs(spec, seed=3)
    return spec, args, kwargs


@pytest.mark.parametrize("name", sorted(_jax_grads.BACKWARD))
def test_grad_matches_grad_of_the_reference(name):
    spec, args, kwargs = _grad_case(name)
    arrays, rebuild = _split(args, kwargs)
    floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f" and a.ndim > 0]
    rng = np.random.default_rng(7)

    def loss(fn):
        def f(*arrs):
            a, k = rebuild(*arrs)
            outs = _tuple(fn(*a, **k))
            return sum(jnp.sum(o.astype(jnp.float32) * jnp.asarray(rng_w[j]))
                       for j, o in enumerate(outs) if o is not None)
        return f

    with testing.force_reference():
        ref_outs = _tuple(spec.fn(*args, **kwargs))
    rng_w = [rng.standard_normal(o.shape).astype(np.float32) for o in ref_outs if o is not None]
    xs = [jnp.asarray(a) for a in arrays]
    got = jax.grad(loss(bj.OPS[name]), argnums=floats)(*xs)
    want = jax.grad(loss(spec.reference), argnums=floats)(*xs)
    for i, g, w in zip(floats, got, want):
        res = testing.compare(g, w, (1e-4, 1e-4), f"grad[{i}]")
        assert res.ok, f"{name}: {res.message}"


def test_grad_under_jit_and_vmap():
    x = jnp.asarray(np.random.default_rng(1).standard_normal((4, 3, 64)), jnp.float32)
    w = jnp.asarray(np.random.default_rng(2).standard_normal(64), jnp.float32)

    def loss(x, w):
        return jnp.sum(bj.call("rms_norm", x, w, eps=1e-5) ** 2)

    gx, gw = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(0, None)))(x, w)
    for b in range(4):
        ex, ew = jax.grad(loss, argnums=(0, 1))(x[b], w)
        np.testing.assert_allclose(gx[b], ex, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(gw[b], ew, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- vmap
def _has_scan(fn, *args):
    return "scan" in str(jax.make_jaxpr(fn)(*args))


def test_vmap_rowwise_is_one_call():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((5, 3, 64)), jnp.float32)
    w = jnp.asarray(rng.standard_normal(64), jnp.float32)
    f = jax.vmap(lambda x: bj.call("rms_norm", x, w))
    assert not _has_scan(f, x)
    want = braze.norm.rms_norm(np.asarray(x), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), want)
    g = jax.vmap(lambda x: bj.call("silu_and_mul", x))
    assert not _has_scan(g, x)
    np.testing.assert_array_equal(np.asarray(g(x)), braze.ops.silu_and_mul(np.asarray(x)))


def test_vmap_batched_parameters_run_per_element():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((5, 3, 64)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((5, 64)), jnp.float32)
    f = jax.vmap(lambda x, w: bj.call("rms_norm", x, w))
    assert _has_scan(f, x, w)
    want = np.stack([braze.norm.rms_norm(np.asarray(x[b]), np.asarray(w[b])) for b in range(5)])
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x, w)), want)


def test_vmap_reduction_outputs_run_per_element():
    """rms_norm_vjp sums dweight over rows: one call over the batch would sum over it too."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((4, 3, 64)), jnp.float32)
    dy = jnp.asarray(rng.standard_normal((4, 3, 64)), jnp.float32)
    w = jnp.ones(64, jnp.float32)
    dx, dw = jax.vmap(lambda x, dy: bj.call("rms_norm_vjp", x, w, dy))(x, dy)
    assert dw.shape == (4, 64)
    for b in range(4):
        ex, ew = braze.norm.rms_norm_vjp(np.asarray(x[b]), np.asarray(w), np.asarray(dy[b]))
        np.testing.assert_array_equal(np.asarray(dx[b]), ex)
        np.testing.assert_array_equal(np.asarray(dw[b]), ew)


def test_vmap_rope_and_sample():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((3, 4, 2, 32)), jnp.float32)
    pos = jnp.asarray(rng.integers(0, 100, (3, 4)), jnp.int32)
    y = jax.vmap(lambda x, p: bj.call("rope", x, p))(x, pos)
    for b in range(3):
        np.testing.assert_array_equal(np.asarray(y[b]), braze.rope.rope(np.asarray(x[b]), np.asarray(pos[b])))
    logits = jnp.asarray(rng.standard_normal((3, 2, 50)), jnp.float32)
    s = jax.vmap(lambda l: bj.call("sample", l, temperature=0.7, seed=5))(logits)
    for b in range(3):  # each batch element draws as its own call does
        np.testing.assert_array_equal(np.asarray(s[b]), braze.sampling.sample(np.asarray(logits[b]), temperature=0.7,
                                                                              seed=5))


# ---------------------------------------------------------------- errors
def _raises_like_plain(fn, exc, *args, **kwargs):
    with pytest.raises(exc) as plain:
        fn(*[np.asarray(a) for a in args], **kwargs)
    name = fn.__name__
    with pytest.raises(exc) as traced:
        jax.make_jaxpr(lambda *a: bj.call(name, *a, **kwargs))(*args)  # at trace time: nothing runs
    assert str(traced.value) == str(plain.value)


def test_bad_arguments_raise_as_the_plain_function_at_trace_time():
    x = jnp.ones((2, 64), jnp.float32)
    _raises_like_plain(braze.norm.rms_norm, ValueError, x, jnp.ones(32, jnp.float32))  # the kernel's check
    _raises_like_plain(braze.norm.rms_norm, TypeError, x, jnp.ones(64, jnp.float16))
    _raises_like_plain(braze.norm.rms_norm, TypeError, x, eps="small")                  # the Python check
    _raises_like_plain(braze.ops.gelu, ValueError, x, approximate="cubic")
    _raises_like_plain(braze.ops.silu_and_mul, ValueError, jnp.ones((2, 63), jnp.float32))
    _raises_like_plain(braze.ops.hadamard, ValueError, jnp.ones((2, 36), jnp.float32))
    _raises_like_plain(braze.rope.rope, ValueError, jnp.ones((3, 2, 32), jnp.float32), jnp.zeros(4, jnp.int32))
    with pytest.raises(TypeError, match="immutable"):
        bj.call("rms_norm", x, out=x)
    with pytest.raises(TypeError):
        bj.call("rms_norm", x, nonsense=1)


# ---------------------------------------------------------------- CUDA (the lead's H200)
@pytest.mark.cuda
@pytest.mark.skipif(not _gpu(), reason="no jax GPU backend here")
@pytest.mark.parametrize("name", ["rms_norm", "add_rms_norm", "rms_norm_vjp", "rope_qk", "silu_and_mul", "softmax",
                                  "sample", "embedding", "hadamard", "decode"])
def test_cuda_jit_matches_the_reference(name):
    spec = _spec.get(name)
    args, kwargs = _inputs(spec)
    got = _tuple(_jitted(spec, args, kwargs))
    assert all(g is None or g.devices() == {jax.devices("gpu")[0]} for g in got)
    with testing.force_reference():
        ref = _tuple(spec.fn(*args, **kwargs))
    for i, (g, r) in enumerate(zip(got, ref)):
        res = testing.compare(g, r, spec.tolerance("float32"), f"out[{i}]")
        assert res.ok, f"{name}: {res.message}"


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu(), reason="no jax GPU backend here")
def test_cuda_grad_bfloat16():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((8, 256)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal(256), jnp.bfloat16)
    ref = _spec.get("rms_norm").reference

    def loss(fn):
        return lambda x, w: jnp.sum(fn(x, w).astype(jnp.float32) ** 2)

    got = jax.jit(jax.grad(loss(bj.OPS["rms_norm"]), argnums=(0, 1)))(x, w)
    want = jax.grad(loss(ref), argnums=(0, 1))(x, w)
    for g, w_ in zip(got, want):
        assert testing.compare(g, w_, (3e-2, 3e-2)).ok


def test_values_are_checked_when_xla_runs_the_call():
    """Per-row arrays' values do not exist at trace time: the CPU kernels' host checks raise when XLA runs."""
    logits = jnp.zeros((2, 10), jnp.float32)
    f = jax.jit(lambda l, t: bj.call("softmax", l, temperature=t))
    f.lower(logits, jnp.ones(2, jnp.float32))  # traces and lowers: nothing is read
    with pytest.raises(Exception, match=r"temperature\[0\] must be"):
        f(logits, jnp.asarray([-1.0, 1.0], jnp.float32)).block_until_ready()
    with pytest.raises(ValueError, match=r"temperature\[0\] must be"):
        braze.sampling.softmax(np.asarray(logits), temperature=np.asarray([-1.0, 1.0], np.float32))
