"""The sampling family: softmax, log_softmax, logsumexp, argmax, the top-k /
top-p / min-p masks, repetition / frequency / presence penalties, and a fused
``sample``.

These are kernels because a reduction must stay on chip: the compositions
sort the vocabulary (top-k / top-p) or materialize probabilities several
times; the kernels find thresholds by a radix select over the logits' bits
and read each row a few times from cache instead.

Logits are ``[B, V]`` float32 / float16 / bfloat16 with a contiguous last axis
(rows may be strided). Arithmetic is f32. Per-row parameters (``temperature``,
``k``, ``p``, ``top_k``, ``top_p``, ``min_p``) are a Python number or an array
``[B]`` on the logits' device: float32 for the real ones, int32 for ``k`` /
``top_k``.

Rows that cannot be sampled: a row is *samplable* when it holds no NaN and
its largest logit is finite. ``argmax`` and ``sample`` return **-1** for any
other row (never an out-of-range token, never an exception from the GPU);
the masks copy such a row unchanged; softmax / log_softmax give NaN for it
(and logsumexp -inf for a row of -inf). Check ``tokens < 0`` to detect them.

Tie rules: ``argmax`` returns the first maximum; ``top_k_mask`` keeps every
logit equal to the k-th largest (so more than k may survive); ``top_p_mask``
keeps every logit >= the largest value t whose logits ``>= t`` hold at least
``p`` of the mass (ties with the last needed token are kept).
"""
import numbers as _numbers
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._call import Call as _Call, integer as _integer, number as _number
from .reference import sampling as _ref

if _TYPE_CHECKING:
    from typing import Optional

    from ._typing import Array, RowFloat, RowInt

__all__ = ["softmax", "log_softmax", "logsumexp", "argmax", "top_k_mask", "top_p_mask", "min_p_mask",
           "apply_penalties", "sample", "philox_uniform"]


def _row_param(c, name, v, kind):
    """A per-row parameter -> (scalar, native array or None)."""
    if isinstance(v, _numbers.Real) and not isinstance(v, bool):
        if kind is not int:
            return float(v), None
        v = _integer(name, v)
        if not -2 ** 63 <= v < 2 ** 63:  # the kernels check the rule; past int64 the binding cannot say why
            raise ValueError(f"{name} must be an integer in [0, 2**31), got {v}")
        return v, None
    if isinstance(v, bool):
        raise TypeError(f"{name} must be a number or an array [B], got bool")
    return (0 if kind is int else 0.0), c.arg(v, name)


def _u64(name, v):
    v = _integer(name, v)
    if not 0 <= v < 2 ** 64:
        raise ValueError(f"{name} must be in [0, 2**64), got {v}")
    return v


def _normalize(op, ref, logits, temperature, out, shape):
    c = _Call(op, logits, "logits")
    t, t_arr = _row_param(c, "temperature", temperature, float)
    if c.kernel is None:
        return c.fallback(ref, (logits,), dict(temperature=temperature), out)
    y = c.out(out, shape(logits), dtype="float32")
    c.kernel(c.arg(logits, "logits"), c.arg(y, "out"), t, t_arr, c.stream)
    return c.result(y)


def softmax(logits: "Array", *, temperature: "RowFloat" = 1.0, out: "Optional[Array]" = None) -> "Array":
    """float32 ``[B, V]``: ``softmax(logits / temperature)`` over the last axis.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``temperature``: a number > 0 or a float32 array ``[B]`` (one per row). One read for the max and sum, one to write.
    """
    return _normalize("softmax", _ref.softmax, logits, temperature, out, lambda x: tuple(x.shape))


def log_softmax(logits: "Array", *, temperature: "RowFloat" = 1.0, out: "Optional[Array]" = None) -> "Array":
    """float32 ``[B, V]``: ``log_softmax(logits / temperature)`` over the last axis.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``temperature``: a number > 0 or a float32 array ``[B]`` (one per row).
    """
    return _normalize("log_softmax", _ref.log_softmax, logits, temperature, out, lambda x: tuple(x.shape))


def logsumexp(logits: "Array", *, temperature: "RowFloat" = 1.0, out: "Optional[Array]" = None) -> "Array":
    """float32 ``[B]``: ``log(sum(exp(logits / temperature)))`` of each row.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``temperature``: a number > 0 or a float32 array ``[B]`` (one per row).
    """
    return _normalize("logsumexp", _ref.logsumexp, logits, temperature, out, lambda x: tuple(x.shape[:1]))


def argmax(logits: "Array", *, out: "Optional[Array]" = None) -> "Array":
    """int32 ``[B]``: the index of the first maximum of each row; -1 for a row that is not samplable.

    ``logits[B, V]`` float32 / float16 / bfloat16.
    """
    c = _Call("argmax", logits, "logits")
    if c.kernel is None:
        return c.fallback(_ref.argmax, (logits,), {}, out)
    y = c.out(out, tuple(logits.shape[:1]), dtype="int32")
    c.kernel(c.arg(logits, "logits"), c.arg(y, "out"), c.stream)
    return c.result(y)


def top_k_mask(logits: "Array", k: "RowInt", *, out: "Optional[Array]" = None) -> "Array":
    """Keeps the k largest logits of each row (and every logit tied with the k-th), others -> -inf.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``k``: an int >= 0 or an int32 array ``[B]`` (0 keeps the whole
    row). Returns logits' shape and dtype; ``out`` may be ``logits`` (in place).
    """
    c = _Call("top_k_mask", logits, "logits")
    kv, k_arr = _row_param(c, "k", k, int)
    if c.kernel is None:
        return c.fallback(_ref.top_k_mask, (logits, k), {}, out)
    y = c.out(out, tuple(logits.shape))
    c.kernel(c.arg(logits, "logits"), c.arg(y, "out"), kv, k_arr, c.stream)
    return c.result(y)


def _prob_mask(op, ref, logits, p, temperature, out):
    c = _Call(op, logits, "logits")
    pv, p_arr = _row_param(c, "p", p, float)
    t, t_arr = _row_param(c, "temperature", temperature, float)
    if c.kernel is None:
        return c.fallback(ref, (logits, p), dict(temperature=temperature), out)
    y = c.out(out, tuple(logits.shape))
    c.kernel(c.arg(logits, "logits"), c.arg(y, "out"), pv, p_arr, t, t_arr, c.stream)
    return c.result(y)


def top_p_mask(logits: "Array", p: "RowFloat", *, temperature: "RowFloat" = 1.0,
               out: "Optional[Array]" = None) -> "Array":
    """Keeps the smallest set of largest logits whose probability (of ``softmax(logits /
    temperature)``) sums to >= p, plus ties with the last one; others -> -inf.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``p``: a number in (0, 1] or a float32 array ``[B]`` (1 keeps the
    whole row); ``temperature``: a number > 0 or a float32 array ``[B]`` (one per row). Returns logits' shape and dtype; ``out`` may be ``logits``.
    """
    return _prob_mask("top_p_mask", _ref.top_p_mask, logits, p, temperature, out)


def min_p_mask(logits: "Array", p: "RowFloat", *, temperature: "RowFloat" = 1.0,
               out: "Optional[Array]" = None) -> "Array":
    """Keeps logits whose probability is >= ``p`` times the row's largest probability; others -> -inf.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``p``: a number in [0, 1] or a float32 array ``[B]`` (0 keeps the
    whole row); ``temperature``: a number > 0 or a float32 array ``[B]`` (one per row). Returns logits' shape and dtype; ``out`` may be ``logits``.
    """
    return _prob_mask("min_p_mask", _ref.min_p_mask, logits, p, temperature, out)


def apply_penalties(logits: "Array", token_ids: "Array", *, repetition: float = 1.0, frequency: float = 0.0,
                    presence: float = 0.0, out: "Optional[Array]" = None) -> "Array":
    """Penalizes the tokens generated so far: ``repetition`` divides positive / multiplies
    negative logits of seen tokens, ``frequency`` subtracts ``count * frequency``,
    ``presence`` subtracts ``presence`` once.

    ``logits[B, V]`` float32 / float16 / bfloat16; ``token_ids`` int32 ``[B, L]``, each in ``[0, V)`` or -1 (padding).
    ``repetition`` (> 0), ``frequency`` and ``presence`` are numbers, one for
    every row. Returns logits' shape and dtype; ``out`` may be ``logits`` (in place).
    """
    c = _Call("apply_penalties", logits, "logits")
    rep, freq, pres = _number("repetition", repetition), _number("frequency", frequency), _number("presence", presence)
    if c.kernel is None:
        return c.fallback(_ref.apply_penalties, (logits, token_ids),
                          dict(repetition=rep, frequency=freq, presence=pres), out)
    y = c.out(out, tuple(logits.shape))
    c.kernel(c.arg(logits, "logits"), c.arg(token_ids, "token_ids"), c.arg(y, "out"), rep, freq, pres,
             c.stream)
    return c.result(y)


def sample(logits: "Array", *, temperature: "RowFloat" = 1.0, top_k: "RowInt" = 0, top_p: "RowFloat" = 1.0,
           min_p: "RowFloat" = 0.0, seed: int = 0, offset: int = 0, out: "Optional[Array]" = None) -> "Array":
    """int32 ``[B]``: one token per row drawn from ``softmax(logits / temperature)`` after the
    filters, without sorting the vocabulary.

    ``logits[B, V]`` float32 / float16 / bfloat16. Each of ``temperature`` (>= 0), ``top_k`` (int >= 0), ``top_p``
    (in (0, 1]) and ``min_p`` (in [0, 1]) is a Python number for every row or an
    array ``[B]`` on the logits' device, one value per row: int32 for ``top_k``,
    float32 for the others. ``seed`` and ``offset`` are ints in ``[0, 2**64)``.

    ``top_k`` (0 = off) and ``min_p`` (0 = off) cut relative to the whole row,
    then ``top_p`` (1 = off) over the renormalized survivors; the token is
    drawn by inverse CDF over the kept tokens in index order with the row's
    Philox4x32-10 uniform, keyed by ``(seed, offset, row)`` -- the same on every
    backend, so a run is reproducible. ``temperature = 0`` or ``top_k = 1`` is
    argmax. A row that is not samplable (NaN, or no finite largest logit)
    gives -1.
    """
    c = _Call("sample", logits, "logits")
    t, t_arr = _row_param(c, "temperature", temperature, float)
    k, k_arr = _row_param(c, "top_k", top_k, int)
    p, p_arr = _row_param(c, "top_p", top_p, float)
    mp, mp_arr = _row_param(c, "min_p", min_p, float)
    seed, offset = _u64("seed", seed), _u64("offset", offset)
    if c.kernel is None:
        return c.fallback(_ref.sample, (logits,), dict(temperature=temperature, top_k=top_k, top_p=top_p,
                                                         min_p=min_p, seed=seed, offset=offset), out)
    y = c.out(out, tuple(logits.shape[:1]), dtype="int32")
    c.kernel(c.arg(logits, "logits"), c.arg(y, "out"), t, t_arr, k, k_arr, p, p_arr, mp, mp_arr, seed, offset,
             c.stream)
    return c.result(y)


def philox_uniform(rows: int, *, seed: int = 0, offset: int = 0, like: "Optional[Array]" = None,
                   out: "Optional[Array]" = None) -> "Array":
    """float32 ``[rows]``: the uniforms rows ``0..rows-1`` of ``sample(seed=seed, offset=offset)``
    draw, computed by the backend of ``like`` (or of ``out``; numpy on the CPU by default).
    For tests and for reproducing a draw; ``braze.reference.sampling.row_uniforms`` is the
    numpy twin."""
    import numpy as np

    rows = _integer("rows", rows)
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    like = like if like is not None else out if out is not None else np.empty((0,), np.float32)
    c = _Call("philox_uniform", like, "like")
    seed, offset = _u64("seed", seed), _u64("offset", offset)
    if c.kernel is None:
        return c.fallback(_ref.philox_uniform, (rows,), dict(seed=seed, offset=offset), out)
    y = c.out(out, (rows,), dtype="float32")
    c.kernel(c.arg(y, "out"), seed, offset, c.stream)
    return c.result(y)
