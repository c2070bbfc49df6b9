"""Peers of the quant family (``braze bench``) on the CPU, where installed: the GGML
maintainers' numpy codecs (``gguf.quants``) for dequantize, ggml's own CPU matmul
(bench/ggml_peer.py, from llama-cpp-python's libraries) for matmul."""
from __future__ import annotations

import importlib.util

import numpy as np

from ...reference.quant import out_dtype


def cpu_ops(op):
    if op.startswith("matmul_"):
        from ..ggml_peer import GGML_TYPES, library_dir

        fmt = op[len("matmul_"):]
        return [("ggml", _ggml_matmul(fmt))] if fmt in GGML_TYPES and library_dir() else []
    if not op.startswith("dequantize_") or importlib.util.find_spec("gguf") is None:
        return []
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    from ...reference.quant import BLOCKS

    # GGUF's own block layouts only: braze's mxfp4 / nvfp4 are the split OCP / NVIDIA layouts
    # (codes and scales apart), which gguf.quants does not read; GGUF's are *_gguf here
    fmt = op[len("dequantize_"):]
    name = fmt.upper() if fmt in BLOCKS else fmt[:-len("_gguf")].upper() if fmt.endswith("_gguf") else None
    t = getattr(T, name, None) if name else None
    if t is None or t == T.Q8_K:  # gguf.quants has no q8_K decoder
        return []

    def dequantize(data, *, format, k, dtype="float32"):
        y = gq.dequantize(data, t)
        return y if dtype == "float32" else y.astype(out_dtype(np, data, dtype))
    return [("gguf", dequantize)]


# quantize_activations: torch's composition (amax, divide, clamp, cast); W8A8 matmul:
# torch._scaled_mm / torch._int_mm.
from . import quant_mx, quant_w8a8  # noqa: E402

torch_ops = {**quant_mx.torch_ops, **quant_w8a8.torch_ops}


def _ggml_matmul(fmt):
    from .. import ggml_peer
    from ... import _cpu

    def matmul(x, data, scales=None, biases=None, tensor_scale=None, *, format, bias=None, group_size=None):
        out = ggml_peer.matmul(_cpu.num_threads())(x.reshape(-1, x.shape[-1]), data, fmt)
        if bias is not None:
            out += bias
        return out.reshape(*x.shape[:-1], data.shape[0])
    return matmul
