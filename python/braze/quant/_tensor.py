"""QuantizedTensor: a quantized weight as the arrays its format ships in."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional, Sequence

from ._formats import format_info
from ._gguf_types import ggml_format

if TYPE_CHECKING:
    from .._typing import Array


def _lead_k(shape, arg="shape"):
    try:
        dims = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{arg} must be a sequence of ints, got {type(shape).__name__}") from None
    if len(dims) < 1 or any(s < 0 for s in dims):
        raise ValueError(f"{arg} must have at least one axis and no negative sizes, got {dims}")
    return (math.prod(dims[:-1]), dims[-1]) if len(dims) > 1 else (1, dims[0])


class QuantizedTensor:
    """A weight ``[N, K]`` in a quantized ``format``: ``data`` (the packed elements,
    uint8 ``[N, K / block * block_bytes]`` for the GGML formats, their GGUF blocks
    byte for byte) and, for formats that keep them apart, ``scales``, ``biases``
    and ``tensor_scale``, in the caller's framework on the caller's device.
    ``dequantize`` turns it back into float32 / float16 / bfloat16 ``[N, K]``.
    Moving it is moving those arrays.
    """

    __slots__ = ("format", "shape", "data", "scales", "biases", "tensor_scale", "group_size")

    def __init__(self, format: str, shape: "Sequence[int]", data: "Array", scales: "Optional[Array]" = None,
                 biases: "Optional[Array]" = None, tensor_scale: "Optional[Array]" = None,
                 group_size: "Optional[int]" = None) -> None:
        fmt = format_info(format)
        n, k = _lead_k(shape)
        if len(tuple(shape)) != 2:
            raise ValueError(f"shape must be [N, K], got {tuple(shape)}")
        if k % fmt.block:
            raise ValueError(f"shape: K = {k} is not a multiple of {format}'s block of {fmt.block} elements")
        if not hasattr(data, "shape") or not hasattr(data, "__dlpack__"):
            raise TypeError(f"data must be an array, got {type(data).__name__}")
        self.format = format
        self.shape = (n, k)
        self.data = data
        self.scales = scales
        self.biases = biases
        self.tensor_scale = tensor_scale
        self.group_size = group_size

    @classmethod
    def from_gguf(cls, raw: "Array", ggml_type: int, shape: "Sequence[int]") -> "QuantizedTensor":
        """The bytes of a GGUF tensor (uint8, any shape holding ``[..., K]`` rows of
        whole blocks, e.g. ``GGUFReader``'s ``tensor.data``) as a QuantizedTensor of
        logical ``shape`` (numpy order, ``[..., K]``; leading axes become N) without
        copying or re-quantizing. ``ggml_type``: GGML's type id (``gguf.GGMLQuantizationType``).
        """
        fmt = format_info(ggml_format(ggml_type), "ggml_type")
        n, k = _lead_k(shape)
        if fmt.layout != "blocks":
            raise ValueError(f"ggml_type: {fmt.name} is not stored as blocks in GGUF")
        if k % fmt.block:
            raise ValueError(f"shape: K = {k} is not a multiple of {fmt.name}'s block of {fmt.block} elements")
        want = n * fmt.row_bytes(k)
        size = math.prod(int(s) for s in raw.shape)
        if size != want:
            raise ValueError(f"raw must hold {want} bytes for {fmt.name} {[n, k]} "
                             f"({fmt.block_bytes} bytes per {fmt.block} elements), got {size}")
        if str(getattr(raw, "dtype", "")).replace("torch.", "") != "uint8":
            raise TypeError(f"raw must be uint8 bytes, got {getattr(raw, 'dtype', type(raw).__name__)}")
        data = raw.reshape((n, fmt.row_bytes(k)))
        return cls(fmt.name, (n, k), data)

    @classmethod
    def from_mlx(cls, wq: "Array", scales: "Array", biases: "Array", *, group_size: int, bits: int,
                 mode: str = "affine") -> "QuantizedTensor":
        """``mlx.core.quantize``'s ``(wq, scales, biases)`` (uint32 ``[N, K * bits / 32]``, and
        ``[N, K / group_size]`` in the weight dtype) as a QuantizedTensor of format
        ``affine<bits>``, wrapping the arrays without copying."""
        from ._mx import from_mlx

        return from_mlx(cls, wq, scales, biases, group_size=group_size, bits=bits, mode=mode)

    def __repr__(self):
        return f"QuantizedTensor(format={self.format!r}, shape={list(self.shape)})"
