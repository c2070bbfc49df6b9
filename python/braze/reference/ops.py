"""Reference compositions of the ops family (API.md, ops).

Conventions every backend keeps (see ``braze.ops``):

* Gated activations read ``x[..., 2H]``: gate ``g = x[..., :H]`` and up
  ``u = x[..., H:]``, or with ``interleaved`` ``g = x[..., 0::2]``, ``u = x[..., 1::2]``.
* ``embedding``: an id outside ``[0, V)`` gives a row of zeros.
* ``hadamard``: ``n = m * 2**k`` (``m`` in 1, 12, 20, 28); a row viewed as
  ``[m, 2**k]`` gets the Sylvester transform of size ``2**k`` along its last
  axis, then ``H_m`` (``hadamard_matrix(m)``, Paley's constructions) along its
  first, times ``scale`` (``None``: ``1/sqrt(n)``).

The Hadamard matrices are built here from their definitions, independently of
``csrc/core/hadamard.h``; a test checks that the kernels' tables equal them.
"""
from __future__ import annotations

import math

import numpy as np
from array_api_compat import device as _device

from ._common import compute_dtype, namespace, upcast

HADAMARD_ORDERS = (1, 12, 20, 28)
HADAMARD_MAX = 32768


# ---------------------------------------------------------------- activations
def _halves(xp, x, interleaved):
    n = x.shape[-1]
    if n % 2:
        raise ValueError(f"x: the last axis of a gated op must be even, got {n}")
    if interleaved:
        return x[..., 0::2], x[..., 1::2]
    return x[..., : n // 2], x[..., n // 2:]


def _sigmoid(xp, z):
    return 1.0 / (1.0 + xp.exp(-z))


def _silu(xp, g):
    return g * _sigmoid(xp, g)


def _gelu(xp, g, approximate):
    if approximate == "tanh":
        return 0.5 * g * (1.0 + xp.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g * g * g)))
    if approximate != "none":
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    return 0.5 * g * (1.0 + erf(xp, g / math.sqrt(2.0)))


def erf(xp, z):
    """erf of a float array: the framework's own where it has one (torch, JAX,
    CuPy, MLX; numpy through SciPy when installed), else :func:`erf_series`."""
    name = type(z).__module__.split(".")[0]
    try:
        if name == "torch":
            import torch

            return torch.special.erf(z)
        if name in ("jax", "jaxlib"):
            import jax.scipy.special

            return jax.scipy.special.erf(z)
        if name == "cupy":
            import cupyx.scipy.special

            return cupyx.scipy.special.erf(z)
        if name == "mlx":
            import mlx.core

            return mlx.core.erf(z)
        if name == "numpy":
            import scipy.special

            return scipy.special.erf(z)
    except ImportError:
        pass
    return erf_series(xp, z)


# Maclaurin coefficients of erf(z) / z in powers of z^2: (-1)^n / (n! (2n + 1)).
_ERF_SERIES = tuple((-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(50))


def erf_series(xp, z):
    """erf from array-API operations alone: the Maclaurin series for |z| < 3
    (50 terms by Horner; cancellation costs about 2 digits at |z| = 3), the
    continued fraction of erfc for |z| >= 3 (depth 30). About 4e-14 relative in
    float64 (tests compare with math.erf)."""
    a = xp.abs(z)
    small = a < 3.0
    s = xp.where(small, a, xp.zeros_like(a))
    s2 = s * s
    acc = xp.full_like(s, _ERF_SERIES[-1])
    for c in _ERF_SERIES[-2::-1]:
        acc = acc * s2 + c
    series = acc * s * (2.0 / math.sqrt(math.pi))
    # erfc(t) = exp(-t^2) / sqrt(pi) / (t + (1/2) / (t + 1 / (t + (3/2) / (t + ...))))
    t = xp.where(small, xp.full_like(a, 3.0), a)
    f = t
    for k in range(30, 0, -1):
        f = t + (k / 2.0) / f
    cf = 1.0 - xp.exp(-t * t) / (math.sqrt(math.pi) * f)
    mag = xp.where(small, series, cf)
    return xp.where(z < 0, -mag, mag)


def _gated(x, interleaved, fn):
    xp = namespace(x)
    dt = compute_dtype(xp, x)
    g, u = _halves(xp, upcast(xp, x, dt), interleaved)
    return xp.astype(fn(xp, g, u), x.dtype)


def silu_and_mul(x, *, interleaved=False):
    return _gated(x, interleaved, lambda xp, g, u: _silu(xp, g) * u)


def gelu_and_mul(x, *, approximate="none", interleaved=False):
    return _gated(x, interleaved, lambda xp, g, u: _gelu(xp, g, approximate) * u)


def swiglu_clamped(x, *, alpha=1.702, limit=7.0, interleaved=True):
    """``min(g, limit) * sigmoid(alpha * min(g, limit)) * (clip(u, -limit, limit) + 1)``."""
    def fn(xp, g, u):
        g = xp.minimum(g, xp.full_like(g, limit))
        u = xp.clip(u, -limit, limit)
        return g * _sigmoid(xp, alpha * g) * (u + 1.0)

    return _gated(x, interleaved, fn)


def silu(x):
    xp = namespace(x)
    return xp.astype(_silu(xp, upcast(xp, x, compute_dtype(xp, x))), x.dtype)


def gelu(x, *, approximate="none"):
    xp = namespace(x)
    return xp.astype(_gelu(xp, upcast(xp, x, compute_dtype(xp, x)), approximate), x.dtype)


# ---------------------------------------------------------------- activation VJPs
# The derivatives written out (not autograd of the forward): f = act(g), df = act'(g).
def _silu_d(xp, g):
    s = _sigmoid(xp, g)
    return g * s, s * (1.0 + g * (1.0 - s))


def _gelu_d(xp, g, approximate):
    if approximate == "tanh":
        k, a = math.sqrt(2.0 / math.pi), 0.044715
        t = xp.tanh(k * (g + a * g * g * g))
        return 0.5 * g * (1.0 + t), 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * k * (1.0 + 3.0 * a * g * g)
    if approximate != "none":
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
    cdf = 0.5 * (1.0 + erf(xp, g / math.sqrt(2.0)))
    return g * cdf, cdf + g * xp.exp(-0.5 * g * g) / math.sqrt(2.0 * math.pi)


def _check_dy(x, dy, shape):
    if tuple(dy.shape) != tuple(shape):
        raise ValueError(f"dy must have shape {tuple(shape)}, got {tuple(dy.shape)}")
    if dy.dtype != x.dtype:
        raise TypeError(f"dy must be {x.dtype}, got {dy.dtype}")


def _gated_vjp(x, dy, interleaved, fn):
    """dx of a gated op: fn(xp, g, u) -> (dg / dy, du / dy), joined as g and u are in x."""
    xp = namespace(x, dy)
    dt = compute_dtype(xp, x)
    g, u = _halves(xp, upcast(xp, x, dt), interleaved)
    _check_dy(x, dy, g.shape)
    dyf = upcast(xp, dy, dt)
    dg, du = fn(xp, g, u)
    dg, du = dyf * dg, dyf * du
    if interleaved:
        dx = xp.reshape(xp.stack((dg, du), axis=-1), tuple(x.shape))
    else:
        dx = xp.concat((dg, du), axis=-1)
    return xp.astype(dx, x.dtype)


def _unary_vjp(x, dy, d):
    xp = namespace(x, dy)
    _check_dy(x, dy, x.shape)
    dt = compute_dtype(xp, x)
    return xp.astype(upcast(xp, dy, dt) * d(xp, upcast(xp, x, dt))[1], x.dtype)


def _times(f_df, u):
    f, df = f_df
    return u * df, f


def silu_and_mul_vjp(x, dy, *, interleaved=False):
    """``dg = dy * u * silu'(g)``, ``du = dy * silu(g)``, ``silu'(g) = s (1 + g (1 - s))``."""
    return _gated_vjp(x, dy, interleaved, lambda xp, g, u: _times(_silu_d(xp, g), u))


def gelu_and_mul_vjp(x, dy, *, approximate="none", interleaved=False):
    """``dg = dy * u * gelu'(g)``, ``du = dy * gelu(g)``."""
    return _gated_vjp(x, dy, interleaved, lambda xp, g, u: _times(_gelu_d(xp, g, approximate), u))


def swiglu_clamped_vjp(x, dy, *, alpha=1.702, limit=7.0, interleaved=True):
    """With ``gc = min(g, limit)``, ``s = sigmoid(alpha gc)``: ``dg = dy (clip(u) + 1) s (1 + alpha gc (1 - s))``
    times ``[g < limit]``, ``du = dy gc s`` times ``[-limit < u < limit]``."""
    def fn(xp, g, u):
        gc = xp.minimum(g, xp.full_like(g, limit))
        s = _sigmoid(xp, alpha * gc)
        df = s * (1.0 + alpha * gc * (1.0 - s)) * xp.astype(g < limit, g.dtype)
        inside = xp.astype((u > -limit) & (u < limit), u.dtype)
        return (xp.clip(u, -limit, limit) + 1.0) * df, gc * s * inside

    return _gated_vjp(x, dy, interleaved, fn)


def silu_vjp(x, dy):
    """``dy * silu'(x)``."""
    return _unary_vjp(x, dy, _silu_d)


def gelu_vjp(x, dy, *, approximate="none"):
    """``dy * gelu'(x)``."""
    return _unary_vjp(x, dy, lambda xp, g: _gelu_d(xp, g, approximate))


# ---------------------------------------------------------------- embedding
def embedding(ids, table):
    """``table[ids]`` with a zero row for every id outside ``[0, V)``: ``ids.shape + (H,)``."""
    xp = namespace(ids, table)
    vocab, dim = table.shape
    flat = xp.reshape(ids, (-1,))
    if vocab == 0:
        return xp.zeros(tuple(ids.shape) + (dim,), dtype=table.dtype)
    valid = (flat >= 0) & (flat < vocab)
    rows = xp.take(table, xp.where(valid, flat, xp.zeros_like(flat)), axis=0)
    rows = xp.where(xp.expand_dims(valid, axis=1), rows, xp.zeros_like(rows))
    return xp.reshape(rows, tuple(ids.shape) + (dim,))


# ---------------------------------------------------------------- hadamard
def _quadratic_character(q):
    """chi(a) for a in [0, q), q an odd prime: 0, +1 for a nonzero square, -1 otherwise (Euler's criterion)."""
    return [0] + [1 if pow(a, (q - 1) // 2, q) == 1 else -1 for a in range(1, q)]


def _jacobsthal(q):
    chi = _quadratic_character(q)
    return np.array([[chi[(j - i) % q] for j in range(q)] for i in range(q)], dtype=np.int64)


def _paley_one(q):
    """Order q + 1 for a prime q = 3 (mod 4): I + [[0, 1^T], [-1, Q]]."""
    core = np.zeros((q + 1, q + 1), dtype=np.int64)
    core[0, 1:], core[1:, 0], core[1:, 1:] = 1, -1, _jacobsthal(q)
    return np.eye(q + 1, dtype=np.int64) + core


def _paley_two(q):
    """Order 2 (q + 1) for a prime q = 1 (mod 4): in the symmetric [[0, 1^T], [1, Q]]
    each 0 becomes [[1, 1], [1, -1]] and each +-1 becomes +-[[1, -1], [-1, -1]]."""
    core = np.zeros((q + 1, q + 1), dtype=np.int64)
    core[0, 1:], core[1:, 0], core[1:, 1:] = 1, 1, _jacobsthal(q)
    zero = np.array([[1, 1], [1, -1]], dtype=np.int64)
    sign = np.array([[1, -1], [-1, -1]], dtype=np.int64)
    out = np.empty((2 * (q + 1), 2 * (q + 1)), dtype=np.int64)
    for i in range(q + 1):
        for j in range(q + 1):
            out[2 * i:2 * i + 2, 2 * j:2 * j + 2] = zero if core[i, j] == 0 else core[i, j] * sign
    return out


_MATRICES = {}


def hadamard_matrix(m):
    """The order-m Hadamard matrix braze uses (int64 numpy, entries +-1): 1 -> [[1]],
    12 and 20 -> Paley I with q = 11, 19; 28 -> Paley II with q = 13."""
    if m not in _MATRICES:
        build = {1: lambda: np.ones((1, 1), dtype=np.int64), 12: lambda: _paley_one(11),
                 20: lambda: _paley_one(19), 28: lambda: _paley_two(13)}
        if m not in build:
            raise ValueError(f"m must be one of {HADAMARD_ORDERS}, got {m}")
        _MATRICES[m] = build[m]()
    return _MATRICES[m]


def sylvester_matrix(n):
    """The order-n (a power of two) Sylvester matrix: H_1 = [[1]], H_2k = [[H, H], [H, -H]]."""
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def hadamard_split(n):
    """(m, 2**k) with n = m * 2**k, m in HADAMARD_ORDERS and n <= HADAMARD_MAX; else ValueError."""
    for m in HADAMARD_ORDERS:
        if 0 < n <= HADAMARD_MAX and n % m == 0 and (n // m) & (n // m - 1) == 0:
            return m, n // m
    raise ValueError(f"x: hadamard needs a last axis n = m * 2**k with m in {{1, 12, 20, 28}} and n <= 32768, got {n}")


def hadamard(x, *, scale=None):
    xp = namespace(x)
    dt = compute_dtype(xp, x)
    n = x.shape[-1]
    m, length = hadamard_split(n)
    lead = tuple(x.shape[:-1])
    t = xp.reshape(upcast(xp, x, dt), lead + (m, length))
    # Sylvester butterflies of distance h: pairs (a, b) -> (a + b, a - b).
    h = 1
    while h < length:
        v = xp.reshape(t, lead + (m, length // (2 * h), 2, h))
        a, b = v[..., 0, :], v[..., 1, :]
        t = xp.reshape(xp.stack((a + b, a - b), axis=-2), lead + (m, length))
        h *= 2
    if m > 1:
        hm = xp.asarray(hadamard_matrix(m), dtype=dt, device=_device(x))
        t = xp.matmul(hm, t)
    s = 1.0 / math.sqrt(n) if scale is None else scale
    return xp.astype(xp.reshape(t * s, x.shape), x.dtype)
