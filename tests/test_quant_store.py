"""Where the CPU dequantize kernels write, on every instruction-set build: outputs
streamed around the cache (forced on for small tensors) hold the same bits as the
cached stores, into aligned, strided and misaligned outputs; and no kernel reads
or writes a byte beyond its arrays (each placed against a page the process may
not touch, so a stray access ends the run)."""
import ctypes
import mmap
import sys

import numpy as np
import pytest

import braze
from braze import _spec
from braze import quant as bq
from conftest import cpu_isa

_spec.load_all()
FORMATS = [f for f, r in bq.formats().items() if r.dequantize_built]
DTYPES = ("float32", "float16", "bfloat16")
ISAS = braze._cpu.isas_supported()


def shapes(fmt):
    """(rows, cols): several blocks (or groups) a row; a ragged tail where the format allows one."""
    block = bq.formats()[fmt].block
    unit = max(block, 128 if fmt.startswith("affine") else 1, 16)
    out = [(3, 2 * unit), (2, 5 * unit)]
    if block == 1:  # fp8 / int8: rows that end inside a vector
        out += [(3, 37), (2, 133)]
    return out


def inputs(fmt, n, k, dtype, seed=0):
    spec = _spec.get(f"dequantize_{fmt}")
    arrays, kw = spec.make_inputs((n, k), dtype, np.random.default_rng(seed), {}, False)
    return spec.fn, arrays, kw


def bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def same(got, want):
    """Equal bits; a NaN matches a NaN of either sign (x86 and numpy may differ in the sign)."""
    g, w = bits(got), bits(want)
    f = np.asarray(want).astype(np.float32)
    nan = np.isnan(f)
    return g.shape == w.shape and bool((np.isnan(np.asarray(got).astype(np.float32)) == nan).all()) \
        and bool((g[~nan] == w[~nan]).all())


def aligned_empty(shape, dtype, align=64, offset=0):
    """An array whose first element sits `offset` bytes past an `align`-byte boundary."""
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dt.itemsize
    raw = np.empty(nbytes + align + offset, np.uint8)
    start = (-raw.ctypes.data) % align + offset
    return raw[start:start + nbytes].view(dt).reshape(shape)


@pytest.fixture
def streamed():
    """Every dequantize output counts as large: the streaming stores run on small tensors."""
    braze._cpu.set_stream_min_bytes(0)
    try:
        yield
    finally:
        braze._cpu.set_stream_min_bytes(-1)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_streamed_output_equals_cached(fmt, isa, streamed):
    for dtype in DTYPES:
        for n, k in shapes(fmt):
            fn, arrays, kw = inputs(fmt, n, k, dtype)
            braze._cpu.set_stream_min_bytes(-1)
            with cpu_isa(isa):
                want = np.asarray(fn(*arrays, **kw))
            braze._cpu.set_stream_min_bytes(0)
            with cpu_isa(isa):
                assert same(fn(*arrays, **kw), want), (fmt, dtype, n, k, "returned")
                # aligned, rows 8 elements apart inside a wider buffer, one element off a boundary
                for label, full, view in (
                        ("aligned", None, aligned_empty((n, k), want.dtype)),
                        ("strided", aligned_empty((n, k + 8), want.dtype), None),
                        ("misaligned", None, aligned_empty((n, k), want.dtype, offset=want.dtype.itemsize))):
                    if full is not None:
                        full[...] = np.asarray(-3.0, np.float32).astype(want.dtype)
                        view = full[:, :k]
                    fn(*arrays, **kw, out=view)
                    assert same(view, want), (fmt, dtype, n, k, label)
                    if full is not None:
                        assert (np.asarray(full[:, k:]).astype(np.float32) == -3.0).all(), (fmt, dtype, label)


# ---------------------------------------------------------------- bounds
_PAGE = mmap.PAGESIZE


class Fenced:
    """Arrays that end at a page the process may not touch (PROT_NONE)."""

    def __init__(self):
        self.maps = []
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def place(self, a):
        if not isinstance(a, np.ndarray):
            return a
        a = np.ascontiguousarray(a)
        pages = -(-a.nbytes // _PAGE) + 1
        m = mmap.mmap(-1, pages * _PAGE)
        buf = (ctypes.c_char * (pages * _PAGE)).from_buffer(m)
        fence = ctypes.addressof(buf) + (pages - 1) * _PAGE
        assert self.libc.mprotect(fence, _PAGE, 0) == 0, ctypes.get_errno()
        g = np.frombuffer(m, np.uint8, a.nbytes, (pages - 1) * _PAGE - a.nbytes).view(a.dtype).reshape(a.shape)
        g[...] = a
        self.maps.append((m, buf))
        return g


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fences pages with mprotect through libc")
@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_access_past_the_arrays(fmt, isa, streamed):
    fence = Fenced()
    for dtype in DTYPES:
        for n, k in shapes(fmt):
            fn, arrays, kw = inputs(fmt, n, k, dtype, seed=1)
            with cpu_isa(isa):
                want = np.asarray(fn(*arrays, **kw))
                got = fn(*[fence.place(a) for a in arrays], **kw)
                out = fence.place(np.zeros_like(want))
                fn(*[fence.place(a) for a in arrays], **kw, out=out)
            assert same(got, want) and same(out, want), (fmt, dtype, n, k)
