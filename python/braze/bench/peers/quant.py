"""Peers of the quant family (``braze bench``): the GGML maintainers' numpy
codecs (``gguf.quants``) on the CPU, where installed."""
from __future__ import annotations

import importlib.util

import numpy as np

from ...reference.quant import out_dtype


def cpu_ops(op):
    if not op.startswith("dequantize_") or importlib.util.find_spec("gguf") is None:
        return []
    from gguf import GGMLQuantizationType as T
    from gguf import quants as gq

    t = getattr(T, op[len("dequantize_"):].upper(), None)
    if t is None or t == T.Q8_K:  # gguf.quants has no q8_K decoder
        return []

    def dequantize(data, *, format, k, dtype="float32"):
        y = gq.dequantize(data, t)
        return y if dtype == "float32" else y.astype(out_dtype(np, data, dtype))
    return [("gguf", dequantize)]


# quantize_activations: torch's composition (amax, divide, clamp, cast).
from .quant_mx import torch_ops  # noqa: E402,F401
