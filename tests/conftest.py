import contextlib
import os
import sys
import zlib

import pytest

# the CUDA kernels not yet run on a GPU (braze._call.UNVERIFIED) run in the tests: they are what
# `pytest -m cuda` verifies; read once when braze._call is imported, so set before that
os.environ.setdefault("BRAZE_CUDA_UNVERIFIED", "1")
# JAX takes 75% of the GPU's memory per process unless told otherwise: with
# pytest-xdist's workers beside torch, the jax tests would run out of memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
from braze import _backends, _spec, testing  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mtlsim.pytest_support import simulated  # noqa: E402


def cuda_ready():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and _backends.usable("cuda")


def backend_params():
    """cpu always; cuda (marked) where a GPU, torch and braze._cuda are all here;
    metal through the MSL simulator (braze._metal built against it) on Linux."""
    return [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda,
                         pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")]),
            pytest.param("metal", id="metal", marks=[simulated])]


def on_backend(backend):
    """The context a test runs `backend` in: the simulated Metal module routes
    host arrays to the Metal backend; the others need nothing."""
    if backend != "metal":
        return contextlib.nullcontext()
    import mtlsim

    return testing.simulated_metal(mtlsim.metal_module())


def parity_params(specs, strided_cases=(0,)):
    """(spec, shape, case, layout) for every shape x option case of `specs`, plus
    the other input layouts of spec.layouts (braze.testing.LAYOUTS) on multi-row
    shapes: strided rows for the cases listed, broadcast (stride-0) rows and
    misaligned data for the first option case on the first two such shapes."""
    for spec in specs:
        multi = 0
        for shape in spec.shapes + spec.edge_shapes:
            sid = f"{spec.name}-{'x'.join(map(str, shape))}"
            for ci, case in enumerate(spec.cases):
                yield pytest.param(spec, shape, case, "contiguous", id=f"{sid}-case{ci}")
            if len(shape) < 2 or shape[0] <= 1:
                continue
            multi += 1
            if "strided" in spec.layouts:
                for ci in strided_cases:
                    yield pytest.param(spec, shape, spec.cases[ci], "strided", id=f"{sid}-strided{ci}")
            for layout in ("broadcast", "misaligned"):
                if layout in spec.layouts and multi <= 2:
                    yield pytest.param(spec, shape, spec.cases[0], layout, id=f"{sid}-{layout}")


def parity_seed(spec, shape, dtype):
    """A seed per test that is the same in every process (str hashes are salted)."""
    return zlib.crc32(f"{spec.name}{shape}{dtype}".encode())


def parity_test(specs, strided_cases=(0,)):
    """The registry parity test of a family: every op x backend x dtype x shape x
    option case against the float64 reference (braze.testing.check)."""

    @pytest.mark.parametrize("backend", backend_params())
    @pytest.mark.parametrize("dtype", _spec.FLOAT_DTYPES)
    @pytest.mark.parametrize("spec,shape,case,layout", list(parity_params(specs, strided_cases)))
    def test_parity(spec, shape, case, layout, dtype, backend):
        if backend not in spec.backends or dtype not in spec.dtypes:
            pytest.skip(f"{spec.name} does not claim {backend}/{dtype}")
        with on_backend(backend):
            res = testing.check(spec, backend, dtype, shape, case, layout, seed=parity_seed(spec, shape, dtype))
        assert res.ok, res.message

    return test_parity


@contextlib.contextmanager
def cpu_isa(isa):
    """Runs the CPU kernels of one instruction-set build, then restores the active one."""
    from braze import _cpu

    before = _cpu.isa()
    _cpu.set_isa(isa)
    try:
        yield
    finally:
        _cpu.set_isa(before)
