"""The CPU dequantize's vector decoders (csrc/cpu/quant_unpack.h, the e2m1 lookup and
the AVX-512 BF16 narrowing of quant_store.h) against the codecs' decode, bit for bit:
random bytes with edge blocks (zero, largest and subnormal scales; MX scales whose
products are float32 denormals, which the BF16 instructions would flush), every
instruction-set build, narrowing by instruction and by integer rounding, float32 /
float16 / bfloat16, odd row counts, strided data and strided or misaligned outputs.
float32 must equal the base build's (the codec's scalar decode for the GGML blocks)
and the numpy reference; float16 / bfloat16 must be those float32 values rounded to
nearest even, as numpy rounds them."""
import numpy as np
import pytest

import braze
from braze import _cpu, _spec
from braze._arrays import BF16
from braze.reference import quant as ref

_spec.load_all()
from braze.specs import quant_mx as mx_spec  # noqa: E402  (after the registry: the spec modules import each other)
from braze.specs.quant import random_blocks  # noqa: E402
from conftest import cpu_isa

ISAS = _cpu.isas_supported()
NARROWING = (True, False) if _cpu.hw_bf16() else (False,)
BLOCK_FORMATS = ("q4_K", "q6_K", "q4_0", "q8_0", "q5_K")
SPLIT_FORMATS = ("mxfp4", "nvfp4", "fp8_e4m3", "affine4")
F16_EDGES = np.array([0x0000, 0x7bff, 0xfbff, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x8000], np.uint16)


def bf16_of(f32):
    """Round to nearest even, NaN made quiet, denormals kept (written here, not numpy's)."""
    u = np.ascontiguousarray(f32, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = (u & 0x7fffffff) > 0x7f800000
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def block_data(fmt, n, k, rng):
    """Random blocks, then f16 scale fields set to edge values in some blocks (no inf / NaN)."""
    data = random_blocks(fmt, n, k, rng)
    nb, nbytes = k // ref.BLOCKS[fmt][0], ref.BLOCKS[fmt][1]
    b = data.reshape(n, nb, nbytes)
    pick = rng.random((n, nb)) < 0.5
    for off in ref.F16_FIELDS[fmt]:
        edge = rng.choice(F16_EDGES, (n, nb)).view(np.uint8).reshape(n, nb, 2)
        b[..., off:off + 2] = np.where(pick[..., None], edge, b[..., off:off + 2])
    if fmt in ("q4_K", "q5_K"):  # 6-bit scales and mins of 0 and 63 in some blocks
        b[0, 0, 4:16] = 0xff
        b[-1, -1, 4:16] = 0
    if fmt == "q6_K":
        b[0, 0, 192:208] = np.array([127, -128, 0, 1] * 4, np.int8).view(np.uint8)
    return data


def split_arrays(fmt, n, k, rng):
    """A format's arrays (spec layout) with edge scales: MX exponents 0 (products denormal) and 254,
    nvfp4 / fp8 scales that make denormal products; codes without NaN."""
    arrays, kw = mx_spec._deq_inputs(fmt)((n, k), "float32", rng, {}, False)
    arrays = [np.array(a) for a in arrays]
    if fmt == "mxfp4":
        arrays[1][0, :] = 0
        arrays[1][-1, -1] = 254
        arrays[1][n // 2, ::2] = 1
    elif fmt == "nvfp4":
        arrays[1][0, :] = 0x01  # the smallest e4m3 subnormal
        arrays[1][-1, 0] = 0x7e  # 448
        arrays[2][...] = np.float32(1e-36) if n % 2 else np.float32(3.0)
    elif fmt == "fp8_e4m3":
        codes = arrays[0]
        codes[(codes & 0x7f) == 0x7f] = 0x7e  # no NaN
        arrays[1][0] = np.float32(1e-39)  # a denormal scale
        arrays[1][-1] = np.float32(2e-36)
    elif fmt == "affine4":
        arrays[1][0, 0] = 0
        arrays[2][0, 0] = np.float32(1e-40)  # a denormal bias
        arrays[1][-1, :] = np.float32(1e-30)
    return arrays, kw


def deq(fmt, arrays, kw, dtype, out=None):
    if fmt in BLOCK_FORMATS:
        return braze.quant._dequantize_raw(arrays[0], format=fmt, k=kw["k"], dtype=dtype, out=out)
    return mx_spec.dequantize_arrays(*arrays, **{**kw, "dtype": dtype}, out=out)


def reference_f32(fmt, arrays, kw):
    if fmt in BLOCK_FORMATS:
        return np.asarray(ref.dequantize(arrays[0], format=fmt, dtype="float32"))
    return np.asarray(mx_spec.dequantize_reference(*arrays, **{**kw, "dtype": "float32"}))


def check(fmt, arrays, kw, n, k):
    with cpu_isa("base"):
        base = np.asarray(deq(fmt, arrays, kw, "float32"))
    with np.errstate(all="ignore"):
        want = reference_f32(fmt, arrays, kw)
    assert (bits(base) == bits(want)).all(), (fmt, "base build against the reference")
    want16 = want.astype(np.float16)
    wantb = bf16_of(want)
    for isa in ISAS:
        for hw in NARROWING:
            _cpu.set_hw_bf16(hw)
            with cpu_isa(isa):
                assert (bits(deq(fmt, arrays, kw, "float32")) == bits(want)).all(), (fmt, isa, "float32")
                assert (bits(deq(fmt, arrays, kw, "float16")) == bits(want16)).all(), (fmt, isa, "float16")
                got = deq(fmt, arrays, kw, "bfloat16")
                assert (bits(got) == wantb).all(), (fmt, isa, hw, "bfloat16")
                # rows 24 elements apart in a wider buffer, and one element off a 64-byte boundary
                full = np.full((n, k + 24), -3.0, np.float32).astype(BF16)
                deq(fmt, arrays, kw, "bfloat16", out=full[:, :k])
                assert (bits(full[:, :k]) == wantb).all() and (bits(full[:, k:]) == bits(np.float32(-3.0).astype(BF16))).all()
                raw = np.zeros(n * k + 64, BF16)
                off = (-raw.ctypes.data % 64) // 2 + 1
                view = raw[off:off + n * k].reshape(n, k)
                deq(fmt, arrays, kw, "bfloat16", out=view)
                assert (bits(view) == wantb).all(), (fmt, isa, hw, "misaligned")


@pytest.fixture(params=["cached", "streamed"])
def store_kind(request):
    braze._cpu.set_stream_min_bytes(0 if request.param == "streamed" else -1)
    hw = _cpu.hw_bf16()
    try:
        yield request.param
    finally:
        braze._cpu.set_stream_min_bytes(-1)
        _cpu.set_hw_bf16(hw)


@pytest.mark.parametrize("fmt", BLOCK_FORMATS)
def test_block_formats_equal_the_codec(fmt, store_kind):
    rng = np.random.default_rng(21)
    for n, k in ((5, 512), (1, 256 if fmt.endswith("K") else 32), (3, 1280)):
        if k % ref.BLOCKS[fmt][0]:
            continue
        data = block_data(fmt, n, k, rng)
        check(fmt, [data], dict(k=k), n, k)
        # rows of the data 5 bytes apart in a wider buffer
        wide = np.zeros((n, data.shape[1] + 5), np.uint8)
        wide[:, :data.shape[1]] = data
        check(fmt, [wide[:, :data.shape[1]]], dict(k=k), n, k)


@pytest.mark.parametrize("fmt", SPLIT_FORMATS)
def test_split_formats_equal_the_codec(fmt, store_kind):
    rng = np.random.default_rng(22)
    for n, k in ((5, 512), (3, 128), (7, 384)):
        arrays, kw = split_arrays(fmt, n, k, rng)
        check(fmt, arrays, kw, n, k)


def test_narrowing_switch():
    """On by default where the CPU has AVX-512 BF16 (and the avx512 build runs); off always allowed."""
    hw = _cpu.hw_bf16()
    try:
        _cpu.set_hw_bf16(False)
        assert not _cpu.hw_bf16()
        if hw:
            _cpu.set_hw_bf16(True)
            assert _cpu.hw_bf16()
        if "avx512" not in ISAS:
            with pytest.raises(ValueError, match="on"):
                _cpu.set_hw_bf16(True)
    finally:
        _cpu.set_hw_bf16(hw)


@pytest.mark.parametrize("fmt", ["affine4", "affine8", "q4_1"])
def test_nan_of_scale_times_code_plus_nan_wins(fmt):
    """s c + b with both NaN gives s c's NaN on every build (negative here, b's positive):
    the AVX-512 build's single vaddps must keep its operand order."""
    rng = np.random.default_rng(23)
    n, k = 3, 256
    neg_nan, pos_nan = np.uint32(0xffc00001).view(np.float32), np.uint32(0x7fc00002).view(np.float32)
    if fmt == "q4_1":  # d and m are float16 fields: -NaN and +NaN
        data = random_blocks(fmt, n, k, rng)
        b = data.reshape(n, k // 32, 20)
        b[:, ::2, 0:2] = np.array([0xfe01], np.uint16).view(np.uint8)
        b[:, ::2, 2:4] = np.array([0x7e02], np.uint16).view(np.uint8)
        arrays, kw = [data], dict(k=k)
        run = lambda dt: braze.quant._dequantize_raw(data, format=fmt, k=k, dtype=dt)  # noqa: E731
    else:
        arrays, kw = mx_spec._deq_inputs(fmt)((n, k), "float32", rng, {}, False)
        arrays = [np.array(a) for a in arrays]
        arrays[1][:, ::2] = neg_nan
        arrays[2][:, ::2] = pos_nan
        run = lambda dt: mx_spec.dequantize_arrays(*arrays, **{**kw, "dtype": dt})  # noqa: E731
    with cpu_isa("base"):
        want = {dt: bits(run(dt)) for dt in ("float32", "bfloat16")}
    assert (want["float32"][:, :32] >> 31 == 1).all() and np.isnan(np.asarray(run("float32"))[:, :32]).all()
    for isa in ISAS:
        with cpu_isa(isa):
            for dt in want:
                assert (bits(run(dt)) == want[dt]).all(), (fmt, isa, dt)
