"""torch peers of W8A8 matmul (``matmul_w8a8_<format>``): what a torch user calls for
the same product. fp8: ``torch._scaled_mm`` (x's codes as float8_e4m3fn, W's as
float8_e4m3fn / float8_e5m2 read column-major through ``data.t()``, row-wise scales,
f32 accumulation); int8: ``torch._int_mm`` (exact int32 sums) then the scales, the
bias and the cast. Where torch refuses a shape (``_int_mm`` on CUDA wants more than
16 rows and K, N multiples of 8; ``_scaled_mm`` wants 16-byte rows), the peer falls
back to the reference composition, as ops without a torch peer do."""
from __future__ import annotations

_FP8 = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def _out_dtype(torch, name):
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


def _fallback(x, x_scale, data, scales, format, bias, out_dtype):
    from ...specs.quant_w8a8 import matmul_w8a8_reference

    return matmul_w8a8_reference(x, x_scale, data, scales, format=format, bias=bias, out_dtype=out_dtype)


def _scaled_mm(x, x_scale, data, scales, *, format, bias=None, out_dtype="bfloat16"):
    import torch

    a = x.contiguous().view(torch.float8_e4m3fn)
    b = data.contiguous().view(getattr(torch, _FP8[format])).t()
    sa = x_scale.reshape(-1, 1).float()
    sb = scales.reshape(1, -1).float().expand(1, b.shape[1])
    try:
        return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, bias=bias, out_dtype=_out_dtype(torch, out_dtype))
    except (RuntimeError, NotImplementedError):
        return _fallback(x, x_scale, data, scales, format, bias, out_dtype)


def _int_mm(x, x_scale, data, scales, *, format, bias=None, out_dtype="bfloat16"):
    import torch

    try:
        acc = torch._int_mm(x.contiguous(), data.contiguous().t())
    except (RuntimeError, NotImplementedError):
        return _fallback(x, x_scale, data, scales, format, bias, out_dtype)
    y = acc.float() * x_scale.reshape(-1, 1) * scales.reshape(1, -1)
    if bias is not None:
        y = y + bias.float()
    return y.to(_out_dtype(torch, out_dtype))


torch_ops = {"matmul_w8a8_int8": _int_mm, **{f"matmul_w8a8_{f}": _scaled_mm for f in _FP8}}
