"""ggml's CPU matmul as a ``braze bench`` peer: the library llama.cpp runs on, as
``llama-cpp-python`` installs it (its ``lib/`` holds libggml-base, libggml-cpu
and libggml), called through ctypes. Nothing is imported from llama_cpp itself.

The peer does what llama.cpp does with a model's weight on the CPU: W is placed
once in the CPU backend's repacking buffer where ggml has an interleaved layout
for its type on this CPU (``CPU_REPACK``: q4_0, q4_K, iq4_nl, mxfp4 on AVX2, q2_K
on AVX-512, when N is a multiple of 8), else in a plain CPU buffer; each call
copies x (f32) in, runs ``ggml_mul_mat`` on the backend's persistent thread pool
and copies out [M, N] f32. ggml quantizes x to its dot type (q8_0 / q8_K) inside
the call, as braze's CPU GEMV does. Thread count: braze's.
"""
from __future__ import annotations

import ctypes as C
import glob
import importlib.util
import os

import numpy as np

from ..reference.quant import BLOCKS

# GGML type ids (ggml.h) of the braze formats ggml multiplies.
GGML_TYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10, "q3_K": 11, "q4_K": 12,
              "q5_K": 13, "q6_K": 14, "iq4_nl": 20, "iq4_xs": 23, "mxfp4_gguf": 39}
# Types ggml-cpu repacks on x86 (repack.cpp, ggml_repack_get_optimal_repack_type): AVX2 / AVX-512 needed.
# (elements, bytes) of a block of each: the GGML blocks' table, and GGUF's mxfp4 (an e8m0 byte and 16)
_BLOCKS = dict(BLOCKS, mxfp4_gguf=(32, 17))
_REPACK_AVX2 = {"q4_0", "q4_K", "iq4_nl", "mxfp4_gguf"}
_REPACK_AVX512 = {"q2_K"}
_GGML_F32 = 0
_DEV_CPU = 0


class _InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


class _PoolParams(C.Structure):  # struct ggml_threadpool_params
    _fields_ = [("cpumask", C.c_bool * 512), ("n_threads", C.c_int), ("prio", C.c_int), ("poll", C.c_uint32),
                ("strict_cpu", C.c_bool), ("paused", C.c_bool)]


def library_dir():
    """llama_cpp's ``lib/`` folder when it holds ggml's libraries, else None."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    return d if glob.glob(os.path.join(d, "libggml-cpu.*")) else None


def _load(d, name):
    path = sorted(glob.glob(os.path.join(d, f"lib{name}.so*")) + glob.glob(os.path.join(d, f"lib{name}*.dylib")))
    if not path:
        raise OSError(f"lib{name} not found in {d}")
    return C.CDLL(path[0], mode=C.RTLD_GLOBAL)


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype, f.argtypes = res, list(args)
    return f


class _Ggml:
    """The ggml entry points the peer uses, bound once."""

    def __init__(self, d):
        base, cpu, top = _load(d, "ggml-base"), _load(d, "ggml-cpu"), _load(d, "ggml")
        P = C.c_void_p
        self.init = _sig(base, "ggml_init", P, _InitParams)
        self.free = _sig(base, "ggml_free", None, P)
        self.tensor_overhead = _sig(base, "ggml_tensor_overhead", C.c_size_t)
        self.graph_overhead = _sig(base, "ggml_graph_overhead", C.c_size_t)
        self.new_tensor_2d = _sig(base, "ggml_new_tensor_2d", P, P, C.c_int, C.c_int64, C.c_int64)
        self.nbytes = _sig(base, "ggml_nbytes", C.c_size_t, P)
        self.mul_mat = _sig(base, "ggml_mul_mat", P, P, P, P)
        self.new_graph = _sig(base, "ggml_new_graph", P, P)
        self.build_forward_expand = _sig(base, "ggml_build_forward_expand", None, P, P)
        self.tensor_set = _sig(base, "ggml_backend_tensor_set", None, P, P, C.c_size_t, C.c_size_t)
        self.tensor_get = _sig(base, "ggml_backend_tensor_get", None, P, P, C.c_size_t, C.c_size_t)
        self.buft_name = _sig(base, "ggml_backend_buft_name", C.c_char_p, P)
        self.alloc_ctx = _sig(base, "ggml_backend_alloc_ctx_tensors_from_buft", P, P, P)
        self.buffer_free = _sig(base, "ggml_backend_buffer_free", None, P)
        self.graph_compute = _sig(base, "ggml_backend_graph_compute", C.c_int, P, P)
        self.pool_params_default = _sig(base, "ggml_threadpool_params_default", _PoolParams, C.c_int)
        self.cpu_init = _sig(cpu, "ggml_backend_cpu_init", P)
        self.cpu_set_threads = _sig(cpu, "ggml_backend_cpu_set_n_threads", None, P, C.c_int)
        self.cpu_set_pool = _sig(cpu, "ggml_backend_cpu_set_threadpool", None, P, P)
        self.pool_new = _sig(cpu, "ggml_threadpool_new", P, C.POINTER(_PoolParams))
        self.cpu_buft = _sig(cpu, "ggml_backend_cpu_buffer_type", P)
        self.has_avx2 = _sig(cpu, "ggml_cpu_has_avx2", C.c_int)
        self.has_avx512 = _sig(cpu, "ggml_cpu_has_avx512", C.c_int)
        # ggml's log (it announces each repacked tensor on stderr) goes nowhere
        self._quiet = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)(lambda level, text, user: None)
        _sig(base, "ggml_log_set", None, C.c_void_p, C.c_void_p)(C.cast(self._quiet, C.c_void_p), None)
        self.dev_by_type = _sig(top, "ggml_backend_dev_by_type", P, C.c_int)
        self.dev_reg = _sig(base, "ggml_backend_dev_backend_reg", P, P)
        self.proc = _sig(base, "ggml_backend_reg_get_proc_address", P, P, C.c_char_p)

    def repack_buft(self):
        """The CPU device's repacking buffer type (``CPU_REPACK``), or None."""
        dev = self.dev_by_type(_DEV_CPU)
        addr = self.proc(self.dev_reg(dev), b"ggml_backend_dev_get_extra_bufts") if dev else None
        if not addr:
            return None
        bufts = C.CFUNCTYPE(C.POINTER(C.c_void_p), C.c_void_p)(addr)(dev)
        i = 0
        while bufts and bufts[i]:
            if self.buft_name(bufts[i]) == b"CPU_REPACK":
                return bufts[i]
            i += 1
        return None


class GgmlMatmul:
    """out = x @ W.T through ggml's CPU backend; W given as its GGUF blocks [N, K / block * bytes]."""

    def __init__(self, threads, d=None):
        d = d or library_dir()
        if d is None:
            raise OSError("ggml not found (pip install llama-cpp-python)")
        self.g = g = _Ggml(d)
        self.backend = g.cpu_init()
        g.cpu_set_threads(self.backend, threads)
        params = g.pool_params_default(threads)
        self.pool = g.pool_new(C.byref(params))
        g.cpu_set_pool(self.backend, self.pool)
        self.repack = g.repack_buft()
        self.avx2, self.avx512 = bool(g.has_avx2()), bool(g.has_avx512())
        self.weights = {}  # id(data) -> (data, ctx, buffer, tensor): the arrays of one (format, shape)
        self.graphs = {}  # (id(data), m) -> (ctx, buffer, x tensor, out tensor, graph)
        self.kind = None

    def _repacks(self, fmt, n):
        wanted = fmt in _REPACK_AVX2 and self.avx2 or fmt in _REPACK_AVX512 and self.avx512
        return self.repack is not None and wanted and n % 8 == 0

    def _ctx(self, tensors):
        g = self.g
        return g.init(_InitParams(tensors * g.tensor_overhead() + g.graph_overhead() + 4096, None, True))

    def _drop(self):
        for table in (self.graphs, self.weights):
            for entry in table.values():
                ctx, buf = (entry[1], entry[2]) if table is self.weights else entry[:2]
                self.g.buffer_free(buf)
                self.g.free(ctx)
            table.clear()

    def _weight(self, data, fmt, k):
        kind = (fmt, data.shape, k)
        if kind != self.kind:  # a new weight shape: free the last one's copies
            self._drop()
            self.kind = kind
        key = id(data)
        if key not in self.weights:
            g, n = self.g, data.shape[0]
            blocks = np.ascontiguousarray(data)
            ctx = self._ctx(1)
            t = g.new_tensor_2d(ctx, GGML_TYPES[fmt], k, n)
            if g.nbytes(t) != blocks.nbytes:
                raise ValueError(f"data: {blocks.nbytes} bytes, ggml's {fmt} [{n}, {k}] has {g.nbytes(t)}")
            buf = g.alloc_ctx(ctx, self.repack if self._repacks(fmt, n) else g.cpu_buft())
            g.tensor_set(t, blocks.ctypes.data, 0, blocks.nbytes)  # repacked here where the buffer repacks
            self.weights[key] = (data, ctx, buf, t)
        return self.weights[key][3]

    def __call__(self, x, data, fmt):
        """Checked here, before ggml sees anything: ggml aborts the process on shapes it rejects."""
        if fmt not in GGML_TYPES:
            raise ValueError(f"format: ggml has no {fmt!r}")
        x, data = np.asarray(x), np.asarray(data)
        if x.dtype != np.float32:
            raise TypeError(f"x must be float32 for ggml's CPU matmul, got {x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"x must be [M, K], got shape {x.shape}")
        if data.dtype != np.uint8 or data.ndim != 2:
            raise ValueError(f"data must be uint8 [N, K / block * bytes], got {data.dtype} {data.shape}")
        m, k = x.shape
        block, nbytes = _BLOCKS[fmt]
        if k % block or data.shape[1] != k // block * nbytes:
            raise ValueError(f"data: {data.shape[1]} bytes a row do not hold K = {k} elements of {fmt} "
                             f"(blocks of {block} in {nbytes} bytes)")
        if m == 0 or data.shape[0] == 0:
            return np.zeros((m, data.shape[0]), np.float32)
        w = self._weight(data, fmt, k)
        key = (id(data), m)
        if key not in self.graphs:
            g = self.g
            ctx = self._ctx(3)
            xt = g.new_tensor_2d(ctx, _GGML_F32, k, m)
            ot = g.mul_mat(ctx, w, xt)
            buf = g.alloc_ctx(ctx, g.cpu_buft())
            graph = g.new_graph(ctx)
            g.build_forward_expand(graph, ot)
            self.graphs[key] = (ctx, buf, xt, ot, graph)
        _, _, xt, ot, graph = self.graphs[key]
        xc = np.ascontiguousarray(x)
        out = np.empty((m, data.shape[0]), np.float32)
        self.g.tensor_set(xt, xc.ctypes.data, 0, xc.nbytes)
        if self.g.graph_compute(self.backend, graph) != 0:
            raise RuntimeError("ggml_backend_graph_compute failed")
        self.g.tensor_get(ot, out.ctypes.data, 0, out.nbytes)
        return out


_engine = None


def matmul(threads):
    """The process's GgmlMatmul (created on first use with ``threads``)."""
    global _engine
    if _engine is None:
        _engine = GgmlMatmul(threads)
    return _engine
