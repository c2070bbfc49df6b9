"""Reference compositions of the sampling family (API.md, sampling), and the
numpy twin of the Philox4x32-10 generator in ``csrc/core/philox.h``.

Conventions every backend keeps (see ``braze.sampling``):

* A row is *samplable* when it holds no NaN and its largest logit is finite.
  ``argmax`` and ``sample`` return -1 for any other row; the masks return it
  unchanged; softmax / log_softmax of such a row are NaN.
* Thresholds keep ties: ``top_k_mask`` keeps every logit >= the k-th largest;
  ``top_p_mask`` keeps every logit >= the largest value ``t`` whose logits
  ``>= t`` hold at least ``p`` of the probability mass (so all tokens tied
  with the last one needed are kept).
* ``sample`` filters as ``top_k`` and ``min_p`` (both relative to the whole
  row), then ``top_p`` over the renormalized survivors, and draws by inverse
  CDF over the kept tokens *in index order* with the row's Philox uniform
  ``u``: the first token whose running mass exceeds ``u * total``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np
from array_api_compat import device as _device

from ._common import compute_dtype, namespace, upcast

# ---------------------------------------------------------------- Philox4x32-10
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_LO = np.uint64(0xFFFFFFFF)


def philox4x32_10(counter, key):
    """Philox4x32-10 of uint32 ``counter[..., 4]`` under uint32 ``key[..., 2]`` -> uint32 ``[..., 4]``."""
    c = np.asarray(counter, dtype=np.uint32).astype(np.uint64)
    k = np.asarray(key, dtype=np.uint32).astype(np.uint64)
    x0, x1, x2, x3 = (c[..., i] for i in range(4))
    k0, k1 = k[..., 0], k[..., 1]
    for r in range(10):
        if r:
            k0 = (k0 + _W0) & _LO
            k1 = (k1 + _W1) & _LO
        p0, p1 = _M0 * x0, _M1 * x2
        x0, x1, x2, x3 = (p1 >> 32) ^ x1 ^ k0, p1 & _LO, (p0 >> 32) ^ x3 ^ k1, p0 & _LO
    return np.stack([x0, x1, x2, x3], axis=-1).astype(np.uint32)


def row_blocks(seed, offset, rows):
    """The four Philox words of rows ``0..rows-1``: counter (offset lo, offset hi, row lo, row hi), key (seed lo, seed hi)."""
    r = np.arange(rows, dtype=np.uint64)
    ctr = np.stack([np.full(rows, offset & 0xFFFFFFFF), np.full(rows, offset >> 32),
                    r & _LO, r >> np.uint64(32)], axis=-1).astype(np.uint32)
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32)
    return philox4x32_10(ctr, np.broadcast_to(key, (rows, 2)))


def row_uniforms(seed, offset, rows):
    """float32 [rows]: the uniform in [0, 1) each row of ``sample`` draws (top 24 bits of word 0)."""
    return ((row_blocks(seed, offset, rows)[:, 0] >> 8).astype(np.float32) * np.float32(2.0 ** -24))


def philox_uniform(rows, *, seed=0, offset=0):
    """The reference of ``braze.sampling.philox_uniform`` (numpy float32 [rows])."""
    return row_uniforms(seed, offset, rows)


# ---------------------------------------------------------------- helpers
def _column(xp, v, like, dtype):
    """A per-row parameter (scalar or [B] array) as a [B, 1] array of ``dtype``."""
    rows = like.shape[0]
    if isinstance(v, numbers.Number):
        return xp.full((rows, 1), v, dtype=dtype, device=_device(like))
    return xp.reshape(xp.astype(xp.asarray(v, device=_device(like)), dtype), (rows, 1))


def _valid(xp, x):
    """[B] bool: no NaN and a finite largest logit."""
    return xp.logical_not(xp.any(xp.isnan(x), axis=-1)) & xp.isfinite(xp.max(x, axis=-1))


def _neg_inf(xp, x):
    return xp.full_like(x, -math.inf)


def _scaled(xp, logits, temperature):
    dt = compute_dtype(xp, logits)
    return dt, upcast(xp, logits, dt) / _column(xp, temperature, logits, dt)


def _safe_max(xp, z):
    """Row max, 0 for a row of -inf (its sum of exp is then 0, its softmax 0/0)."""
    m = xp.max(z, axis=-1, keepdims=True)
    return xp.where(m == -math.inf, xp.zeros_like(m), m)


def _lse(xp, z):
    m = _safe_max(xp, z)
    return m + xp.log(xp.sum(xp.exp(z - m), axis=-1, keepdims=True))


def _out_dtype(xp, dt):
    return xp.float64 if dt == xp.float64 else xp.float32


def _value_at(xp, sorted_rows, index):
    """sorted_rows[b, index[b]] for an index column [B, 1]."""
    n = sorted_rows.shape[-1]
    sel = xp.reshape(xp.arange(n, device=_device(sorted_rows)), (1, n)) == index
    return xp.max(xp.where(sel, sorted_rows, _neg_inf(xp, sorted_rows)), axis=-1, keepdims=True)


# ---------------------------------------------------------------- ops
def softmax(logits, *, temperature=1.0):
    xp = namespace(logits)
    dt, z = _scaled(xp, logits, temperature)
    e = xp.exp(z - _safe_max(xp, z))
    return xp.astype(e / xp.sum(e, axis=-1, keepdims=True), _out_dtype(xp, dt))


def log_softmax(logits, *, temperature=1.0):
    xp = namespace(logits)
    dt, z = _scaled(xp, logits, temperature)
    return xp.astype(z - _lse(xp, z), _out_dtype(xp, dt))


def logsumexp(logits, *, temperature=1.0):
    xp = namespace(logits)
    dt, z = _scaled(xp, logits, temperature)
    return xp.astype(_lse(xp, z)[:, 0], _out_dtype(xp, dt))


def argmax(logits):
    """int32 [B]: the first index of the row max; -1 for a row that is not samplable."""
    xp = namespace(logits)
    idx = xp.astype(xp.argmax(logits, axis=-1), xp.int32)
    return xp.where(_valid(xp, logits), idx, xp.full_like(idx, -1))


def top_k_mask(logits, k):
    """Keeps logits >= the k-th largest of their row (ties kept); ``k <= 0`` or ``k >= V`` keeps all."""
    xp = namespace(logits)
    v = logits.shape[-1]
    kk = _column(xp, k, logits, xp.int64)
    kk = xp.where((kk <= 0) | (kk >= v), xp.full_like(kk, v), kk)
    kth = _value_at(xp, xp.sort(logits, axis=-1, descending=True), kk - 1)
    keep = (logits >= kth) | xp.logical_not(_valid(xp, logits))[:, None]
    return xp.where(keep, logits, _neg_inf(xp, logits))


def top_p_mask(logits, p, *, temperature=1.0):
    """Keeps the smallest set of top logits holding probability mass >= p, plus every
    logit tied with the last one it needs; ``p >= 1`` keeps all."""
    xp = namespace(logits)
    dt, z = _scaled(xp, logits, temperature)
    zs = xp.sort(z, axis=-1, descending=True)
    cum = xp.cumulative_sum(xp.exp(zs - _safe_max(xp, zs)), axis=-1)
    pc = _column(xp, p, logits, dt)
    need = xp.sum(xp.astype(cum < pc * cum[:, -1:], xp.int64), axis=-1, keepdims=True)
    cut = _value_at(xp, zs, xp.minimum(need, xp.full_like(need, logits.shape[-1] - 1)))
    keep = (z >= cut) | (pc >= 1) | xp.logical_not(_valid(xp, logits))[:, None]
    return xp.where(keep, logits, _neg_inf(xp, logits))


def min_p_mask(logits, p, *, temperature=1.0):
    """Keeps logits whose probability is >= p times the row's largest probability."""
    xp = namespace(logits)
    dt, z = _scaled(xp, logits, temperature)
    keep = (xp.exp(z - _safe_max(xp, z)) >= _column(xp, p, logits, dt)) | xp.logical_not(_valid(xp, logits))[:, None]
    return xp.where(keep, logits, _neg_inf(xp, logits))


def apply_penalties(logits, token_ids, *, repetition=1.0, frequency=0.0, presence=0.0):
    """For each token seen in ``token_ids[b]`` (-1 = padding), ``count`` times:
    ``x / repetition`` if x > 0 else ``x * repetition``, then ``- count * frequency - presence``.

    (A one-hot count per history position: O(B * L * V), fine for a reference.)
    """
    xp = namespace(logits, token_ids)
    dt = compute_dtype(xp, logits)
    x = upcast(xp, logits, dt)
    v = logits.shape[-1]
    vocab = xp.reshape(xp.arange(v, dtype=token_ids.dtype, device=_device(logits)), (1, v))
    counts = xp.zeros(x.shape, dtype=dt, device=_device(logits))
    for j in range(token_ids.shape[-1]):
        counts = counts + xp.astype(token_ids[:, j:j + 1] == vocab, dt)
    pen = xp.where(x > 0, x / repetition, x * repetition) - counts * frequency - presence
    return xp.astype(xp.where(counts > 0, pen, x), logits.dtype)


def sample(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0):
    """int32 [B]: the token each row draws (see the module docstring for the rules).

    ``temperature == 0`` or ``top_k == 1`` is argmax. The uniforms come from
    :func:`row_uniforms` on the host ([B] floats, moved once to the logits' device).
    """
    xp = namespace(logits)
    dt = compute_dtype(xp, logits)
    x = upcast(xp, logits, dt)
    b, v = x.shape
    t = _column(xp, temperature, x, dt)
    k = _column(xp, top_k, x, xp.int64)
    greedy = (t == 0) | (k == 1)
    t = xp.where(greedy, xp.ones_like(t), t)
    z = x / t
    e = xp.exp(z - _safe_max(xp, z))
    kept = top_k_mask(x, xp.reshape(k, (b,)))
    kept = xp.where(e >= _column(xp, min_p, x, dt), kept, _neg_inf(xp, kept))
    kept = top_p_mask(kept, xp.reshape(_column(xp, top_p, x, dt), (b,)), temperature=xp.reshape(t, (b,)))
    w = xp.where(kept > -math.inf, e, xp.zeros_like(e))
    cum = xp.cumulative_sum(w, axis=-1)
    u = xp.asarray(row_uniforms(seed, offset, b).astype(np.float64), device=_device(x))
    target = xp.reshape(xp.astype(u, dt), (b, 1)) * cum[:, -1:]
    drawn = xp.sum(xp.astype(cum <= target, xp.int64), axis=-1, keepdims=True)
    drawn = xp.minimum(drawn, xp.full_like(drawn, v - 1))
    first_max = xp.reshape(xp.astype(xp.argmax(x, axis=-1), xp.int64), (b, 1))
    tok = xp.reshape(xp.where(greedy, first_max, drawn), (b,))
    return xp.where(_valid(xp, x), xp.astype(tok, xp.int32), xp.full((b,), -1, dtype=xp.int32, device=_device(x)))
