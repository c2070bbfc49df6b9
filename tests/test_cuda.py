"""CUDA-specific depth for the norm family: every op x dtype x row length x
layout against the float64 reference, outputs poisoned with NaN (and the
memory around strided outputs checked untouched), CUDA graphs, streams,
devices, CuPy, mixed-device errors and VJP determinism.

Skips cleanly without torch, a GPU or a usable braze._cuda.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import braze  # noqa: E402
from braze import _backends  # noqa: E402
from braze.reference import norm as ref  # noqa: E402

READY = torch.cuda.is_available() and _backends.usable("cuda")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not READY, reason=f"no CUDA GPU, torch or braze._cuda here "
                                                   f"({_backends.why_not('cuda') or 'torch sees no GPU'})")]

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}
OPS = ("rms_norm", "layer_norm", "add_rms_norm", "rms_norm_gated", "rms_norm_vjp", "layer_norm_vjp")

# (shape, layout): "contig"; "strided" = rows of a wider buffer (row stride H + 8,
# 16-byte aligned for 16-bit types); "misaligned" = the same shifted by one
# element (the scalar path).
SHAPES = [
    ((1, 4096), "contig"), ((1, 1), "contig"), ((3, 7), "contig"), ((5, 33), "contig"),
    ((4, 1000), "contig"), ((8, 4096), "contig"), ((3, 8192), "contig"), ((2, 16384), "contig"),
    ((2, 65537), "contig"), ((2, 262144), "contig"), ((0, 512), "contig"), ((2, 0, 64), "contig"),
    ((2, 3, 256), "contig"), ((1000, 64), "contig"), ((3000, 2048), "contig"),
    # more rows than the persistent grid holds: the staged form's pipeline wraps
    # its stages several times per group (warp form, 128- and 256-thread blocks)
    ((6000, 1024), "contig"), ((2500, 4096), "strided"), ((1500, 8192), "contig"),
    # rows split over a cluster of blocks on compute capability 9+ (2 to 8 CTAs)
    ((3, 50000), "contig"), ((2, 131072), "contig"), ((5, 12000), "misaligned"), ((4, 40000), "strided"),
    ((6, 1000), "strided"), ((4, 4096), "strided"), ((2, 20000), "strided"),
    ((3, 96), "misaligned"), ((5, 1000), "misaligned"), ((5, 4096), "misaligned"),
]


def shape_id(s):
    return "x".join(map(str, s[0])) + ("" if s[1] == "contig" else "-" + s[1])


def _buffer(shape, layout, dtype, fill=None, gen=None, mean=0.0, std=1.0):
    """(view, buffer): a CUDA tensor of `shape` laid out as `layout` inside `buffer`."""
    lead, h = tuple(shape[:-1]), shape[-1]
    pad = 0 if layout == "contig" else 8
    full = lead + (h + pad,)
    if fill is None:
        buf = (torch.randn(full, generator=gen, dtype=torch.float64) * std + mean).to(DTYPES[dtype]).cuda()
    else:
        buf = torch.full(full, fill, dtype=DTYPES[dtype], device="cuda")
    off = 1 if layout == "misaligned" else 0
    return buf[..., off:off + h], buf


def _vector(n, dtype, gen, mean=1.0, std=0.2):
    return (torch.randn(n, generator=gen, dtype=torch.float64) * std + mean).to(DTYPES[dtype]).cuda()


def _np(t):
    return None if t is None else t.detach().double().cpu().numpy()


def _check(name, got, want, dtype, buf=None):
    g, w = _np(got), np.asarray(want, dtype=np.float64)
    assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
    assert not np.isnan(g).any(), f"{name}: {int(np.isnan(g).sum())} elements left unwritten (NaN)"
    scale = max(1.0, float(np.sqrt(np.mean(w * w)))) if w.size else 1.0
    tol = TOL[dtype]
    err = np.abs(g - w)
    bad = err > tol * (np.abs(w) + scale)
    assert not bad.any(), (f"{name}: {int(bad.sum())} of {w.size} elements off; max error "
                           f"{err.max():.3g} (tolerance {tol} x (|ref| + {scale:.3g}))")
    if buf is not None:  # nothing outside the output view was written
        mask = torch.zeros(buf.shape, dtype=torch.bool, device=buf.device)
        mask.view(-1)[_flat_index(buf, got)] = True
        assert torch.isnan(buf[~mask].float()).all(), f"{name}: wrote outside its view"


def _flat_index(buf, view):
    """Flat indices into contiguous `buf` of the elements of `view` (a view of buf)."""
    idx = torch.arange(buf.numel(), device=buf.device).view(buf.shape)
    off = view.storage_offset() - buf.storage_offset()
    return torch.as_strided(idx, view.shape, view.stride(), idx.storage_offset() + off).reshape(-1)


def _run(op, dtype, shape, layout, seed=0, weighted=True):
    """Runs `op` on CUDA with NaN-poisoned outputs and checks every output."""
    gen = torch.Generator().manual_seed(seed)
    h = shape[-1]
    x, _ = _buffer(shape, layout, dtype, gen=gen)
    w = _vector(h, dtype, gen) if weighted else None
    outs = []

    def out():
        v, b = _buffer(shape, layout, dtype, fill=float("nan"))
        outs.append(b)
        return v

    if op == "rms_norm":
        y = out()
        got = braze.norm.rms_norm(x, w, eps=1e-6, weight_offset=0.5, out=y)
        assert got is y
        want = ref.rms_norm(_np(x), _np(w), eps=1e-6, weight_offset=0.5)
        return [("y", y, want, outs[0])]
    if op == "layer_norm":
        b = _vector(h, dtype, gen, 0.0, 1.0) if weighted else None
        y = out()
        braze.norm.layer_norm(x, w, b, eps=1e-5, out=y)
        return [("y", y, ref.layer_norm(_np(x), _np(w), _np(b), eps=1e-5), outs[0])]
    if op == "add_rms_norm":
        r, _ = _buffer(shape, layout, dtype, gen=gen)
        y, hh = out(), out()
        braze.norm.add_rms_norm(x, r, w, eps=1e-6, out=y, residual_out=hh)
        want_y, want_h = ref.add_rms_norm(_np(x), _np(r), _np(w), eps=1e-6)
        return [("y", y, want_y, outs[0]), ("h", hh, want_h, outs[1])]
    if op == "rms_norm_gated":
        gate, _ = _buffer(shape, layout, dtype, gen=gen, std=2.0)
        group = h // 4 if h % 4 == 0 and h >= 8 else None
        y = out()
        braze.norm.rms_norm_gated(x, gate, w, eps=1e-6, group_size=group, out=y)
        return [("y", y, ref.rms_norm_gated(_np(x), _np(gate), _np(w), eps=1e-6, group_size=group), outs[0])]
    if op == "rms_norm_vjp":
        dy, _ = _buffer(shape, layout, dtype, gen=gen)
        dx = out()
        dw = torch.full((h,), float("nan"), dtype=DTYPES[dtype], device="cuda") if weighted else None
        braze.norm.rms_norm_vjp(x, w, dy, eps=1e-6, weight_offset=0.25, out=(dx, dw))
        want_dx, want_dw = ref.rms_norm_vjp(_np(x), _np(w), _np(dy), eps=1e-6, weight_offset=0.25)
        res = [("dx", dx, want_dx, outs[0])]
        return res + ([("dweight", dw, want_dw, None)] if weighted else [])
    if op == "layer_norm_vjp":
        b = _vector(h, dtype, gen, 0.0, 1.0) if weighted else None
        dy, _ = _buffer(shape, layout, dtype, gen=gen)
        dx = out()
        dw, db = ((torch.full((h,), float("nan"), dtype=DTYPES[dtype], device="cuda") for _ in range(2))
                  if weighted else (None, None))
        braze.norm.layer_norm_vjp(x, w, b, dy, eps=1e-5, out=(dx, dw, db))
        want = ref.layer_norm_vjp(_np(x), _np(w), _np(b), _np(dy), eps=1e-5)
        res = [("dx", dx, want[0], outs[0])]
        return res + ([("dweight", dw, want[1], None), ("dbias", db, want[2], None)] if weighted else [])
    raise AssertionError(op)


@pytest.mark.parametrize("shape", SHAPES, ids=[shape_id(s) for s in SHAPES])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_parity(op, dtype, shape):
    for name, got, want, buf in _run(op, dtype, *shape, seed=len(shape[0]) * 1000 + shape[0][-1]):
        _check(f"{op} {name}", got, want, dtype, buf)
    torch.cuda.synchronize()


@pytest.mark.parametrize("op", OPS)
def test_without_weight(op):
    for shape in ((4, 1000), (3, 8192)):
        for name, got, want, buf in _run(op, "bfloat16", shape, "contig", weighted=False):
            _check(f"{op} {name} (no weight)", got, want, "bfloat16", buf)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("rows,h", [(5, 33), (5, 4096), (5, 20000), (1200, 4096)])
def test_add_rms_norm_in_place(dtype, rows, h):
    gen = torch.Generator().manual_seed(h)
    x, _ = _buffer((rows, h), "contig", dtype, gen=gen)
    r, _ = _buffer((rows, h), "contig", dtype, gen=gen)
    w = _vector(h, dtype, gen)
    want_y, want_h = ref.add_rms_norm(_np(x), _np(r), _np(w), eps=1e-6)
    y, hh = braze.norm.add_rms_norm(x, r, w, eps=1e-6, residual_out=r)
    assert hh is r
    _check("h (in place)", r, want_h, dtype)
    _check("y", y, want_y, dtype)


def test_vjp_deterministic():
    gen = torch.Generator().manual_seed(7)
    x, _ = _buffer((3000, 2048), "contig", "float32", gen=gen)
    dy, _ = _buffer((3000, 2048), "contig", "float32", gen=gen)
    w, b = _vector(2048, "float32", gen), _vector(2048, "float32", gen)
    first = braze.norm.layer_norm_vjp(x, w, b, dy)
    for _ in range(3):
        again = braze.norm.layer_norm_vjp(x, w, b, dy)
        for a, c in zip(first, again):
            assert torch.equal(a, c)


def test_cuda_graph_replay():
    gen = torch.Generator().manual_seed(11)
    x, _ = _buffer((64, 4096), "contig", "bfloat16", gen=gen)
    w = _vector(4096, "bfloat16", gen)
    y = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph, as torch asks
        braze.norm.rms_norm(x, w, out=y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        braze.norm.rms_norm(x, w, out=y)
    for seed in (1, 2):
        x.copy_(_buffer((64, 4096), "contig", "bfloat16", gen=torch.Generator().manual_seed(seed))[0])
        y.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        _check("rms_norm (graph replay)", y, ref.rms_norm(_np(x), _np(w)), "bfloat16")


def test_cuda_graph_vjp_workspace():
    """The VJP's partials live in graph-owned memory during capture."""
    gen = torch.Generator().manual_seed(12)
    x, _ = _buffer((512, 2048), "contig", "float32", gen=gen)
    dy, _ = _buffer((512, 2048), "contig", "float32", gen=gen)
    w = _vector(2048, "float32", gen)
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        braze.norm.rms_norm_vjp(x, w, dy, out=(dx, dw))
    dx.fill_(float("nan"))
    dw.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    want_dx, want_dw = ref.rms_norm_vjp(_np(x), _np(w), _np(dy))
    _check("dx (graph)", dx, want_dx, "float32")
    _check("dweight (graph)", dw, want_dw, "float32")


def test_non_default_stream():
    """Runs on the producer's current stream: x is written on `s` after a long
    sleep, so a launch on any other stream would read stale data."""
    gen = torch.Generator().manual_seed(13)
    src, _ = _buffer((256, 8192), "contig", "bfloat16", gen=gen)
    w = _vector(8192, "bfloat16", gen)
    x = torch.zeros_like(src)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(20_000_000)
        x.copy_(src)
        y = braze.norm.rms_norm(x, w)
    s.synchronize()
    _check("rms_norm (side stream)", y, ref.rms_norm(_np(src), _np(w)), "bfloat16")


@pytest.mark.skipif(not READY or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_second_device():
    dev = torch.device("cuda:1")
    gen = torch.Generator().manual_seed(14)
    x = torch.randn(8, 4096, generator=gen).to(torch.bfloat16).to(dev)
    w = torch.randn(4096, generator=gen).to(torch.bfloat16).to(dev)
    before = torch.cuda.current_device()
    y = braze.norm.rms_norm(x, w)
    torch.cuda.synchronize(dev)
    assert y.device == dev and torch.cuda.current_device() == before
    _check("rms_norm on cuda:1", y, ref.rms_norm(_np(x), _np(w)), "bfloat16")
    dx, dw = braze.norm.rms_norm_vjp(x, w, x)
    torch.cuda.synchronize(dev)
    want_dx, want_dw = ref.rms_norm_vjp(_np(x), _np(w), _np(x))
    _check("dx on cuda:1", dx, want_dx, "bfloat16")
    _check("dweight on cuda:1", dw, want_dw, "bfloat16")


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    rng = np.random.default_rng(15)
    xh = rng.normal(size=(16, 1000)).astype(np.float32)
    wh = rng.normal(1, 0.2, size=1000).astype(np.float32)
    x, w = cp.asarray(xh), cp.asarray(wh)
    y = braze.norm.rms_norm(x, w)
    assert isinstance(y, cp.ndarray)
    cp.cuda.get_current_stream().synchronize()
    _check("rms_norm (cupy)", torch.as_tensor(cp.asnumpy(y)), ref.rms_norm(xh.astype(np.float64), wh.astype(np.float64)),
           "float32")
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        y2 = braze.norm.layer_norm(x, w, None)
    s.synchronize()
    _check("layer_norm (cupy, side stream)", torch.as_tensor(cp.asnumpy(y2)),
           ref.layer_norm(xh.astype(np.float64), wh.astype(np.float64)), "float32")


def test_mixed_devices_raise():
    x = torch.randn(4, 64, device="cuda")
    w = torch.randn(64)
    with pytest.raises(ValueError, match="weight"):
        braze.norm.rms_norm(x, w)
    y = torch.full_like(x, float("nan"))
    with pytest.raises(ValueError, match="residual"):
        braze.norm.add_rms_norm(x, torch.randn(4, 64), out=y, residual_out=torch.empty_like(x))
    torch.cuda.synchronize()
    assert torch.isnan(y).all()
