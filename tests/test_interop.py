"""Same array type out as in, device preserved, zero copy with out=, for every installed framework."""
import numpy as np
import pytest

import ml_dtypes
from braze import norm

rng = np.random.default_rng(0)


def test_numpy_in_numpy_out_each_dtype():
    for dt in (np.float32, np.float16, ml_dtypes.bfloat16):
        x = rng.normal(size=(3, 40)).astype(dt)
        y = norm.rms_norm(x, np.ones(40, dt))
        assert type(y) is np.ndarray and y.dtype == x.dtype and y.shape == x.shape


def test_numpy_out_is_the_same_buffer():
    x = rng.normal(size=(3, 40)).astype(np.float32)
    out = np.empty_like(x)
    y = norm.rms_norm(x, out=out)
    assert y is out and y.ctypes.data == out.ctypes.data


def test_numpy_views_without_copy():
    """Per-head slices of a fused buffer are taken as they are (strided rows)."""
    qkv = rng.normal(size=(5, 3, 64)).astype(np.float32)
    q = qkv[:, 0, :]
    out = np.empty((5, 64), np.float32)
    norm.rms_norm(q, out=out)
    np.testing.assert_allclose(out, norm.rms_norm(np.ascontiguousarray(q)), rtol=1e-6)


def test_torch_cpu():
    torch = pytest.importorskip("torch")
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        x = torch.randn(3, 40, dtype=dt)
        w = torch.randn(40, dtype=dt)
        y = norm.rms_norm(x, w)
        assert isinstance(y, torch.Tensor) and y.dtype == dt and y.device == x.device
        ref = torch.nn.functional.rms_norm(x.float(), (40,), w.float(), 1e-6)
        assert torch.allclose(y.float(), ref, rtol=2e-2, atol=2e-2)


def test_torch_out_zero_copy_and_in_place_residual():
    torch = pytest.importorskip("torch")
    x, r, w = torch.randn(3, 40), torch.randn(3, 40), torch.randn(40)
    out = torch.empty(3, 40)
    ptr = r.data_ptr()
    y, h = norm.add_rms_norm(x, r.clone(), w, out=out)
    y2, h2 = norm.add_rms_norm(x, r, w, residual_out=r)
    assert y is out and h2 is r and r.data_ptr() == ptr
    assert torch.equal(h, h2)


def test_torch_requires_grad_input():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 16, requires_grad=True)
    y = norm.layer_norm(x)
    assert isinstance(y, torch.Tensor) and not y.requires_grad


def test_jax_cpu():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.asarray(rng.normal(size=(3, 40)).astype(np.float32))
    y = norm.rms_norm(x)
    assert type(y).__module__.split(".")[0] in ("jax", "jaxlib")
    np.testing.assert_allclose(np.asarray(y), norm.rms_norm(np.asarray(x)), rtol=1e-6)
    with pytest.raises(TypeError, match="immutable"):
        norm.rms_norm(x, out=jnp.zeros((3, 40)))


def test_mlx_cpu():
    mx = pytest.importorskip("mlx.core")
    x = mx.array(rng.normal(size=(3, 40)).astype(np.float32))
    y = norm.rms_norm(x)
    assert isinstance(y, mx.array)
    np.testing.assert_allclose(np.array(y), norm.rms_norm(np.array(x)), rtol=1e-6)


@pytest.mark.parametrize("fw", ["numpy", "torch", "jax", "mlx"])
def test_bfloat16_from_every_framework(fw):
    """bfloat16 is carried by each array: a bf16 weight with a float32 x is a
    TypeError naming the weight's dtype, a uint16 array stays uint16, and
    every framework's bf16 arrays give the numpy (ml_dtypes) result."""
    x = rng.normal(size=(2, 8)).astype(ml_dtypes.bfloat16)
    want = norm.rms_norm(x)
    if fw == "numpy":
        y = want
    elif fw == "torch":
        torch = pytest.importorskip("torch")
        t = torch.from_numpy(x.view(np.uint16).astype(np.int32)).to(torch.int16).view(torch.bfloat16)
        y = norm.rms_norm(t)
        assert y.dtype == torch.bfloat16
        y = y.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    elif fw == "jax":
        jnp = pytest.importorskip("jax.numpy")
        y = norm.rms_norm(jnp.asarray(x))
        assert y.dtype == jnp.bfloat16
    else:
        mx = pytest.importorskip("mlx.core")
        y = norm.rms_norm(mx.array(x.astype(np.float32)).astype(mx.bfloat16))
        assert y.dtype == mx.bfloat16
        y = np.array(y.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    assert np.asarray(y).astype(np.float32).tobytes() == want.astype(np.float32).tobytes()
    with pytest.raises(TypeError, match="weight must be float32, got bfloat16"):
        norm.rms_norm(x.astype(np.float32), np.ones(8, ml_dtypes.bfloat16))
    with pytest.raises(TypeError, match="got uint16"):
        norm.rms_norm(x.view(np.uint16))
