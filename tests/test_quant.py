"""The quant family (GGML formats): registry parity, bit-exactness against the
GGML maintainers' gguf.quants, the format table, GGUF bytes wrapped without
copies, and bad input."""
import os
import re

import numpy as np
import pytest

import braze
from braze import _spec, quant, testing
from braze._arrays import BF16
from braze.reference import quant as ref
from braze.specs.quant import random_blocks
from conftest import cpu_isa, parity_test

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants as gq  # noqa: E402

SPECS = _spec.ops("quant")
test_parity = parity_test(SPECS)

GGML = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "q2_K": T.Q2_K,
        "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K, "q8_K": T.Q8_K, "iq4_nl": T.IQ4_NL,
        "iq4_xs": T.IQ4_XS}
LEGACY = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
GGUF_DEQUANTIZES = [f for f in GGML if f != "q8_K"]  # gguf.quants has no q8_K decoder
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def same_bits_any_nan(a, b):
    """same_bits, except that a NaN matches a NaN of any sign or payload."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    na, nb = np.isnan(a.astype(np.float32)), np.isnan(b.astype(np.float32))
    return bool((na == nb).all()) and a[~na].tobytes() == b[~nb].tobytes()


# ---------------------------------------------------------------- the format table
API_FORMATS = ("q8_0 q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K q8_K iq4_nl iq4_xs mxfp4 mxfp6_e2m3 mxfp6_e3m2 "
               "mxfp8_e4m3 mxfp8_e5m2 nvfp4 fp8_e4m3 fp8_e5m2 int8 affine2 affine3 affine4 affine5 affine6 "
               "affine8").split()


def test_every_api_format_is_in_the_table():
    assert set(API_FORMATS) <= set(quant.formats())


@pytest.mark.parametrize("fmt", list(GGML) + ["mxfp4_gguf", "nvfp4_gguf"])
def test_ggml_block_sizes_agree_with_gguf(fmt):
    t = GGML.get(fmt) or {"mxfp4_gguf": T.MXFP4, "nvfp4_gguf": T.NVFP4}[fmt]
    f = quant.formats()[fmt]
    assert (f.block, f.block_bytes) == gguf.GGML_QUANT_SIZES[t]
    assert f.layout == "blocks"
    if fmt in ref.BLOCKS:
        assert ref.BLOCKS[fmt] == (f.block, f.block_bytes)


def test_built_flags():
    f = quant.formats()
    assert all(f[n].dequantize_built for n in GGML)
    assert all(f[n].quantize_built for n in LEGACY)


# ---------------------------------------------------------------- bit-exact against gguf.quants
def gguf_blocks(fmt, n, k, rng):
    """Blocks gguf itself quantized where it can, else random blocks with sane scales."""
    if fmt in LEGACY:
        w = rng.standard_normal((n, k)).astype(np.float32)
        return gq.quantize(w, GGML[fmt])
    return random_blocks(fmt, n, k, rng)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fmt", GGUF_DEQUANTIZES)
def test_dequantize_bit_exact_with_gguf(fmt, dtype):
    rng = np.random.default_rng(3)
    block = quant.formats()[fmt].block
    n, k = 9, 8 * 256
    data = gguf_blocks(fmt, n, k, rng)
    want = gq.dequantize(data, GGML[fmt]).astype(NP[dtype])
    qw = quant.QuantizedTensor(fmt, (n, k), data)
    assert same_bits(quant.dequantize(qw, dtype=dtype), want)
    assert same_bits(ref.dequantize(data, format=fmt, dtype=dtype), want)  # the reference, too
    assert block in (32, 256)


@pytest.mark.parametrize("fmt", GGUF_DEQUANTIZES)
def test_dequantize_every_bit_pattern_of_the_scales(fmt):
    """Scales of every kind: subnormal, huge, negative, inf and NaN float16 values."""
    rng = np.random.default_rng(4)
    n, k = 64, 256
    data = random_blocks(fmt, n, k, rng)
    nb, nbytes = k // ref.BLOCKS[fmt][0], ref.BLOCKS[fmt][1]
    b = data.reshape(n, nb, nbytes)
    specials = np.array([0x0001, 0x03ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x8000, 0x0400], np.uint16)
    for off in ref.F16_FIELDS[fmt]:
        b[..., off:off + 2] = rng.choice(specials, (n, nb, 1)).view(np.uint8)
    for dtype in NP:
        with np.errstate(all="ignore"):
            want = gq.dequantize(data, GGML[fmt]).astype(NP[dtype])
            got = quant.dequantize(quant.QuantizedTensor(fmt, (n, k), data), dtype=dtype)
        # A NaN scale makes NaN elements; which NaN d * q + m gives when both d * q and m are NaN
        # depends on the operand order the compiler picks (the AVX-512 build: +NaN, numpy: -NaN).
        assert same_bits_any_nan(got, want), dtype


def q8k_blocks(w):
    """q8_K blocks written here from its definition: d = max|x| / 127 (signed as
    GGML's), q = round(x / d), bsums = sums of 16."""
    n, k = w.shape
    x = w.reshape(n, k // 256, 256).astype(np.float32)
    amax = np.abs(x).max(-1, keepdims=True)
    d = (amax / 127).astype(np.float32)
    q = np.clip(np.rint(x / np.where(d == 0, 1, d)), -127, 127).astype(np.int8)
    bsums = q.reshape(n, k // 256, 16, 16).astype(np.int16).sum(-1).astype(np.int16)
    return np.concatenate([d.view(np.uint8), q.view(np.uint8), bsums.view(np.uint8)], -1).reshape(n, -1), d, q


def test_q8_K_dequantize_is_d_times_q():
    rng = np.random.default_rng(5)
    data, d, q = q8k_blocks(rng.standard_normal((5, 512)))
    got = quant.dequantize(quant.QuantizedTensor("q8_K", (5, 512), data))
    assert same_bits(got, (d * q.astype(np.float32)).reshape(5, 512))


def legacy_inputs(rng, n=8, k=512):
    """Normal data with all-zero blocks, constant blocks, tiny and huge (f16 scale
    overflow) blocks, ties of +-max, and the largest finite float32 values."""
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = w.reshape(n, k // 32, 32)
    b[0, 0] = 0
    b[0, 1] = 1.5
    b[0, 2] *= 1e-30
    b[0, 3] *= 1e-8
    b[1, 0] *= 6e5       # |max| / 8 and / 16 straddle float16's 65504
    b[1, 1] *= 1e6
    b[1, 2] = np.where(np.arange(32) % 2, 65504.0 * 127, -65504.0 * 127)
    b[1, 3, :2] = [3.0, -3.0]
    b[1, 3, 2:] = rng.uniform(-1, 1, 30)
    b[2, 0] = np.float32(3e38) * np.sign(b[2, 0])
    b[2, 1] = -2.5
    b[2, 1, 7] = 2.5
    b[3, 0] = np.arange(32, dtype=np.float32) - 15.5
    return w


@pytest.mark.parametrize("fmt", LEGACY)
def test_quantize_bit_exact_with_gguf(fmt):
    rng = np.random.default_rng(6)
    w = legacy_inputs(rng)
    with np.errstate(all="ignore"):
        want = gq.quantize(w, GGML[fmt])
        ours = ref.quantize_ggml(w, fmt)
    got = quant.quantize(w, fmt)
    assert got.format == fmt and got.shape == w.shape
    assert same_bits(got.data, want)
    assert same_bits(ours, want)
    with np.errstate(all="ignore"):
        assert same_bits(quant.dequantize(got), gq.dequantize(want, GGML[fmt]))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("fmt", LEGACY)
def test_quantize_half_inputs_as_their_float32_values(fmt, dtype):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 256)).astype(NP[dtype])
    assert same_bits(quant.quantize(w, fmt).data, gq.quantize(w.astype(np.float32), GGML[fmt]))


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_every_cpu_isa(isa):
    """Each instruction-set build decodes and encodes the same bits."""
    rng = np.random.default_rng(8)
    with cpu_isa(isa):
        for fmt in GGUF_DEQUANTIZES:
            data = gguf_blocks(fmt, 3, 512, rng)
            want = gq.dequantize(data, GGML[fmt])
            for dtype in NP:
                got = quant.dequantize(quant.QuantizedTensor(fmt, (3, 512), data), dtype=dtype)
                assert same_bits(got, want.astype(NP[dtype])), (fmt, dtype)
        for fmt in LEGACY:
            w = legacy_inputs(rng, 4, 256)
            with np.errstate(all="ignore"):
                assert same_bits(quant.quantize(w, fmt).data, gq.quantize(w, GGML[fmt])), fmt


# ---------------------------------------------------------------- GGUF bytes
def test_from_gguf_wraps_without_copy():
    rng = np.random.default_rng(9)
    w = rng.standard_normal((6, 128)).astype(np.float32)
    raw = gq.quantize(w, T.Q4_0)
    qw = quant.QuantizedTensor.from_gguf(raw.reshape(-1), int(T.Q4_0), (2, 3, 128))
    assert qw.shape == (6, 128) and qw.format == "q4_0"
    assert np.shares_memory(qw.data, raw)
    assert same_bits(quant.dequantize(qw), gq.dequantize(raw, T.Q4_0))


def test_from_gguf_bad_input():
    raw = np.zeros((2, 18), np.uint8)
    with pytest.raises(ValueError, match="raw must hold 72 bytes"):
        quant.QuantizedTensor.from_gguf(raw, T.Q4_0, (2, 64))
    with pytest.raises(ValueError, match="K = 48 is not a multiple of q4_0's block of 32"):
        quant.QuantizedTensor.from_gguf(raw, T.Q4_0, (1, 48))
    with pytest.raises(ValueError, match="IQ2_XXS is not a format braze reads"):
        quant.QuantizedTensor.from_gguf(raw, T.IQ2_XXS, (1, 256))
    with pytest.raises(ValueError, match="plain float32"):
        quant.QuantizedTensor.from_gguf(raw, T.F32, (1, 9))
    with pytest.raises(TypeError, match="raw must be uint8"):
        quant.QuantizedTensor.from_gguf(raw.view(np.int8), T.Q4_0, (2, 32))


# ---------------------------------------------------------------- bad input
def q4(n=2, k=64):
    return quant.quantize(np.random.default_rng(0).standard_normal((n, k)).astype(np.float32), "q4_0")


def untouched(out):
    return np.isnan(np.asarray(out, np.float32)).all()


def poisoned(shape, dtype=np.float32):
    return np.full(shape, np.nan, dtype)


def test_unknown_format_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"format must be one of 'q8_0', 'q4_0'.*'iq4_xs'.*; got 'q4_k'"):
        quant.quantize(np.zeros((1, 32), np.float32), "q4_k")
    with pytest.raises(ValueError, match=r"format must be one of .*'affine8'; got 'q9'"):
        braze._cpu.dequantize("q9", 32, np.zeros((1, 18), np.uint8), None, None, None, poisoned((1, 32)))


def test_k_not_a_multiple_of_the_block():
    with pytest.raises(ValueError, match="K = 48 is not a multiple of q4_0's block of 32"):
        quant.quantize(np.zeros((2, 48), np.float32), "q4_0")
    out = poisoned((1, 48))
    with pytest.raises(ValueError, match=r"K \(the row length, 48\) must be a multiple of q4_0's block of 32"):
        braze._cpu.dequantize("q4_0", 48, np.zeros((1, 27), np.uint8), None, None, None, out)
    assert untouched(out)


def test_wrong_byte_count_names_data():
    qw = q4()
    bad = quant.QuantizedTensor("q4_0", (2, 64), qw.data[:, :30])
    out = poisoned((2, 64))
    with pytest.raises(ValueError, match=r"data must be \[N, 36\] \(q4_0: 18 bytes per 32 elements, K = 64\), "
                                         r"got shape \(2, 30\)"):
        quant.dequantize(bad, out=out)
    assert untouched(out)
    with pytest.raises(TypeError, match="data"):
        quant.dequantize(quant.QuantizedTensor("q4_0", (2, 64), qw.data.view(np.int8)), out=out)
    assert untouched(out)


@pytest.mark.parametrize("shape,dtype,match", [
    ((2, 63), np.float32, r"out must have shape \(2, 64\) \(\[N, K\] of the quantized weight\), got \(2, 63\)"),
    ((64, 2), np.float32, r"out must have shape \(2, 64\)"),
    ((2, 64), np.float64, "out"),
    ((2, 64), np.int32, "out"),
])
def test_out_of_wrong_shape_or_dtype(shape, dtype, match):
    out = np.full(shape, -7, dtype) if np.dtype(dtype).kind == "i" else np.full(shape, np.nan, dtype)
    before = out.copy()
    with pytest.raises((TypeError, ValueError), match=match):
        quant.dequantize(q4(), out=out)
    assert out.tobytes() == before.tobytes()


def test_bad_dtype_argument():
    with pytest.raises(ValueError, match="dtype must be one of"):
        quant.dequantize(q4(), dtype="int8")
    with pytest.raises(TypeError, match="qw must be a QuantizedTensor"):
        quant.dequantize(q4().data)


def test_scales_for_a_block_format_are_refused():
    qw = q4()
    out = poisoned((2, 64))
    with pytest.raises(ValueError, match="scales must be None for q4_0: its scales are inside its blocks"):
        braze._cpu.dequantize("q4_0", 64, qw.data, np.ones((2, 2), np.float32), None, None, out)
    assert untouched(out)


def test_formats_without_kernels_say_not_built_yet():
    built = quant.formats()
    for name, f in built.items():
        if f.dequantize_built:
            continue
        with pytest.raises(ValueError, match=re.escape(f"dequantize of format '{name}'") + ".*not built yet"):
            braze._cpu.dequantize(name, f.block, np.zeros((1, f.block_bytes), np.uint32 if f.group == "affine"
                                                           else np.uint8), None, None, None, poisoned((1, f.block)))


def test_quantize_bad_input():
    with pytest.raises(ValueError, match=r"w must be \[N, K\]"):
        quant.quantize(np.zeros(64, np.float32), "q8_0")
    with pytest.raises(ValueError, match="group_size and scale_rule must be None"):
        quant.quantize(np.zeros((1, 64), np.float32), "q8_0", group_size=32)
    with pytest.raises(TypeError, match="w"):
        quant.quantize(np.zeros((1, 64), np.int32), "q8_0")
    data = np.full((1, 34), 7, np.uint8)
    with pytest.raises(ValueError, match=r"data must be \[N, 68\]"):
        braze._cpu.quantize("q8_0", np.zeros((1, 64), np.float32), data, None, None, None)
    assert (data == 7).all()


def test_quantized_tensor_checks_its_shape():
    with pytest.raises(ValueError, match="K = 40 is not a multiple of q8_0's block of 32"):
        quant.QuantizedTensor("q8_0", (1, 40), np.zeros((1, 34), np.uint8))
    with pytest.raises(ValueError, match=r"shape must be \[N, K\]"):
        quant.QuantizedTensor("q8_0", (1, 1, 32), np.zeros((1, 34), np.uint8))


# ---------------------------------------------------------------- GGUF files
def memmap_root(a):
    while a is not None and not isinstance(a, np.memmap):
        a = a.base
    return a


GGUF_ONLY = {"mxfp4_gguf": T.MXFP4, "nvfp4_gguf": T.NVFP4}


def test_load_gguf_every_format(tmp_path):
    """A file with every GGML format braze reads (and plain float tensors),
    written by gguf's writer, reads back as views of the file's memory map."""
    rng = np.random.default_rng(10)
    path = str(tmp_path / "every.gguf")
    wr = gguf.GGUFWriter(path, "braze-test")
    want = {}
    for fmt, t in {**GGML, **GGUF_ONLY}.items():
        f = quant.formats()[fmt]
        shape = (3, 2, 2 * 256) if fmt == "q4_K" else (5, 2 * 256)
        n = int(np.prod(shape[:-1]))
        data = random_blocks(fmt, n, shape[-1], rng) if fmt in ref.BLOCKS else \
            rng.integers(0, 256, (n, f.row_bytes(shape[-1])), dtype=np.uint8)
        wr.add_tensor(fmt, data.reshape(shape[:-1] + (-1,)), raw_dtype=t)
        want[fmt] = (data, (n, shape[-1]))
    w32 = rng.standard_normal((4, 96)).astype(np.float32)
    w16 = rng.standard_normal((2, 3, 64)).astype(np.float16)
    wbf = rng.standard_normal((5, 32)).astype(BF16)
    wr.add_tensor("f32", w32)
    wr.add_tensor("f16", w16)
    wr.add_tensor("bf16", wbf.view(np.uint16), raw_dtype=T.BF16)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()

    got = quant.load_gguf(path)
    assert set(got) == set(want) | {"f32", "f16", "bf16"}
    for fmt, (data, shape) in want.items():
        qw = got[fmt]
        assert isinstance(qw, quant.QuantizedTensor) and qw.format == fmt and qw.shape == shape
        assert memmap_root(qw.data) is not None, f"{fmt}: not a view of the file"
        assert same_bits(qw.data, data)
        if quant.formats()[fmt].dequantize_built:
            with np.errstate(invalid="ignore"):
                expect = gq.dequantize(data, {**GGML, **GGUF_ONLY}[fmt]) if fmt != "q8_K" else ref.dequantize(data, format=fmt)
                assert same_bits(quant.dequantize(qw), expect)
    for name, w in (("f32", w32), ("f16", w16), ("bf16", wbf)):
        assert memmap_root(got[name]) is not None
        assert same_bits(got[name], w)


# ---------------------------------------------------------------- against llama.cpp's quantizers
VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "quant_vectors.npz")
LLAMA = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs")


def sq_error(fmt, data, w):
    y = quant.dequantize(quant.QuantizedTensor(fmt, w.shape, data))
    return float(np.sum((y.astype(np.float64) - w) ** 2))


@pytest.mark.parametrize("fmt", LLAMA)
def test_quantize_matches_llama_cpp(fmt):
    """tests/data/quant_vectors.npz holds llama.cpp's own quantization of the same
    inputs (ggml_quantize_chunk without an importance matrix, made by
    scripts/quant_vectors.py): braze's encoders give the same bytes, so the same
    error, for every format (K-quants and i-quants included)."""
    v = np.load(VECTORS)
    w, theirs = v["w"], v[fmt]
    ours = np.asarray(quant.quantize(w, fmt).data)
    assert same_bits(ours, theirs)
    assert sq_error(fmt, ours, w) == sq_error(fmt, theirs, w)


def test_q8_K_quantize_rounds_to_the_nearest_level():
    """q8_K (llama.cpp's quantize_chunk has none to compare with): d = -max/127
    of the signed extreme, every element within d/2 of its value, bsums the sums of 16."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((4, 512)).astype(np.float32)
    w[1, :256] = 0
    data = np.asarray(quant.quantize(w, "q8_K").data).reshape(4, 2, 292)
    d = data[..., :4].copy().view(np.float32)
    q = data[..., 4:260].view(np.int8).astype(np.int32)
    x = w.reshape(4, 2, 256)
    assert np.all(np.abs(q) <= 127) and d[1, 0, 0] == 0 and not q[1, 0].any()
    assert np.all(np.abs(d * q - x) <= np.abs(d) / 2 * (1 + 1e-6))
    assert np.array_equal(data[..., 260:].copy().view(np.int16), q.reshape(4, 2, 16, 16).sum(-1))
