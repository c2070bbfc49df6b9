"""The attention family: the paged KV cache write, decode, ragged and paged
(chunked) prefill, and the merge of partial attention states.

Why kernels: a composition materializes the scores ``[Hq, Tq, Tk]`` and the
gathered cache (``block_table`` indexing copies every cached key), several
passes over the largest tensors of a step; the kernels read each key and value
once per group of query heads that share it, keep scores on chip (registers /
L1) and never build the gathered cache.

Layouts follow FlashInfer / vLLM: tokens first, heads, then ``head_dim``
(contiguous; other axes may be strided). The KV cache is paged: ``k_cache`` and
``v_cache`` are ``[num_blocks, block_size, Hkv, D]``; key ``j`` of sequence
``b`` is slot ``j % block_size`` of block ``block_table[b, j // block_size]``.
``Hq`` must be a multiple of ``Hkv`` (GQA / MQA; query head ``h`` reads kv head
``h // (Hq // Hkv)``). ``head_dim`` is one of 64, 80, 96, 128, 192, 256.
Dtypes: float16 / bfloat16 everywhere, float32 on the CPU; softmax in f32.
Index arrays are int32 (``slot_mapping`` int32 or int64).

Options of every attention path: ``scale`` (default ``1/sqrt(D)``);
``window=W`` keeps keys with ``q_pos - W < k_pos`` (with causal masking also
``k_pos <= q_pos``); ``sinks[Hq]`` are per-head logits added to the softmax
denominator; ``softcap=c`` turns scores ``s`` into ``c * tanh(s / c)``.
``return_lse=True`` (or ``lse_out=``) also returns ``lse[..., Hq]`` float32,
the natural log of the softmax denominator (sinks included; ``-inf`` with an
output of 0 where every key is masked and there is no sink), which
:func:`merge_states` combines. Such calls return ``(out, lse)``; others ``out``.

Index values are checked on the CPU before anything is written (a slot
outside the cache, a ``kv_lens`` beyond its ``block_table`` row, a block id
outside the cache, a bad ``cu_seqlens``: ValueError naming the array). A GPU
kernel never reads out of bounds: such a block's keys are masked and such a
slot is skipped (docs/design.md, attention).
"""
import math as _math
from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import _backends
from ._call import Call as _Call, integer as _integer, number as _number
from .reference import attention as _ref

if _TYPE_CHECKING:
    from typing import Optional, Tuple, Union

    from ._typing import Array

__all__ = ["append_kv", "decode", "prefill", "prefill_paged", "merge_states"]


def _options(scale, window, softcap):
    """(scale, window, softcap) as the kernels take them: NaN, 0 and 0 for None."""
    sc = _math.nan if scale is None else _number("scale", scale)
    if window is None:
        w = 0
    else:
        w = _integer("window", window)
        if w <= 0:
            raise ValueError(f"window must be a positive number of keys (or None), got {w}")
    if softcap is None:
        cap = 0.0
    else:
        cap = _number("softcap", softcap)
        if not cap > 0 or not _math.isfinite(cap):
            raise ValueError(f"softcap must be a finite number > 0 (or None), got {cap}")
    return sc, w, cap


def _want_lse(return_lse, lse_out):
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {type(return_lse).__name__}")
    return return_lse or lse_out is not None


def _workspace(c, q, rows, block_table=None, block_size=0):
    """``{"workspace": array}`` for a backend whose attention kernels take
    scratch (split-K partial states on CUDA), sized from shapes only (no read
    of kv_lens), from q's own framework on q's device; else ``{}``."""
    size = getattr(_backends.module(c.backend), "attention_workspace_bytes", None)
    if size is None:
        return {}
    max_blocks = int(block_table.shape[1]) if block_table is not None else 0
    n = size(c.op, c.fw.dtype_name(q), int(rows), int(q.shape[1]), int(q.shape[2]), max_blocks, int(block_size),
             c.fw.device(q)[1])
    return {"workspace": c.arg(c.fw.empty(q, (n,), "uint8"), "workspace")} if n else {}


def _run(c, q, want, out, lse_out, call):
    """Allocates out (q's shape and dtype) and, when wanted, lse [tokens, Hq] f32; runs call(out, lse)."""
    y = c.out(out, tuple(q.shape))
    lse = c.out(lse_out, tuple(q.shape[:2]), "lse_out", "float32") if want else None
    call(c.arg(y, "out"), c.arg(lse, "lse_out"))
    return (c.result(y), c.result(lse)) if want else c.result(y)


def append_kv(k: "Array", v: "Array", k_cache: "Array", v_cache: "Array", slot_mapping: "Array",
              ) -> "Tuple[Array, Array]":
    """Writes new keys and values into the paged cache, in place.

    ``k``, ``v`` ``[T, Hkv, D]`` float32 / float16 / bfloat16;
    ``k_cache``, ``v_cache`` ``[num_blocks, block_size, Hkv, D]`` of the same
    dtype; ``slot_mapping[T]`` int32 / int64: token ``t`` goes to slot
    ``s = slot_mapping[t]`` (block ``s // block_size``, offset
    ``s % block_size``); ``-1`` skips the token. Returns ``(k_cache, v_cache)``.
    """
    c = _Call("append_kv", k, "k")
    kc = c.out(k_cache, None, "k_cache")
    vc = c.out(v_cache, None, "v_cache")
    if c.kernel is None:
        return c.fallback(_ref.append_kv, (k, v, k_cache, v_cache, slot_mapping), {}, (kc, vc))
    c.kernel(c.arg(k, "k"), c.arg(v, "v"), c.arg(kc, "k_cache"), c.arg(vc, "v_cache"),
             c.arg(slot_mapping, "slot_mapping"), c.stream)
    return c.result(kc), c.result(vc)


def decode(q: "Array", k_cache: "Array", v_cache: "Array", block_table: "Array", kv_lens: "Array", *,
           scale: "Optional[float]" = None, window: "Optional[int]" = None, sinks: "Optional[Array]" = None,
           softcap: "Optional[float]" = None, return_lse: bool = False, out: "Optional[Array]" = None,
           lse_out: "Optional[Array]" = None) -> "Union[Array, Tuple[Array, Array]]":
    """One query token per sequence against its paged cache (decode).

    ``q[B, Hq, D]`` float32 / float16 / bfloat16; ``k_cache``, ``v_cache``
    ``[num_blocks, block_size, Hkv, D]``; ``block_table[B, max_blocks]`` int32;
    ``kv_lens[B]`` int32 (cached tokens, the new one included; the query sits at
    position ``kv_lens[b] - 1``). Returns ``out[B, Hq, D]`` in q's dtype (and
    ``lse[B, Hq]`` float32 when asked). Long contexts are split over the
    CPU's threads and the partial states merged.
    """
    c = _Call("decode", q, "q")
    sc, w, cap = _options(scale, window, softcap)
    want = _want_lse(return_lse, lse_out)
    if c.kernel is None:
        kw = dict(scale=scale, window=window, sinks=sinks, softcap=softcap, return_lse=want)
        return c.fallback(_ref.decode, (q, k_cache, v_cache, block_table, kv_lens), kw,
                          (out, lse_out) if want else out)
    ws = _workspace(c, q, q.shape[0], block_table, k_cache.shape[1])
    return _run(c, q, want, out, lse_out, lambda o, lse: c.kernel(
        c.arg(q, "q"), c.arg(k_cache, "k_cache"), c.arg(v_cache, "v_cache"), c.arg(block_table, "block_table"),
        c.arg(kv_lens, "kv_lens"), o, lse, sc, w, c.arg(sinks, "sinks"), cap, stream=c.stream, **ws))


def prefill(q: "Array", k: "Array", v: "Array", cu_seqlens: "Array", *, causal: bool = True,
            scale: "Optional[float]" = None, window: "Optional[int]" = None, sinks: "Optional[Array]" = None,
            softcap: "Optional[float]" = None, return_lse: bool = False, out: "Optional[Array]" = None,
            lse_out: "Optional[Array]" = None) -> "Union[Array, Tuple[Array, Array]]":
    """Ragged self-attention over a batch of new sequences (prefill).

    ``q[T, Hq, D]``, ``k``, ``v`` ``[T, Hkv, D]`` float32 / float16 / bfloat16;
    ``cu_seqlens[B + 1]`` int32: sequence ``b`` is tokens
    ``cu_seqlens[b] .. cu_seqlens[b + 1]`` of q, k and v (positions from 0).
    ``causal=False`` lets every query see its whole sequence (``window`` still
    bounds keys from the left). Returns ``out[T, Hq, D]`` (and ``lse[T, Hq]``
    float32 when asked).
    """
    c = _Call("prefill", q, "q")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
    sc, w, cap = _options(scale, window, softcap)
    want = _want_lse(return_lse, lse_out)
    if c.kernel is None:
        kw = dict(causal=causal, scale=scale, window=window, sinks=sinks, softcap=softcap, return_lse=want)
        return c.fallback(_ref.prefill, (q, k, v, cu_seqlens), kw, (out, lse_out) if want else out)
    ws = _workspace(c, q, q.shape[0])
    return _run(c, q, want, out, lse_out, lambda o, lse: c.kernel(
        c.arg(q, "q"), c.arg(k, "k"), c.arg(v, "v"), c.arg(cu_seqlens, "cu_seqlens"), o, lse, causal, sc, w,
        c.arg(sinks, "sinks"), cap, stream=c.stream, **ws))


def prefill_paged(q: "Array", k_cache: "Array", v_cache: "Array", block_table: "Array", cu_seqlens_q: "Array",
                  kv_lens: "Array", *, scale: "Optional[float]" = None, window: "Optional[int]" = None,
                  sinks: "Optional[Array]" = None, softcap: "Optional[float]" = None, return_lse: bool = False,
                  out: "Optional[Array]" = None, lse_out: "Optional[Array]" = None,
                  ) -> "Union[Array, Tuple[Array, Array]]":
    """Chunked prefill / prefix caching: new queries against the paged cache, causal.

    ``q[T, Hq, D]`` float32 / float16 / bfloat16; ``cu_seqlens_q[B + 1]``
    int32 splits q into sequences; ``kv_lens[B]`` int32 counts each sequence's
    cached tokens, its new ones (already appended) included: the ``n`` new
    queries sit at positions ``kv_lens[b] - n .. kv_lens[b] - 1``.
    ``k_cache``, ``v_cache``, ``block_table`` as in :func:`decode`. Returns
    ``out[T, Hq, D]`` (and ``lse[T, Hq]`` float32 when asked).
    """
    c = _Call("prefill_paged", q, "q")
    sc, w, cap = _options(scale, window, softcap)
    want = _want_lse(return_lse, lse_out)
    if c.kernel is None:
        kw = dict(scale=scale, window=window, sinks=sinks, softcap=softcap, return_lse=want)
        return c.fallback(_ref.prefill_paged, (q, k_cache, v_cache, block_table, cu_seqlens_q, kv_lens), kw,
                          (out, lse_out) if want else out)
    ws = _workspace(c, q, q.shape[0], block_table, k_cache.shape[1])
    return _run(c, q, want, out, lse_out, lambda o, lse: c.kernel(
        c.arg(q, "q"), c.arg(k_cache, "k_cache"), c.arg(v_cache, "v_cache"), c.arg(block_table, "block_table"),
        c.arg(cu_seqlens_q, "cu_seqlens_q"), c.arg(kv_lens, "kv_lens"), o, lse, sc, w, c.arg(sinks, "sinks"), cap,
        stream=c.stream, **ws))


def merge_states(o_a: "Array", lse_a: "Array", o_b: "Array", lse_b: "Array", *,
                 out: "Optional[Tuple[Array, Array]]" = None) -> "Tuple[Array, Array]":
    """Combines two partial attentions over disjoint key sets.

    ``o_a``, ``o_b`` ``[T, H, D]`` float32 / float16 / bfloat16 and
    ``lse_a``, ``lse_b`` ``[T, H]`` float32 (as returned with ``return_lse``).
    Returns ``(o[T, H, D], lse[T, H])``: ``lse = log(e^lse_a + e^lse_b)``,
    ``o = o_a e^(lse_a - lse) + o_b e^(lse_b - lse)`` (0 where both are -inf).
    ``out`` may be a pair ``(o, lse)`` to write into.
    """
    c = _Call("merge_states", o_a, "o_a")
    o_out, l_out = (None, None) if out is None else tuple(out)
    if c.kernel is None:
        return c.fallback(_ref.merge_states, (o_a, lse_a, o_b, lse_b), {}, (o_out, l_out))
    o = c.out(o_out, tuple(o_a.shape), "out[0]")
    lse = c.out(l_out, tuple(o_a.shape[:2]), "out[1]", "float32")
    c.kernel(c.arg(o_a, "o_a"), c.arg(lse_a, "lse_a"), c.arg(o_b, "o_b"), c.arg(lse_b, "lse_b"),
             c.arg(o, "out[0]"), c.arg(lse, "out[1]"), c.stream)
    return c.result(o), c.result(lse)
