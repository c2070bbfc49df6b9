"""GGML type ids (gguf.GGMLQuantizationType, the GGUF file's numbers) of braze's formats."""
from __future__ import annotations

import numbers

GGML_FORMATS = {2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K", 11: "q3_K", 12: "q4_K",
                13: "q5_K", 14: "q6_K", 15: "q8_K", 20: "iq4_nl", 23: "iq4_xs", 39: "mxfp4_gguf", 40: "nvfp4_gguf"}
# Plain float tensors: numpy dtype names.
GGML_FLOATS = {0: "float32", 1: "float16", 30: "bfloat16"}


def ggml_format(ggml_type):
    """The braze format of a GGML type id; ValueError naming the type otherwise."""
    if not isinstance(ggml_type, numbers.Integral) or isinstance(ggml_type, bool):
        raise TypeError(f"ggml_type must be a GGML type id (int), got {type(ggml_type).__name__}")
    t = int(ggml_type)
    if t in GGML_FORMATS:
        return GGML_FORMATS[t]
    name = getattr(ggml_type, "name", str(t))
    if t in GGML_FLOATS:
        raise ValueError(f"ggml_type {name} is a plain {GGML_FLOATS[t]} tensor, not a quantized format")
    raise ValueError(f"ggml_type {name} is not a format braze reads; it reads "
                     + ", ".join(f"{v} ({k})" for k, v in GGML_FORMATS.items()))
