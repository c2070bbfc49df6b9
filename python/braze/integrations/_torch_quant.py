"""The quant family's torch ops: one per native entry point, not one per format.

The registry has a spec per format (``dequantize_q4_K``, ``quantize_q8_0``,
``quantize_activations_nvfp4``, ...), each a ``QuantSpec`` whose ``native``
names the entry point that serves it. A torch user holds a QuantizedTensor's
arrays and a format name, so ``braze::dequantize``, ``braze::quantize`` and
``braze::quantize_activations`` take the format as a ``str`` argument; their
schemas are read from the signatures below, as every other op's is read from
its public function. ``SUBSTITUTES`` lets ``torch.compile`` trace the public
functions that take or build a QuantizedTensor.
"""

from typing import TYPE_CHECKING

from .. import quant as _quant
from ..quant._formats import format_info

if TYPE_CHECKING:
    from .._typing import Array


def dequantize(data: "Array", format: str, scales: "Optional[Array]" = None, biases: "Optional[Array]" = None,
               tensor_scale: "Optional[Array]" = None, *, k: "Optional[int]" = None, dtype: str = "float32",
               group_size: "Optional[int]" = None, out: "Optional[Array]" = None) -> "Array":
    """braze.quant.dequantize on a QuantizedTensor's arrays: ``[N, K]`` in ``dtype``.
    ``k`` defaults to what ``data``'s rows hold (bytes per row / block bytes * block)."""
    fmt = format_info(format)
    if k is None:
        row_bytes = int(data.shape[-1]) * data.element_size() if len(data.shape) == 2 else 0
        if len(data.shape) != 2 or row_bytes % fmt.block_bytes:
            raise ValueError(f"data must be [N, whole {format} blocks], got shape {tuple(data.shape)}")
        k = row_bytes // fmt.block_bytes * fmt.block
    return _quant._dequantize_raw(data, format=format, k=k, dtype=_quant._dtype_name(dtype), out=out,
                                  scales=scales, biases=biases, tensor_scale=tensor_scale, group_size=group_size)


def quantize(w: "Array", format: str, *, group_size: "Optional[int]" = None, scale_rule: "Optional[str]" = None,
             granularity: "Optional[str]" = None) -> "Tuple[Array, Array, Array, Array]":
    """braze.quant.quantize: the QuantizedTensor's ``(data, scales, biases, tensor_scale)``,
    None where the format keeps no such array."""
    qt = _quant.quantize(w, format, group_size=group_size, scale_rule=scale_rule, granularity=granularity)
    return qt.data, qt.scales, qt.biases, qt.tensor_scale


def quantize_activations(x: "Array", format: str, *, out: "Optional[Tuple[Array, Array]]" = None,
                         ) -> "Tuple[Array, Array]":
    """braze.quant.quantize_activations: ``(xq, sx)``."""
    return _quant.quantize_activations(x, format, out=out)


def matmul(x: "Array", data: "Array", scales: "Optional[Array]" = None, biases: "Optional[Array]" = None,
           tensor_scale: "Optional[Array]" = None, *, format: str = "", bias: "Optional[Array]" = None,
           group_size: "Optional[int]" = None, out: "Optional[Array]" = None) -> "Array":
    """braze.quant.matmul on a QuantizedTensor's arrays (format "": ``data`` is a dense
    weight of x's dtype): ``x [..., K] @ W.T (+ bias)``."""
    return _quant._matmul_raw(x, data, scales, biases, tensor_scale, format=format, bias=bias,
                              group_size=group_size, out=out)


def matmul_w8a8(x: "Array", x_scale: "Array", data: "Array", scales: "Array", *, format: str,
                bias: "Optional[Array]" = None, out: "Optional[Array]" = None,
                out_dtype: "Optional[str]" = None) -> "Array":
    """braze.quant.matmul with quantized x (W8A8) on an int8 / fp8 weight's arrays."""
    from ..quant import _w8a8

    return _w8a8._matmul_w8a8_raw(x, x_scale, data, scales, format=format, bias=bias, out=out, out_dtype=out_dtype)


# native entry point (QuantSpec.native) -> the function its torch op runs (and takes the schema of)
ENTRIES = {"dequantize": dequantize, "quantize": quantize, "quantize_activations": quantize_activations,
           "matmul": matmul, "matmul_w8a8": matmul_w8a8}

_DTYPE_NAMES = {}


def _dtype_str(dtype):
    import torch

    if not _DTYPE_NAMES:
        _DTYPE_NAMES.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"})
    return _DTYPE_NAMES.get(dtype, dtype)  # a name passes through; anything else fails the op's check


def substitutes(call):
    """public function -> its replacement under torch.compile, calling the ops through ``call``."""

    def traced_dequantize(qw, *, dtype="float32", out=None):
        if not isinstance(qw, _quant.QuantizedTensor):
            raise TypeError(f"qw must be a QuantizedTensor, got {type(qw).__name__}")
        return call("dequantize", qw.data, qw.format, qw.scales, qw.biases, qw.tensor_scale, k=qw.shape[1],
                    dtype=_dtype_str(dtype), group_size=qw.group_size, out=out)

    def traced_quantize(w, format, *, group_size=None, scale_rule=None, granularity=None):
        data, scales, biases, tensor_scale = call("quantize", w, format, group_size=group_size,
                                                  scale_rule=scale_rule, granularity=granularity)
        if biases is not None and group_size is None and scales.shape[1]:  # affine: the group the kernel chose
            group_size = w.shape[1] // scales.shape[1]
        return _quant.QuantizedTensor(format, (w.shape[0], w.shape[1]), data, scales, biases, tensor_scale,
                                      group_size)

    def traced_quantize_activations(x, format, *, out=None):
        return call("quantize_activations", x, format, out=out)

    def traced_matmul(x, qw, *, x_scale=None, bias=None, out=None, out_dtype=None):
        if x_scale is not None:
            if not isinstance(qw, _quant.QuantizedTensor):
                raise ValueError(f"qw: quantized x multiplies a QuantizedTensor, got {type(qw).__name__}")
            return call("matmul_w8a8", x, x_scale, qw.data, qw.scales, format=qw.format, bias=bias, out=out,
                        out_dtype=_dtype_str(out_dtype) if out_dtype is not None else None)
        if isinstance(qw, _quant.QuantizedTensor):
            return call("matmul", x, qw.data, qw.scales, qw.biases, qw.tensor_scale, format=qw.format, bias=bias,
                        group_size=qw.group_size, out=out)
        return call("matmul", x, qw, format="", bias=bias, out=out)

    return {_quant.dequantize: traced_dequantize, _quant.quantize: traced_quantize,
            _quant.quantize_activations: traced_quantize_activations, _quant.matmul: traced_matmul}
