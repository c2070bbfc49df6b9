"""The native call a public braze function makes, found without data: the
function runs on stand-in arrays (shape and dtype only) with every kernel
replaced by a recorder, in the recording thread only. So the JAX wrapping
reads, from the public function itself, its argument checks, its conversions
(``approximate="tanh"`` -> a bool, ``scale=None`` -> NaN, ...), the outputs it
allocates (shapes and dtypes) and the native entry point it calls, and the
MLX wrapping the output shapes its vmap rule checks: nothing is listed per op
(docs/jax.md, "How it works").
"""
from __future__ import annotations

import contextlib
import threading

from .. import _arrays, _backends, _call


class Aval:
    """A stand-in array: shape and dtype, no data. ``source`` is the index of
    the caller's array it stands for, or None for one the public function
    allocated (an output, or scratch)."""

    __slots__ = ("shape", "dtype", "source")

    def __init__(self, shape, dtype, source=None):
        self.shape, self.dtype, self.source = tuple(int(d) for d in shape), str(dtype), source

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __dlpack_device__(self):
        return (1, 0)


class _AvalFramework(_arrays.Numpy):
    name = "jax"
    immutable = False
    backend = "cpu"  # the backend whose kernel path is recorded (set per recording)

    @staticmethod
    def device(a):
        return _AvalFramework.backend, 0

    @staticmethod
    def place(a):
        return _AvalFramework.backend, 0

    @staticmethod
    def native(a):
        return a

    @staticmethod
    def dtype_name(a):
        return a.dtype

    @staticmethod
    def empty(like, shape, dtype=None):
        return Aval(shape, dtype or like.dtype)

    @staticmethod
    def writable(a):
        return True

    @staticmethod
    def wrap(buf, like):
        return buf


_arrays._by_type[Aval] = _AvalFramework


class _Recording(dict):
    """The kernel table while a thread records: there every kernel the backend
    has is a recorder; other threads keep the real table."""

    def __init__(self, real):
        super().__init__()
        self.real, self.threads = real, {}

    def __getitem__(self, key):
        calls = self.threads.get(threading.get_ident())
        if calls is None:
            return self.real[key]
        backend, op = key
        if not _backends.has_kernel(backend, op):
            raise TypeError(f"{op}: the {backend} backend has no kernel for it, so it has no XLA FFI call")

        def record(*args, **kwargs):
            calls.append((op, args, kwargs))
        return record

    def __setitem__(self, key, value):
        if threading.get_ident() not in self.threads:
            self.real[key] = value


_lock = threading.Lock()


@contextlib.contextmanager
def recording(backend):
    """Yields the list the public function's kernel calls are appended to."""
    tid, calls = threading.get_ident(), []
    with _lock:
        table = _call._kernels
        if not isinstance(table, _Recording):
            table = _call._kernels = _Recording(table)
        table.threads[tid] = calls
        _AvalFramework.backend = backend
    try:
        yield calls
    finally:
        with _lock:
            del table.threads[tid]
            if not table.threads and _call._kernels is table:
                _call._kernels = table.real
