"""Framework and device detection, output allocation and bfloat16 views.

Arrays cross into the native modules through DLPack (``nb::ndarray``) without
copies. Outputs are allocated by the caller's own framework on the caller's
device, so the result has the input's type; JAX and MLX arrays are immutable,
so their outputs are written into a numpy buffer braze allocates and handed
back through DLPack (no copy on the CPU).
"""
from __future__ import annotations

import sys
import warnings

import ml_dtypes
import numpy as np

from ._cpu import as_bfloat16 as _as_bfloat16

BF16 = np.dtype(ml_dtypes.bfloat16)
_DEVICES = {1: "cpu", 2: "cuda", 3: "cpu", 8: "metal"}
_TORCH_DEVICES = {"cpu": "cpu", "cuda": "cuda", "mps": "metal"}


class UnsupportedDtype(TypeError):
    """An array of a dtype no kernel reads; ``Call.arg`` names the argument."""


def dlpack_device(a):
    """('cpu' | 'cuda' | 'metal', index) from DLPack."""
    kind, idx = a.__dlpack_device__()
    return _DEVICES.get(int(kind), f"dlpack device {int(kind)}"), int(idx)


class Numpy:
    name = "numpy"
    immutable = False

    @staticmethod
    def device(a):
        return "cpu", 0

    @staticmethod
    def place(a):
        """(backend, stream handle) of a call on ``a``: the hot path's one look."""
        return "cpu", 0

    @staticmethod
    def native(a):
        if a.dtype.num >= 256:  # user-defined (ml_dtypes) types: numpy's DLPack export refuses them all
            if a.dtype == BF16:  # the uint16 view, labelled bfloat16 for DLPack
                return _as_bfloat16(a.view(np.uint16))
            raise UnsupportedDtype(a.dtype.name)
        return a

    @staticmethod
    def dtype_name(a):
        return "bfloat16" if a.dtype == BF16 else a.dtype.name

    @staticmethod
    def empty(like, shape, dtype=None):
        return np.empty(shape, like.dtype if dtype is None else _np_dtype(dtype))

    @staticmethod
    def writable(a):
        return a.flags.writeable

    @staticmethod
    def stream(a):
        return 0

    @staticmethod
    def wrap(buf, like):
        return buf

    @staticmethod
    def copy_into(dst, src):
        np.copyto(dst, np.asarray(src))


class Torch:
    """torch tensors enter as DLPack capsules from torch's C exporter: its
    Python ``__dlpack__`` costs ~2 us a call, a lot at decode shapes."""

    name = "torch"
    immutable = False
    _to_dlpack = None

    @staticmethod
    def device(a):
        d = a.device
        return _TORCH_DEVICES.get(d.type, d.type), d.index or 0

    @staticmethod
    def place(a):
        if a.is_cuda:  # a plain flag: cheaper than building a.device
            return "cuda", _torch_raw_stream(a.get_device())
        return Torch.device(a)[0], 0

    @classmethod
    def native(cls, a):
        if cls._to_dlpack is None:
            import torch

            cls._to_dlpack = getattr(torch._C, "_to_dlpack", None) or torch.utils.dlpack.to_dlpack
        if a.requires_grad:
            _warn_detached()
            a = a.detach()
        return cls._to_dlpack(a)

    @staticmethod
    def dtype_name(a):
        return str(a.dtype).replace("torch.", "")

    @staticmethod
    def empty(like, shape, dtype=None):
        import torch

        if dtype is None:
            if shape == like.shape:  # empty_like is about half new_empty's cost (decode calls)
                return torch.empty_like(like)
            return like.new_empty(shape)
        return like.new_empty(shape, dtype=getattr(torch, dtype))

    @staticmethod
    def writable(a):
        return True

    @staticmethod
    def stream(a):
        dev = a.device
        if dev.type != "cuda":
            return 0
        return _torch_raw_stream(dev.index)

    @staticmethod
    def wrap(buf, like):
        return buf

    @staticmethod
    def copy_into(dst, src):
        dst.copy_(src)


_detach_warned = False


def _warn_detached():
    global _detach_warned
    if _detach_warned:
        return
    _detach_warned = True
    level, f = 1, sys._getframe(0)
    while f is not None and f.f_globals.get("__name__", "").partition(".")[0] == "braze":
        level, f = level + 1, f.f_back  # point the warning at the caller's line
    warnings.warn("braze ops are not differentiable yet: a tensor that requires grad is read through "
                  "detach(), so no gradient flows back through this call. The *_vjp ops (e.g. "
                  "braze.norm.rms_norm_vjp, braze.ops.silu_and_mul_vjp; rope with inverse=True) compute the "
                  "backward pass.",
                  UserWarning, stacklevel=level)


_raw_stream = None


def _torch_raw_stream(index):
    """The current CUDA stream handle of device `index`: torch's raw getter
    (what Triton launches with) is ~10x cheaper than current_stream()."""
    global _raw_stream
    if _raw_stream is None:
        import torch

        _raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
            lambda i: torch.cuda.current_stream(i).cuda_stream)
    return _raw_stream(index)


class Cupy:
    name = "cupy"
    immutable = False
    device = staticmethod(dlpack_device)

    @staticmethod
    def place(a):
        backend = dlpack_device(a)[0]  # "cuda", or a device braze has no backend for (ROCm)
        return backend, Cupy.stream(a) if backend == "cuda" else 0

    @staticmethod
    def native(a):
        return a

    @staticmethod
    def dtype_name(a):
        return a.dtype.name

    @staticmethod
    def empty(like, shape, dtype=None):
        import cupy

        with like.device:
            return cupy.empty(shape, like.dtype if dtype is None else dtype)

    @staticmethod
    def writable(a):
        return True

    @staticmethod
    def stream(a):
        """The current stream of ``a``'s device (each device has its own), not
        of whichever device is current."""
        import cupy

        with a.device:
            return cupy.cuda.get_current_stream().ptr

    @staticmethod
    def wrap(buf, like):
        return buf

    @staticmethod
    def copy_into(dst, src):
        dst[...] = src


class _Immutable(Numpy):
    """JAX / MLX on the CPU: inputs are read through DLPack, outputs are numpy
    buffers handed back as the framework's array."""

    immutable = True
    device = staticmethod(dlpack_device)

    @staticmethod
    def place(a):
        return dlpack_device(a)[0], 0

    @staticmethod
    def empty(like, shape, dtype=None):
        return np.empty(shape, _np_dtype(dtype) if dtype else _np_dtype(_Immutable.dtype_name(like)))

    @staticmethod
    def dtype_name(a):
        return str(a.dtype).replace("mlx.core.", "")

    @staticmethod
    def native(a):
        return a


class Jax(_Immutable):
    name = "jax"

    @staticmethod
    def wrap(buf, like):
        import jax.numpy as jnp

        return jnp.asarray(buf)


class Mlx(_Immutable):
    name = "mlx"

    @staticmethod
    def wrap(buf, like):
        import mlx.core as mx

        return mx.array(buf)


_BY_MODULE = {"numpy": Numpy, "torch": Torch, "cupy": Cupy, "jax": Jax, "jaxlib": Jax, "mlx": Mlx}
_by_type = {}


def framework(a, name="x"):
    """The adapter for ``a``'s framework; TypeError for something that is not an array."""
    t = type(a)
    fw = _by_type.get(t)
    if fw is None:
        root = t.__module__.split(".")[0]
        fw = _BY_MODULE.get(root)
        if fw is None or not hasattr(a, "__dlpack_device__"):
            raise TypeError(f"{name} must be an array (numpy, torch, cupy, jax or mlx), got {t.__name__}")
        _by_type[t] = fw
    return fw


def device(a):
    """('cpu' | 'cuda' | 'metal', index) of any supported array."""
    return framework(a).device(a)


def _np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)
