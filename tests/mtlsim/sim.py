"""ctypes front end of simulator libraries built by build.py."""
from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import numpy as np

from .build import ROOT, build, sanitizing

NORM_OPS = ("rms_norm", "layer_norm", "add_rms_norm", "rms_norm_gated",
            "rms_norm_vjp", "layer_norm_vjp")               # NormOp order (plans/norm.h)
NORM_ROLES = ("x", "weight", "bias", "aux", "out", "aux_out", "dweight", "dbias")  # NormRole
ROPE_ROLES = ("q", "k", "positions", "inv_freq", "q_out", "k_out")  # RopeRole (plans/rope.h)
DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2}          # DType order (plans/plan.h)
SAMPLING_OPS = ("softmax", "log_softmax", "logsumexp", "argmax", "top_k_mask", "top_p_mask", "min_p_mask",
                "apply_penalties", "sample", "philox_uniform")    # SamplingOp order (plans/sampling.h)
SAMPLING_ROLES = ("x", "out", "temperature", "top_k", "p", "min_p", "ids")  # SamplingRole


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
    env = dict(os.environ, LD_PRELOAD=lib, MTLSIM_SANITIZE="1")
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


def _extent(a: np.ndarray) -> int:
    """Bytes from a's first element to one past its last."""
    if a.size == 0:
        return 0
    return sum((d - 1) * s for d, s in zip(a.shape, a.strides)) + a.itemsize


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


class NormLibrary(Library):
    def run(self, op: str, arrays: dict, *, eps: float, weight_offset: float = 0.0,
            group_size: int = 0, seed: int = 0, shuffle: bool = False) -> None:
        """Runs norm op `op` on 2-D row arrays ([rows, n], last axis contiguous)
        and 1-D weight-like arrays, keyed by NORM_ROLES names; writes outputs."""
        x = arrays["x"]
        rows, n = x.shape
        strides = (ctypes.c_longlong * 8)()
        present = (ctypes.c_int * 8)()
        ptrs = (ctypes.c_void_p * 8)()
        extents = (ctypes.c_ulonglong * 8)()
        for i, role in enumerate(NORM_ROLES):
            a = arrays.get(role)
            if a is None:
                continue
            assert a.dtype == x.dtype and a.shape[-1] == n and (a.strides[-1] == a.itemsize or n <= 1 or a.size == 0)
            present[i] = 1
            ptrs[i] = _ptr(a)
            extents[i] = _extent(a)
            strides[i] = a.strides[0] // a.itemsize if a.ndim == 2 else 0
        err = ctypes.create_string_buffer(1024)
        rc = self.lib.mtlsim_norm(
            NORM_OPS.index(op), DTYPES[x.dtype.name], ctypes.c_ulonglong(rows),
            ctypes.c_ulonglong(n), strides, present, ctypes.c_float(eps),
            ctypes.c_float(weight_offset), ctypes.c_ulonglong(group_size), ptrs, extents,
            ctypes.c_ulonglong(seed), int(shuffle), err, len(err))
        if rc:
            raise SimError(err.value.decode())


class RopeLibrary(Library):
    def run(self, q, positions, inv_freq, q_out, *, k=None, k_out=None, rotary_dim=None,
            interleaved=False, inverse=False, attention_scale=1.0, seed: int = 0,
            shuffle: bool = False) -> None:
        """Runs rope (k None) or rope_qk through plan_rope. q, k, q_out, k_out
        are [tokens, heads, dim] arrays (last axis contiguous, token and head
        axes may be strided); positions [tokens] int32 / int64; inv_freq
        [rot / 2] float32. `q_out is q` (and `k_out is k`) is in place."""
        qk = k is not None
        tokens, hq, dim = q.shape
        hk = k.shape[1] if qk else 0
        rot = dim if rotary_dim is None else rotary_dim
        arrays = (q, k, positions, inv_freq, q_out, k_out)
        for a in (q, k, q_out, k_out):
            if a is not None:
                assert a.dtype == q.dtype and a.ndim == 3 and a.shape[0] == tokens and a.shape[2] == dim
                assert a.strides[2] == a.itemsize or dim <= 1 or a.size == 0
        assert positions.dtype in (np.int32, np.int64) and positions.shape == (tokens,)
        assert inv_freq.dtype == np.float32 and inv_freq.shape == (rot // 2,)
        el = lambda a, i: 0 if a is None else a.strides[i] // a.itemsize  # noqa: E731
        ints = (ctypes.c_int * 7)(int(qk), DTYPES[q.dtype.name], int(positions.dtype == np.int64),
                                  int(interleaved), int(inverse), int(q_out is q),
                                  int(qk and k_out is k))
        sizes = (ctypes.c_ulonglong * 5)(tokens, dim, rot, hq, hk)
        strides = (ctypes.c_longlong * 9)(el(positions, 0), el(q, 0), el(q, 1), el(q_out, 0), el(q_out, 1),
                                          el(k, 0), el(k, 1), el(k_out, 0), el(k_out, 1))
        ptrs = (ctypes.c_void_p * 6)(*[_ptr(a) if a is not None and a.size else None for a in arrays])
        extents = (ctypes.c_ulonglong * 6)(*[0 if a is None else _extent(a) for a in arrays])
        err = ctypes.create_string_buffer(1024)
        rc = self.lib.mtlsim_rope(ints, sizes, strides, ctypes.c_float(attention_scale), ptrs, extents,
                                  ctypes.c_ulonglong(seed), int(shuffle), err, len(err))
        if rc:
            raise SimError(err.value.decode())


class SamplingLibrary(Library):
    def run(self, op: str, x, out, *, temperature=1.0, top_k=0, p=1.0, min_p=0.0, ids=None,
            repetition=1.0, frequency=0.0, presence=0.0, seed: int = 0, offset: int = 0,
            sim_seed: int = 0, shuffle: bool = False) -> None:
        """Runs sampling op `op` through plan_sampling. x: logits [rows, cols]
        (last axis contiguous, rows may be strided; None for philox_uniform);
        out: [rows, cols] rows or a [rows] vector (`out is x`: in place).
        temperature / top_k / p / min_p: a scalar or a [rows] array (float32,
        int32 for top_k); p is top_p, or the p of min_p_mask. ids: int32
        [rows, L] token ids of apply_penalties."""
        rows = out.shape[0]
        cols = x.shape[1] if x is not None else 0
        params = {"temperature": (temperature, np.float32), "top_k": (top_k, np.int32),
                  "p": (p, np.float32), "min_p": (min_p, np.float32)}
        arrays = {"x": x, "out": out, "ids": ids}
        scalars = {}
        for name, (v, dt) in params.items():
            if isinstance(v, np.ndarray):
                assert v.dtype == dt and v.shape == (rows,), name
                arrays[name] = v
                scalars[name] = 0
            else:
                scalars[name] = v
        if x is not None:
            assert x.ndim == 2 and (x.strides[1] == x.itemsize or cols <= 1 or x.size == 0)
        if out.ndim == 2:
            assert out.shape == x.shape and (out.strides[1] == out.itemsize or cols <= 1 or out.size == 0)
        if ids is not None:
            assert ids.dtype == np.int32 and ids.ndim == 2 and ids.shape[0] == rows
            assert ids.strides[1] == 4 or ids.shape[1] <= 1
        el = lambda a, i: 0 if a is None or a.ndim <= i else a.strides[i] // a.itemsize  # noqa: E731
        dtype = DTYPES[x.dtype.name] if x is not None else 0
        ints = (ctypes.c_int * 8)(SAMPLING_OPS.index(op), dtype,
                                  *[int(isinstance(arrays.get(n), np.ndarray)) for n in ("temperature", "top_k", "p", "min_p")],
                                  int(out is x), int(scalars["top_k"]))
        sizes = (ctypes.c_ulonglong * 5)(rows, cols, 0 if ids is None else ids.shape[1], seed, offset)
        strides = (ctypes.c_longlong * 3)(el(x, 0), el(out, 0) if out.ndim == 2 else 0, el(ids, 0))
        floats = (ctypes.c_float * 6)(scalars["temperature"], scalars["p"], scalars["min_p"], repetition,
                                      frequency, presence)
        order = [arrays.get(r) for r in SAMPLING_ROLES]
        ptrs = (ctypes.c_void_p * 7)(*[_ptr(a) if a is not None and a.size else None for a in order])
        extents = (ctypes.c_ulonglong * 7)(*[0 if a is None else _extent(a) for a in order])
        err = ctypes.create_string_buffer(1024)
        rc = self.lib.mtlsim_sampling(ints, sizes, strides, floats, ptrs, extents,
                                      ctypes.c_ulonglong(sim_seed), int(shuffle), err, len(err))
        if rc:
            raise SimError(err.value.decode())


def sampling_library() -> SamplingLibrary:
    shaders = sorted((ROOT / "shaders" / "metal" / "sampling").glob("*.metal"))
    host = [ROOT / "csrc" / "metal" / "plans" / "plan.cpp",
            ROOT / "csrc" / "metal" / "plans" / "sampling.cpp",
            Path(__file__).resolve().parent / "sim_sampling.cpp"]
    return SamplingLibrary(build("sampling", shaders, host))


def rope_library() -> RopeLibrary:
    shaders = sorted((ROOT / "shaders" / "metal" / "rope").glob("*.metal"))
    host = [ROOT / "csrc" / "metal" / "plans" / "plan.cpp",
            ROOT / "csrc" / "metal" / "plans" / "rope.cpp",
            Path(__file__).resolve().parent / "sim_rope.cpp"]
    return RopeLibrary(build("rope", shaders, host))


def norm_library() -> NormLibrary:
    shaders = sorted((ROOT / "shaders" / "metal" / "norm").glob("*.metal"))
    host = [ROOT / "csrc" / "metal" / "plans" / "plan.cpp",
            ROOT / "csrc" / "metal" / "plans" / "norm.cpp",
            Path(__file__).resolve().parent / "sim_norm.cpp"]
    return NormLibrary(build("norm", shaders, host))


def family_library(family: str) -> Library:
    """The simulated library of shaders/metal/<family>/ (with its launch plans)."""
    if family == "norm":
        return norm_library()
    if family == "rope":
        return rope_library()
    if family == "sampling":
        return sampling_library()
    return Library(build(family, sorted((ROOT / "shaders" / "metal" / family).glob("*.metal")), []))


def shader_library(name: str, metal: Path) -> Library:
    """A library of one test shader (no launch plans)."""
    return Library(build(name, [metal], []))
