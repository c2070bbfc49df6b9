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

test_under_sanitizers = sanitized_rerun(__file__)

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
DTYPES = list(NP)
FORMATS = [f for f, *_ in __import__("braze")._cpu._quant_formats()]
MX = list(ref_mx.MX_ELEM)
AFFINE = [f"affine{b}" for b in ref_mx.AFFINE_BITS]
SEARCHED = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_K", "iq4_nl", "iq4_xs"]  # quantize_search.metal
METAL_QUANTIZES = list(LEGACY) + SEARCHED + MX + ["nvfp4", "fp8_e4m3", "fp8_e5m2", "int8"] + AFFINE


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


@simulated
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


@simulated
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


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt,opts", list(quantize_cases()), ids=lambda v: str(v))
def test_quantize_matches_cpu(fmt, opts, dtype):
    if fmt in LEGACY:
        w32 = legacy_inputs(np.random.default_rng(6), n=4, k=256)
    elif fmt in SEARCHED:
        w32 = searched_inputs(6, 512)
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


def searched_inputs(n, k, seed=0):
    """Rows for the K-quant / i-quant searches: normal rows of random magnitude
    (exp(+-6)), and edge super-blocks in rows 0..3: all zeros, -0 and a zero
    sub-block of 16, constant blocks (positive, negative, a ramp), one huge
    element among tiny ones, sub-blocks spanning 1e-6..1e4, values past
    float16's range (the f16 scales overflow), subnormals and ties of +-max
    (n >= 5, k >= 512)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-6, 6, (n, 1)))).astype(np.float32)
    b = w.reshape(n, k // 32, 32)
    b[0, 0] = 0.0
    b[0, 1] = -0.0
    b[0, 2, :16] = 0.0
    b[0, 3] = 1.5
    b[0, 4] = -2.25
    b[0, 5] = np.arange(32, dtype=np.float32) - 15.5
    b[0, 6] = 1e-3 * rng.standard_normal(32)
    b[0, 6, 5] = 40.0
    b[0, 7] = rng.uniform(-1, 1, 32) * 10.0 ** rng.uniform(-6, 4, 32)
    b[1, :8] = rng.standard_normal((8, 32)) * 1e5              # d = max / 63 .. 127 past 65504
    b[1, 8:16] = rng.standard_normal((8, 32)) * 3e4
    b[2, :8] = 0.0                                             # a zero super-block
    b[2, 8] = np.where(np.arange(32) % 2, 7.0, -7.0)         # ties of +-max
    b[2, 9] = 1e-20 * rng.standard_normal(32)                 # below the searches' 1e-15 floor
    b[2, 10] = 1e-40 * np.sign(rng.standard_normal(32))
    b[3, 8:16] = rng.uniform(0, 1, (8, 32))                    # all positive: min 0
    b[3, :8] = -rng.uniform(0, 1, (8, 32))                     # all negative
    b[4, :8] = 1e-40 * np.sign(rng.standard_normal((8, 32)))   # a subnormal float32 super-block
    return w


@simulated
@pytest.mark.parametrize("fmt", SEARCHED)
def test_quantize_searched_formats_match_cpu_across_seeds(fmt):
    """More rows and seeds than test_quantize_matches_cpu (f32), and strided rows."""
    for seed in (11, 12, 13):
        w = searched_inputs(5, 768, seed=seed)
        want = bq.quantize(w, fmt)
        assert fields(on_metal(bq.quantize, w, fmt)) == fields(want), (fmt, seed)
    view = searched_inputs(8, 1024, seed=14)[::2, 256:768]
    assert fields(on_metal(bq.quantize, view, fmt)) == fields(bq.quantize(view, fmt))


@simulated
@pytest.mark.parametrize("fmt", [f for f in SEARCHED if f != "q8_K"])
def test_quantize_searched_formats_match_llama_cpp(fmt):
    """tests/data/quant_vectors.npz (llama.cpp's own quantizations, test_quant.py's
    test_quantize_matches_llama_cpp): the Metal encoders give the same bytes."""
    v = np.load(HERE / "data" / "quant_vectors.npz")
    got = on_metal(bq.quantize, v["w"], fmt)
    assert np.asarray(got.data).tobytes() == np.asarray(v[fmt]).tobytes()


@simulated
def test_quantize_host_names_cover_every_quantizable_format():
    """Every format the CPU quantizes has its Metal kernels (one per input dtype),
    and METAL_QUANTIZES (the formats test_quantize_matches_cpu runs) is all of them."""
    mod = mtlsim.metal_module()
    built = [f for f, *_, q in __import__("braze")._cpu._quant_formats() if q]
    assert sorted(built) == sorted(METAL_QUANTIZES)
    for fmt in built:
        for dt in ("f32", "f16", "bf16"):
            assert mod._has_kernel(f"quantize_{fmt}_{dt}"), (fmt, dt)


@simulated
@pytest.mark.parametrize("fmt", ["mxfp4_gguf", "nvfp4_gguf"])
def test_quantize_gguf_fp4_raises_as_on_cpu_and_writes_nothing(fmt):
    """GGUF's fp4 block formats have no quantizer on any backend: Metal raises the
    CPU's ValueError (core's prepare_quantize, before any plan) and writes nothing."""
    w = weights(2, 256, seed=2, special=False)
    block, nbytes = {f: (b, nb) for f, b, nb, *_ in __import__("braze")._cpu._quant_formats()}[fmt]
    data = np.full((2, 256 // block * nbytes), 7, np.uint8)
    with pytest.raises(ValueError) as cpu:
        bq._quantize_raw(w, format=fmt, out=data.copy())
    with pytest.raises(ValueError, match=rf"quantize of format '{fmt}' .*not built") as metal:
        on_metal(bq._quantize_raw, w, format=fmt, out=data)
    assert str(metal.value) == str(cpu.value)
    assert (data == 7).all()


# ---------------------------------------------------------------- activations
@simulated
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


@simulated
def test_quantize_activations_odd_k_and_strided_rows():
    x = weights(6, 200, seed=9, special=False)
    for fmt, view in (("fp8_e4m3", x[:, :37]), ("int8", x[::2, :37]), ("mxfp8_e4m3", x[::2, :64]),
                      ("nvfp4", x[:, 16:176])):
        want = bq.quantize_activations(view, fmt)
        got = on_metal(bq.quantize_activations, view, fmt)
        assert [raw(a) for a in got] == [raw(a) for a in want], fmt
