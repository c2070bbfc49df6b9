"""The short path from a public function to a native kernel.

``Call(op, x)`` finds x's framework and device, the backend module for that
device and its kernel for ``op``; ``arg``/``out``/``result`` convert arrays in
and out without copies. When the backend lacks the kernel, ``fallback`` runs
the reference composition in the caller's framework on the caller's device,
with a one-time warning.
"""
from __future__ import annotations

import numbers
import os
import warnings

from . import _backends
from ._arrays import UnsupportedDtype, framework

_warned = set()
# Kernels built and bound but not yet run on a GPU (docs/cuda.md, "Not yet run on a
# GPU"): the public functions run the reference composition on such arrays instead,
# with the usual one-time warning, unless BRAZE_CUDA_UNVERIFIED=1 (the test suite
# sets it, so `pytest -m cuda` runs the kernels). A verified kernel leaves this set.
# The H200 runs of 2026-12-03 (docs/performance.md) passed the quant and attention kernels,
# prefill's tensor-core flash kernel included, that of 2026-12-04 the activation VJPs, and the
# H100 run of 2026-12-06 matmul_w8a8 (mma.sync and wgmma GEMMs) and the Hopper wgmma GEMM.
UNVERIFIED = {"cuda": frozenset()}
_use_unverified = os.environ.get("BRAZE_CUDA_UNVERIFIED", "") == "1"
_kernels = {}  # (backend, op) -> native entry point or None, looked up once


def number(name, v):
    if type(v) is float:  # the common case, without the ABC check
        return v
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    raise TypeError(f"{name} must be a real number, got {type(v).__name__}")


def integer(name, v):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return int(v)
    raise TypeError(f"{name} must be an integer, got {type(v).__name__}")


class Call:
    __slots__ = ("op", "x", "fw", "backend", "kernel", "stream")

    def __init__(self, op, x, name="x"):
        self.op = op
        self.x = x
        fw = self.fw = framework(x, name)
        self.backend, self.stream = fw.place(x)
        if _backends.ROUTE:  # tests: a backend run on another device's arrays (simulated Metal)
            self.backend = _backends.ROUTE.get(self.backend, self.backend)
        try:
            self.kernel = _kernels[(self.backend, op)]
        except KeyError:
            mod = _backends.module(self.backend) if self.backend in _backends.NAMES else None
            kernel = getattr(mod, op, None) if mod is not None else None
            if op in UNVERIFIED.get(self.backend, ()) and not _use_unverified:
                kernel = None
            self.kernel = _kernels[(self.backend, op)] = kernel

    def arg(self, a, name):
        """An array argument (or None) as the native module takes it."""
        if a is None:
            return None
        try:
            return framework(a, name).native(a)
        except UnsupportedDtype as e:
            raise TypeError(f"{name} has dtype {e}, which no braze kernel reads: data must be float32, "
                            f"float16 or bfloat16 (indices int32 / int64)") from None

    def out(self, out, shape, name="out", dtype=None):
        """``out`` checked for type and writability, or a new array of x's framework."""
        if out is None:
            return self.fw.empty(self.x, shape, dtype)
        fw = framework(out, name)
        if fw.immutable:
            raise TypeError(f"{name} cannot be a {fw.name} array: {fw.name} arrays are immutable")
        if not fw.writable(out):
            raise ValueError(f"{name} is read-only")
        return out

    def result(self, buf):
        return buf if buf is None or not self.fw.immutable else self.fw.wrap(buf, self.x)

    def fallback(self, reference, args, kwargs, outs=None):
        """Runs the reference composition and returns its results, as the kernel
        path would: each result is copied into its slot of ``outs`` where one is
        given (and that array returned), else returned as computed. Every given
        slot is checked before any is written."""
        key = (self.op, self.backend)
        if key not in _warned and not _forced_reference:
            _warned.add(key)
            why = _backends.why_not(self.backend) or (
                "its kernel has not run on a GPU yet (BRAZE_CUDA_UNVERIFIED=1 runs it)"
                if self.op in UNVERIFIED.get(self.backend, ()) else "this backend has no kernel for it")
            warnings.warn(f"braze: {self.op} on {self.backend}: {why}; running the reference "
                          f"composition in {self.fw.name} instead", RuntimeWarning, stacklevel=3)
        res = reference(*args, **kwargs)
        if outs is None:
            return res
        single = not isinstance(res, tuple)
        dsts, srcs = ((outs,), (res,)) if single else (tuple(outs), res)
        if len(dsts) != len(srcs):
            raise TypeError(f"out must be a tuple of {len(srcs)} arrays (or None), got {len(dsts)}")
        for i, (dst, src) in enumerate(zip(dsts, srcs)):
            if dst is None or src is None:
                continue
            name = "out" if single else f"out[{i}]"
            self.out(dst, None, name)  # type, immutability, writability
            if tuple(dst.shape) != tuple(src.shape):
                raise ValueError(f"{name} must have shape {tuple(src.shape)}, got {tuple(dst.shape)}")
            want, got = framework(src).dtype_name(src), framework(dst, name).dtype_name(dst)
            if want != got:
                raise TypeError(f"{name} must be {want}, got {got}")
        results = []
        for dst, src in zip(dsts, srcs):
            if dst is None or src is None:
                results.append(src)
            else:
                framework(dst).copy_into(dst, src)
                results.append(dst)
        return results[0] if single else tuple(results)


_forced_reference = False  # set by braze.testing.force_reference(): no warning for a fallback asked for
