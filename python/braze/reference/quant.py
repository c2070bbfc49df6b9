"""Reference compositions of the quant family (API.md, quant): GGML block formats.

Written from the published GGUF block layouts (the same layouts as
``csrc/core/quant/{ggml,kquants,iquants}.h`` describe), independently of the
kernels: every decode is array-API bit manipulation on the raw bytes, so the
same function runs on numpy, torch, CuPy and JAX arrays. Arithmetic is float32,
one operation at a time in the order of GGML's own reference (``gguf.quants``),
so the result is bit-exact with it; the output is cast once to ``dtype``.

``quantize_ggml`` is the GGML reference rounding of the legacy formats
(q8_0, q4_0, q4_1, q5_0, q5_1) in numpy.
"""
from __future__ import annotations

import numpy as np

from ._common import namespace

IQ4_VALUES = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)

# format: (block elements, block bytes)
BLOCKS = {
    "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
    "q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210),
    "q8_K": (256, 292), "iq4_nl": (32, 18), "iq4_xs": (256, 136),
}
# Byte offsets of each block's float16 scales (d, dmin, m); q8_K's d is float32 at 0.
F16_FIELDS = {
    "q8_0": (0,), "q4_0": (0,), "q4_1": (0, 2), "q5_0": (0,), "q5_1": (0, 2),
    "q2_K": (80, 82), "q3_K": (108,), "q4_K": (0, 2), "q5_K": (0, 2), "q6_K": (208,),
    "q8_K": (), "iq4_nl": (0,), "iq4_xs": (0,),
}


def _i32(xp, a):
    return xp.astype(a, xp.int32)


def _bits(xp, a, shift, mask):
    """(a >> shift) & mask of uint8 bytes, as int32."""
    return xp.bitwise_and(xp.bitwise_right_shift(_i32(xp, a), shift), mask)


def _pow2(xp, e, like):
    """2.0**e (float32, exact) for an int32 array e in [-149, 127]: a table lookup."""
    table = xp.asarray(np.ldexp(np.float32(1), np.arange(-149, 128)).astype(np.float32), device=_dev(like))
    return xp.reshape(xp.take(table, xp.reshape(xp.astype(e + 149, xp.int64), (-1,))), e.shape)


def _dev(a):
    from array_api_compat import device
    return device(a)


def _f16(xp, b, off):
    """The float16 at byte `off` of each block of b [..., bytes], as float32."""
    h = _i32(xp, b[..., off]) | (_i32(xp, b[..., off + 1]) << 8)
    sign = xp.where(h >= 0x8000, -1.0, 1.0)
    e, m = (h >> 10) & 31, h & 1023
    mag = xp.where(e == 0, xp.astype(m, xp.float32) * _pow2(xp, xp.zeros_like(e) - 24, b),
                   xp.astype(m + 1024, xp.float32) * _pow2(xp, xp.where(e == 31, 0, e) - 25, b))
    special = xp.where(m == 0, float("inf"), float("nan"))
    return xp.astype(sign, xp.float32) * xp.where(e == 31, xp.astype(special, xp.float32), mag)


def _f32(xp, b, off):
    """The float32 at byte `off` of each block (q8_K's scale), decoded from its bits."""
    lo = _i32(xp, b[..., off]) | (_i32(xp, b[..., off + 1]) << 8) | (_i32(xp, b[..., off + 2]) << 16)
    top = _i32(xp, b[..., off + 3])
    sign = xp.where(top >= 128, -1.0, 1.0)
    e = ((top & 127) << 1) | (lo >> 23)
    m = lo & 0x7FFFFF
    # m * 2**(e - 150) as two exact products: the mantissa has 23 bits, a float32 24.
    mag = xp.where(e == 0, xp.astype(m, xp.float32) * _pow2(xp, xp.zeros_like(e) - 149, b),
                   xp.astype(m + 0x800000, xp.float32) * _pow2(xp, xp.where(e == 255, 0, e) - 127, b)
                   * np.float32(2.0 ** -23))
    special = xp.where(m == 0, float("inf"), float("nan"))
    return xp.astype(sign, xp.float32) * xp.where(e == 255, xp.astype(special, xp.float32), mag)


def _nibbles32(xp, qs):
    """The 32 4-bit values of a q4-style block: low nibbles of qs[0:16], then the high ones."""
    return xp.concat([_bits(xp, qs, 0, 15), _bits(xp, qs, 4, 15)], axis=-1)


def _bitplane(xp, bytes_, n):
    """Bit j (j < n) of a little-endian bit field stored in bytes_[..., :ceil(n/8)]."""
    return xp.concat([_bits(xp, bytes_[..., j // 8:j // 8 + 1], j % 8, 1) for j in range(n)], axis=-1)


def _f(xp, a):
    return xp.astype(a, xp.float32)


def _col(a):
    return a[..., None]


def _decode_legacy(xp, b, fmt):
    d = _col(_f16(xp, b, 0))
    if fmt == "q8_0":
        q = _i32(xp, b[..., 2:])
        return _f(xp, xp.where(q >= 128, q - 256, q)) * d
    if fmt in ("q4_0", "iq4_nl"):
        q = _nibbles32(xp, b[..., 2:])
        if fmt == "iq4_nl":
            kv = xp.asarray(np.array(IQ4_VALUES, np.float32), device=_dev(b))
            return d * xp.reshape(xp.take(kv, xp.reshape(xp.astype(q, xp.int64), (-1,))), q.shape)
        return d * _f(xp, q - 8)
    if fmt == "q4_1":
        return d * _f(xp, _nibbles32(xp, b[..., 4:])) + _col(_f16(xp, b, 2))
    if fmt == "q5_0":
        q = _nibbles32(xp, b[..., 6:]) | (_bitplane(xp, b[..., 2:6], 32) << 4)
        return d * _f(xp, q - 16)
    q = _nibbles32(xp, b[..., 8:]) | (_bitplane(xp, b[..., 4:8], 32) << 4)  # q5_1
    return d * _f(xp, q) + _col(_f16(xp, b, 2))


def _scales_k4(xp, s):
    """q4_K / q5_K's eight 6-bit (scale, min) pairs from their 12 bytes."""
    sc = [_bits(xp, s[..., j:j + 1], 0, 63) for j in range(4)]
    sc += [_bits(xp, s[..., j + 8:j + 9], 0, 15) | (_bits(xp, s[..., j:j + 1], 6, 3) << 4) for j in range(4)]
    mn = [_bits(xp, s[..., j + 4:j + 5], 0, 63) for j in range(4)]
    mn += [_bits(xp, s[..., j + 8:j + 9], 4, 15) | (_bits(xp, s[..., j + 4:j + 5], 6, 3) << 4) for j in range(4)]
    return xp.concat(sc, axis=-1), xp.concat(mn, axis=-1)


def _per_sub(xp, v, sub):
    """[..., nsub] -> [..., nsub * sub]: each value repeated over its sub-block."""
    return xp.reshape(xp.broadcast_to(v[..., None], v.shape + (sub,)), v.shape[:-1] + (v.shape[-1] * sub,))


def _decode_k(xp, b, fmt):
    """[..., 256] float32 of one K-quant / iq4_xs super-block per row of b."""
    if fmt == "q2_K":
        sc = _i32(xp, b[..., :16])
        d, dmin = _col(_f16(xp, b, 80)), _col(_f16(xp, b, 82))
        dl, ml = _per_sub(xp, d * _f(xp, sc & 15), 16), _per_sub(xp, dmin * _f(xp, sc >> 4), 16)
        qs = b[..., 16:80]
        q = xp.concat([_bits(xp, qs[..., h * 32:(h + 1) * 32], s, 3) for h in range(2) for s in (0, 2, 4, 6)], axis=-1)
        return dl * _f(xp, q) - ml
    if fmt == "q3_K":
        s = b[..., 96:108]
        lo = [_bits(xp, s[..., i % 8:i % 8 + 1], 4 * (i // 8), 15) for i in range(16)]
        hi = [_bits(xp, s[..., 8 + i % 4:9 + i % 4], 2 * (i // 4), 3) for i in range(16)]
        sc = xp.concat([a | (c << 4) for a, c in zip(lo, hi)], axis=-1) - 32
        dl = _per_sub(xp, _col(_f16(xp, b, 108)) * _f(xp, sc), 16)
        qs, hm = b[..., 32:96], b[..., :32]
        ql = xp.concat([_bits(xp, qs[..., h * 32:(h + 1) * 32], sh, 3) for h in range(2) for sh in (0, 2, 4, 6)],
                       axis=-1)
        hb = xp.concat([_bits(xp, hm, j, 1) for j in range(8)], axis=-1)
        return dl * _f(xp, ql - 4 * (1 - hb))
    if fmt in ("q4_K", "q5_K"):
        sc, mn = _scales_k4(xp, b[..., 4:16])
        dl = _per_sub(xp, _col(_f16(xp, b, 0)) * _f(xp, sc), 32)
        ml = _per_sub(xp, _col(_f16(xp, b, 2)) * _f(xp, mn), 32)
        qs = b[..., 16:144] if fmt == "q4_K" else b[..., 48:176]
        q = xp.concat([_bits(xp, qs[..., p * 32:(p + 1) * 32], sh, 15) for p in range(4) for sh in (0, 4)], axis=-1)
        if fmt == "q5_K":
            q = q | (xp.concat([_bits(xp, b[..., 16:48], j, 1) for j in range(8)], axis=-1) << 4)
        return dl * _f(xp, q) - ml
    if fmt == "q6_K":
        sc = _i32(xp, b[..., 192:208])
        dl = _per_sub(xp, _col(_f16(xp, b, 208)) * _f(xp, xp.where(sc >= 128, sc - 256, sc)), 16)
        ql = xp.concat([_bits(xp, b[..., h * 64:(h + 1) * 64], sh, 15) for h in range(2) for sh in (0, 4)], axis=-1)
        qh = xp.concat([_bits(xp, b[..., 128 + h * 32:128 + (h + 1) * 32], sh, 3) for h in range(2)
                        for sh in (0, 2, 4, 6)], axis=-1)
        return dl * _f(xp, (ql | (qh << 4)) - 32)
    if fmt == "q8_K":
        q = _i32(xp, b[..., 4:260])
        return _col(_f32(xp, b, 0)) * _f(xp, xp.where(q >= 128, q - 256, q))
    # iq4_xs
    sh_ = _i32(xp, b[..., 2]) | (_i32(xp, b[..., 3]) << 8)
    ls = xp.concat([_bits(xp, b[..., 4 + ib // 2:5 + ib // 2], 4 * (ib % 2), 15)
                    | (((sh_[..., None] >> (2 * ib)) & 3) << 4) for ib in range(8)], axis=-1) - 32
    dl = _per_sub(xp, _col(_f16(xp, b, 0)) * _f(xp, ls), 32)
    q = xp.concat([_nibbles32(xp, b[..., 8 + 16 * ib:24 + 16 * ib]) for ib in range(8)], axis=-1)
    kv = xp.asarray(np.array(IQ4_VALUES, np.float32), device=_dev(b))
    return dl * xp.reshape(xp.take(kv, xp.reshape(xp.astype(q, xp.int64), (-1,))), q.shape)


def out_dtype(xp, like, dtype):
    """The framework's dtype called `dtype` (numpy's bfloat16 is ml_dtypes')."""
    if dtype != "bfloat16":
        return getattr(xp, dtype)
    mod = type(like).__module__.split(".")[0]
    if mod == "numpy":
        from .._arrays import BF16
        return BF16
    import importlib
    return importlib.import_module("jax.numpy" if mod in ("jax", "jaxlib") else mod).bfloat16


def dequantize(data, *, format, dtype="float32"):
    """``data [N, K / block * block_bytes]`` uint8 GGUF blocks of ``format`` -> ``[N, K]`` in ``dtype``."""
    xp = namespace(data)
    block, nbytes = BLOCKS[format]
    n, width = data.shape
    if width % nbytes:
        raise ValueError(f"data: {width} bytes per row is not a whole number of {format} blocks ({nbytes} bytes)")
    nb = width // nbytes
    b = xp.reshape(data, (n, nb, nbytes))
    y = _decode_legacy(xp, b, format) if block == 32 else _decode_k(xp, b, format)
    y = xp.reshape(y, (n, nb * block))
    if dtype == "float32":
        return y
    if dtype == "float64":
        return xp.astype(y, xp.float64)
    return xp.astype(y, out_dtype(xp, data, dtype))


# ---------------------------------------------------------------- quantize (numpy)
def _round_away(v):
    a = np.abs(v)
    f = np.floor(a)
    return np.sign(v) * (f + np.floor(2 * (a - f)))


def quantize_ggml(w, format):
    """float32 ``w [N, K]`` -> uint8 GGUF blocks ``[N, K / 32 * bytes]`` (q8_0, q4_0, q4_1, q5_0, q5_1)."""
    w = np.asarray(w, np.float32)
    n, k = w.shape
    x = w.reshape(n, k // 32, 32)
    f32 = np.float32
    if format in ("q8_0", "q4_0", "q5_0"):
        if format == "q8_0":
            d = np.abs(x).max(axis=-1, keepdims=True) / f32(127)
        else:
            idx = np.abs(x).argmax(axis=-1)[..., None]
            d = np.take_along_axis(x, idx, axis=-1) / f32(-8 if format == "q4_0" else -16)
        with np.errstate(divide="ignore"):
            inv = np.where(d == 0, f32(0), f32(1) / d).astype(np.float32)
        if format == "q8_0":
            q = _round_away(x * inv).astype(np.int8).view(np.uint8)
            return np.concatenate([d.astype(np.float16).view(np.uint8), q], axis=-1).reshape(n, k // 32 * 34)
        hi = 15 if format == "q4_0" else 31
        q = np.clip(np.trunc(x * inv + f32(hi // 2 + 1.5)), 0, hi).astype(np.uint8)
        parts = [d.astype(np.float16).view(np.uint8)]
    else:
        mn, mx = x.min(axis=-1, keepdims=True), x.max(axis=-1, keepdims=True)
        hi = 15 if format == "q4_1" else 31
        d = (mx - mn) / f32(hi)
        with np.errstate(divide="ignore"):
            inv = np.where(d == 0, f32(0), f32(1) / d).astype(np.float32)
        q = np.clip(np.trunc((x - mn) * inv + f32(0.5)), 0, hi).astype(np.uint8)
        parts = [d.astype(np.float16).view(np.uint8), mn.astype(np.float16).view(np.uint8)]
    if hi == 31:
        bits = ((q >> 4) & 1).astype(np.uint32) << np.arange(32, dtype=np.uint32)
        parts.append(bits.sum(axis=-1, dtype=np.uint32)[..., None].view(np.uint8))
    parts.append((q[..., :16] & 15) | ((q[..., 16:] & 15) << 4))
    out = np.concatenate(parts, axis=-1)
    return out.reshape(n, k // 32 * out.shape[-1])


# ---------------------------------------------------------------- matmul
def _host(a):
    """A float / integer array on the host as numpy (torch bfloat16 through float32, exactly)."""
    if a is None:
        return None
    if type(a).__module__.split(".")[0] == "torch":
        a = a.detach().cpu()
        return (a.float() if a.dtype.is_floating_point else a).numpy()
    return np.asarray(a)


def matmul(x, data, scales=None, biases=None, tensor_scale=None, bias=None, *, format="", group_size=None):
    """``x [..., K] @ W.T (+ bias [N])`` -> ``[..., N]`` in x's dtype. ``W [N, K]``:
    ``data`` itself when ``format`` is "" (a dense weight), else its dequantized
    float32 values (this module's decode for the GGML formats, quant_mx's for the
    others) widened to float64, exactly. The product and the bias in float64, one
    rounding to x's dtype."""
    xp = namespace(x)
    k = x.shape[-1]
    if not format:
        w = xp.astype(data, xp.float64)
    elif format in BLOCKS:
        w = dequantize(data, format=format, dtype="float64")
    else:
        from . import quant_mx

        w64 = quant_mx.dequantize(_host(data), _host(scales), _host(biases), _host(tensor_scale), format=format, k=k,
                                  group_size=group_size).astype(np.float64)
        w = xp.asarray(w64, device=_dev(x))
    y = xp.matmul(xp.astype(x, xp.float64), xp.permute_dims(w, (1, 0)))
    if bias is not None:
        y = y + xp.astype(bias, xp.float64)
    return xp.astype(y, x.dtype)
