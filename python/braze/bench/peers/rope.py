"""torch peer of the rope family: what a torch user writes (cos/sin from the
positions, rotate-half or interleaved pairs, concatenation of the pass-through)."""
from __future__ import annotations


def _cos_sin(positions, inv_freq, rot, base, scale, inverse, device):
    import torch

    if inv_freq is None:
        inv_freq = base ** (-torch.arange(0, rot, 2, device=device, dtype=torch.float64) / rot)
    ang = positions.float()[..., None] * inv_freq.float()
    sin = ang.sin() * (-scale if inverse else scale)
    return ang.cos() * scale, sin


def _rotate(x, cos, sin, rot, interleaved):
    import torch

    c, s = cos[..., None, :], sin[..., None, :]  # broadcast over heads
    xr = x[..., :rot].float()
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        y = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rot // 2], xr[..., rot // 2:]
        y = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return torch.cat((y.to(x.dtype), x[..., rot:]), dim=-1) if rot < x.shape[-1] else y.to(x.dtype)


def rope(x, positions, *, inv_freq=None, base=10000.0, rotary_dim=None, interleaved=False,
         attention_scale=1.0, inverse=False):
    rot = rotary_dim or x.shape[-1]
    cos, sin = _cos_sin(positions, inv_freq, rot, base, attention_scale, inverse, x.device)
    return _rotate(x, cos, sin, rot, interleaved)


def rope_qk(q, k, positions, *, inv_freq=None, base=10000.0, rotary_dim=None, interleaved=False,
            attention_scale=1.0, inverse=False):
    rot = rotary_dim or q.shape[-1]
    cos, sin = _cos_sin(positions, inv_freq, rot, base, attention_scale, inverse, q.device)
    return _rotate(q, cos, sin, rot, interleaved), _rotate(k, cos, sin, rot, interleaved)


torch_ops = {"rope": rope, "rope_qk": rope_qk}
