"""ctypes front end of simulator libraries built by build.py."""
from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
from pathlib import Path

import numpy as np

from .build import ROOT, build, build_metal_module, sanitizing



class SimError(RuntimeError):
    """A launch the simulator refused or a kernel bug it caught."""


def asan_loaded() -> bool:
    with open("/proc/self/maps") as f:
        return "libasan" in f.read()


def needs_relaunch() -> bool:
    """MTLSIM_SANITIZE is set but this process lacks the ASan runtime.

    ASan must be the first library of a process: a sanitized simulator loaded
    by dlopen into a plain Python mixes allocators. Tests then rerun
    themselves in a child started with sanitizer_env()."""
    return sanitizing() and not asan_loaded()


def sanitizer_env() -> dict:
    lib = subprocess.run(["g++", "-print-file-name=libasan.so"], check=True,
                         capture_output=True, text=True).stdout.strip()
    # libstdc++ too: ASan finds the real __cxa_throw when it starts, and python links no C++
    # runtime, so without it every C++ exception aborts the process
    cxx = subprocess.run(["g++", "-print-file-name=libstdc++.so.6"], check=True,
                         capture_output=True, text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=f"{lib} {cxx}", MTLSIM_SANITIZE="1")
    env["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1" + (
        ":" + env["ASAN_OPTIONS"] if env.get("ASAN_OPTIONS") else "")
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return env


def _load(path: Path) -> ctypes.CDLL:
    if needs_relaunch():
        raise SimError("MTLSIM_SANITIZE=1 needs the ASan runtime preloaded: run under "
                       "sim.sanitizer_env()")
    return ctypes.CDLL(str(path))


def _ptr(a: np.ndarray | None) -> int:
    return 0 if a is None else a.__array_interface__["data"][0]


class Library:
    def __init__(self, path: Path):
        self.path = path
        self.lib = _load(path)
        self.lib.mtlsim_dispatch.restype = ctypes.c_int

    def dispatch(self, kernel: str, threadgroups, threads, buffers, *, threadgroup_bytes=(),
                 seed: int = 0, shuffle: bool = False) -> None:
        """Runs one kernel over numpy buffers bound at [[buffer(i)]] in order."""
        grid = (ctypes.c_uint * 3)(*threadgroups)
        tg = (ctypes.c_uint * 3)(*threads)
        bufs = (ctypes.c_void_p * len(buffers))(*[_ptr(b) for b in buffers])
        tgb = (ctypes.c_ulonglong * max(1, len(threadgroup_bytes)))(*threadgroup_bytes)
        err = ctypes.create_string_buffer(1024)
        rc = self.lib.mtlsim_dispatch(kernel.encode(), grid, tg, bufs, len(buffers), tgb,
                                      len(threadgroup_bytes), ctypes.c_ulonglong(seed),
                                      int(shuffle), err, len(err))
        if rc:
            raise SimError(err.value.decode())

    def has_kernel(self, kernel: str) -> bool:
        return bool(self.lib.mtlsim_has_kernel(kernel.encode()))


def shader_library(name: str, metal: Path) -> Library:
    """A library of one test shader (no launch plans)."""
    return Library(build(name, [metal], []))


_metal = None


def metal_module():
    """The simulated braze._metal (build.build_metal_module), imported once."""
    global _metal
    if _metal is None:
        path = build_metal_module()
        if needs_relaunch():
            raise SimError("MTLSIM_SANITIZE=1 needs the ASan runtime preloaded: run under sim.sanitizer_env()")
        spec = importlib.util.spec_from_file_location("_metal", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        lib = ctypes.CDLL(str(path))
        mod._schedule = lib.mtlsim_set_schedule
        mod._has_kernel = lambda name: bool(lib.mtlsim_has_kernel(name.encode()))
        _metal = mod
    return _metal


def set_schedule(seed: int = 0, shuffle: bool = False) -> None:
    """The simulator's fiber schedule for the following launches of metal_module()."""
    metal_module()._schedule(ctypes.c_ulonglong(seed), int(shuffle))
