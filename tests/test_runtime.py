"""The CPU thread pool (issue 11, bugs 3 and 6): fork safety, task exceptions,
nested regions, and VJP parameter sums that do not depend on the thread count.

Cases that deadlocked run in a subprocess with a timeout, so that a regression
fails the test instead of hanging the suite.
"""
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import braze
from braze import _cpu, norm


def run_python(code, timeout=120):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


@pytest.fixture
def restore_threads():
    n = _cpu.num_threads()
    yield
    _cpu.set_num_threads(n)


def test_fork_after_the_pool_has_run():
    """The child of a fork after a pooled op runs ops itself (on a pool of its own)."""
    out = run_python("""
        import os, time
        import numpy as np
        from braze import _cpu, norm
        _cpu.set_num_threads(3)
        x = np.random.default_rng(0).normal(size=(2048, 2048)).astype(np.float32)
        want = norm.rms_norm(x)  # big enough to wake the workers
        pid = os.fork()
        if pid == 0:
            ok = np.array_equal(norm.rms_norm(x), want) and _cpu.num_threads() == 3
            _cpu.set_num_threads(2)  # resizing must not join the parent's threads
            ok = ok and np.array_equal(norm.rms_norm(x), want)
            os._exit(0 if ok else 1)
        for _ in range(600):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            raise SystemExit("the child deadlocked")
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert np.array_equal(norm.rms_norm(x), want)  # the parent's pool still works
        print("forked")
    """)
    assert "forked" in out


def test_nested_parallel_region_runs_inline():
    out = run_python("""
        from braze import _cpu
        for n in (1, 2, 3):
            _cpu.set_num_threads(n)
            assert _cpu._test_pool("nested") == 256
        print("nested")
    """)
    assert "nested" in out


def test_task_exception_reaches_the_caller():
    out = run_python("""
        import numpy as np
        from braze import _cpu, norm
        for n in (1, 3):
            _cpu.set_num_threads(n)
            try:
                _cpu._test_pool("throw")
            except ValueError as e:
                assert "task 13 failed" in str(e), e
            else:
                raise SystemExit("no exception")
            x = np.ones((512, 1024), np.float32)  # the pool still runs jobs afterwards
            assert np.allclose(norm.rms_norm(x), 1.0)
        print("raised")
    """)
    assert "raised" in out


def test_test_pool_kind_checked():
    with pytest.raises(ValueError, match="kind must be"):
        _cpu._test_pool("bogus")


# ---------------------------------------------------------------- deterministic VJP sums
@pytest.mark.parametrize("shape", [(1000, 4096), (7, 33), (300, 70)])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_vjp_sums_do_not_depend_on_thread_count(shape, dtype, restore_threads):
    rng = np.random.default_rng(6)
    x = rng.normal(size=shape).astype(dtype)
    dy = rng.normal(size=shape).astype(dtype)
    w = rng.normal(1.0, 0.25, size=shape[-1]).astype(dtype)
    b = rng.normal(size=shape[-1]).astype(dtype)
    results = []
    for n in (1, 2, 3):
        _cpu.set_num_threads(n)
        results.append((norm.rms_norm_vjp(x, w, dy), norm.layer_norm_vjp(x, w, b, dy)))
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            for g, r in zip(got, want):
                assert g.tobytes() == r.tobytes()
