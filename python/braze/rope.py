"""The rope family: rotary position embeddings of q and k, and their frequencies.

``rope`` and ``rope_qk`` are kernels because the composition reads x several
times and materializes cos/sin tables of the full ``[tokens, heads, dim]``
size; the kernels compute cos and sin once per (token, pair) in float32
angles and rotate every head with them in one pass over memory, q and k in one
launch. ``frequencies`` is a composition (numpy, host side). The rotated axis
(head_dim) must be contiguous; token and head axes may be strided, so q and k
slices of a fused qkv buffer work without copies. The VJP of rope is rope with
``inverse=True``.

Shapes: ``x[..., H, D]`` -- one or more token axes, then heads, then
head_dim; ``positions`` int32 / int64 of exactly the token axes ``x.shape[:-2]``;
``inv_freq`` float32 ``[rotary_dim // 2]``. Data dtypes: float32, float16,
bfloat16 (q and k of one dtype). Outputs have the input's shape, dtype,
framework and device.
"""
import math as _math
from typing import TYPE_CHECKING as _TYPE_CHECKING

import numpy as _np

from ._call import Call as _Call, integer as _integer, number as _number
from .reference import rope as _ref

if _TYPE_CHECKING:
    from typing import Any, Dict, Optional, Tuple

    from ._typing import Array

__all__ = ["rope", "rope_qk", "frequencies"]


def _options(base, rotary_dim, interleaved, attention_scale, inverse):
    base, attention_scale = _number("base", base), _number("attention_scale", attention_scale)
    rd = -1 if rotary_dim is None else _integer("rotary_dim", rotary_dim)
    if rotary_dim is not None and rd < 0:
        raise ValueError(f"rotary_dim must be a positive even number, got {rd}")
    for name, v in (("interleaved", interleaved), ("inverse", inverse)):
        if not isinstance(v, bool):
            raise TypeError(f"{name} must be a bool, got {type(v).__name__}")
    return base, rd, bool(interleaved), attention_scale, bool(inverse)


def rope(x: "Array", positions: "Array", *, inv_freq: "Optional[Array]" = None, base: float = 10000.0,
         rotary_dim: "Optional[int]" = None, interleaved: bool = False, attention_scale: float = 1.0,
         inverse: bool = False, out: "Optional[Array]" = None) -> "Array":
    """Rotary embedding of ``x[..., H, D]`` (float32 / float16 / bfloat16) at ``positions``.

    ``positions`` int32 / int64 has exactly the token axes of x, ``x.shape[:-2]``
    (one position per token; a ``[T, D]`` tensor needs a heads axis,
    ``x[:, None, :]``). Returns x's shape and dtype. Pair i at position p turns by ``p * inv_freq[i]`` (f32), ``inv_freq`` float32
    ``[rotary_dim // 2]`` defaulting to ``base ** (-2i / rotary_dim)``.
    ``interleaved=False`` pairs ``(x[i], x[i + r/2])`` (rotate-half), ``True``
    pairs ``(x[2i], x[2i+1])``. cos and sin are multiplied by ``attention_scale``;
    ``inverse=True`` turns by ``-angle``. The ``D - rotary_dim`` last dims pass
    through. ``out`` may be ``x`` itself (in place).
    """
    c = _Call("rope", x)
    opts = _options(base, rotary_dim, interleaved, attention_scale, inverse)
    if c.kernel is None:
        return c.fallback(_ref.rope, (x, positions), _ref_kwargs(inv_freq, *opts), out)
    y = c.out(out, x.shape)
    c.kernel(c.arg(x, "x"), c.arg(positions, "positions"), c.arg(inv_freq, "inv_freq"), c.arg(y, "out"),
             *opts, c.stream)
    return c.result(y)


def rope_qk(q: "Array", k: "Array", positions: "Array", *, inv_freq: "Optional[Array]" = None,
            base: float = 10000.0, rotary_dim: "Optional[int]" = None, interleaved: bool = False,
            attention_scale: float = 1.0, inverse: bool = False, q_out: "Optional[Array]" = None,
            k_out: "Optional[Array]" = None) -> "Tuple[Array, Array]":
    """:func:`rope` of q and k in one launch; returns the rotated ``(q, k)``.

    ``q[..., Hq, D]`` and ``k[..., Hk, D]`` share their token axes, D and dtype
    (float32 / float16 / bfloat16); head counts may differ (GQA). ``positions``
    int32 / int64 ``[...]`` has the token axes. ``q_out=q, k_out=k`` rotates in place; q and k may be slices of one fused
    qkv buffer.
    """
    c = _Call("rope_qk", q, "q")
    opts = _options(base, rotary_dim, interleaved, attention_scale, inverse)
    if c.kernel is None:
        outs = None if q_out is None and k_out is None else (q_out, k_out)
        return c.fallback(_ref.rope_qk, (q, k, positions), _ref_kwargs(inv_freq, *opts), outs)
    yq = c.out(q_out, q.shape, "q_out")
    yk = c.out(k_out, k.shape, "k_out")
    c.kernel(c.arg(q, "q"), c.arg(k, "k"), c.arg(positions, "positions"), c.arg(inv_freq, "inv_freq"),
             c.arg(yq, "q_out"), c.arg(yk, "k_out"), *opts, c.stream)
    return c.result(yq), c.result(yk)


def _ref_kwargs(inv_freq, base, rd, interleaved, attention_scale, inverse):
    return dict(inv_freq=inv_freq, base=base, rotary_dim=None if rd < 0 else rd, interleaved=interleaved,
                attention_scale=attention_scale, inverse=inverse)


# ---------------------------------------------------------------- frequencies
_SCALINGS = {
    "linear": ({"factor"}, {}),
    "ntk": ({"factor"}, {}),
    "banded": ({"factor", "low_freq_factor", "high_freq_factor", "original_max_position"}, {}),
    "yarn": ({"factor", "original_max_position"},
             {"beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 0.0}),
}


def frequencies(rotary_dim: int, *, base: float = 10000.0,
                scaling: "Optional[Dict[str, Any]]" = None) -> "Tuple[_np.ndarray, float]":
    """``(inv_freq, attention_scale)`` for :func:`rope`: float32 numpy ``[rotary_dim // 2]`` and a float.

    With ``d = rotary_dim`` and ``f_i = base ** (-2i / d)`` (float64, rounded once
    to float32 at the end), ``scaling`` is None or a dict with ``"type"``:

    - ``"linear"`` (``factor``): position interpolation, ``f_i / factor``.
    - ``"ntk"`` (``factor``): NTK-aware base, ``f_i`` with
      ``base' = base * factor ** (d / (d - 2))``.
    - ``"banded"`` (``factor, low_freq_factor, high_freq_factor,
      original_max_position``; the scheme of Llama 3.1): with wavelength
      ``w_i = 2 pi / f_i``, ``L = original_max_position``: ``f_i`` where
      ``w_i < L / high_freq_factor``; ``f_i / factor`` where
      ``w_i > L / low_freq_factor``; between them
      ``(1 - t) f_i / factor + t f_i`` with
      ``t = (L / w_i - low_freq_factor) / (high_freq_factor - low_freq_factor)``.
    - ``"yarn"`` (``factor, original_max_position, beta_fast=32, beta_slow=1,
      mscale=1, mscale_all_dim=0``; YaRN, Peng et al. 2023): the correction dim
      of ``n`` rotations is ``c(n) = d ln(L / (2 pi n)) / (2 ln base)``;
      ``lo = max(floor(c(beta_fast)), 0)``, ``hi = min(ceil(c(beta_slow)), d - 1)``
      (``hi += 0.001`` when equal); ramp ``m_i = clip((i - lo) / (hi - lo), 0, 1)``;
      ``f_i' = f_i / factor * m_i + f_i * (1 - m_i)``. ``attention_scale =
      g(factor, mscale) / g(factor, mscale_all_dim)`` with ``g(s, m) = 1`` for
      ``s <= 1`` else ``0.1 m ln(s) + 1`` (with the defaults, ``0.1 ln(factor) + 1``).

    ``attention_scale`` is 1.0 for every other scaling.
    """
    d = _integer("rotary_dim", rotary_dim)
    if d <= 0 or d % 2:
        raise ValueError(f"rotary_dim must be a positive even number, got {d}")
    base = _number("base", base)
    if not base > 0 or not _math.isfinite(base):
        raise ValueError(f"base must be a finite number > 0, got {base}")
    i = _np.arange(d // 2, dtype=_np.float64)
    if scaling is None:
        return (base ** (-2.0 * i / d)).astype(_np.float32), 1.0
    p = _scaling_params(scaling)
    kind, factor = p["type"], p["factor"]
    if kind == "ntk":
        if d <= 2:
            raise ValueError(f"ntk scaling needs rotary_dim > 2, got {d}")
        base = base * factor ** (d / (d - 2))
    f = base ** (-2.0 * i / d)
    scale = 1.0
    if kind == "linear":
        f = f / factor
    elif kind == "banded":
        lo_f, hi_f, L = p["low_freq_factor"], p["high_freq_factor"], p["original_max_position"]
        if not hi_f > lo_f:
            raise ValueError(f"scaling: high_freq_factor ({hi_f}) must exceed low_freq_factor ({lo_f})")
        wave = 2.0 * _math.pi / f
        t = _np.clip((L / wave - lo_f) / (hi_f - lo_f), 0.0, 1.0)
        f = _np.where(wave < L / hi_f, f, _np.where(wave > L / lo_f, f / factor, (1.0 - t) * f / factor + t * f))
    elif kind == "yarn":
        L = p["original_max_position"]

        def corr(n):
            return d * _math.log(L / (n * 2.0 * _math.pi)) / (2.0 * _math.log(base))

        lo = max(_math.floor(corr(p["beta_fast"])), 0)
        hi = min(_math.ceil(corr(p["beta_slow"])), d - 1)
        if hi == lo:
            hi += 0.001
        ramp = _np.clip((i - lo) / (hi - lo), 0.0, 1.0)
        f = f / factor * ramp + f * (1.0 - ramp)

        def g(s, m):
            return 1.0 if s <= 1 else 0.1 * m * _math.log(s) + 1.0

        scale = g(factor, p["mscale"]) / g(factor, p["mscale_all_dim"])
    return f.astype(_np.float32), float(scale)


def _scaling_params(scaling):
    if not isinstance(scaling, dict):
        raise TypeError(f"scaling must be None or a dict, got {type(scaling).__name__}")
    kind = scaling.get("type")
    if kind not in _SCALINGS:
        raise ValueError(f"scaling['type'] must be one of {sorted(_SCALINGS)}, got {kind!r}")
    required, defaults = _SCALINGS[kind]
    unknown = set(scaling) - required - set(defaults) - {"type"}
    if unknown:
        raise ValueError(f"scaling of type {kind!r} has unknown keys {sorted(unknown)}")
    missing = required - set(scaling)
    if missing:
        raise ValueError(f"scaling of type {kind!r} needs {sorted(missing)}")
    p = {"type": kind, **defaults}
    for key in required | set(defaults):
        if key in scaling:
            p[key] = _number(f"scaling['{key}']", scaling[key])
    if not p["factor"] > 0:
        raise ValueError(f"scaling['factor'] must be > 0, got {p['factor']}")
    if "original_max_position" in p and not p["original_max_position"] > 0:
        raise ValueError(f"scaling['original_max_position'] must be > 0, got {p['original_max_position']}")
    return p
