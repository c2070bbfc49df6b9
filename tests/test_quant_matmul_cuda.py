"""braze._cuda.matmul (out = x W^T + bias) against a float64 reference: W is the
CPU's dequantize of the same packed arrays (exact in float32), widened, times
x as float64, plus the bias, for every format of the table and dense weights.

Row counts cross the path switch (GEMV for m <= 16 in M tiles of 1, 2, 4, 8,
16, on tensor cores for 2 (q4_0) or 3 (q4_K) to 16 rows of 16-bit x unless
BRAZE_CUDA_GEMV=simt; tensor-core GEMM above for float16 / bfloat16, a CUDA-core GEMM for
float32); N = 67 is no multiple of any tile; K is one block, and a length
spanning several GEMV slabs (2048 elements for one row); x rows strided (both
16-byte aligned and not), with and without a bias, into a strided out.

Tolerance, per dtype with unit roundoff u (f32 2^-24, f16 2^-11, bf16 2^-8):
|got - want| <= u |want| (the one rounding of the output) + 8 u sqrt(K)
max|x| max|W| (f32 summation in any order, and in the GEMM W rounded to x's
16-bit dtype as the mma operand: one relative error of u per product, which
sum like a random walk).

Skips cleanly without torch, a GPU or a usable braze._cuda.
"""
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import braze.quant as bq  # noqa: E402
from braze import _backends  # noqa: E402
from braze import _spec  # noqa: E402

READY = torch.cuda.is_available() and _backends.usable("cuda")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not READY, reason=f"no CUDA GPU, torch or braze._cuda here "
                                                   f"({_backends.why_not('cuda') or 'torch sees no GPU'})")]

DTYPES = ("float32", "float16", "bfloat16")
_TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_U = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
FORMATS = [f for f, r in bq.formats().items() if r.dequantize_built]
ROWS = (1, 2, 5, 16, 17, 64, 200)
N = 67


def _native():
    from braze import _cuda
    return _cuda


def _block(fmt):
    return 1 if fmt == "" else bq.formats()[fmt].block


def _lengths(fmt):
    """K: one block (affine: one group of 64; fp8 / int8: 37, ending inside a 16-element
    chunk) and a length past two GEMV slabs of one row (2 x 2048)."""
    b = _block(fmt)
    if fmt.startswith("affine"):
        return (64, 64 * 70)
    if b == 1:
        return (37, 4133)
    return (b, b * math.ceil(4400 / b))


def _to_cuda(a):
    """A numpy array on the GPU, same bits, torch's dtype of the same kind."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.uint32:
        return torch.from_numpy(a.view(np.int32)).cuda().view(torch.uint32)
    if a.dtype.itemsize == 2 and a.dtype != np.float16:  # ml_dtypes bfloat16
        return torch.from_numpy(a.view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(a).cuda()


def _no_specials(fmt, arrays, dtype):
    """The registry's random codes without NaN / inf elements (one would make a whole
    output row NaN) nor e5m2's top binades, and MX scales of at most 2^0 in float16 (the
    GEMM rounds W to x's dtype, where 2^9 x 57344 would overflow)."""
    arrays = [np.array(a) for a in arrays]
    d = arrays[0]
    if fmt in ("fp8_e4m3", "mxfp8_e4m3"):
        d[(d & 0x7F) == 0x7F] = 0
    elif fmt in ("fp8_e5m2", "mxfp8_e5m2"):
        d[(d & 0x7F) > 0x5F] &= 0x80  # |value| <= 448 before scaling
    if fmt in ("mxfp4", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp8_e4m3", "mxfp8_e5m2") and dtype == "float16":
        arrays[1] = np.minimum(arrays[1], 127).astype(np.uint8)
    return arrays


def _weight(fmt, k, dtype, seed, fp8_scales=None, n=N):
    """(args of the native call after x: data, scales, biases, tensor_scale; group; W float64 [n, K]).
    fp8_scales: replaces the registry's per-row fp8 scales (a [1] tensor scale, a 2-D block grid)."""
    rng = np.random.default_rng(seed)
    if fmt == "":
        w = rng.normal(0, 0.05, (n, k)).astype(np.float32)
        wt = torch.from_numpy(w).to(_TORCH[dtype]).cuda()
        return (wt, None, None, None), 0, wt.double().cpu().numpy()
    _spec.load_all()
    spec = _spec.get(f"dequantize_{fmt}")
    arrays, kw = spec.make_inputs((n, k), dtype, rng, {}, False)
    arrays = _no_specials(fmt, arrays, dtype)
    if fp8_scales is not None:
        arrays[1] = fp8_scales
    w = np.asarray(spec.fn(*arrays, **{**kw, "dtype": "float32"}), dtype=np.float64)
    group = kw.get("group_size") or 0
    data, rest = arrays[0], list(arrays[1:])
    scales = rest.pop(0) if rest else None
    biases = rest.pop(0) if fmt.startswith("affine") else None
    tensor_scale = rest.pop(0) if fmt == "nvfp4" else None
    dev = tuple(None if a is None else _to_cuda(a) for a in (data, scales, biases, tensor_scale))
    return dev, group, w


def _x(m, k, dtype, pad, seed, sigma=1.0):
    """x [m, k] (a view with rows k + pad apart when pad) and its float64 values."""
    rng = np.random.default_rng(seed)
    full = rng.normal(0, sigma, (m, k + pad)).astype(np.float32)
    full = torch.from_numpy(full).to(_TORCH[dtype]).cuda()
    x = full[:, :k]
    return x, x.double().cpu().numpy()


def _check(name, got, want, k, dtype, xmax, wmax):
    got = got.double().cpu().numpy()
    u = _U[dtype]
    # x's dtype's roundings grow like sqrt(K); an f32 accumulator that sums the K
    # products in sequence (the CUDA-core GEMM) drifts like u32 K, past sqrt(K) u32
    # for f32 x at K ~ 4000 (seen on the H200: 1.2x the sqrt(K) bound alone).
    tol = u * np.abs(want) + 8 * u * math.sqrt(k) * xmax * wmax + _U["float32"] * k * xmax * wmax / 2 + 1e-30
    err = np.abs(got - want)
    assert np.isfinite(got).all(), f"{name}: non-finite output at {np.argwhere(~np.isfinite(got))[0].tolist()}"
    bad = err > tol
    assert not bad.any(), (f"{name}: {int(bad.sum())} of {want.size} outside tolerance; worst at "
                           f"{np.unravel_index(np.argmax(err / tol), err.shape)}: err {err.max():.3g}, "
                           f"tol there {tol.flat[np.argmax(err / tol)]:.3g}")


def _run(fmt, dtype, m, k, seed, pad=0, bias=False, out_pad=0, fp8_scales=None, n=N):
    (data, scales, biases, tscale), group, w = _weight(fmt, k, dtype, seed, fp8_scales, n)
    # outputs of a few thousand at most: float16's range holds them whatever W's scale
    sigma = min(1.0, 2000.0 / (max(np.abs(w).max(), 1e-30) * math.sqrt(k)))
    x, x64 = _x(m, k, dtype, pad, seed + 1, sigma)
    b = b64 = None
    if bias:
        b = torch.from_numpy(np.random.default_rng(seed + 2).normal(0, 1, n).astype(np.float32)).to(_TORCH[dtype])
        b = b.cuda()
        b64 = b.double().cpu().numpy()
    full = torch.full((m, n + out_pad), -7.0, dtype=_TORCH[dtype], device="cuda")
    out = full[:, :n]
    _native().matmul(fmt, x, data, scales, biases, tscale, b, out, group, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    want = x64 @ w.T + (b64 if bias else 0.0)
    name = f"{fmt or 'dense'} {dtype} m={m} n={n} k={k} pad={pad} bias={bias}"
    _check(name, out, want, k, dtype, np.abs(x64).max(), max(np.abs(w).max(), 1e-30))
    if out_pad:
        assert bool((full[:, n:] == -7.0).all()), f"{name}: wrote outside out"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", [""] + FORMATS)
def test_matmul_rows(fmt, dtype):
    """Every row count of ROWS: both GEMV M tiles and GEMM edges, K one block and long."""
    for i, k in enumerate(_lengths(fmt)):
        for m in ROWS:
            _run(fmt, dtype, m, k, seed=100 * i + m)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ["", "q4_0", "q8_0", "q4_K", "q6_K", "iq4_xs", "mxfp4", "nvfp4", "fp8_e4m3",
                                 "int8", "affine4"])
@pytest.mark.parametrize("m", (1, 3, 16, 40))
def test_matmul_strided_bias(fmt, dtype, m):
    """Strided x rows (8 elements apart: still 16-byte aligned for 16-bit x; 3: not), a bias,
    a strided out whose padding stays untouched."""
    k = _lengths(fmt)[1]
    _run(fmt, dtype, m, k, seed=7, pad=8, bias=True, out_pad=5)
    _run(fmt, dtype, m, k, seed=8, pad=3, bias=True, out_pad=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ("q4_0", "q4_1", "q5_0", "q8_0", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl",
                                 "iq4_xs"))
def test_matmul_fast_dot_every_m(fmt, dtype):
    """The GEMV's fast dots (shaders/cuda/quant/gemv_dot.cuh) for every m of 1..16 (each M
    tile, rows past m computed on staged zeros and dropped): K spans two slabs of 2048
    (four of 1024) and ends 3 blocks into the next, an odd count, so units start on
    both 4-byte alignments and the last slab is short; odd m read x rows 3 elements
    apart (not 16-byte aligned)."""
    b = _block(fmt)
    k = b * (math.ceil(4096 / b) + 3)
    for m in range(1, 17):
        _run(fmt, dtype, m, k, seed=300 + m, pad=3 if m % 2 else 0, bias=m == 7)


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("fmt", ("q4_0", "q4_K"))
@pytest.mark.parametrize("m", (2, 3, 4, 5, 8, 9, 16))
def test_matmul_gemv_mma(fmt, dtype, m):
    """The tensor-core GEMV (shaders/cuda/quant/gemv_mma.cuh: 2 (q4_0) or 3 (q4_K) to 16 rows
    of 16-bit x, x 16-byte aligned with rows a multiple of 8 elements apart): one and two
    n-tiles of x rows (8, 9), K over two 2048-element stages (eight of 512 where only the
    short form fits) and a short last one, x rows 8 elements apart, a bias, a strided out;
    n = 67 and 32 SMs - 13 (CTA tiles of 16 rows, the last one partial); q4_K's 2 rows: the
    SIMT GEMV, which the launcher keeps there."""
    b = _block(fmt)
    k = b * (math.ceil(4096 / b) + 3)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    for n in (N, 32 * sms - 13):
        _run(fmt, dtype, m, k, seed=500 + m, pad=8, bias=True, out_pad=5, n=n)
    _run(fmt, dtype, m, b, seed=600 + m)  # K of one block: one short slab


def _kernel_names(fn):
    """The CUDA kernels fn launches, by the torch profiler (empty where it sees none)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


@pytest.mark.parametrize("fmt", ("q4_0", "q4_K"))
def test_gemv_mma_taken(fmt):
    """bf16 x on q4_0 / q4_K: from 2 rows (q4_0) or 3 (q4_K) to 16 the tensor-core GEMV runs
    where the GPU's shared memory holds its long stages (from 5 rows where only the short
    ones fit), unless BRAZE_CUDA_GEMV=simt (then the SIMT one); 1 row, x rows not 16-byte
    aligned and f32 x stay on the SIMT GEMV."""
    k = 512
    (data, *_), _, _ = _weight(fmt, k, "bfloat16", 0)

    def names(m, dtype="bfloat16", pad=0):
        x, _ = _x(m, k, dtype, pad, 1)
        out = torch.empty((m, N), dtype=_TORCH[dtype], device="cuda")
        return " ".join(_kernel_names(lambda: _native().matmul(
            fmt, x, data, None, None, None, None, out, 0, torch.cuda.current_stream().cuda_stream)))

    probe = names(1)
    if not probe:
        pytest.skip("the torch profiler sees no CUDA kernels here")
    simt = os.environ.get("BRAZE_CUDA_GEMV") == "simt"
    # the long stages' shared memory for 1..8 rows of x (gemv_mma_smem_bytes<F, 16, 1, 2, 2048>);
    # 9..16 rows always find a form that fits (from 5 rows either form is taken)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    optin = getattr(props, "shared_memory_per_block_optin", 232448 if props.major >= 9 else 0)
    long_stages = optin >= {"q4_0": 103424, "q4_K": 104448}[fmt]
    first = (2 if fmt == "q4_0" else 3) if long_stages else 5
    for m in range(2, 17):
        got = names(m)
        assert ("gemv_mma_kernel" in got) == (m >= first and not simt), (
            f"m={m}, BRAZE_CUDA_GEMV={os.environ.get('BRAZE_CUDA_GEMV')}: {got}")
    for got in (probe, names(5, pad=3), names(5, "float32")):
        assert "gemv_mma_kernel" not in got and "gemv_kernel" in got, got


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ("fp8_e4m3", "fp8_e5m2"))
@pytest.mark.parametrize("scaling", ("tensor", "block"))
def test_matmul_fp8_scalings(fmt, dtype, scaling):
    """fp8 weights with one scale for the tensor, or one per 128 x 128 block (K = 300 ends
    inside a block and inside a 16-element chunk)."""
    k = 300
    rng = np.random.default_rng(5)
    scales = (np.array([0.03], np.float32) if scaling == "tensor"
              else rng.uniform(0.001, 0.1, (math.ceil(N / 128), math.ceil(k / 128))).astype(np.float32))
    for m in (1, 5, 17, 130):
        _run(fmt, dtype, m, k, seed=m, fp8_scales=scales)


def test_matmul_bad_bias_raises_before_writing():
    (data, *_), _, _ = _weight("q4_0", 64, "float32", 0)
    x, _ = _x(2, 64, "float32", 0, 1)
    out = torch.full((2, N), -7.0, device="cuda")
    with pytest.raises(ValueError, match="bias"):
        _native().matmul("q4_0", x, data, None, None, None, torch.zeros(N + 1, device="cuda"), out, 0, 0)
    assert bool((out == -7.0).all())


@pytest.mark.skipif(not hasattr(bq, "matmul"), reason="braze.quant.matmul not in this build yet")
@pytest.mark.parametrize("m", (1, 33))
def test_public_matmul_on_cuda(m):
    """braze.quant.matmul on a QuantizedTensor of CUDA arrays takes the CUDA kernels."""
    fmt, dtype, k = "q4_K", "bfloat16", 512
    (data, *_), _, w = _weight(fmt, k, dtype, 3)
    x, x64 = _x(m, k, dtype, 0, 4)
    got = bq.matmul(x, bq.QuantizedTensor(fmt, (N, k), data))
    torch.cuda.synchronize()
    assert got.is_cuda and got.shape == (m, N)
    _check(f"braze.quant.matmul {fmt} m={m}", got, x64 @ w.T, k, dtype, np.abs(x64).max(), np.abs(w).max())
