"""Reference compositions of the rope family (API.md, rope).

The angle of pair i at position p is the float32 product ``float32(p) *
inv_freq[i]`` in every dtype, as the kernels compute it; the oracle (float64
inputs) then takes cos and sin of that angle in float64, so it differs from a
kernel only by the kernel's cos/sin accuracy, even at positions near 2**24.
"""
from __future__ import annotations

from ._common import compute_dtype, namespace, upcast


def default_inv_freq(xp, rotary_dim, base, device=None):
    """``base ** (-2i / rotary_dim)`` evaluated in float64, rounded once to float32."""
    i = xp.arange(rotary_dim // 2, dtype=xp.float64, device=device)
    return xp.astype(float(base) ** (-2.0 * i / rotary_dim), xp.float32)


def _cos_sin(xp, positions, inv_freq, rot, base, attention_scale, inverse, dt, device):
    f = default_inv_freq(xp, rot, base, device) if inv_freq is None else xp.astype(inv_freq, xp.float32)
    ang = xp.astype(positions, xp.float32)[..., None] * f  # float32 product: [tokens..., rot/2]
    ang = xp.astype(ang, dt)
    c = xp.cos(ang) * attention_scale
    s = xp.sin(ang) * (-attention_scale if inverse else attention_scale)
    return c[..., None, :], s[..., None, :]  # broadcast over heads


def rope(x, positions, *, inv_freq=None, base=10000.0, rotary_dim=None, interleaved=False,
         attention_scale=1.0, inverse=False):
    """Rotates ``x[..., H, D]``: pairs ``(x[i], x[i + r/2])`` (rotate-half) or
    ``(x[2i], x[2i+1])`` (interleaved) by ``positions[...] * inv_freq[i]``;
    ``y1 = x1 c - x2 s``, ``y2 = x2 c + x1 s`` with c, s scaled by
    ``attention_scale`` and s negated for ``inverse``. Dims past rotary_dim pass through."""
    xp = namespace(x, positions, inv_freq)
    dt = compute_dtype(xp, x)
    d = x.shape[-1]
    rot = d if rotary_dim is None else rotary_dim
    h = rot // 2
    dev = getattr(x, "device", None)
    c, s = _cos_sin(xp, positions, inv_freq, rot, base, attention_scale, inverse, dt, dev)
    xf = upcast(xp, x, dt)
    if interleaved:
        pairs = xp.reshape(xf[..., :rot], tuple(x.shape[:-1]) + (h, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        y = xp.reshape(xp.stack([a * c - b * s, b * c + a * s], axis=-1), tuple(x.shape[:-1]) + (rot,))
    else:
        x1, x2 = xf[..., :h], xf[..., h:rot]
        y = xp.concat([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    if rot < d:
        y = xp.concat([y, xf[..., rot:]], axis=-1)
    return xp.astype(y, x.dtype)


def rope_qk(q, k, positions, **options):
    """``(rope(q, positions), rope(k, positions))`` with the same options."""
    return rope(q, positions, **options), rope(k, positions, **options)
