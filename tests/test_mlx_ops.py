"""braze ops as mx.custom_function: every registry op wrapped, eager equal to
the plain function, mx.grad against mx.grad of the reference composition,
mx.vmap against a loop, mx.compile (which records the reference composition)."""
import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")

import braze  # noqa: E402
from braze import _spec, testing  # noqa: E402
from braze.integrations import mlx as bm  # noqa: E402

SPECS = _spec.ops()
# the registry specs whose functions are numpy adapters around the kernel (byte views): see test_jax_ops
ADAPTERS = [s.name for s in SPECS if s.name.startswith("quantize_q")
            or (s.name.startswith("quantize_activations_") and s.name != "quantize_activations_int8")]


def _inputs(spec, seed=0):
    args, kwargs = spec.make_inputs(spec.shapes[0], "float32", np.random.default_rng(seed), spec.cases[0], False)
    return list(args), dict(kwargs)


def _mx(v):
    return mx.array(np.ascontiguousarray(v)) if isinstance(v, np.ndarray) else v


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


def test_every_registry_op_has_an_mlx_function():
    assert sorted(bm.OPS) == sorted(s.name for s in SPECS)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.name not in ADAPTERS], ids=lambda s: s.name)
def test_eager_matches_the_plain_function(spec):
    """The same results as the plain function on the same MLX arrays, or the same error (append_kv:
    mlx arrays are immutable)."""
    args, kwargs = _inputs(spec)
    margs, mkw = [_mx(a) for a in args], {k: _mx(v) for k, v in kwargs.items()}
    try:
        want = _tuple(spec.fn(*margs, **mkw))
    except (TypeError, ValueError) as e:
        with pytest.raises(type(e)) as got:
            bm.call(spec.name, *margs, **mkw)
        assert str(got.value) == str(e)
        return
    got = _tuple(bm.call(spec.name, *margs, **mkw))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        assert g.dtype == w.dtype and g.shape == w.shape
        assert mx.array_equal(g, w, equal_nan=True).item()


@pytest.mark.parametrize("name", sorted(bm.BACKWARD))
def test_grad_matches_grad_of_the_reference(name):
    spec = _spec.get(name)
    args, kwargs = _inputs(spec, seed=3)
    margs, mkw = [_mx(a) for a in args], {k: _mx(v) for k, v in kwargs.items()}
    floats = [i for i, a in enumerate(margs) if isinstance(a, mx.array) and a.dtype == mx.float32 and a.ndim > 0]
    with testing.force_reference():
        outs = _tuple(spec.fn(*args, **kwargs))
    rng = np.random.default_rng(7)
    weights = [mx.array(rng.standard_normal(o.shape).astype(np.float32)) for o in outs if o is not None]

    def loss(fn):
        def f(*fl):
            a = list(margs)
            for i, v in zip(floats, fl):
                a[i] = v
            res = [o for o in _tuple(fn(*a, **mkw)) if o is not None]
            return sum((o * w).sum() for o, w in zip(res, weights))
        return f

    got = mx.grad(loss(bm.OPS[name]), argnums=tuple(range(len(floats))))(*[margs[i] for i in floats])
    if spec.family == "rope":
        # rope's reference composition does not run on MLX arrays; rope is linear in q / k, so its
        # gradient is checked by the adjoint identity <grad, v> = loss(v) on random directions
        vs = [mx.array(rng.standard_normal(margs[i].shape).astype(np.float32)) for i in floats]
        lhs = sum((g * v).sum() for g, v in zip(_tuple(got), vs)).item()
        assert abs(lhs - loss(bm.OPS[name])(*vs).item()) <= 1e-3 * max(1.0, abs(lhs))
        return
    want = mx.grad(loss(spec.reference), argnums=tuple(range(len(floats))))(*[margs[i] for i in floats])
    for i, g, w in zip(floats, _tuple(got), _tuple(want)):
        res = testing.compare(np.array(g), np.array(w), (1e-4, 1e-4), f"grad[{i}]")
        assert res.ok, f"{name}: {res.message}"


def test_vmap_matches_a_loop():
    rng = np.random.default_rng(0)
    x = mx.array(rng.standard_normal((4, 3, 64)).astype(np.float32))
    w = mx.array(rng.standard_normal((4, 64)).astype(np.float32))
    one = mx.vmap(lambda x: bm.call("rms_norm", x, w[0]))(x)           # one call over the batch
    each = mx.vmap(lambda x, w: bm.call("rms_norm", x, w))(x, w)        # weight batched: per element
    dx, dw = mx.vmap(lambda x, w: bm.call("rms_norm_vjp", x, w, x))(x, w)  # dweight: a reduction, per element
    for b in range(4):
        xb, wb = np.array(x[b]), np.array(w[b])
        np.testing.assert_array_equal(np.array(one[b]), braze.norm.rms_norm(xb, np.array(w[0])))
        np.testing.assert_array_equal(np.array(each[b]), braze.norm.rms_norm(xb, wb))
        ex, ew = braze.norm.rms_norm_vjp(xb, wb, xb)
        np.testing.assert_array_equal(np.array(dx[b]), ex)
        np.testing.assert_array_equal(np.array(dw[b]), ew)


def test_compile_runs_the_reference_composition():
    rng = np.random.default_rng(0)
    x = mx.array(rng.standard_normal((3, 128)).astype(np.float32))

    def block(x):
        return bm.call("silu_and_mul", bm.call("rms_norm", x))

    got = mx.compile(block)(x)
    with testing.force_reference():
        want = braze.ops.silu_and_mul(braze.norm.rms_norm(np.array(x)))
    assert testing.compare(np.array(got), want, (2e-5, 2e-5)).ok
    g = mx.compile(mx.grad(lambda x: block(x).sum()))(x)
    assert testing.compare(np.array(g), np.array(mx.grad(lambda x: block(x).sum())(x)), (1e-4, 1e-4)).ok


def test_bad_arguments_raise_as_the_plain_function():
    x = mx.ones((2, 64))
    for call, args, kw in [(braze.norm.rms_norm, (x, mx.ones((32,))), {}),
                           (braze.ops.gelu, (x,), {"approximate": "cubic"})]:
        with pytest.raises((TypeError, ValueError)) as plain:
            call(*args, **kw)
        with pytest.raises(type(plain.value)) as wrapped:
            bm.call(call.__name__, *args, **kw)
        assert str(wrapped.value) == str(plain.value)
    with pytest.raises(TypeError, match="immutable"):
        bm.call("rms_norm", x, out=x)


def test_vmap_of_a_rowwise_op_is_one_kernel_call(monkeypatch):
    calls = []
    plain = bm._plain
    monkeypatch.setattr(bm, "_plain", lambda *a: calls.append(1) or plain(*a))
    x = mx.array(np.random.default_rng(0).standard_normal((6, 3, 64)).astype(np.float32))
    w = mx.ones((64,))
    y = mx.vmap(lambda x: bm.call("rms_norm", x, w))(x)
    mx.eval(y)
    assert len(calls) == 2  # the forward trace (reference, on placeholders) and one kernel call on the batch
    calls.clear()
    mx.eval(mx.vmap(lambda x, w: bm.call("rms_norm", x, w))(x, mx.ones((6, 64))))
    assert len(calls) == 1 + 1 + 6  # trace, the batched call the kernel refuses (weight [6, 64]), one per element
