"""Bad input -> a clear TypeError / ValueError naming the argument, and nothing written."""
import numpy as np
import pytest

import braze
from braze import norm

rng = np.random.default_rng(0)
X = rng.normal(size=(4, 64)).astype(np.float32)
W = rng.normal(size=64).astype(np.float32)


def fresh_out(shape=(4, 64), dtype=np.float32):
    return np.full(shape, 7.0, dtype)


def raises(exc, match, fn, *outs):
    """fn must raise exc matching `match`, and every out must still hold 7.0."""
    with pytest.raises(exc, match=match):
        fn()
    for o in outs:
        assert np.all(o == 7.0), "output written before the error"


def test_x_not_an_array():
    raises(TypeError, "x must be an array", lambda: norm.rms_norm([[1.0, 2.0]]))


def test_weight_not_an_array():
    raises(TypeError, "weight must be an array", lambda: norm.rms_norm(X, [1.0] * 64))


def test_x_integer_dtype():
    o = fresh_out()
    raises(TypeError, "x must be float32, float16 or bfloat16, got int32",
           lambda: norm.rms_norm(X.astype(np.int32), None, out=o.astype(np.int32)))


def test_x_float64_rejected():
    raises(TypeError, "x must be float32, float16 or bfloat16, got float64", lambda: norm.rms_norm(X.astype(np.float64)))


def test_weight_dtype_mismatch():
    o = fresh_out()
    raises(TypeError, "weight must be float32, got float16", lambda: norm.rms_norm(X, W.astype(np.float16), out=o), o)


def test_weight_wrong_length():
    o = fresh_out()
    raises(ValueError, r"weight must have shape \(64,\)", lambda: norm.rms_norm(X, W[:63], out=o), o)


def test_out_wrong_shape():
    o = fresh_out((4, 63))
    raises(ValueError, r"out must have shape \(4, 64\)", lambda: norm.rms_norm(X, W, out=o), o)


def test_out_wrong_dtype():
    o = fresh_out(dtype=np.float16)
    raises(TypeError, "out must be float32, got float16", lambda: norm.rms_norm(X, W, out=o), o)


def test_out_read_only():
    o = fresh_out()
    o.flags.writeable = False
    raises(ValueError, "out is read-only", lambda: norm.rms_norm(X, W, out=o), o)


def test_last_axis_not_contiguous():
    x = rng.normal(size=(4, 128)).astype(np.float32)[:, ::2]
    o = fresh_out()
    raises(ValueError, "x: the last axis must be contiguous", lambda: norm.rms_norm(x, W, out=o), o)


def test_leading_axes_not_rows():
    x = np.ascontiguousarray(rng.normal(size=(3, 4, 64)).astype(np.float32).transpose(1, 0, 2))
    x = x.transpose(1, 0, 2)  # strides no longer form one row sequence
    o = fresh_out((3, 4, 64))
    raises(ValueError, "x: the leading axes", lambda: norm.rms_norm(x, W, out=o), o)


def test_out_aliases_x():
    x = X.copy()
    raises(ValueError, "out overlaps x", lambda: norm.rms_norm(x, W, out=x))


def test_residual_shape_mismatch():
    o, h = fresh_out(), fresh_out()
    raises(ValueError, r"residual must have shape \(4, 64\)",
           lambda: norm.add_rms_norm(X, X[:3].copy(), W, out=o, residual_out=h), o, h)


def test_residual_out_overlapping_x():
    x, r, o = X.copy(), X.copy(), fresh_out()
    raises(ValueError, "residual_out overlaps x", lambda: norm.add_rms_norm(x, r, W, out=o, residual_out=x), o)


def test_group_size_not_dividing():
    o = fresh_out()
    raises(ValueError, "group_size must divide", lambda: norm.rms_norm_gated(X, X, W, group_size=48, out=o), o)


def test_group_size_not_positive():
    raises(ValueError, "group_size must be positive", lambda: norm.rms_norm_gated(X, X, W, group_size=0))


def test_eps_negative():
    o = fresh_out()
    raises(ValueError, "eps must be a finite number >= 0", lambda: norm.rms_norm(X, W, eps=-1.0, out=o), o)


def test_eps_not_a_number():
    raises(TypeError, "eps must be a real number", lambda: norm.rms_norm(X, W, eps="1e-6"))


def test_vjp_out_not_a_tuple():
    raises(TypeError, "out must be a tuple of 2 arrays", lambda: norm.rms_norm_vjp(X, W, X, out=fresh_out()))


def test_vjp_dy_shape():
    dx, dw = fresh_out(), np.full(64, 7.0, np.float32)
    raises(ValueError, r"dy must have shape \(4, 64\)", lambda: norm.rms_norm_vjp(X, W, X[:2], out=(dx, dw)), dx, dw)


def test_too_many_axes():
    x = np.ones((1,) * 9 + (4,), np.float32)
    raises(ValueError, "at most 8 are supported", lambda: norm.rms_norm(x))


def test_torch_mixed_dtype():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 64)
    o = torch.full((4, 64), 7.0)
    with pytest.raises(TypeError, match="weight must be float32, got bfloat16"):
        norm.rms_norm(x, torch.ones(64, dtype=torch.bfloat16), out=o)
    assert bool((o == 7.0).all())


def test_cpu_isa_name_checked():
    with pytest.raises(ValueError, match="isa must be one of"):
        braze._cpu.set_isa("sse9")


# ---------------------------------------------------------------- issue 12: dtypes, rope axes, numbers, grad
def test_numpy_fp8_names_the_argument_and_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    o = fresh_out()
    for x, w, name in ((X.astype(ml_dtypes.float8_e4m3fn), None, "x"), (X, W.astype(ml_dtypes.float8_e5m2), "weight")):
        raises(TypeError, rf"{name} has dtype float8_e\w+, .*float32, float16 or bfloat16",
               lambda: norm.rms_norm(x, w, out=o), o)


def test_torch_fp8_names_the_argument_and_dtypes():
    torch = pytest.importorskip("torch")
    x = torch.randn(4, 64)
    o = torch.full((4, 64), 7.0)
    with pytest.raises(TypeError, match="^x must be float32, float16 or bfloat16"):
        norm.rms_norm(x.to(torch.float8_e4m3fn))
    with pytest.raises(TypeError, match="^weight must be float32"):
        norm.rms_norm(x, torch.ones(64).to(torch.float8_e4m3fn), out=o)
    assert bool((o == 7.0).all())


def test_unsupported_dtype_of_a_sampling_parameter():
    from braze import sampling

    logits = rng.normal(size=(2, 16)).astype(np.float32)
    with pytest.raises(TypeError, match="temperature must be float32, got float64"):
        sampling.sample(logits, temperature=np.ones(2))
    with pytest.raises(TypeError, match="top_k must be int32, got int64"):
        sampling.sample(logits, top_k=np.ones(2, np.int64))


def test_rope_without_a_heads_axis_says_so():
    from braze import rope

    x = rng.normal(size=(3, 64)).astype(np.float32)
    o = fresh_out((3, 64))
    raises(ValueError, r"x of shape \(3, 64\) has no heads axis.*x\[\.\.\., None, :\]",
           lambda: rope.rope(x, np.arange(3, dtype=np.int32), out=o), o)
    raises(ValueError, "q of shape .* has no heads axis",
           lambda: rope.rope_qk(x, x.copy(), np.arange(3, dtype=np.int32)))


@pytest.mark.parametrize("kwargs, text", [
    (dict(top_k=2 ** 40), "top_k must be an integer >= 0 (0 disables it), got 1099511627776"),
    (dict(top_k=-3), "top_k must be an integer >= 0 (0 disables it), got -3"),
    (dict(top_k=2 ** 70), "top_k must be an integer in [0, 2**31), got 1180591620717411303424"),
    (dict(top_p=1.0000001), "top_p must be in (0, 1] (1 disables it), got 1.0000001"),
    (dict(temperature=-1e-7), "temperature must be a finite number >= 0 (0 is greedy), got -1e-07"),
    (dict(min_p=123456.0), "min_p must be in [0, 1] (0 disables it), got 123456.0"),
    (dict(top_p=np.array([0.5, 0.1 + 1], np.float32)), "top_p[1] must be in (0, 1] (1 disables it), got 1.1"),
])
def test_numbers_print_as_given(kwargs, text):
    from braze import sampling

    logits = rng.normal(size=(2, 16)).astype(np.float32)
    with pytest.raises(ValueError) as e:
        sampling.sample(logits, **kwargs)
    assert str(e.value) == text


def test_float_options_print_with_repr_precision():
    from braze import rope, sampling

    x = rng.normal(size=(2, 1, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"eps must be a finite number >= 0, got -1e-06$"):
        norm.rms_norm(X, eps=-1e-6)
    with pytest.raises(ValueError, match=r"base must be a finite number > 0, got -10000.0$"):
        rope.rope(x, np.arange(2, dtype=np.int32), base=-1e4)
    with pytest.raises(ValueError, match=r"repetition must be a finite number > 0, got 0.0$"):
        sampling.apply_penalties(X, np.zeros((4, 2), np.int32), repetition=0.0)


def test_requires_grad_warns_once(monkeypatch):
    torch = pytest.importorskip("torch")
    from braze import _arrays

    monkeypatch.setattr(_arrays, "_detach_warned", False)
    x = torch.randn(2, 16, requires_grad=True)
    with pytest.warns(UserWarning, match=r"not differentiable yet.*detach\(\).*_vjp") as rec:
        norm.rms_norm(x)
    assert rec[0].filename == __file__  # points at the caller's line, not into braze
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        norm.rms_norm(x)  # once per process
        norm.rms_norm(torch.randn(2, 16))


def test_quant_matmul_x_rows_that_do_not_merge():
    """x whose leading axes are not one strided row axis: a ValueError naming x, no silent copy."""
    w = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    qw = braze.quant.quantize(w, "q8_0")
    x = np.ones((3, 4, 64), np.float32).transpose(1, 0, 2)  # [4, 3, 64], rows 64 and 256 apart
    with pytest.raises(ValueError, match="x's leading axes must merge"):
        braze.quant.matmul(x, qw)
    y = braze.quant.matmul(np.ascontiguousarray(x), qw)  # the same values, one row axis: fine
    assert y.shape == (4, 3, 8)
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="x's leading axes must merge"):
        braze.quant.matmul(torch.from_numpy(x), qw)
