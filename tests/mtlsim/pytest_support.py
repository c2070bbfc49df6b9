"""What every simulator test module shares: the marker that runs its tests only
where the simulator runs, and the sanitized rerun (MTLSIM_SANITIZE=1: ASan must
be loaded first, so the module reruns itself in a child process that preloads
it, and in the parent only that test runs)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .sim import needs_relaunch, sanitizer_env

RELAUNCH = needs_relaunch()

# The simulator needs g++ and Linux ucontext; on a Mac the real kernels run instead.
simulated = pytest.mark.skipif(
    RELAUNCH or not sys.platform.startswith("linux"),
    reason="the sanitized child process runs these" if RELAUNCH else "the MSL simulator runs on Linux")


def sanitized_rerun(test_file):
    """A test that reruns `test_file` under ASan / UBSan in a child process."""

    @pytest.mark.skipif(not RELAUNCH, reason="only with MTLSIM_SANITIZE=1")
    def test_under_sanitizers():
        r = subprocess.run([sys.executable, "-m", "pytest", test_file, "-q", "-p", "no:cacheprovider"],
                           env=sanitizer_env(), capture_output=True, text=True,
                           cwd=Path(test_file).resolve().parent.parent)
        assert r.returncode == 0, (r.stdout + r.stderr)[-8000:]
        assert " passed" in r.stdout, r.stdout[-2000:]

    return test_under_sanitizers
