"""CUDA-specific depth for the norm family: every op x dtype x row length x
layout against the float64 reference, outputs poisoned with NaN (and the
memory around strided outputs checked untouched), CUDA graphs, streams,
devices, CuPy, mixed-device errors, VJP determinism and the VJPs'
caller-provided workspace (two host threads on one stream). Sampling rows
split over a thread-block cluster (sm_90) against the CPU backend's tokens.

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
    """The VJP's workspace is allocated by torch during capture (the graph's pool)."""
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


# ---------------------------------------------------------------- VJP workspace
def test_vjp_two_host_threads_one_stream():
    """Two host threads hammer the VJPs on one stream with different shapes
    (so different workspace sizes); each result matches the reference."""
    import threading

    stream = torch.cuda.Stream()
    shapes = {0: (3000, 2048), 1: (700, 8192)}
    inputs = {}
    for i, (rows, h) in shapes.items():
        gen = torch.Generator().manual_seed(40 + i)
        x, _ = _buffer((rows, h), "contig", "float32", gen=gen)
        dy, _ = _buffer((rows, h), "contig", "float32", gen=gen)
        inputs[i] = (x, _vector(h, "float32", gen), dy)
    torch.cuda.synchronize()
    results, errors = {0: [], 1: []}, []

    def work(i):
        try:
            x, w, dy = inputs[i]
            with torch.cuda.stream(stream):
                for _ in range(25):
                    results[i].append(braze.norm.rms_norm_vjp(x, w, dy))
        except Exception as e:  # reported below, in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in shapes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stream.synchronize()
    assert not errors, errors
    for i, (x, w, dy) in inputs.items():
        want_dx, want_dw = ref.rms_norm_vjp(_np(x), _np(w), _np(dy))
        first = results[i][0]
        _check(f"dx (thread {i})", first[0], want_dx, "float32")
        _check(f"dweight (thread {i})", first[1], want_dw, "float32")
        for dx, dw in results[i][1:]:  # the grid is fixed: every repeat has the same bits
            assert torch.equal(dx, first[0]) and torch.equal(dw, first[1])


def test_vjp_workspace_size_checked():
    from braze import _cuda

    gen = torch.Generator().manual_seed(41)
    x, _ = _buffer((512, 4096), "contig", "float32", gen=gen)
    dy, _ = _buffer((512, 4096), "contig", "float32", gen=gen)
    w = _vector(4096, "float32", gen)
    need = _cuda.norm_vjp_workspace_bytes("rms_norm_vjp", "float32", 512, 4096, 1, 0)
    assert need >= 4096 * 4
    assert _cuda.norm_vjp_workspace_bytes("rms_norm_vjp", "float32", 0, 4096, 1, 0) == 0
    assert _cuda.norm_vjp_workspace_bytes("layer_norm_vjp", "bfloat16", 512, 4096, 0, 0) == 0
    with pytest.raises(ValueError, match="op"):
        _cuda.norm_vjp_workspace_bytes("rms_norm", "float32", 512, 4096, 1, 0)
    dx = torch.full_like(x, float("nan"))
    dw = torch.full_like(w, float("nan"))
    native = torch.utils.dlpack.to_dlpack
    for ws, match in ((torch.empty(16, dtype=torch.uint8, device="cuda"), "workspace"),
                      (None, "workspace"),
                      (torch.empty(need, dtype=torch.uint8), "workspace"),
                      (torch.empty(need // 4, dtype=torch.float32, device="cuda"), "workspace")):
        with pytest.raises(ValueError, match=match):
            _cuda.rms_norm_vjp(native(x), native(w), native(dy), native(dx), native(dw), 1e-6, 0.0,
                               stream=torch.cuda.current_stream().cuda_stream,
                               workspace=None if ws is None else native(ws))
    torch.cuda.synchronize()
    assert torch.isnan(dx).all() and torch.isnan(dw).all()
    ws = torch.empty(need, dtype=torch.uint8, device="cuda")
    _cuda.rms_norm_vjp(native(x), native(w), native(dy), native(dx), native(dw), 1e-6, 0.0,
                       stream=torch.cuda.current_stream().cuda_stream, workspace=native(ws))
    torch.cuda.synchronize()
    want_dx, want_dw = ref.rms_norm_vjp(_np(x), _np(w), _np(dy))
    _check("dx (own workspace)", dx, want_dx, "float32")
    _check("dweight (own workspace)", dw, want_dw, "float32")


# ---------------------------------------------------------------- split sampling rows
# Rows sample and the masks split over a cluster of CTAs on sm_90 when the
# batch leaves SMs idle (slices of >= 8192 elements, at most 8 CTAs):
# 1 x 128256 takes 8, 3 x 70000 8, 2 x 40000 4, 1 x 16384 2; 200 x 70000 fills
# the GPU and stays whole (the same tokens either way).
SPLIT_SAMPLE_SHAPES = ((1, 128256), (3, 70000), (2, 40000), (1, 16384), (200, 70000))
SAMPLE_CASES = (
    {}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.1}, {"top_k": 50, "top_p": 0.9},
    {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05}, {"temperature": 0.0},
    {"top_k": 6000}, {"top_k": 6000, "top_p": 0.95}, {"temperature": 2.0, "top_p": 0.5},
)


def _logits_np(rows, cols, seed, scale=3.0):
    return np.random.default_rng(seed).normal(0, scale, size=(rows, cols)).astype(np.float32)


def _on_cuda(x, dtype):
    return torch.from_numpy(x).to(DTYPES[dtype]).cuda()


def _cpu_twin(t):
    """The numpy array the CPU backend takes for the CUDA tensor t (bf16 via ml_dtypes)."""
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.cpu().numpy()


def _sample_both(x, **kw):
    got = braze.sampling.sample(x, **kw)
    want = braze.sampling.sample(_cpu_twin(x), **kw)
    torch.cuda.synchronize()
    return got.cpu().numpy(), np.asarray(want)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", SPLIT_SAMPLE_SHAPES, ids=["x".join(map(str, s)) for s in SPLIT_SAMPLE_SHAPES])
def test_split_sample_matches_cpu(shape, dtype):
    """The same tokens as the CPU, except a draw on a boundary: the CUDA sampler
    sums the kept mass in 2^-40 fixed point, the CPU in double, so a target
    within a relative 1e-6 of the cumulative mass between two neighbouring kept
    tokens may fall either side (seen once in 6000 rows of 200x70000 bf16 on the
    H200, at 1.6e-9). Any other difference is a wrong candidate set: a bug."""
    x = _on_cuda(_logits_np(*shape, seed=shape[1] + shape[0]), dtype)
    for ci, case in enumerate(SAMPLE_CASES):
        for offset in (0, 1, 77):
            got, want = _sample_both(x, seed=99, offset=offset, **case)
            for r in np.nonzero(got != want)[0]:
                gap = _boundary_gap(_cpu_twin(x[r:r + 1]).astype(np.float64)[0], case, 99, offset, r,
                                    got[r], want[r])
                assert gap < 1e-6, f"case {case} offset {offset} row {r}: cuda {got[r]} cpu {want[r]} (gap {gap})"


def _boundary_gap(x, case, seed, offset, row, a, b):
    """How far (relative to the kept mass) the row's draw lands from the boundary
    between tokens a and b, in float64; inf unless a and b are neighbours in
    the kept set."""
    from braze.reference import sampling as sref

    t = case.get("temperature", 1.0) or 1.0
    e = np.exp(x / t - (x / t).max())
    kept = np.asarray(sref.top_k_mask(x[None], case["top_k"]))[0] if case.get("top_k") else x
    kept = np.where(e >= case.get("min_p", 0.0), kept, -np.inf)
    kept = np.asarray(sref.top_p_mask(kept[None], case.get("top_p", 1.0), temperature=t))[0]
    w = np.where(kept > -np.inf, e, 0.0)
    lo, hi = sorted((int(a), int(b)))
    if lo < 0 or w[lo] == 0 or w[hi] == 0 or w[lo + 1:hi].any():
        return math.inf
    cum = np.cumsum(w)
    u = float(sref.row_uniforms(seed, offset, row + 1)[row])
    return abs(u * cum[-1] - cum[lo]) / cum[-1]


def test_split_sample_per_row_params():
    rows, cols = 3, 70000
    x = _on_cuda(_logits_np(rows, cols, seed=5), "float32")
    params = dict(temperature=torch.tensor([0.5, 1.0, 0.0]), top_k=torch.tensor([0, 40, 5], dtype=torch.int32),
                  top_p=torch.tensor([0.9, 1.0, 0.5]), min_p=torch.tensor([0.0, 0.05, 0.2]))
    cuda_kw = {k: v.cuda() for k, v in params.items()}
    cpu_kw = {k: v.numpy() for k, v in params.items()}
    for offset in range(4):
        got = braze.sampling.sample(x, seed=3, offset=offset, **cuda_kw).cpu().numpy()
        want = np.asarray(braze.sampling.sample(_cpu_twin(x), seed=3, offset=offset, **cpu_kw))
        assert np.array_equal(got, want), (offset, got, want)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_split_sample_special_values(dtype):
    """NaN, +inf and -inf sitting in one CTA's slice of a split row."""
    cols = 128256
    x = _logits_np(7, cols, seed=6)
    x[1, 100000] = np.nan     # -> -1
    x[2, 70000] = np.inf      # -> -1 (no finite max)
    x[3, :] = -np.inf         # -> -1
    x[4, :120000] = -np.inf   # only the last slice can be drawn
    x[5, 17:] = -np.inf       # only the first slice can be drawn
    x[6, ::2] = -np.inf       # every other element
    t = _on_cuda(x, dtype)
    for case in ({}, {"top_k": 50, "top_p": 0.9}, {"top_p": 0.9}, {"min_p": 0.1}, {"temperature": 0.0}):
        got, want = _sample_both(t, seed=11, offset=2, **case)
        assert np.array_equal(got, want), (case, got, want)
        assert (got[1:4] == -1).all()
        assert got[4] >= 120000 and 0 <= got[5] < 17 and got[6] % 2 == 1


def test_split_sample_warp_bound_edges():
    """Split rows bound top-k (k up to 32 warps a CTA of the cluster) by the k-th
    largest of every warp's max: rows of ties (the list overflows: the radix
    path), few warps holding finite values (fewer than k: no bound), the top of
    the row in one CTA (its warps hold the largest maxima), and k at and past
    the cluster's warp count (8 CTAs x 32 at 1 x 128256)."""
    cols = 128256
    x = _logits_np(6, cols, seed=12)
    x[1] = np.round(x[1] / 4)  # a few distinct values: thousands tie at any bound
    x[2] = 1.0                 # all equal
    x[3, :] = -np.inf
    x[3, ::4000] = np.arange(33, dtype=np.float32)  # 33 finite values, at most 33 warps hold one
    x[4, :] = -np.inf
    x[4, ::500] = np.linspace(-3, 3, (cols + 499) // 500)  # one finite value per ~warp
    x[5, :16032] += 6.0  # the largest values in the first CTA's slice: one CTA lists every candidate
    t = _on_cuda(x, "float32")
    for k in (1, 2, 20, 50, 255, 256, 257, 1000):
        for case in ({"top_k": k}, {"top_k": k, "top_p": 0.9}, {"top_k": k, "temperature": 0.5, "min_p": 0.05}):
            for r in range(6):
                got, want = _sample_both(t[r:r + 1], seed=21, offset=r, **case)
                if got[0] != want[0]:
                    gap = _boundary_gap(x[r].astype(np.float64), case, 21, r, 0, got[0], want[0])
                    assert gap < 1e-6, f"row {r} case {case}: cuda {got[0]} cpu {want[0]} (gap {gap})"


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("shape", ((1, 128256), (3, 70000)), ids=["1x128256", "3x70000"])
def test_split_masks_match_cpu(shape, dtype):
    S = braze.sampling
    x = _on_cuda(_logits_np(*shape, seed=9), dtype)
    x[0, 5000] = float("-inf")
    for name, kw in (("top_k_mask", {"k": 50}), ("top_k_mask", {"k": 6000}), ("top_p_mask", {"p": 0.9}),
                     ("top_p_mask", {"p": 0.5, "temperature": 0.7}), ("min_p_mask", {"p": 0.1})):
        fn = getattr(S, name)
        want = np.asarray(fn(_cpu_twin(x), **kw)).astype(np.float32)
        got = _cpu_twin(fn(x, **kw)).astype(np.float32)
        assert np.array_equal(got, want), f"{name} {kw}"
        inplace = x.clone()
        fn(inplace, **kw, out=inplace)
        assert np.array_equal(_cpu_twin(inplace).astype(np.float32), want), f"{name} {kw} in place"


def test_split_sample_reference():
    """The registry's sample spec (every option case) on split shapes, against the reference sampler."""
    from braze import _spec, testing

    spec = next(s for s in _spec.ops("sampling") if s.name == "sample")
    for shape in ((1, 128256), (3, 70000)):
        for case in spec.cases:
            res = testing.check(spec, "cuda", "float32", shape, case, seed=4)
            assert res.ok, f"{shape} {case}: {res.message}"


# ---------------------------------------------------------------- ops family
# CUDA-only depth for braze.ops (the registry's parity test covers the common
# cases): large rows checked on a subsample, misaligned pointers (the scalar
# path), strided and broadcast rows, out-of-range ids, every Hadamard size,
# in place, empty batches. References are float64 torch on the GPU.
import math  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402


def _ops_input(shape, dtype, layout, gen, std=2.0):
    """A CUDA tensor of `shape`: "contig", "strided" (rows of a wider buffer),
    "misaligned" (shifted by one element) or "broadcast" (one row, stride 0)."""
    if layout == "broadcast":
        row = (torch.randn(shape[-1], generator=gen, dtype=torch.float64) * std).to(DTYPES[dtype]).cuda()
        return row.expand(shape)
    return _buffer(shape, layout, dtype, gen=gen, std=std)[0]


def _gelu(g, tanh):
    if tanh:
        return 0.5 * g * (1 + torch.tanh(math.sqrt(2 / math.pi) * (g + 0.044715 * g ** 3)))
    return 0.5 * g * (1 + torch.erf(g / math.sqrt(2)))


def _act_ref(op, x, interleaved=None, approximate="none", alpha=1.702, limit=7.0):
    if interleaved is None:  # the API's defaults: swiglu_clamped interleaves (gpt-oss), the others do not
        interleaved = op == "swiglu_clamped"
    x = x.double()
    if op in ("silu", "gelu"):
        return x * torch.sigmoid(x) if op == "silu" else _gelu(x, approximate == "tanh")
    h = x.shape[-1] // 2
    g, u = (x[..., 0::2], x[..., 1::2]) if interleaved else (x[..., :h], x[..., h:])
    if op == "silu_and_mul":
        return g * torch.sigmoid(g) * u
    if op == "gelu_and_mul":
        return _gelu(g, approximate == "tanh") * u
    g = g.clamp(max=limit)
    return g * torch.sigmoid(alpha * g) * (u.clamp(-limit, limit) + 1)


ACT_CASES = [("silu_and_mul", {}), ("silu_and_mul", {"interleaved": True}),
             ("gelu_and_mul", {}), ("gelu_and_mul", {"approximate": "tanh"}),
             ("gelu_and_mul", {"approximate": "tanh", "interleaved": True}),
             ("swiglu_clamped", {}), ("swiglu_clamped", {"interleaved": False, "alpha": 1.5, "limit": 3.0}),
             ("silu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"})]
ACT_SHAPES = [((1, 2 * 14336), "contig"), ((7, 2 * 2880), "contig"), ((3, 2 * 13), "contig"),
              ((1, 2), "contig"), ((5, 2 * 4100), "misaligned"), ((4, 2 * 1000), "strided"),
              ((6, 2 * 1024), "broadcast"), ((2, 3, 2 * 40), "contig"), ((3, 2 * 7), "misaligned")]


def _act_call(op, x, out=None, **kw):
    return getattr(braze.ops, op)(x, out=out, **kw)


@pytest.mark.parametrize("shape", ACT_SHAPES, ids=[shape_id(s) for s in ACT_SHAPES])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", range(len(ACT_CASES)), ids=[f"{o}-{'-'.join(map(str, k.values()))}"
                                                              for o, k in ACT_CASES])
def test_ops_act(case, dtype, shape):
    op, kw = ACT_CASES[case]
    gen = torch.Generator().manual_seed(case * 100 + shape[0][-1])
    x = _ops_input(shape[0], dtype, shape[1], gen)
    gated = op not in ("silu", "gelu")
    out_shape = shape[0][:-1] + ((shape[0][-1] // 2,) if gated else (shape[0][-1],))
    y, buf = _buffer(out_shape, "misaligned" if shape[1] == "misaligned" else "contig", dtype, fill=float("nan"))
    assert _act_call(op, x, out=y, **kw) is y
    torch.cuda.synchronize()
    _check(op, y, _np(_act_ref(op, x, **kw)), dtype, buf)


@pytest.mark.parametrize("op", ["silu_and_mul", "gelu_and_mul"])
def test_ops_act_large_subsample(op):
    """16384 x 2*14336 bf16 (the bench shape): every 97th row against float64."""
    gen = torch.Generator(device="cuda").manual_seed(3)
    x = torch.randn(16384, 2 * 14336, generator=gen, device="cuda", dtype=torch.float32).to(torch.bfloat16)
    y = getattr(braze.ops, op)(x)
    torch.cuda.synchronize()
    rows = torch.arange(0, 16384, 97, device="cuda")
    _check(op, y[rows], _np(_act_ref(op, x[rows])), "bfloat16")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("op,kw", [("silu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"})])
def test_ops_act_in_place(op, kw, dtype):
    for shape, layout in (((9, 4096), "contig"), ((5, 333), "misaligned"), ((4, 1000), "strided")):
        x = _ops_input(shape, dtype, layout, torch.Generator().manual_seed(5))
        want = _np(_act_ref(op, x, **kw))
        assert _act_call(op, x, out=x, **kw) is x
        torch.cuda.synchronize()
        _check(f"{op} in place", x, want, dtype)


def test_ops_empty_rows():
    x = torch.empty(0, 2 * 64, device="cuda", dtype=torch.bfloat16)
    assert braze.ops.silu_and_mul(x).shape == (0, 64)
    assert braze.ops.gelu(x).shape == (0, 128)
    assert braze.ops.hadamard(torch.empty(0, 4096, device="cuda")).shape == (0, 4096)
    table = torch.randn(10, 64, device="cuda")
    assert braze.ops.embedding(torch.empty(0, dtype=torch.int32, device="cuda"), table).shape == (0, 64)
    torch.cuda.synchronize()


# embedding: ids outside [0, V) write zeros and never read out of bounds; the
# table is the last rows of a larger buffer so a wild read would show.
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dim,layout", [(4096, "contig"), (2880, "strided"), (1000, "misaligned"), (7, "contig"),
                                        (1, "contig")])
def test_ops_embedding(dim, layout, id_dtype, dtype):
    V = 1000
    gen = torch.Generator().manual_seed(dim)
    table = _ops_input((V, dim), dtype, layout, gen)
    ids = torch.randint(0, V, (37,), generator=gen)
    bad = [-1, V, -(2 ** 31), 2 ** 31 - 1] + ([2 ** 40, -(2 ** 40), 2 ** 63 - 1] if id_dtype == torch.int64 else [])
    ids[: len(bad)] = torch.tensor(bad)
    ids[-1], ids[-2] = 0, V - 1
    ids = ids.to(id_dtype).cuda()
    y, buf = _buffer((37, dim), layout if layout != "strided" else "contig", dtype, fill=float("nan"))
    assert braze.ops.embedding(ids, table, out=y) is y
    torch.cuda.synchronize()
    idc = ids.long().cpu()
    inside = (idc >= 0) & (idc < V)
    want = torch.zeros(37, dim, dtype=torch.float64)
    want[inside] = table.double().cpu()[idc[inside]]
    _check("embedding", y, want.numpy(), dtype, buf)
    assert (y[~inside.cuda()] == 0).all()


def test_ops_embedding_2d_ids():
    table = torch.randn(151936, 256, device="cuda", dtype=torch.bfloat16)
    ids = torch.randint(0, 151936, (3, 5), device="cuda", dtype=torch.int64)
    y = braze.ops.embedding(ids, table)
    torch.cuda.synchronize()
    assert y.shape == (3, 5, 256) and torch.equal(y, table[ids])


def _hadamard_matrix(m):
    if m == 1:
        return torch.ones(1, 1, dtype=torch.float64)
    path = pathlib.Path(__file__).resolve().parents[1] / "csrc" / "core" / "hadamard.h"
    if not path.exists():
        pytest.skip("csrc/core/hadamard.h is not beside the tests")
    body = re.search(rf"BRAZE_HADAMARD_{m} \{{([^}}]*)\}}", path.read_text()).group(1)
    rows = [int(v.strip().rstrip("u"), 16) for v in body.split(",")]
    return torch.tensor([[-1.0 if (r >> j) & 1 else 1.0 for j in range(m)] for r in rows], dtype=torch.float64)


def _hadamard_ref(x, m, scale=None):
    """(H_m kron H_P) x over the last axis, in float64 on x's device."""
    x = x.double()
    n = x.shape[-1]
    P = n // m
    v = x.reshape(-1, m, P)
    h = 1
    while h < P:
        w = v.reshape(v.shape[0], m, P // (2 * h), 2, h)
        v = torch.stack((w[..., 0, :] + w[..., 1, :], w[..., 0, :] - w[..., 1, :]), dim=-2).reshape(-1, m, P)
        h *= 2
    v = torch.einsum("ab,rbp->rap", _hadamard_matrix(m).to(x.device), v)
    return (v.reshape(x.shape) * (1 / math.sqrt(n) if scale is None else scale))


HAD_SIZES = [m << k for m in (1, 12, 20, 28) for k in range(16) if m << k <= 32768]


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", HAD_SIZES)
def test_ops_hadamard_sizes(n, dtype):
    m = next(mm for mm in (28, 20, 12, 1) if n % mm == 0 and (n // mm) & (n // mm - 1) == 0)
    gen = torch.Generator().manual_seed(n)
    rows = 5 if n >= 4096 else 37  # several rows a block for short rows, one partial block
    for layout in ("contig", "misaligned") if n <= 4096 else ("contig",):
        x = _ops_input((rows, n), dtype, layout, gen, std=1.0)
        y, buf = _buffer((rows, n), layout, dtype, fill=float("nan"))
        assert braze.ops.hadamard(x, out=y) is y
        torch.cuda.synchronize()
        _check(f"hadamard n={n} {layout}", y, _np(_hadamard_ref(x, m)), dtype, buf)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_ops_hadamard_layouts_in_place_scale(dtype):
    gen = torch.Generator().manual_seed(1)
    for n, m in ((4096, 1), (28 * 128, 28), (12 * 1024, 12), (32768, 1)):
        x = _ops_input((3, n), dtype, "strided", gen, std=1.0)
        want = _np(_hadamard_ref(x, m, scale=0.5))
        assert braze.ops.hadamard(x, scale=0.5, out=x) is x
        torch.cuda.synchronize()
        _check(f"hadamard n={n} in place", x, want, dtype)
        b = _ops_input((4, n), dtype, "broadcast", gen, std=1.0)
        _check(f"hadamard n={n} broadcast", braze.ops.hadamard(b), _np(_hadamard_ref(b, m)), dtype)


def test_ops_hadamard_many_rows():
    """16384 rows of 4096 bf16 (the bench shape), checked on a subsample."""
    gen = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(16384, 4096, generator=gen, device="cuda").to(torch.bfloat16)
    y = braze.ops.hadamard(x)
    torch.cuda.synchronize()
    rows = torch.arange(0, 16384, 61, device="cuda")
    _check("hadamard 16384x4096", y[rows], _np(_hadamard_ref(x[rows], 1)), "bfloat16")


def test_ops_cuda_graph_and_stream():
    gen = torch.Generator().manual_seed(9)
    x = _ops_input((64, 2 * 4096), "bfloat16", "contig", gen)
    y = torch.empty(64, 4096, dtype=torch.bfloat16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        braze.ops.silu_and_mul(x, out=y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        braze.ops.silu_and_mul(x, out=y)
    x.copy_(_ops_input((64, 2 * 4096), "bfloat16", "contig", torch.Generator().manual_seed(10)))
    y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    _check("silu_and_mul (graph replay)", y, _np(_act_ref("silu_and_mul", x)), "bfloat16")
