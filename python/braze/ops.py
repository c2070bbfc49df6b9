"""The ops family: gated activations (SwiGLU, GeGLU, gpt-oss's clamped SwiGLU),
SiLU and GELU, the embedding gather and the Hadamard transform.

Why kernels: the activations are elementwise, and a composition reads and
writes the data once per operation (sigmoid, multiply, slice, multiply: four or
five passes, and intermediates the size of the output); the kernel reads each
input once and writes the output once. The embedding gather with its
out-of-range rule would be a take, a compare and a select over the whole
output. The Hadamard transform is ``log2(n)`` butterfly passes (plus a small
dense one for ``m > 1``) that the kernel runs on a row held in cache or
registers, so the row crosses memory twice instead of ``2 log2(n)`` times.

Layouts: the last axis is contiguous, leading axes may be strided (one row
stride) or broadcast (stride 0) for inputs. Dtypes: float32, float16, bfloat16
(numpy bfloat16 is ``ml_dtypes.bfloat16``), f32 math, outputs in the input's
dtype. Gated ops take the vLLM / FlashInfer layout ``x[..., 2H] -> [..., H]``:
the gate is the first half and ``up`` the second, or with ``interleaved=True``
gate and up alternate (``x[..., 0::2]``, ``x[..., 1::2]``, as gpt-oss stores
them). ``out=`` may be ``x`` itself only for ``silu``, ``gelu`` and
``hadamard``; otherwise it must not overlap an input.
"""
import math as _math
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._call import Call as _Call, number as _number
from .reference import ops as _ref

if _TYPE_CHECKING:
    from typing import Optional

    from ._typing import Array

__all__ = ["silu_and_mul", "gelu_and_mul", "swiglu_clamped", "silu", "gelu", "embedding", "hadamard",
           "silu_and_mul_vjp", "gelu_and_mul_vjp", "swiglu_clamped_vjp", "silu_vjp", "gelu_vjp"]


def _flag(name, v):
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__}")
    return v


def _approximate(v):
    if v not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {v!r}")
    return v == "tanh"


def _half_shape(x):
    """x's shape with the last axis halved (the checks that follow name an odd axis)."""
    shape = tuple(x.shape)
    return shape[:-1] + (shape[-1] // 2,) if shape else shape


def silu_and_mul(x: "Array", *, interleaved: bool = False, out: "Optional[Array]" = None) -> "Array":
    """SwiGLU's activation: ``silu(g) * u`` with ``silu(g) = g * sigmoid(g)``.

    ``x[..., 2H]`` float32 / float16 / bfloat16 holds the gate and up halves
    (``interleaved=True``: alternating). Returns ``[..., H]`` in x's dtype.
    """
    c = _Call("silu_and_mul", x)
    il = _flag("interleaved", interleaved)
    if c.kernel is None:
        return c.fallback(_ref.silu_and_mul, (x,), dict(interleaved=il), out)
    y = c.out(out, _half_shape(x))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), il, c.stream)
    return c.result(y)


def gelu_and_mul(x: "Array", *, approximate: str = "none", interleaved: bool = False,
                 out: "Optional[Array]" = None) -> "Array":
    """GeGLU's activation: ``gelu(g) * u``; ``approximate="none"`` is the erf form
    ``g/2 (1 + erf(g/sqrt 2))``, ``"tanh"`` the tanh approximation.

    ``x[..., 2H]`` float32 / float16 / bfloat16 (``interleaved=True``: gate and up
    alternate). Returns ``[..., H]`` in x's dtype.
    """
    c = _Call("gelu_and_mul", x)
    tanh, il = _approximate(approximate), _flag("interleaved", interleaved)
    if c.kernel is None:
        return c.fallback(_ref.gelu_and_mul, (x,), dict(approximate=approximate, interleaved=il), out)
    y = c.out(out, _half_shape(x))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), tanh, il, c.stream)
    return c.result(y)


def swiglu_clamped(x: "Array", *, alpha: float = 1.702, limit: float = 7.0, interleaved: bool = True,
                   out: "Optional[Array]" = None) -> "Array":
    """The clamped SwiGLU of gpt-oss: with ``gc = min(g, limit)``,
    ``gc * sigmoid(alpha * gc) * (clip(u, -limit, limit) + 1)``.

    ``x[..., 2H]`` float32 / float16 / bfloat16, gate and up interleaved by
    default (``interleaved=False``: halves). ``alpha`` finite, ``limit > 0``.
    Returns ``[..., H]`` in x's dtype.
    """
    c = _Call("swiglu_clamped", x)
    alpha, limit = _number("alpha", alpha), _number("limit", limit)
    il = _flag("interleaved", interleaved)
    if c.kernel is None:
        return c.fallback(_ref.swiglu_clamped, (x,), dict(alpha=alpha, limit=limit, interleaved=il), out)
    y = c.out(out, _half_shape(x))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), alpha, limit, il, c.stream)
    return c.result(y)


def silu(x: "Array", *, out: "Optional[Array]" = None) -> "Array":
    """``x * sigmoid(x)``: ``x[...]`` float32 / float16 / bfloat16 with at least one axis
    ``[..., H]``; returns x's shape and dtype. ``out`` may be ``x`` (in place).
    """
    c = _Call("silu", x)
    if c.kernel is None:
        return c.fallback(_ref.silu, (x,), {}, out)
    y = c.out(out, tuple(x.shape))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), c.stream)
    return c.result(y)


def gelu(x: "Array", *, approximate: str = "none", out: "Optional[Array]" = None) -> "Array":
    """GELU, ``"none"``: ``x/2 (1 + erf(x/sqrt 2))``, ``"tanh"``: the tanh approximation.

    ``x[..., H]`` float32 / float16 / bfloat16; returns x's shape and dtype.
    ``out`` may be ``x`` (in place).
    """
    c = _Call("gelu", x)
    tanh = _approximate(approximate)
    if c.kernel is None:
        return c.fallback(_ref.gelu, (x,), dict(approximate=approximate), out)
    y = c.out(out, tuple(x.shape))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), tanh, c.stream)
    return c.result(y)


# ---------------------------------------------------------------- VJPs
# dx from x and the output's cotangent dy in one pass: x and dy read once, dx
# written once (f32 math, one rounding). The derivative is the same formula as
# the integrations' autograd (docs/design.md, "The ops family").
def _vjp(op, x, dy, out, ref, kwargs, scalars):
    c = _Call(op, x)
    if c.kernel is None:
        return c.fallback(ref, (x, dy), kwargs, out)
    dx = c.out(out, tuple(x.shape))
    c.kernel(c.arg(x, "x"), c.arg(dy, "dy"), c.arg(dx, "out"), *scalars, c.stream)
    return c.result(dx)


def silu_and_mul_vjp(x: "Array", dy: "Array", *, interleaved: bool = False,
                     out: "Optional[Array]" = None) -> "Array":
    """The VJP of :func:`silu_and_mul`: ``dx`` from ``x[..., 2H]`` and ``dy[..., H]``
    (the output's cotangent), both float32 / float16 / bfloat16 of one dtype.

    ``dg = dy * u * silu'(g)`` and ``du = dy * silu(g)``, placed as g and u are
    (halves, or alternating with ``interleaved=True``). Returns x's shape and dtype.
    """
    il = _flag("interleaved", interleaved)
    return _vjp("silu_and_mul_vjp", x, dy, out, _ref.silu_and_mul_vjp, dict(interleaved=il), (il,))


def gelu_and_mul_vjp(x: "Array", dy: "Array", *, approximate: str = "none", interleaved: bool = False,
                     out: "Optional[Array]" = None) -> "Array":
    """The VJP of :func:`gelu_and_mul`: ``dg = dy * u * gelu'(g)``, ``du = dy * gelu(g)``.

    ``x[..., 2H]`` and ``dy[..., H]`` float32 / float16 / bfloat16 of one dtype;
    returns ``dx`` in x's shape and dtype.
    """
    tanh, il = _approximate(approximate), _flag("interleaved", interleaved)
    return _vjp("gelu_and_mul_vjp", x, dy, out, _ref.gelu_and_mul_vjp,
                dict(approximate=approximate, interleaved=il), (tanh, il))


def swiglu_clamped_vjp(x: "Array", dy: "Array", *, alpha: float = 1.702, limit: float = 7.0,
                       interleaved: bool = True, out: "Optional[Array]" = None) -> "Array":
    """The VJP of :func:`swiglu_clamped`. With ``gc = min(g, limit)``,
    ``s = sigmoid(alpha * gc)``: ``dg = dy * (clip(u) + 1) * s (1 + alpha gc (1 - s))``
    where ``g < limit`` (0 past it), ``du = dy * gc * s`` where ``-limit < u < limit`` (else 0).

    ``x[..., 2H]`` and ``dy[..., H]`` float32 / float16 / bfloat16 of one dtype;
    returns ``dx`` in x's shape and dtype.
    """
    alpha, limit = _number("alpha", alpha), _number("limit", limit)
    il = _flag("interleaved", interleaved)
    return _vjp("swiglu_clamped_vjp", x, dy, out, _ref.swiglu_clamped_vjp,
                dict(alpha=alpha, limit=limit, interleaved=il), (alpha, limit, il))


def silu_vjp(x: "Array", dy: "Array", *, out: "Optional[Array]" = None) -> "Array":
    """The VJP of :func:`silu`: ``dy * s * (1 + x (1 - s))``, ``s = sigmoid(x)``.

    ``x`` and ``dy`` of one shape ``[..., H]`` and dtype (float32 / float16 /
    bfloat16); returns x's shape and dtype.
    """
    return _vjp("silu_vjp", x, dy, out, _ref.silu_vjp, {}, ())


def gelu_vjp(x: "Array", dy: "Array", *, approximate: str = "none", out: "Optional[Array]" = None) -> "Array":
    """The VJP of :func:`gelu`: ``dy * gelu'(x)`` (erf form: ``Phi(x) + x phi(x)``).

    ``x`` and ``dy`` of one shape ``[..., H]`` and dtype (float32 / float16 /
    bfloat16); returns x's shape and dtype.
    """
    tanh = _approximate(approximate)
    return _vjp("gelu_vjp", x, dy, out, _ref.gelu_vjp, dict(approximate=approximate), (tanh,))


def embedding(ids: "Array", table: "Array", *, check: bool = False, out: "Optional[Array]" = None) -> "Array":
    """Rows of ``table[V, H]`` (float32 / float16 / bfloat16) gathered by ``ids[...]``
    (int32 / int64, any shape): returns ``[..., H]`` in table's dtype.

    An id outside ``[0, V)`` never reads out of bounds: its row of the output
    is zeros. ``check=True`` raises ``ValueError`` for such ids before anything
    is written (it reads the ids back: a host sync on a GPU).
    """
    c = _Call("embedding", table, "table")
    if len(getattr(table, "shape", ())) != 2:
        raise ValueError(f"table must be 2-D [vocab, dim], got shape {tuple(table.shape)}")
    if _flag("check", check):
        _check_ids(ids, int(table.shape[0]))
    if c.kernel is None:
        return c.fallback(_ref.embedding, (ids, table), {}, out)
    y = c.out(out, tuple(ids.shape) + (int(table.shape[1]),))
    c.kernel(c.arg(ids, "ids"), c.arg(table, "table"), c.arg(y, "out"), c.stream)
    return c.result(y)


def _check_ids(ids, vocab):
    from array_api_compat import array_namespace

    from ._arrays import framework

    framework(ids, "ids")  # a clear TypeError for a non-array
    xp = array_namespace(ids)
    if "int" not in str(ids.dtype):
        raise TypeError(f"ids must be int32 or int64, got {ids.dtype}")
    if _math.prod(ids.shape):
        lo, hi = int(xp.min(ids)), int(xp.max(ids))
        if lo < 0 or hi >= vocab:
            bad = lo if lo < 0 else hi
            raise ValueError(f"ids: id {bad} is outside [0, {vocab}) (the table's vocab)")


def hadamard(x: "Array", *, scale: "Optional[float]" = None, out: "Optional[Array]" = None) -> "Array":
    """The fast Walsh-Hadamard transform over the last axis, times ``scale``
    (``None``: ``1/sqrt(n)``, which makes it orthonormal), f32 math.

    ``x[..., n]`` float32 / float16 / bfloat16 with ``n = m * 2**k``, ``m`` in
    {1, 12, 20, 28}, ``n <= 32768``. A row viewed as ``[m, 2**k]`` gets the
    Sylvester transform along its last axis and the order-m Hadamard matrix
    (Paley's constructions, ``braze.reference.ops.hadamard_matrix``) along its
    first. Returns x's shape and dtype; ``out`` may be ``x`` (in place).
    """
    c = _Call("hadamard", x)
    s = None if scale is None else _number("scale", scale)
    if c.kernel is None:
        return c.fallback(_ref.hadamard, (x,), dict(scale=s), out)
    y = c.out(out, tuple(x.shape))
    c.kernel(c.arg(x, "x"), c.arg(y, "out"), float("nan") if s is None else s, c.stream)
    return c.result(y)
