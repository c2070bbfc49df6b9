"""The reference fallback (issue 11, bug 2): every op of the registry, forced onto
its reference composition, returns the reference's results, the same number of
them, written into the out= arrays given and freshly made where none is.
"""
import warnings

import numpy as np
import pytest

from braze import _call, _spec, norm, testing


def as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


def poisoned(r):
    out = np.empty_like(r)
    out[...] = np.nan if r.dtype.kind == "f" or r.dtype.kind == "V" or "float" in r.dtype.name else -7
    return out


def same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def out_slots(n):
    """Which outputs get an out= array: all of them, and for several outputs each one alone."""
    yield (True,) * n
    if n > 1:
        for i in range(n):
            yield tuple(j == i for j in range(n))


SPECS = _spec.ops()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_every_op_through_the_forced_fallback(spec, dtype):
    if dtype not in spec.dtypes:
        pytest.skip(f"{spec.name} has no {dtype}")
    rng = np.random.default_rng(2)
    args, kwargs = spec.make_inputs(tuple(spec.shapes[0]), dtype, rng, spec.cases[0], False)
    ref = as_tuple(spec.reference(*args, **kwargs))
    with testing.force_reference(), warnings.catch_warnings():
        warnings.simplefilter("error")  # a forced fallback does not warn
        got = as_tuple(spec.fn(*args, **kwargs))
        assert len(got) == len(ref)
        assert all(same(g, r) for g, r in zip(got, ref))
        for slots in out_slots(len(ref)):
            outs = tuple(poisoned(r) if given and r is not None else None for given, r in zip(slots, ref))
            back = as_tuple(spec.fn(*args, **{**kwargs, **spec.out_kwargs(outs if len(outs) > 1 else outs[0])}))
            assert len(back) == len(ref), f"{len(back)} outputs, the reference has {len(ref)}"
            for o, b, r in zip(outs, back, ref):
                if o is not None:
                    assert b is o, "the out= array given is not the one returned"
                assert same(b, r)


def test_add_rms_norm_in_place_residual_returns_y():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 16)).astype(np.float32)
    r = rng.normal(size=(3, 16)).astype(np.float32)
    want_y, want_h = norm.add_rms_norm(x, r.copy())
    with testing.force_reference():
        y, h = norm.add_rms_norm(x, r, residual_out=r)
    assert y is not None and h is r
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, want_h, rtol=1e-6)


def test_fallback_checks_every_out_before_writing():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 16)).astype(np.float32)
    dx = np.full((3, 16), 7.0, np.float32)
    with testing.force_reference():
        with pytest.raises(ValueError, match=r"out\[1\] must have shape \(16,\)"):
            norm.rms_norm_vjp(x, np.ones(16, np.float32), x, out=(dx, np.empty(15, np.float32)))
        with pytest.raises(TypeError, match="out must be float32, got float16"):
            norm.rms_norm(x, out=np.empty((3, 16), np.float16))
        ro = np.full((3, 16), 7.0, np.float32)
        ro.flags.writeable = False
        with pytest.raises(ValueError, match="out\\[1\\] is read-only"):
            norm.add_rms_norm(x, x, out=dx, residual_out=ro)
    assert np.all(dx == 7.0)


def test_force_reference_restores_the_kernels():
    x = np.ones((2, 8), np.float32)
    before = _call.Call("rms_norm", x).kernel
    assert before is not None
    with testing.force_reference():
        assert _call.Call("rms_norm", x).kernel is None
    assert _call.Call("rms_norm", x).kernel is before
    assert not _call._forced_reference
