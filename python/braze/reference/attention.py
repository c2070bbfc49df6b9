"""Reference compositions of the attention family (API.md, attention).

Plain ``softmax(q k^T * scale + masks) v`` per sequence, in float32 (float64
for float64 inputs), the paged cache gathered by ``block_table``.
Conventions every backend keeps (see ``braze.attention``):

* query position ``p``, key position ``j``: a key is masked when ``j > p``
  (causal), or ``j <= p - window`` (``window`` set); decode's query sits at
  ``kv_len - 1``, ``prefill_paged``'s ``n`` queries at the end of the
  sequence's ``kv_len`` cached tokens, ``prefill``'s at ``0 .. n - 1``.
* ``softcap=c``: scores ``s = scale * q.k`` become ``c * tanh(s / c)``.
* ``sinks[h]``: ``exp(sinks[h])`` joins the softmax denominator.
* ``lse`` is the natural log of that denominator (sinks included), ``-inf``
  with the output 0 when every key is masked and there is no sink; it is what
  ``merge_states`` combines exactly.
* GQA: query head ``h`` reads kv head ``h // (Hq // Hkv)``.
"""
from __future__ import annotations

import math

from array_api_compat import device as _device

from ._common import compute_dtype, namespace, upcast


def _attend(xp, q, k, v, qpos, causal, window, scale, sinks, softcap, dt):
    """q [n, Hq, D], k / v [L, Hkv, D], qpos [n] ints -> (out [n, Hq, D], lse [n, Hq]) in dt."""
    n, hq, d = q.shape
    length, hkv = k.shape[0], k.shape[1]
    g = hq // hkv
    qh = xp.permute_dims(xp.reshape(upcast(xp, q, dt), (n, hkv, g, d)), (1, 2, 0, 3))  # [Hkv, G, n, D]
    kh = xp.permute_dims(upcast(xp, k, dt), (1, 2, 0))[:, None]                      # [Hkv, 1, D, L]
    vh = xp.permute_dims(upcast(xp, v, dt), (1, 0, 2))[:, None]                      # [Hkv, 1, L, D]
    s = xp.matmul(qh, kh) * scale                                                    # [Hkv, G, n, L]
    if softcap is not None:
        s = softcap * xp.tanh(s / softcap)
    dev = _device(q)  # every array made here sits beside the inputs (a GPU oracle)
    kpos = xp.arange(length, device=dev)[None, :]
    qp = xp.asarray(qpos, device=dev)[:, None]
    keep = kpos < length  # all True, shaped [1, L]
    if causal:
        keep = keep & (kpos <= qp)
    if window is not None:
        keep = keep & (kpos > qp - window)
    keep = xp.broadcast_to(keep, (n, length)) if n else keep[:0]
    s = xp.where(keep, s, xp.asarray(-math.inf, dtype=dt, device=dev))
    m = xp.max(s, axis=-1, keepdims=True) if length else xp.full((hkv, g, n, 1), -math.inf, dtype=dt, device=dev)
    if sinks is not None:
        sk = xp.reshape(upcast(xp, sinks, dt), (hkv, g, 1, 1))
        m = xp.maximum(m, sk)
    m = xp.where(m > -math.inf, m, xp.zeros_like(m))  # all masked: any finite shift
    p = xp.exp(s - m)
    denom = xp.sum(p, axis=-1, keepdims=True)
    if sinks is not None:
        denom = denom + xp.exp(sk - m)
    safe = xp.where(denom > 0, denom, xp.ones_like(denom))
    o = xp.where(denom > 0, xp.matmul(p, vh) / safe, xp.zeros_like(safe))           # [Hkv, G, n, D]
    lse = xp.where(denom > 0, m + xp.log(safe), xp.full_like(m, -math.inf))
    out = xp.reshape(xp.permute_dims(o, (2, 0, 1, 3)), (n, hq, d))
    lse = xp.reshape(xp.permute_dims(lse[..., 0], (2, 0, 1)), (n, hq))
    return out, lse


def _gather(xp, cache, table_row, length):
    """The first `length` tokens of a sequence's paged cache: [length, Hkv, D]."""
    bs = cache.shape[1]
    nblocks = (length + bs - 1) // bs
    ids = xp.asarray(table_row[:nblocks], dtype=xp.int64, device=_device(cache))
    blocks = xp.take(cache, ids, axis=0)
    return xp.reshape(blocks, (nblocks * bs,) + tuple(cache.shape[2:]))[:length]


def _check_opts(q, window, softcap):
    if window is not None and window <= 0:
        raise ValueError(f"window must be a positive number of keys (or None), got {window}")
    if softcap is not None and not softcap > 0:
        raise ValueError(f"softcap must be > 0 (or None), got {softcap}")


def _finish(xp, q, outs, lses, shape, return_lse, dt):
    n, hq, d = shape
    out = xp.concat(outs, axis=0) if outs else xp.zeros((n, hq, d), dtype=dt, device=_device(q))
    lse = xp.concat(lses, axis=0) if lses else xp.zeros((n, hq), dtype=dt, device=_device(q))
    out = xp.astype(out, q.dtype)
    if not return_lse:
        return out
    return out, (lse if dt == xp.float64 else xp.astype(lse, xp.float32))


def _scale(q, scale):
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def append_kv(k, v, k_cache, v_cache, slot_mapping):
    """New caches: ``k_cache`` with ``[s // bs, s % bs] = k[t]`` for each slot ``s = slot_mapping[t] >= 0``."""
    xp = namespace(k, v, k_cache, v_cache)
    nb, bs, h, d = k_cache.shape
    cap = nb * bs
    slots = xp.asarray(slot_mapping, dtype=xp.int64)
    match = slots[None, :] == xp.arange(cap, dtype=xp.int64, device=_device(k_cache))[:, None]  # [cap, T]
    res = []
    for new, cache in ((k, k_cache), (v, v_cache)):
        flat = xp.reshape(cache, (cap, h, d))
        if k.shape[0] == 0:
            res.append(xp.asarray(flat, copy=True))
            continue
        has = xp.any(match, axis=1)
        src = xp.argmax(xp.astype(match, xp.int32), axis=1)
        taken = xp.astype(xp.take(new, src, axis=0), cache.dtype)
        res.append(xp.where(has[:, None, None], taken, flat))
    return tuple(xp.reshape(r, (nb, bs, h, d)) for r in res)


def decode(q, k_cache, v_cache, block_table, kv_lens, *, scale=None, window=None, sinks=None, softcap=None,
           return_lse=False):
    """q [B, Hq, D] against each sequence's kv_lens[b] cached tokens, query position kv_lens[b] - 1."""
    xp = namespace(q, k_cache, v_cache)
    _check_opts(q, window, softcap)
    dt = compute_dtype(xp, q)
    sc = _scale(q, scale)
    outs, lses = [], []
    for b in range(q.shape[0]):
        length = int(kv_lens[b])
        kk = _gather(xp, k_cache, block_table[b], length)
        vv = _gather(xp, v_cache, block_table[b], length)
        o, lse = _attend(xp, q[b:b + 1], kk, vv, [length - 1], True, window, sc, sinks, softcap, dt)
        outs.append(o)
        lses.append(lse)
    return _finish(xp, q, outs, lses, tuple(q.shape), return_lse, dt)


def prefill(q, k, v, cu_seqlens, *, causal=True, scale=None, window=None, sinks=None, softcap=None,
            return_lse=False):
    """Ragged self-attention: sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] of q, k and v."""
    xp = namespace(q, k, v)
    _check_opts(q, window, softcap)
    dt = compute_dtype(xp, q)
    sc = _scale(q, scale)
    outs, lses = [], []
    for b in range(len(cu_seqlens) - 1):
        s, e = int(cu_seqlens[b]), int(cu_seqlens[b + 1])
        o, lse = _attend(xp, q[s:e], k[s:e], v[s:e], list(range(e - s)), causal, window, sc, sinks, softcap, dt)
        outs.append(o)
        lses.append(lse)
    return _finish(xp, q, outs, lses, tuple(q.shape), return_lse, dt)


def prefill_paged(q, k_cache, v_cache, block_table, cu_seqlens_q, kv_lens, *, scale=None, window=None, sinks=None,
                  softcap=None, return_lse=False):
    """Chunked prefill: sequence b's queries (cu_seqlens_q) are the last of its kv_lens[b] cached tokens, causal."""
    xp = namespace(q, k_cache, v_cache)
    _check_opts(q, window, softcap)
    dt = compute_dtype(xp, q)
    sc = _scale(q, scale)
    outs, lses = [], []
    for b in range(len(cu_seqlens_q) - 1):
        s, e = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
        length = int(kv_lens[b])
        kk = _gather(xp, k_cache, block_table[b], length)
        vv = _gather(xp, v_cache, block_table[b], length)
        qpos = list(range(length - (e - s), length))
        o, lse = _attend(xp, q[s:e], kk, vv, qpos, True, window, sc, sinks, softcap, dt)
        outs.append(o)
        lses.append(lse)
    return _finish(xp, q, outs, lses, tuple(q.shape), return_lse, dt)


def merge_states(o_a, lse_a, o_b, lse_b):
    """(o, lse) of the union of two disjoint key sets from their partial results."""
    xp = namespace(o_a, lse_a, o_b, lse_b)
    dt = compute_dtype(xp, o_a)
    la, lb = upcast(xp, lse_a, dt), upcast(xp, lse_b, dt)
    m = xp.maximum(la, lb)
    m = xp.where(m > -math.inf, m, xp.zeros_like(m))
    wa, wb = xp.exp(la - m), xp.exp(lb - m)
    s = wa + wb
    safe = xp.where(s > 0, s, xp.ones_like(s))
    o = (upcast(xp, o_a, dt) * (wa / safe)[..., None] + upcast(xp, o_b, dt) * (wb / safe)[..., None])
    lse = xp.where(s > 0, m + xp.log(safe), xp.full_like(m, -math.inf))
    return xp.astype(o, o_a.dtype), (lse if dt == xp.float64 else xp.astype(lse, xp.float32))
