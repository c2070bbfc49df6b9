"""The format table as the native module declares it (csrc/core/quant/formats.h):
one source of truth for names, block sizes and byte counts."""
from __future__ import annotations

from typing import NamedTuple


class Format(NamedTuple):
    name: str
    block: int          # logical elements per block of `data`
    block_bytes: int    # bytes those elements take in `data`
    layout: str         # "blocks": scales inside each block (GGUF); "split": scales in arrays of their own
    group: str          # the codec header's group (ggml, kquants, iquants, mx, nvfp4, fp8, int8, affine)
    dequantize_built: bool
    quantize_built: bool

    def row_bytes(self, k):
        return k // self.block * self.block_bytes


def _load():
    from .. import _cpu

    return {t[0]: Format(*t) for t in _cpu._quant_formats()}


FORMATS = _load()


def format_info(name, arg="format"):
    if not isinstance(name, str):
        raise TypeError(f"{arg} must be a format name (str), got {type(name).__name__}")
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"{arg} must be one of {', '.join(repr(n) for n in FORMATS)}; got {name!r}") from None
