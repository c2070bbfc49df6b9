"""numpy references of the MX, nvfp4, fp8, int8 and MLX-affine formats.

Written from the format definitions (OCP Microscaling v1.0, NVIDIA's nvfp4
recipe, the gguf package's NVFP4 block, MLX's affine quantization), apart from
the C++ codecs in ``csrc/core/quant``: element codes are found by searching
the grid of every value a code takes (float64), not by bit manipulation.
Arithmetic the definitions do in float32 (scales, divisions) is done here in
numpy float32, which rounds as IEEE 754 does, so results agree bit for bit.

Storage (API.md, quant): packed codes LSB first in a little-endian bit
stream (fp4: element 2i in the low nibble of byte i; fp6: 4 elements in 3
bytes); MX scales e8m0 one byte per 32 elements; nvfp4 e4m3 scales one byte
per 16 plus an f32 tensor scale.
"""
from __future__ import annotations

import numpy as np

# name: (bits, exponent bits, mantissa bits, bias, has_inf_nan_ieee, nan_code)
ELEMS = {
    "e2m1": (4, 2, 1, 1, False, None),
    "e2m3": (6, 2, 3, 1, False, None),
    "e3m2": (6, 3, 2, 3, False, None),
    "e4m3": (8, 4, 3, 7, False, 0x7F),
    "e5m2": (8, 5, 2, 15, True, 0x7E),
}
MX_ELEM = {"mxfp4": "e2m1", "mxfp6_e2m3": "e2m3", "mxfp6_e3m2": "e3m2", "mxfp8_e4m3": "e4m3", "mxfp8_e5m2": "e5m2"}
MX_BLOCK = 32
NVFP4_BLOCK = 16
SCALE_RULES = ("floor", "ceil", "round")
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def elem_values(elem):
    """Value of every code of an element format (float64), by the definition
    (-1)^s * 2^(e - bias) * (1 + m / 2^M), subnormal 2^(1 - bias) * m / 2^M."""
    bits, eb, mb, bias, ieee, _ = ELEMS[elem]
    codes = np.arange(1 << bits)
    s = codes >> (bits - 1)
    e = (codes >> mb) & ((1 << eb) - 1)
    m = codes & ((1 << mb) - 1)
    mag = np.where(e == 0, 2.0 ** (1 - bias) * m / 2**mb, 2.0 ** (e.astype(np.float64) - bias) * (1 + m / 2**mb))
    if elem == "e4m3":
        mag = np.where((e == 15) & (m == 7), np.nan, mag)
    if ieee:
        mag = np.where(e == (1 << eb) - 1, np.where(m == 0, np.inf, np.nan), mag)
    return np.where(s == 1, -mag, mag)


def _grid(elem):
    """The finite magnitudes in code order (codes 0 .. max_code)."""
    bits = ELEMS[elem][0]
    v = elem_values(elem)[: 1 << (bits - 1)]
    return v[np.isfinite(v)]


def elem_max(elem):
    return float(_grid(elem)[-1])


def encode_elem(x, elem):
    """Nearest code (ties to the even code), saturating to +-max; NaN to the
    format's NaN code (0 in a format without one)."""
    bits, *_, nan_code = ELEMS[elem]
    grid = _grid(elem)
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    lo = np.clip(np.searchsorted(grid, a, side="right") - 1, 0, len(grid) - 1)
    hi = np.minimum(lo + 1, len(grid) - 1)
    with np.errstate(invalid="ignore"):
        d_lo, d_hi = a - grid[lo], grid[hi] - a
        up = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = np.where(up, hi, lo)
    code = np.where(a >= grid[-1], len(grid) - 1, code)
    code = code | (np.signbit(x).astype(np.int64) << (bits - 1))
    nan = (nan_code | (np.signbit(x).astype(np.int64) << (bits - 1))) if nan_code else 0
    code = np.where(np.isnan(x), nan, code)
    return code.astype(np.uint8)


def decode_elem(codes, elem):
    return elem_values(elem)[np.asarray(codes).astype(np.int64)]


# ---------------------------------------------------------------- packing
def pack_codes(codes, bits):
    """[N, K] codes -> [N, K * bits / 8] uint8, LSB first."""
    codes = np.asarray(codes, dtype=np.uint8)
    n, k = codes.shape
    shifts = np.arange(bits, dtype=np.uint8)
    stream = ((codes[..., None] >> shifts) & 1).reshape(n, k * bits)
    return np.packbits(stream.reshape(n, k * bits // 8, 8), axis=-1, bitorder="little").reshape(n, k * bits // 8)


def unpack_codes(data, bits, k):
    data = np.asarray(data, dtype=np.uint8)
    n = data.shape[0]
    stream = np.unpackbits(data, axis=-1, bitorder="little")[:, : k * bits].reshape(n, k, bits)
    return (stream.astype(np.uint8) << np.arange(bits, dtype=np.uint8)).sum(axis=-1, dtype=np.uint32).astype(np.uint8)


# ---------------------------------------------------------------- MX
def _emax(elem):
    return int(np.floor(np.log2(elem_max(elem))))


def mx_scale_exponent(amax, elem, rule):
    """Shared exponent of blocks with largest magnitude amax (float64 array,
    finite, >= 0), clamped to [-127, 127]; amax 0 gives -127."""
    if rule not in SCALE_RULES:
        raise ValueError(f"scale_rule must be one of {SCALE_RULES}, got {rule!r}")
    amax = np.asarray(amax, dtype=np.float64)
    emax, mb, top = _emax(elem), ELEMS[elem][2], elem_max(elem)
    pos = amax > 0
    safe = np.where(pos, amax, 1.0)
    mant, e = np.frexp(safe)  # safe = mant * 2^e, mant in [0.5, 1)
    if rule == "round":  # amax rounded to the element's mantissa width (ties to even)
        r = np.rint(mant * 2.0 ** (mb + 1)) / 2.0 ** (mb + 1)
        mant, e2 = np.frexp(r)
        e = e + e2
    fl = e - 1  # floor(log2)
    s = fl - emax
    if rule == "ceil":
        s = np.where(safe > top * 2.0 ** s, s + 1, s)
    return np.clip(np.where(pos, s, -127), -127, 127).astype(np.int64)


def mx_quantize(w, fmt, scale_rule="floor"):
    """w [N, K] float -> (data uint8 [N, K * bits / 8], scales uint8 e8m0 [N, K / 32])."""
    elem = MX_ELEM[fmt]
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    if k % MX_BLOCK:
        raise ValueError(f"w: K={k} is not a multiple of {MX_BLOCK}")
    blocks = w.astype(np.float64).reshape(n, k // MX_BLOCK, MX_BLOCK)
    finite = np.isfinite(blocks).all(axis=-1)
    amax = np.where(finite, np.abs(np.where(np.isfinite(blocks), blocks, 0)).max(axis=-1), 0.0)
    s = mx_scale_exponent(amax, elem, scale_rule)
    codes = encode_elem(blocks / 2.0 ** s[..., None], elem)
    codes = np.where(finite[..., None], codes, 0).reshape(n, k)
    scales = np.where(finite, s + 127, 255).astype(np.uint8)
    return pack_codes(codes, ELEMS[elem][0]), scales


def e8m0_values(scales):
    s = np.asarray(scales).astype(np.int64)
    return np.where(s == 255, np.nan, 2.0 ** (s - 127.0))


def mx_dequantize(data, scales, fmt, k):
    elem = MX_ELEM[fmt]
    codes = unpack_codes(data, ELEMS[elem][0], k)
    v = decode_elem(codes, elem) * np.repeat(e8m0_values(scales), MX_BLOCK, axis=-1)
    with np.errstate(over="ignore"):  # exact in float32 but past its range (scale 2^127): inf
        return v.astype(np.float32)


# ---------------------------------------------------------------- nvfp4
def nvfp4_tensor_scale(w):
    amax = np.float32(np.max(np.abs(np.asarray(w, dtype=np.float32)))) if np.size(w) else np.float32(0)
    t = np.float32(amax / np.float32(448.0 * 6.0))
    return np.float32(1.0) if t == 0 else t


def nvfp4_quantize(w, tensor_scale=None):
    """w [N, K] -> (data uint8 [N, K/2], scales uint8 e4m3 [N, K/16], tensor_scale f32)."""
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    if k % NVFP4_BLOCK:
        raise ValueError(f"w: K={k} is not a multiple of {NVFP4_BLOCK}")
    t = nvfp4_tensor_scale(w) if tensor_scale is None else np.float32(tensor_scale)
    blocks = w.reshape(n, k // NVFP4_BLOCK, NVFP4_BLOCK)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = np.abs(blocks).max(axis=-1)  # NaN propagates
        sb = encode_elem(amax / (np.float32(6.0) * t), "e4m3")
        d = (decode_elem(sb, "e4m3").astype(np.float32) * t)[..., None]
        q = np.where(d == 0, 0, encode_elem(blocks / np.where(d == 0, np.float32(1), d), "e2m1"))
    return pack_codes(q.reshape(n, k), 4), sb, np.float32(t)


def nvfp4_dequantize(data, scales, tensor_scale, k):
    q = decode_elem(unpack_codes(data, 4, k), "e2m1")
    s = np.repeat(decode_elem(scales, "e4m3"), NVFP4_BLOCK, axis=-1)
    return (q * s).astype(np.float32) * np.float32(tensor_scale)


def nvfp4_gguf_dequantize(raw, k):
    """GGUF NVFP4 rows [N, K / 64 * 36] -> f32 [N, K]: four unsigned e4m3
    sub-scales (bit 7 ignored, 0x7F reads 0), then 8 bytes per 16 elements,
    the first 8 in the low nibbles."""
    raw = np.asarray(raw, dtype=np.uint8)
    n = raw.shape[0]
    blocks = raw.reshape(n, k // 64, 36)
    d = blocks[..., :4].astype(np.int64)
    e, m = (d >> 3) & 15, d & 7
    dv = np.where(e == 0, m * 2.0**-9, 2.0 ** (e - 7.0) * (1 + m / 8))
    dv = np.where(d == 0x7F, 0.0, dv)
    qs = blocks[..., 4:].reshape(n, k // 64, 4, 8)
    codes = np.concatenate([qs & 15, qs >> 4], axis=-1)  # [n, b, 4, 16]
    v = (decode_elem(codes, "e2m1") + 0.0) * dv[..., None]  # GGML's tables read the code -0 as +0
    return v.reshape(n, k).astype(np.float32)


# ---------------------------------------------------------------- fp8 / int8
def _amax_rows(x):
    with np.errstate(invalid="ignore"):
        return np.abs(x).max(axis=-1)  # NaN propagates


def fp8_quantize(w, fmt, granularity="row"):
    """w [N, K] -> (codes uint8 [N, K], scales f32): per tensor [1], per row [N],
    per 128 x 128 block [ceil(N/128), ceil(K/128)]; scale = amax / fmax."""
    elem = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}[fmt]
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    fmax = np.float32(FP8_MAX[elem])
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if granularity == "tensor":
            amax = np.abs(w).max().reshape(1) if w.size else np.zeros(1, np.float32)
            scales = (amax / fmax).astype(np.float32)
            full = np.broadcast_to(scales[0], w.shape)
        elif granularity == "row":
            scales = (_amax_rows(w) / fmax).astype(np.float32)
            full = np.broadcast_to(scales[:, None], w.shape)
        elif granularity == "block":
            nb, kb = -(-n // 128), -(-k // 128)
            pad = np.zeros((nb * 128, kb * 128), np.float32)
            pad[:n, :k] = w
            amax = np.abs(pad.reshape(nb, 128, kb, 128)).max(axis=(1, 3))
            scales = (amax / fmax).astype(np.float32)
            full = np.repeat(np.repeat(scales, 128, axis=0), 128, axis=1)[:n, :k]
        else:
            raise ValueError(f"granularity must be 'tensor', 'row' or 'block', got {granularity!r}")
        q = np.where(full == 0, 0, encode_elem(w / np.where(full == 0, np.float32(1), full), elem))
    return q.astype(np.uint8), scales


def fp8_dequantize(q, scales, fmt, granularity="row"):
    elem = {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"}[fmt]
    n, k = q.shape
    v = decode_elem(q, elem).astype(np.float32)
    scales = np.asarray(scales, dtype=np.float32)
    if granularity == "tensor":
        return v * scales[0]
    if granularity == "row":
        return v * scales[:, None]
    return v * np.repeat(np.repeat(scales, 128, axis=0), 128, axis=1)[:n, :k]


def int8_quantize(w):
    """w [N, K] -> (int8 [N, K], f32 [N]): scale = amax / 127, round half to even."""
    w = np.asarray(w, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        scales = (_amax_rows(w) / np.float32(127)).astype(np.float32)
        v = w / np.where(scales == 0, np.float32(1), scales)[:, None]
        v = np.where(np.isnan(v) | (scales[:, None] == 0), 0, np.clip(v, -127, 127))
    return np.rint(v).astype(np.int8), scales


def int8_dequantize(q, scales):
    return q.astype(np.float32) * np.asarray(scales, dtype=np.float32)[:, None]


# ---------------------------------------------------------------- MLX affine
AFFINE_BITS = (2, 3, 4, 5, 6, 8)
AFFINE_GROUPS = (32, 64, 128)


def affine_quantize(w, bits, group_size):
    """MLX's affine quantization of w [N, K] (float32 math; scales and biases
    returned in float32 before the cast to the weight dtype, which the caller
    does): per group n = 2^bits - 1, s = max((max - min) / n, 1e-7), the edge
    (the end of larger magnitude) decoding exactly, q = clip(rint((w - b) / s), 0, n).
    Returns (data uint32 [N, K * bits / 32], scales f32, biases f32)."""
    w = np.asarray(w, dtype=np.float32)
    n, k = w.shape
    g = w.reshape(n, k // group_size, group_size)
    hi, lo = g.max(axis=-1), g.min(axis=-1)
    nb = np.float32((1 << bits) - 1)
    low_edge = np.abs(lo) > np.abs(hi)
    s = np.maximum((hi - lo) / nb, np.float32(1e-7))
    s = np.where(low_edge, s, -s)
    edge = np.where(low_edge, lo, hi)
    with np.errstate(invalid="ignore", divide="ignore"):
        q0 = np.rint(edge / s)
        s = np.where(q0 != 0, edge / np.where(q0 != 0, q0, 1), s).astype(np.float32)
    b = np.where(q0 != 0, edge, 0).astype(np.float32)
    with np.errstate(invalid="ignore"):
        q = np.rint((g - b[..., None]) / s[..., None])
    q = np.clip(np.nan_to_num(q, nan=0.0), 0, nb).astype(np.uint8).reshape(n, k)
    return pack_codes(q, bits).view(np.uint32), s, b


def affine_dequantize(data, scales, biases, bits, group_size, k):
    """s * q + b in float32 (one rounding), from the stored scales and biases."""
    q = unpack_codes(np.ascontiguousarray(data).view(np.uint8), bits, k).astype(np.float32)
    n = q.shape[0]
    s = np.asarray(scales, dtype=np.float32)[..., None]
    b = np.asarray(biases, dtype=np.float32)[..., None]
    return (s * q.reshape(n, k // group_size, group_size) + b).reshape(n, k)


# ---------------------------------------------------------------- activations
ACT_FORMATS = ("fp8_e4m3", "int8", "mxfp8_e4m3", "nvfp4")


def quantize_activations(x, format):
    """x [M, K] float -> (xq, sx): per-token fp8_e4m3 (uint8 codes, f32 [M]) or
    int8 (int8, f32 [M]); per-block mxfp8_e4m3 (uint8 codes, e8m0 [M, K/32],
    floor rule) or nvfp4 (uint8 [M, K/2], e4m3 [M, K/16], tensor scale 1)."""
    x = np.asarray(x, dtype=np.float32)
    if format == "fp8_e4m3":
        return fp8_quantize(x, "fp8_e4m3", "row")
    if format == "int8":
        return int8_quantize(x)
    if format == "mxfp8_e4m3":
        return mx_quantize(x, "mxfp8_e4m3", "floor")
    if format == "nvfp4":
        data, scales, _ = nvfp4_quantize(x, tensor_scale=1.0)
        return data, scales
    raise ValueError(f"format must be one of {ACT_FORMATS}, got {format!r}")


def mxfp4_gguf_dequantize(raw, k):
    """GGUF MXFP4 rows [N, K / 32 * 17] -> f32 [N, K]: an e8m0 byte e, then 16
    bytes whose low nibbles are elements 0..15 and high nibbles 16..31;
    x = 2^(e - 127) * e2m1(q), with e = 255 read as 2^128 (not NaN), as gguf does."""
    raw = np.asarray(raw, dtype=np.uint8)
    n = raw.shape[0]
    blocks = raw.reshape(n, k // 32, 17)
    scale = 2.0 ** (blocks[..., 0].astype(np.float64) - 127)
    qs = blocks[..., 1:]
    codes = np.concatenate([qs & 15, qs >> 4], axis=-1)
    with np.errstate(over="ignore", invalid="ignore"):
        return ((decode_elem(codes, "e2m1") + 0.0) * scale[..., None]).reshape(n, k).astype(np.float32)
