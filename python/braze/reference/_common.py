"""Helpers shared by the reference compositions."""
from __future__ import annotations

from array_api_compat import array_namespace


def namespace(*arrays):
    return array_namespace(*[a for a in arrays if a is not None])


def compute_dtype(xp, x):
    """float64 stays float64 (the oracle); every other float computes in float32."""
    return xp.float64 if x.dtype == xp.float64 else xp.float32


def upcast(xp, a, dt):
    return None if a is None else xp.astype(a, dt)
