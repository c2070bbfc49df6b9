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
    return cast(rng.normal(loc, scale, shape), dtype)


def vector(n, dtype, rng, loc=1.0, scale=0.25):
    return cast(rng.normal(loc, scale, (n,)), dtype)


def itemsize(dtype):
    return 4 if dtype == "float32" else 2


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n
