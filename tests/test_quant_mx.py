"""The quant family's MX / nvfp4 / fp8 / int8 / MLX-affine formats and
quantize_activations on the CPU: bit-exact against the numpy references of
braze.reference.quant_mx (written from the OCP / NVIDIA definitions), the
references against ml_dtypes' fp8 casts, affine against mlx.core, GGUF's fp4
blocks against gguf.quants, and the errors of bad input."""
import numpy as np
import pytest

import braze.quant as bq
from braze.reference import quant_mx as ref

torch = pytest.importorskip("torch")

MX = list(ref.MX_ELEM)
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def bits(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    return a.view(np.uint32)


def same_f32(a, b):
    """Bit for bit, NaN payloads aside."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    na, nb = np.isnan(a), np.isnan(b)
    return a.shape == b.shape and np.array_equal(na, nb) and np.array_equal(bits(a)[~na], bits(b)[~nb])


def to_np(a):
    if isinstance(a, torch.Tensor):
        if a.dtype == torch.bfloat16:
            return a.float().numpy()
        return a.numpy()
    return np.asarray(a)


def as_dtype(w32, dtype):
    """w32 (numpy f32) in `dtype` as the test passes it (torch for bfloat16), and its float32 values."""
    t = torch.from_numpy(np.ascontiguousarray(w32)).to(getattr(torch, dtype))
    return t, t.float().numpy()


def weights(n, k, seed=0, special=True):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-6, 6, (n, 1)))).astype(np.float32)
    if special and n >= 8 and k >= 64:
        w[0, :32] = 0.0
        w[1, :32] = -0.0
        w[1, 3] = np.nan
        w[2, 40] = np.inf
        w[3, :32] = 1e-40
        w[4, 32:64] = 3e38
        w[5, :32] = 6.0
        w[6, :32] = 7.0
        w[7, :32] = 449.0
    return w


def ulp(v, dtype):
    """The spacing of `dtype`'s values at |v| (subnormals included)."""
    mbits, emin = {"float32": (23, -126), "float16": (10, -14), "bfloat16": (7, -126)}[dtype]
    e = np.floor(np.log2(np.maximum(np.abs(np.asarray(v, np.float64)), 2.0 ** emin)))
    return 2.0 ** (e - mbits)


def cast_like(y32, dtype):
    """float32 values rounded once to `dtype` (the kernels' one rounding), as float32."""
    return torch.from_numpy(np.ascontiguousarray(y32)).to(getattr(torch, dtype)).float().numpy()


# ---------------------------------------------------------------- references vs ml_dtypes
@pytest.mark.parametrize("elem", ["e4m3", "e5m2"])
def test_reference_fp8_matches_ml_dtypes(elem):
    """Round to nearest even at the boundaries; beyond max the reference
    saturates where ml_dtypes (a plain cast) overflows, so it is compared on
    the clipped value; NaN stays NaN, -0 keeps its sign."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    dt = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}[elem]
    fmax = FP8_MAX[elem]
    edge = [448, 449, 464, 465, 480, 57344, 61439, 61440, 1e30, 2.0**-6, 2.0**-9, 2.0**-10, 2.0**-10 * 1.001,
            3 * 2.0**-11, 2.0**-14, 2.0**-16, 2.0**-17, 1.5 * 2.0**-17, 0.0, -0.0, np.inf, -np.inf, 1e-45]
    x = np.array(edge + [-v for v in edge], np.float32)
    x = np.concatenate([x, np.random.default_rng(0).standard_normal(50000).astype(np.float32) * fmax / 3])
    ours = ref.encode_elem(x, elem)
    want = np.clip(x, -fmax, fmax).astype(dt).view(np.uint8)
    assert np.array_equal(ours, want)
    nan = ref.encode_elem(np.array([np.nan], np.float32), elem)
    assert np.isnan(ref.decode_elem(nan, elem)[0])
    assert ref.encode_elem(np.array([-0.0], np.float32), elem)[0] == 0x80  # -0 keeps its sign
    codes = np.arange(256, dtype=np.uint8)
    assert same_f32(ref.decode_elem(codes, elem), codes.view(dt).astype(np.float32))


def test_reference_mx_scale_rules():
    """floor is OCP's floor(log2 amax) - emax; ceil never saturates; round saturates by less than half a step."""
    amax = np.array([6.0, 6.5, 7.0, 8.0, 1.0, 0.75])
    assert list(ref.mx_scale_exponent(amax, "e2m1", "floor")) == [0, 0, 0, 1, -2, -3]
    assert list(ref.mx_scale_exponent(amax, "e2m1", "ceil")) == [0, 1, 1, 1, -2, -3]
    assert list(ref.mx_scale_exponent(amax, "e2m1", "round")) == [0, 0, 1, 1, -2, -3]
    assert ref.mx_scale_exponent(np.array([0.0]), "e4m3", "floor")[0] == -127


# ---------------------------------------------------------------- MX
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("rule", ref.SCALE_RULES)
@pytest.mark.parametrize("fmt", MX)
def test_mx_bit_exact(fmt, rule, dtype):
    w, w32 = as_dtype(weights(12, 160, seed=1), dtype)
    qw = bq.quantize(w, fmt, scale_rule=rule)
    data, scales = ref.mx_quantize(w32, fmt, rule)
    assert np.array_equal(to_np(qw.data), data)
    assert np.array_equal(to_np(qw.scales), scales)
    want = ref.mx_dequantize(data, scales, fmt, 160)
    assert same_f32(to_np(bq.dequantize(qw)), want)
    assert same_f32(to_np(bq.dequantize(qw, dtype=dtype)), cast_like(want, dtype))


def test_mx_numpy_arrays_and_default_rule():
    w = weights(4, 64, seed=2, special=False)
    qw = bq.quantize(w, "mxfp4")
    assert isinstance(qw.data, np.ndarray) and qw.data.dtype == np.uint8 and qw.data.shape == (4, 32)
    assert qw.scales.shape == (4, 2)
    data, scales = ref.mx_quantize(w, "mxfp4", "floor")
    assert np.array_equal(qw.data, data) and np.array_equal(qw.scales, scales)


# ---------------------------------------------------------------- nvfp4
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_nvfp4_bit_exact(dtype):
    w32 = weights(9, 96, seed=3, special=False)
    w32[0, :16] = 0
    w32[1, :16] = w32[1, :16] * 1e4  # a block whose e4m3 scale saturates
    w, w32 = as_dtype(w32, dtype)
    qw = bq.quantize(w, "nvfp4")
    data, scales, t = ref.nvfp4_quantize(w32)
    assert np.array_equal(to_np(qw.data), data)
    assert np.array_equal(to_np(qw.scales), scales)
    assert bits(to_np(qw.tensor_scale))[0] == bits(np.float32(t)).item()
    want = ref.nvfp4_dequantize(data, scales, t, 96)
    assert same_f32(to_np(bq.dequantize(qw)), want)
    assert same_f32(to_np(bq.dequantize(qw, dtype=dtype)), cast_like(want, dtype))


# ---------------------------------------------------------------- fp8 / int8
@pytest.mark.parametrize("granularity", ["tensor", "row", "block"])
@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_bit_exact(fmt, granularity):
    w32 = weights(200, 300, seed=4, special=False)
    w32[5] = 0
    w, w32 = as_dtype(w32, "bfloat16")
    qw = bq.quantize(w, fmt, granularity=granularity)
    data, scales = ref.fp8_quantize(w32, fmt, granularity)
    assert np.array_equal(to_np(qw.data), data)
    assert same_f32(to_np(qw.scales), scales)
    want = ref.fp8_dequantize(data, scales, fmt, granularity)
    assert same_f32(to_np(bq.dequantize(qw)), want)
    assert same_f32(to_np(bq.dequantize(qw, dtype="bfloat16")), cast_like(want, "bfloat16"))


def test_fp8_row_matches_torch_composition():
    x = torch.randn(64, 512, dtype=torch.float32) * 10
    qw = bq.quantize(x, "fp8_e4m3")
    scale = x.abs().amax(dim=1) / 448.0
    want = (x / scale[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    assert torch.equal(qw.data, want)
    assert torch.equal(qw.scales, scale)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_int8_bit_exact(dtype):
    w32 = weights(17, 130, seed=5, special=False)
    w32[3] = 0
    w32[4, 7] = np.nan
    w, w32 = as_dtype(w32, dtype)
    qw = bq.quantize(w, "int8")
    data, scales = ref.int8_quantize(w32)
    assert to_np(qw.data).dtype == np.int8
    assert np.array_equal(to_np(qw.data), data)
    assert same_f32(to_np(qw.scales), scales)
    assert same_f32(to_np(bq.dequantize(qw)), ref.int8_dequantize(data, scales))


# ---------------------------------------------------------------- MLX affine
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("group", ref.AFFINE_GROUPS)
@pytest.mark.parametrize("nbits", ref.AFFINE_BITS)
def test_affine_matches_mlx(nbits, group, dtype):
    """quantize equals mlx.core.quantize bit for bit; dequantize of MLX's own
    arrays (from_mlx, no copy) equals mlx.core.dequantize bit for bit in
    float32; in float16 / bfloat16 MLX rounds s * q to the dtype and then the
    sum, braze rounds once, so they differ by at most an ulp of the larger term."""
    mx = pytest.importorskip("mlx.core")
    w32 = (np.random.default_rng(nbits * group).standard_normal((8, 256)) * 0.05).astype(np.float32)
    w32[0, :group] = 0.0
    w32[1, :group] = 0.25
    w, w32 = as_dtype(w32, dtype)
    mdt = getattr(mx, dtype)
    wq, s, b = mx.quantize(mx.array(w32).astype(mdt), group_size=group, bits=nbits)
    qw = bq.quantize(w, f"affine{nbits}", group_size=group)
    assert np.array_equal(to_np(qw.data), np.array(wq))
    assert np.array_equal(to_np(qw.scales), np.array(s.astype(mx.float32)))
    assert np.array_equal(to_np(qw.biases), np.array(b.astype(mx.float32)))
    # the other direction: MLX's arrays into braze
    s32, b32 = np.array(s.astype(mx.float32)), np.array(b.astype(mx.float32))
    qm = bq.QuantizedTensor.from_mlx(np.array(wq), s32, b32, group_size=group, bits=nbits)
    assert qm.format == f"affine{nbits}" and qm.shape == (8, 256)
    want = np.array(mx.dequantize(wq, mx.array(s32), mx.array(b32), group_size=group, bits=nbits))
    assert same_f32(bq.dequantize(qm), want)
    got = to_np(bq.dequantize(qw, dtype=dtype))
    theirs = np.array(mx.dequantize(wq, s, b, group_size=group, bits=nbits).astype(mx.float32))
    assert same_f32(got, cast_like(ref.affine_dequantize(np.array(wq), s32, b32, nbits, group, 256), dtype))
    # MLX rounds s * q before adding b: off by at most an ulp of the larger term
    sq = ref.affine_dequantize(np.array(wq), s32, np.zeros_like(b32), nbits, group, 256)
    big = np.maximum(np.abs(sq), np.repeat(np.abs(b32), group, axis=1))
    assert np.all(np.abs(got - theirs) <= ulp(big, dtype))


def test_from_mlx_errors():
    wq = np.zeros((4, 16), np.uint32)
    s = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="bits"):
        bq.QuantizedTensor.from_mlx(wq, s, s, group_size=64, bits=7)
    with pytest.raises(ValueError, match="group_size"):
        bq.QuantizedTensor.from_mlx(wq, s, s, group_size=48, bits=4)
    with pytest.raises(ValueError, match="scales"):
        bq.QuantizedTensor.from_mlx(wq, np.zeros((4, 3), np.float32), s, group_size=64, bits=4)
    with pytest.raises(ValueError, match="mode"):
        bq.QuantizedTensor.from_mlx(wq, s, s, group_size=64, bits=4, mode="mxfp4")


# ---------------------------------------------------------------- GGUF fp4 blocks
@pytest.mark.parametrize("name,block,nbytes", [("MXFP4", 32, 17), ("NVFP4", 64, 36)])
def test_gguf_fp4_blocks_match_gguf(name, block, nbytes):
    gguf = pytest.importorskip("gguf")
    t = getattr(gguf.GGMLQuantizationType, name, None)
    if t is None:
        pytest.skip(f"this gguf has no {name}")
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, (6, 512 // block * nbytes), dtype=np.uint8)
    if name == "MXFP4":
        raw.reshape(6, -1, nbytes)[..., 0] = rng.integers(110, 140, (6, 512 // block))
    else:
        raw[0, :4] = [0x7F, 0xFF, 0x80, 0x00]
    qw = bq.QuantizedTensor.from_gguf(raw, int(t), (6, 512))
    want = gguf.quants.dequantize(raw, t).reshape(6, 512)
    assert same_f32(bq.dequantize(qw), want)
    ours = ref.mxfp4_gguf_dequantize(raw, 512) if name == "MXFP4" else ref.nvfp4_gguf_dequantize(raw, 512)
    assert same_f32(ours, want)


# ---------------------------------------------------------------- activations
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ref.ACT_FORMATS)
@pytest.mark.parametrize("shape", [(1, 4096), (7, 96), (33, 1024)])
def test_quantize_activations_bit_exact(fmt, dtype, shape):
    x32 = (np.random.default_rng(shape[0]).standard_normal(shape) * 3).astype(np.float32)
    x32[0, 5] = 300.0  # an outlier
    if shape[0] > 2:
        x32[1] = 0.0
    x, x32 = as_dtype(x32, dtype)
    xq, sx = bq.quantize_activations(x, fmt)
    wq, ws = ref.quantize_activations(x32, fmt)
    assert np.array_equal(to_np(xq), wq)
    assert same_f32(to_np(sx), ws) if ws.dtype == np.float32 else np.array_equal(to_np(sx), ws)


def test_quantize_activations_fp8_matches_torch_composition():
    x = torch.randn(16, 4096, dtype=torch.bfloat16) * 4
    xq, sx = bq.quantize_activations(x, "fp8_e4m3")
    xf = x.float()
    scale = xf.abs().amax(dim=1) / 448.0
    want = (xf / scale[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
    assert torch.equal(xq, want) and torch.equal(sx, scale)


def test_quantize_activations_odd_k_per_token():
    x = np.random.default_rng(3).standard_normal((3, 37)).astype(np.float32)
    for fmt in ("fp8_e4m3", "int8"):
        xq, sx = bq.quantize_activations(x, fmt)
        wq, ws = ref.quantize_activations(x, fmt)
        assert np.array_equal(xq, wq) and same_f32(sx, ws)


# ---------------------------------------------------------------- bad input
def test_bad_input():
    w = np.ones((4, 48), np.float32)
    with pytest.raises(ValueError, match="block of 32"):
        bq.quantize(w, "mxfp4")
    with pytest.raises(ValueError, match="scale_rule"):
        bq.quantize(np.ones((4, 64), np.float32), "mxfp4", scale_rule="nearest")
    with pytest.raises(ValueError, match="group_size"):
        bq.quantize(np.ones((4, 64), np.float32), "affine4", group_size=48)
    with pytest.raises(ValueError, match="granularity"):
        bq.quantize(np.ones((4, 64), np.float32), "fp8_e4m3", granularity="column")
    with pytest.raises(ValueError, match="scale_rule"):
        bq.quantize(np.ones((4, 64), np.float32), "int8", scale_rule="floor")
    with pytest.raises(ValueError, match="'nvfp4'"):
        bq.quantize_activations(np.ones((2, 32), np.float32), "fp4")
    with pytest.raises(ValueError, match="x"):
        bq.quantize_activations(np.ones((2, 3, 32), np.float32), "int8")
    with pytest.raises(ValueError, match="multiple of"):
        bq.quantize_activations(np.ones((2, 40), np.float32), "mxfp8_e4m3")
    with pytest.raises(TypeError):
        bq.quantize_activations(np.ones((2, 32), np.int32), "int8")


def test_dequantize_bad_arrays_write_nothing():
    qw = bq.quantize(weights(4, 64, special=False), "mxfp4")
    out = np.full((4, 64), 7.0, np.float32)
    bad = bq.QuantizedTensor("mxfp4", (4, 64), qw.data, qw.scales[:, :1])
    with pytest.raises(ValueError, match="scales"):
        bq.dequantize(bad, out=out)
    bad = bq.QuantizedTensor("mxfp4", (4, 64), qw.data, qw.scales.astype(np.int32))
    with pytest.raises(TypeError, match="scales"):
        bq.dequantize(bad, out=out)
    bad = bq.QuantizedTensor("mxfp4", (4, 64), qw.data, None)
    with pytest.raises(ValueError, match="scales"):
        bq.dequantize(bad, out=out)
    nv = bq.quantize(weights(4, 64, special=False), "nvfp4")
    bad = bq.QuantizedTensor("nvfp4", (4, 64), nv.data, nv.scales, tensor_scale=None)
    with pytest.raises(ValueError, match="tensor_scale"):
        bq.dequantize(bad, out=out)
    f8 = bq.quantize(weights(4, 64, special=False), "fp8_e4m3")
    bad = bq.QuantizedTensor("fp8_e4m3", (4, 64), f8.data, np.ones((3,), np.float32))
    with pytest.raises(ValueError, match="scales"):
        bq.dequantize(bad, out=out)
    assert np.all(out == 7.0)
