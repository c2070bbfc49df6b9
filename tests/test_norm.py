"""Parity of every norm op x backend x dtype x shape x option case, generated from the registry."""
import numpy as np
import pytest

import braze
from braze import _spec, testing
from conftest import cpu_isa, parity_test

SPECS = _spec.ops("norm")


test_parity = parity_test(SPECS)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_add_rms_norm_in_place(dtype):
    spec = _spec.get("add_rms_norm")
    (x, res, w), kw = spec.make_inputs((6, 300), dtype, np.random.default_rng(1), {}, False)
    ref_y, ref_h = spec.reference(testing.to_numpy64(x), testing.to_numpy64(res), testing.to_numpy64(w), **kw)
    y, h = braze.norm.add_rms_norm(x, res, w, residual_out=res, **kw)
    assert h is res
    assert testing.compare(h, ref_h, spec.tolerance(dtype)).ok
    assert testing.compare(y, ref_y, spec.tolerance(dtype)).ok


def test_long_row_262144():
    spec = _spec.get("rms_norm")
    assert testing.check(spec, "cpu", "float32", (2, 262144)).ok


def test_vjp_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 96)).astype(np.float32)
    w = rng.normal(1, 0.2, size=96).astype(np.float32)
    b = rng.normal(size=96).astype(np.float32)
    dy = rng.normal(size=(7, 96)).astype(np.float32)
    xt, wt, bt = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    torch.nn.functional.rms_norm(xt, (96,), wt, 1e-6).backward(torch.tensor(dy, dtype=torch.float64))
    dx, dw = braze.norm.rms_norm_vjp(x, w, dy, eps=1e-6)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-4, atol=1e-4)
    xt.grad = wt.grad = None
    torch.nn.functional.layer_norm(xt, (96,), wt, bt, 1e-5).backward(torch.tensor(dy, dtype=torch.float64))
    dx, dw, db = braze.norm.layer_norm_vjp(x, w, b, dy, eps=1e-5)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db, bt.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("dtype", _spec.FLOAT_DTYPES)
def test_every_cpu_isa(isa, dtype):
    """Each instruction-set build of the CPU kernels agrees with the reference."""
    with cpu_isa(isa):
        for spec in SPECS:
            for shape in ((3, 33), (2, 4096), (1, 7)):
                for case in spec.cases:
                    res = testing.check(spec, "cpu", dtype, shape, case)
                    assert res.ok, f"{spec.name} {shape} {case} on {isa}: {res.message}"
