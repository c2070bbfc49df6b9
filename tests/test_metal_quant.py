"""The quant family on Metal (shaders/metal/quant/), run through the simulated
braze._metal (the real shaders, plans, bindings and checks): dequantize of
every format, quantize of the formats ported to Metal and quantize_activations,
each bit-exact against the CPU kernels on the CPU tests' vectors (random GGUF
blocks, GGUF's own quantizations, legacy_inputs' edge blocks, weights() with
zeros, -0, NaN, inf, subnormals, huge and saturating blocks). The registry
parity tests (tests/test_quant.py) run the same kernels against the references."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import braze.quant as bq
from braze import _spec, testing
from braze._arrays import BF16
from braze.reference import quant_mx as ref_mx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402
from test_quant import LEGACY, legacy_inputs  # noqa: E402
from test_quant_mx import weights  # noqa: E402

pytestmark = simulated
test_under_sanitizers = sanitized_rerun(__file__)

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
DTYPES = list(NP)
FORMATS = [f for f, *_ in __import__("braze")._cpu._quant_formats()]
MX = list(ref_mx.MX_ELEM)
AFFINE = [f"affine{b}" for b in ref_mx.AFFINE_BITS]
METAL_QUANTIZES = list(LEGACY) + MX + ["nvfp4", "fp8_e4m3", "fp8_e5m2", "int8"] + AFFINE


def on_metal(fn, *a, **kw):
    with testing.simulated_metal(mtlsim.metal_module()):
        return fn(*a, **kw)


def raw(a):
    """The bytes of an array (any dtype), NaNs of float arrays made one pattern
    (payloads are not part of the contract)."""
    a = np.ascontiguousarray(np.asarray(a))
    if a.dtype.kind == "f" or a.dtype == BF16:
        f = a.astype(np.float32)
        a = np.where(np.isnan(f), np.float32(np.nan), f).astype(a.dtype) if np.isnan(f).any() else a
    return a.dtype.str, a.shape, a.tobytes()


def fields(qw):
    return [raw(getattr(qw, n)) for n in ("data", "scales", "biases", "tensor_scale") if getattr(qw, n) is not None]


# ---------------------------------------------------------------- dequantize
def deq_inputs(fmt, n, k, strided, seed=0):
    """The registry's dequantize inputs of `fmt` (random blocks / codes with sane scales)."""
    spec = _spec.get(f"dequantize_{fmt}")
    args, kw = spec.make_inputs((n, k), "float32", np.random.default_rng(seed), {}, strided)
    return spec, args, kw


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_matches_cpu(fmt, dtype):
    block = {f: b for f, b, *_ in __import__("braze")._cpu._quant_formats()}[fmt]
    k = 384 if fmt.startswith("affine") else max(256, block) if block > 1 else 261  # fp8 / int8: any K
    for strided in (False, True):
        spec, args, kw = deq_inputs(fmt, 5, k, strided, seed=len(fmt))
        kw["dtype"] = dtype
        want = spec.fn(*args, **kw)
        got = on_metal(spec.fn, *args, **kw)
        assert raw(got) == raw(want), (fmt, dtype, strided)


def test_dequantize_every_scale_byte_of_mx_and_nvfp4():
    """Every e8m0 / e4m3 scale byte (NaN, 2^-127, subnormal e4m3) through the shader's decoders."""
    rng = np.random.default_rng(3)
    k = 256 * 32
    for fmt in MX:
        bits = {"mxfp4": 4, "mxfp6_e2m3": 6, "mxfp6_e3m2": 6}.get(fmt, 8)
        data = rng.integers(0, 256, (1, k * bits // 8), dtype=np.uint8)
        scales = np.arange(256, dtype=np.uint8)[None, :]
        qw = bq.QuantizedTensor(fmt, (1, k), data, scales)
        assert raw(on_metal(bq.dequantize, qw)) == raw(bq.dequantize(qw)), fmt
    data = rng.integers(0, 256, (1, 2048), dtype=np.uint8)
    qw = bq.QuantizedTensor("nvfp4", (1, 4096), data, np.arange(256, dtype=np.uint8)[None, :],
                            tensor_scale=np.array([0.37], np.float32))
    for dt in DTYPES:
        assert raw(on_metal(bq.dequantize, qw, dtype=dt)) == raw(bq.dequantize(qw, dtype=dt))


# ---------------------------------------------------------------- quantize
def quantize_cases():
    for fmt in METAL_QUANTIZES:
        if fmt in MX:
            opts = [dict(scale_rule=r) for r in ref_mx.SCALE_RULES]
        elif fmt.startswith("fp8"):
            opts = [dict(granularity=g) for g in ("tensor", "row", "block")]
        elif fmt.startswith("affine"):
            opts = [dict(group_size=g) for g in ref_mx.AFFINE_GROUPS]
        else:
            opts = [{}]
        for o in opts:
            yield fmt, o


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt,opts", list(quantize_cases()), ids=lambda v: str(v))
def test_quantize_matches_cpu(fmt, opts, dtype):
    if fmt in LEGACY:
        w32 = legacy_inputs(np.random.default_rng(6), n=4, k=256)
    elif fmt.startswith("fp8") and opts["granularity"] == "block":
        w32 = weights(136, 264, seed=4)  # two 128-row blocks, a partial 128-column block
    elif fmt.startswith("fp8") or fmt == "int8":
        w32 = weights(12, 300, seed=1)  # K free: a partial last chunk
    else:
        w32 = weights(12, 384, seed=1)
    with np.errstate(over="ignore"):  # weights() holds 3e38: inf in float16, as the CPU sees it too
        w = w32.astype(NP[dtype])
    want = bq.quantize(w, fmt, **opts)
    got = on_metal(bq.quantize, w, fmt, **opts)
    assert fields(got) == fields(want)
    for dt in DTYPES:
        assert raw(on_metal(bq.dequantize, got, dtype=dt)) == raw(bq.dequantize(want, dtype=dt))


@pytest.mark.parametrize("fmt", ["q4_K", "q6_K", "iq4_xs", "iq4_nl", "q8_K"])
def test_quantize_formats_not_on_metal_raise_and_write_nothing(fmt):
    w = weights(2, 256, seed=2, special=False)
    block, nbytes = {f: (b, nb) for f, b, nb, *_ in __import__("braze")._cpu._quant_formats()}[fmt]
    data = np.full((2, 256 // block * nbytes), 7, np.uint8)
    with pytest.raises(ValueError, match=rf"quantize of format '{fmt}' has no Metal kernel"):
        on_metal(bq._quantize_raw, w, format=fmt, out=data)
    assert (data == 7).all()


# ---------------------------------------------------------------- activations
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", ref_mx.ACT_FORMATS)
@pytest.mark.parametrize("shape", [(1, 512), (7, 96), (3, 1056)])
def test_quantize_activations_matches_cpu(fmt, dtype, shape):
    x = weights(*shape, seed=shape[0] + 5, special=shape[0] >= 8)
    x[0, 5] = 3e4
    if shape[0] > 2:
        x[1] = 0.0
        x[2, 9] = np.nan
    with np.errstate(over="ignore"):
        x = x.astype(NP[dtype])
    want = bq.quantize_activations(x, fmt)
    got = on_metal(bq.quantize_activations, x, fmt)
    assert [raw(a) for a in got] == [raw(a) for a in want]


def test_quantize_activations_odd_k_and_strided_rows():
    x = weights(6, 200, seed=9, special=False)
    for fmt, view in (("fp8_e4m3", x[:, :37]), ("int8", x[::2, :37]), ("mxfp8_e4m3", x[::2, :64]),
                      ("nvfp4", x[:, 16:176])):
        want = bq.quantize_activations(view, fmt)
        got = on_metal(bq.quantize_activations, view, fmt)
        assert [raw(a) for a in got] == [raw(a) for a in want], fmt
