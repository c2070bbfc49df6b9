"""Which native backends are built, which are usable here, and why not.

``braze._cpu`` is always built and imported eagerly. ``braze._cuda`` and
``braze._metal`` are imported lazily, on first use, so that the package works
on machines without a GPU toolkit or driver.
"""
from __future__ import annotations

import importlib
import importlib.util
import platform

from . import _cpu

NAMES = ("cpu", "cuda", "metal")

_modules = {"cpu": _cpu}
_why_not = {}

# backend -> backend: calls on arrays of the first run on the second. Empty
# except in tests, which route host arrays to the simulated Metal backend
# (braze.testing.simulated_metal).
ROUTE = {}


def module(backend):
    """The native module of ``backend``, or None when it is not usable here."""
    try:
        return _modules[backend]
    except KeyError:
        pass
    mod = None
    try:
        mod = importlib.import_module(f"braze._{backend}")
        probe = getattr(mod, "usable", None)
        if probe is not None:
            ok, why = probe()
            if not ok:
                _why_not[backend] = why
                mod = None
    except ImportError as e:
        _why_not[backend] = _explain_missing(backend, e)
    _modules[backend] = mod
    return mod


def _explain_missing(backend, err):
    if backend == "cuda":
        return ("not built: no CUDA toolkit (nvcc) was found when braze was built"
                if "No module named" in str(err) else f"cannot be loaded: {err}")
    if backend == "metal":
        if platform.system() != "Darwin":
            return "Metal needs macOS on Apple silicon; here the shaders run only in the test simulator"
        return f"not built or cannot be loaded: {err}"
    return str(err)


def built(backend):
    try:
        return importlib.util.find_spec(f"braze._{backend}") is not None
    except (ImportError, ValueError):
        return False


def usable(backend):
    return module(backend) is not None


def why_not(backend):
    module(backend)
    return _why_not.get(backend)


def has_kernel(backend, op):
    mod = module(backend)
    return mod is not None and hasattr(mod, op)
