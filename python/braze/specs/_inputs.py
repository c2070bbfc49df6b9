"""Random test inputs as numpy arrays of a given dtype (bfloat16 via ml_dtypes)."""
from __future__ import annotations

import numpy as np

from .._arrays import _np_dtype


def cast(a, dtype):
    return np.asarray(a, dtype=np.float32).astype(_np_dtype(dtype))


def rows(shape, dtype, rng, strided=False, scale=1.0, loc=0.0):
    """Normal(loc, scale) data of ``shape``; with ``strided``, a view whose rows
    are padded apart (the last axis stays contiguous)."""
    shape = tuple(shape)
    if strided and len(shape) >= 1:
        pad = 3
        full = rng.normal(loc, scale, shape[:-1] + (shape[-1] + pad,))
        return cast(full, dtype)[..., : shape[-1]]
    n = int(np.prod(shape))
    if n > _TILE_FROM:  # bench-sized (a 1 GB KV cache): a random block repeated, made in seconds
        block = cast(rng.normal(loc, scale, _TILE), dtype)
        return np.resize(block, shape)
    return cast(rng.normal(loc, scale, shape), dtype)


# Inputs above _TILE_FROM elements repeat a random block of _TILE (a prime, so the
# repeats do not line up with rows): no test is that large.
_TILE_FROM, _TILE = 1 << 26, 4_194_301


def vector(n, dtype, rng, loc=1.0, scale=0.25):
    return cast(rng.normal(loc, scale, (n,)), dtype)


def itemsize(dtype):
    return 4 if dtype == "float32" else 2


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
