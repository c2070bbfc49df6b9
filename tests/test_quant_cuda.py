"""The quant family on CUDA against the CPU backend, bit for bit: both run the
same codec headers (csrc/core/quant/), so CUDA's quantize must write the CPU's
bytes and CUDA's dequantize the CPU's floats (a NaN is a NaN: payloads differ
between the two machines' arithmetic), for every format, output dtype,
odd row counts and rows strided inside wider buffers; quantize_activations
likewise, with NaN, inf, -0 and saturating values in its rows.

Skips cleanly without torch, a GPU or a usable braze._cuda.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import braze.quant as bq  # noqa: E402
from braze import _backends  # noqa: E402
from braze import _spec  # noqa: E402
from braze.quant import _mx  # noqa: E402

READY = torch.cuda.is_available() and _backends.usable("cuda")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not READY, reason=f"no CUDA GPU, torch or braze._cuda here "
                                                   f"({_backends.why_not('cuda') or 'torch sees no GPU'})")]

OUT_DTYPES = ("float32", "float16", "bfloat16")
# torch dtype -> (numpy dtype of the same bits, a torch dtype of that width every CUDA op supports)
_BITS = {torch.float32: (np.uint32, torch.int32), torch.float16: (np.uint16, torch.int16),
         torch.bfloat16: (np.uint16, torch.int16), torch.uint8: (np.uint8, torch.uint8),
         torch.int8: (np.uint8, torch.int8), torch.uint32: (np.uint32, torch.int32)}
_TORCH_OF = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _host_bits(a):
    """The raw bits of a numpy array (ml_dtypes bfloat16 included) as unsigned integers."""
    a = np.ascontiguousarray(np.asarray(a))
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _cuda_bits(t):
    np_dt, carrier = _BITS[t.dtype]
    return t.view(carrier).contiguous().cpu().numpy().view(np_dt)


def _to_cuda(a, like=None, pad=0):
    """A numpy array on the GPU with the same bits (and torch dtype `like`, by default
    numpy's), its rows `pad` elements apart beyond their length when pad > 0."""
    a = np.asarray(a)
    bits = _host_bits(a)
    if like is None:
        like = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
                np.dtype(np.uint8): torch.uint8, np.dtype(np.int8): torch.int8,
                np.dtype(np.uint32): torch.uint32}.get(a.dtype, torch.bfloat16)
    carrier = _BITS[like][1]
    host = torch.from_numpy(bits.view({1: np.uint8, 2: np.int16, 4: np.int32}[bits.dtype.itemsize]).copy())
    if carrier == torch.int8:
        host = host.view(torch.int8)
    if pad and a.ndim == 2:
        full = torch.zeros((a.shape[0], a.shape[1] + pad), dtype=carrier, device="cuda")
        full[:, :a.shape[1]].copy_(host.cuda())
        return full.view(like)[:, :a.shape[1]]
    return host.cuda().view(like)


# Float arrays: bit patterns that are NaN (|bits| above the infinity's), per torch dtype.
_NAN_ABOVE = {torch.float32: (0x7fffffff, 0x7f800000), torch.float16: (0x7fff, 0x7c00),
              torch.bfloat16: (0x7fff, 0x7f80)}


def _same(name, got_cuda, want_cpu, nan=None):
    """Equal bits; in float arrays a NaN must meet a NaN, whatever its sign and payload
    (CUDA's arithmetic returns one canonical NaN, +0x7fffffff, where x86 propagates the
    operand's or makes the negative 0xffc00000). `nan`: (mask, above) for byte codes
    (fp8) whose NaNs are the codes with code & mask > above."""
    g, w = _cuda_bits(got_cuda), _host_bits(want_cpu)
    assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
    bad = g != w
    if got_cuda.dtype in _NAN_ABOVE or nan is not None:
        mask, inf = nan or _NAN_ABOVE[got_cuda.dtype]
        nan_g, nan_w = (g & mask) > inf, (w & mask) > inf
        assert (nan_g == nan_w).all(), f"{name}: NaN at {np.argwhere(nan_g != nan_w)[0].tolist()} on one side only"
        bad &= ~nan_g
    assert not bad.any(), (f"{name}: {int(bad.sum())} of {w.size} differ from the CPU's; first at "
                           f"{np.argwhere(bad)[0].tolist()}: {g[bad][0]:#x} != {w[bad][0]:#x}")


def _deq_spec(fmt):
    _spec.load_all()
    return _spec.get(f"dequantize_{fmt}")


DEQ_FORMATS = [f for f, r in bq.formats().items() if r.dequantize_built]
Q_FORMATS = [f for f, r in bq.formats().items() if r.quantize_built]


def _deq_inputs(fmt, n, k, dtype, strided, seed):
    """The registry's random inputs of dequantize_<fmt> (numpy, strided rows where asked)."""
    spec = _deq_spec(fmt)
    rng = np.random.default_rng(seed)
    return spec.make_inputs((n, k), dtype, rng, {}, strided), spec.fn


@pytest.mark.parametrize("dtype", OUT_DTYPES)
@pytest.mark.parametrize("fmt", DEQ_FORMATS)
def test_dequantize_equals_cpu(fmt, dtype):
    block = bq.formats()[fmt].block
    unit = max(block, 64 if fmt.startswith("affine") else 1, 16)
    # odd rows, a row longer than one CTA's tile (4096), a short one, strided rows and a strided out
    shapes = [(7, 3 * unit, False), (3, unit * (4096 // unit + 3), False), (5, 2 * unit, True), (1, unit, False)]
    if block == 1:  # fp8 / int8: rows that end inside a thread's 16-element chunk
        shapes += [(3, 37, False), (4, 37, True)]
    for i, (n, k, strided) in enumerate(shapes):
        (arrays, kw), fn = _deq_inputs(fmt, n, k, dtype, strided, seed=i)
        want = fn(*arrays, **kw)
        pad = 3 if strided else 0
        dev = tuple(_to_cuda(a, pad=pad if a.ndim == 2 and a is arrays[0] else 0) for a in arrays)
        got = fn(*dev, **kw)
        torch.cuda.synchronize()
        _same(f"{fmt} {dtype} [{n}, {k}]{' strided' if strided else ''}", got, want)
        # into a strided out (rows 8 elements apart beyond K): the padding stays untouched
        full = torch.full((n, k + 8), -3.0, dtype=_TORCH_OF[dtype], device="cuda")
        fn(*dev, **kw, out=full[:, :k])
        _same(f"{fmt} {dtype} into strided out", full[:, :k], want)
        assert bool((full[:, k:] == -3.0).all()), f"{fmt}: wrote outside out"


def _weights(n, k, dtype, seed, special=False):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.05, (n, k)).astype(np.float32)
    w[:, ::7] *= 30  # outliers inside blocks
    if n > 2:
        w[1] = 0.0  # an all-zero row
    if special:
        w[0, :5] = [np.nan, np.inf, -np.inf, -0.0, 1e30]
        if n > 3:
            w[3, 3] = -np.nan
            w[3, 9] = 448.0
            w[3, 10] = 449.0
            w[3, 11] = 464.0
    import ml_dtypes
    return w.astype({"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dtype])


def _q_cases(fmt):
    g = bq.formats()[fmt].group
    if g == "mx":
        return [dict(scale_rule=r) for r in _mx.SCALE_RULES]
    if g == "fp8":
        return [dict(granularity=x) for x in _mx.GRANULARITIES]
    if g == "affine":
        return [dict(group_size=s) for s in (32, 64, 128)]
    return [{}]


def _parts(qt):
    return [(name, getattr(qt, name)) for name in ("data", "scales", "biases", "tensor_scale")
            if getattr(qt, name, None) is not None]


@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("fmt", Q_FORMATS)
def test_quantize_equals_cpu(fmt, dtype):
    block = bq.formats()[fmt].block
    unit = max(block, 128 if fmt.startswith("affine") else 1, 32)
    for i, (n, k, strided) in enumerate([(7, 3 * unit, False), (131, 2 * unit, True), (1, unit, False)]):
        for kw in _q_cases(fmt):
            w = _weights(n, k, dtype, seed=10 + i)
            want = bq.quantize(w, fmt, **kw)
            got = bq.quantize(_to_cuda(w, pad=5 if strided else 0), fmt, **kw)
            torch.cuda.synchronize()
            for (name, g), (_, c) in zip(_parts(got), _parts(want)):
                _same(f"quantize {fmt} {kw} {dtype} [{n}, {k}]{' strided' if strided else ''}: {name}", g, c)


@pytest.mark.parametrize("fmt", [f for f in Q_FORMATS if bq.formats()[f].group in ("fp8", "int8", "mx")])
def test_quantize_special_values_equal_cpu(fmt):
    """NaN, inf, -0 and values at fp8's saturation edge: the codes and scales the CPU writes."""
    for kw in _q_cases(fmt):
        w = _weights(5, 256, "float32", seed=3, special=True)
        want = bq.quantize(w, fmt, **kw)
        got = bq.quantize(_to_cuda(w), fmt, **kw)
        for (name, g), (_, c) in zip(_parts(got), _parts(want)):
            _same(f"quantize {fmt} {kw} special: {name}", g, c)


_E4M3_NAN = {"fp8_e4m3": (0x7f, 0x7e), "mxfp8_e4m3": (0x7f, 0x7e)}


@pytest.mark.parametrize("dtype", OUT_DTYPES)
@pytest.mark.parametrize("fmt", _mx.ACT_FORMATS)
def test_quantize_activations_equals_cpu(fmt, dtype):
    block = {"mxfp8_e4m3": 32, "nvfp4": 16}.get(fmt, 1)
    shapes = [(7, 4096, False), (3, 8192 + 2 * 32, False), (5, 96, True), (2, 16384 + 256, True)]
    if block == 1:
        shapes += [(3, 37, False), (4, 37, True)]  # rows not a whole number of 8-element packs
    for i, (m, k, strided) in enumerate(shapes):
        x = _weights(m, k, dtype, seed=20 + i, special=i == 0) * 40
        want = bq.quantize_activations(x, fmt)
        got = bq.quantize_activations(_to_cuda(x, pad=8 if strided else 0), fmt)
        torch.cuda.synchronize()
        # e4m3 codes: 0x7f and 0xff are NaN (an infinite input makes inf * 0 = NaN, of either sign)
        _same(f"{fmt} {dtype} [{m}, {k}] xq", got[0], want[0], nan=_E4M3_NAN.get(fmt))
        _same(f"{fmt} {dtype} [{m}, {k}] sx", got[1], want[1])


def test_empty_shapes():
    w = torch.zeros((0, 64), dtype=torch.float32, device="cuda")
    qt = bq.quantize(w, "fp8_e4m3", granularity="tensor")
    assert tuple(qt.data.shape) == (0, 64)
    assert _cuda_bits(qt.scales).tolist() == _host_bits(
        bq.quantize(np.zeros((0, 64), np.float32), "fp8_e4m3", granularity="tensor").scales).tolist()
    y = bq.dequantize(bq.quantize(torch.zeros((0, 256), device="cuda"), "q4_K"))
    assert tuple(y.shape) == (0, 256)
    try:
        want = bq.quantize_activations(np.zeros((3, 0), np.float32), "fp8_e4m3")
    except ValueError:  # rows of no elements are refused on the CPU: the same on CUDA
        with pytest.raises(ValueError):
            bq.quantize_activations(torch.zeros((3, 0), device="cuda"), "fp8_e4m3")
        return
    xq, sx = bq.quantize_activations(torch.zeros((3, 0), device="cuda"), "fp8_e4m3")
    assert tuple(xq.shape) == (3, 0)
    _same("fp8_e4m3 [3, 0] sx", sx, want[1])
