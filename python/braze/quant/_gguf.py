"""Reading GGUF files: every tensor memory-mapped, none copied."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

from ._gguf_types import GGML_FLOATS, GGML_FORMATS
from ._tensor import QuantizedTensor

if TYPE_CHECKING:
    from .._typing import Array


def load_gguf(path: "Union[str, os.PathLike]") -> "dict[str, Union[QuantizedTensor, Array]]":
    """Every tensor of the GGUF file at ``path``, by name, in numpy order ``[..., K]``:
    a QuantizedTensor ``[N, K]`` for the quantized formats braze reads, the float32
    / float16 / bfloat16 array (bfloat16 as ml_dtypes) for plain tensors. Each is a
    view of the file's memory map (gguf's ``GGUFReader``), nothing is copied.
    """
    from gguf import GGUFReader

    reader = GGUFReader(os.fspath(path), "r")
    out = {}
    for t in reader.tensors:
        kind = int(t.tensor_type)
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))  # GGUF lists ne[0] (K) first
        if kind in GGML_FORMATS:
            out[t.name] = QuantizedTensor.from_gguf(t.data, kind, shape)
        elif kind in GGML_FLOATS:
            data = t.data
            if kind == 30:  # GGUFReader hands bfloat16 out as its uint16 bits
                from .._arrays import BF16

                data = data.view(BF16)
            out[t.name] = data.reshape(shape)
        else:
            name = getattr(t.tensor_type, "name", str(kind))
            raise ValueError(f"{path}: tensor {t.name!r} has GGML type {name}, which braze does not read")
    return out
