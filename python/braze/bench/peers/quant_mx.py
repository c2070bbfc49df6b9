"""torch peers of quantize_activations: the composition a user writes without
braze (amax, divide, clamp, cast), each step a pass over the activations."""
from __future__ import annotations


def _fp8(x, format):
    import torch

    xf = x.float()
    scale = xf.abs().amax(dim=1) / 448.0
    q = (xf / scale[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.int8)
    return q, scale


def _int8(x, format):
    xf = x.float()
    scale = xf.abs().amax(dim=1) / 127.0
    import torch

    return (xf / scale[:, None]).round().clamp(-127, 127).to(torch.int8), scale


def _mxfp8(x, format):
    import torch

    m, k = x.shape
    xb = x.float().reshape(m, k // 32, 32)
    amax = xb.abs().amax(dim=2)
    e = (torch.frexp(amax)[1] - 1 - 8).clamp(-127, 127)
    q = (xb * torch.exp2(-e.float())[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q.reshape(m, k).view(torch.int8), (e + 127).to(torch.uint8).view(torch.int8)


def _nvfp4(x, format):
    import torch

    m, k = x.shape
    xb = x.float().reshape(m, k // 16, 16)
    sb = (xb.abs().amax(dim=2) / 6.0).clamp(max=448).to(torch.float8_e4m3fn)
    d = sb.float()[..., None]
    v = xb / torch.where(d == 0, torch.ones_like(d), d)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    code = torch.bucketize(v.abs().clamp(max=6), mids) | ((v < 0).to(torch.int64) << 3)
    code = code.reshape(m, k // 2, 2)
    packed = (code[..., 0] | (code[..., 1] << 4)).to(torch.uint8)
    return packed.view(torch.int8), sb.view(torch.int8)


torch_ops = {
    "quantize_activations_fp8_e4m3": _fp8,
    "quantize_activations_int8": _int8,
    "quantize_activations_mxfp8_e4m3": _mxfp8,
    "quantize_activations_nvfp4": _nvfp4,
}
