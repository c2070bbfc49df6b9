"""Every registry op as an ``mx.custom_function``, so ``mx.grad`` runs the
VJP kernels and ``mx.vmap`` batches the kernels (docs/mlx.md).

``braze.integrations.mlx.OPS[name]`` (or ``call(name, ...)``) takes the public
function's arguments, MLX arrays in place of arrays. Eagerly it is the public
function (the kernel, its checks). Under ``mx.grad`` the forward runs the
kernel and the backward is ``_grads``' formula (the norms' and the
activations' VJP kernels, rope inverted). Under ``mx.vmap`` the
rule runs the kernel on the batched arrays once where the op is row-wise
(the same derived rule as the JAX integration), else once per element.

MLX traces ``mx.compile`` and ``mx.vmap`` with placeholder arrays that hold
no data; a non-MLX kernel cannot run on them (that needs a C++
``mx.Primitive`` whose ``eval_cpu`` calls the kernel, which braze does not
build). So on placeholders the op records its *reference composition* in MLX
ops instead: ``mx.compile`` gives correct results through MLX's own ops, not
braze's kernels, and ``mx.vmap`` (whose rule then gets real arrays) runs the
kernels.
"""
from __future__ import annotations

import functools
import inspect

import mlx.core as mx

from .. import _spec
from ..testing import force_reference
from ._grads import BACKWARD
from ._record import Aval, recording


def _placeholder(a):
    """Whether ``a`` is one of the data-less arrays MLX traces compile / vmap with."""
    try:
        a.__dlpack__()
    except ValueError as e:
        if "[eval]" in str(e):
            return True
        raise
    return False


def _flat(v):
    return v if isinstance(v, tuple) else (v,)


def _plain(fn, bound, params):
    """The public function on ``bound``: the kernel on data, the reference composition on placeholders."""
    args, kwargs = [], {}
    traced = False
    for p in params:
        if p.name not in bound:
            continue
        v = bound[p.name]
        if isinstance(v, mx.array):
            traced = traced or _placeholder(v)
            v = v if traced else mx.contiguous(v)  # a cotangent may be a broadcast (stride 0) view
        if isinstance(v, tuple) and p.kind == p.VAR_POSITIONAL:
            traced = traced or any(isinstance(e, mx.array) and _placeholder(e) for e in v)
            args.extend(v if traced else tuple(mx.contiguous(e) for e in v))
            continue
        (kwargs.__setitem__(p.name, v) if p.kind == p.KEYWORD_ONLY else args.append(v))
    if traced:
        with force_reference():
            return fn(*args, **kwargs)
    return fn(*args, **kwargs)


def _dtype_name(a):
    return str(a.dtype).replace("mlx.core.", "")


def _shapes(fn, bound, params):
    """The output shapes of the public call, from the kernel path on stand-ins (nothing runs)."""
    stand = {k: Aval(v.shape, _dtype_name(v)) if isinstance(v, mx.array) else v for k, v in bound.items()}
    args, kwargs = [], {}
    for p in params:
        if p.name not in stand:
            continue
        v = stand[p.name]
        if p.kind == p.VAR_POSITIONAL:
            args.extend(Aval(e.shape, _dtype_name(e)) if isinstance(e, mx.array) else e for e in v)
        else:
            (kwargs.__setitem__(p.name, v) if p.kind == p.KEYWORD_ONLY else args.append(v))
    with recording("cpu"):
        res = fn(*args, **kwargs)
    return tuple(r.shape for r in _flat(res) if r is not None)


class _Op:
    def __init__(self, spec):
        self.name, self.fn = spec.name, spec.fn
        self.params = tuple(inspect.signature(spec.fn).parameters.values())
        self.sig = inspect.signature(spec.fn)
        self.seeded = any(p.name == "seed" for p in self.params)  # random draws indexed by row: no merged batch

    def __call__(self, *args, **kwargs):
        bound = dict(self.sig.bind(*args, **kwargs).arguments)
        for k, v in bound.items():
            if (k == "out" or k.endswith("_out")) and v is not None:
                raise TypeError(f"{k} cannot be given: mlx arrays are immutable (the op returns its outputs)")
        flat = {}
        for k, v in bound.items():  # a tuple of arrays (``*arrays``: split quant formats) one entry each
            if isinstance(v, tuple) and v and all(isinstance(e, mx.array) for e in v):
                flat.update({(k, i): e for i, e in enumerate(v)})
            else:
                flat[k] = v
        names = tuple(k for k, v in flat.items() if isinstance(v, mx.array))
        if not names:  # nothing to differentiate or batch (philox_uniform)
            return _plain(self.fn, bound, self.params)
        static = tuple((k, v) for k, v in flat.items() if k not in names)
        try:
            f, holes = _custom(self, names, static)
        except TypeError:  # an unhashable static argument: a custom function for this call only
            f, holes = _custom.__wrapped__(self, names, static)
        res = f(*(flat[n] for n in names))
        if not holes:
            return res
        it = iter(res)  # the outputs the public function returns as None, put back
        return tuple(None if i in holes[0] else next(it) for i in range(holes[1]))


def _unflat(flat):
    """{name or (name, index): value} -> {name: value}, tuples rebuilt."""
    out, parts = {}, {}
    for k, v in flat.items():
        if isinstance(k, tuple):
            parts.setdefault(k[0], []).append((k[1], v))
        else:
            out[k] = v
    out.update({k: tuple(v for _, v in sorted(p)) for k, p in parts.items()})
    return out


@functools.lru_cache(maxsize=None)
def _custom(op, names, static):
    kw = dict(static)
    holes = []  # (positions of None outputs, number of outputs): a custom function returns arrays only

    def forward(*arrays):
        res = _plain(op.fn, _unflat({**kw, **dict(zip(names, arrays))}), op.params)
        if not isinstance(res, tuple):
            return res
        if any(r is None for r in res):
            holes[:] = [frozenset(i for i, r in enumerate(res) if r is None), len(res)]
        return tuple(r for r in res if r is not None)

    f = mx.custom_function(forward)
    backward = BACKWARD.get(op.name)
    if backward is not None:
        @f.vjp
        def vjp(primals, cotangents, outputs):
            if isinstance(primals, mx.array):  # MLX hands a lone primal over bare
                primals = (primals,)
            if isinstance(outputs, list):
                outputs, cotangents = tuple(outputs), tuple(cotangents)
            got = backward(_unflat({**kw, **dict(zip(names, primals))}), outputs, cotangents, OPS)
            grads = tuple(got.get(n) if got.get(n) is not None else mx.zeros_like(a) for n, a in zip(names, primals))
            return grads

    @f.vmap
    def vmap(inputs, axes):
        moved = [a if ax is None else mx.moveaxis(a, ax, 0) for a, ax in zip(inputs, axes)]
        size = next(a.shape[0] for a, ax in zip(moved, axes) if ax is not None)
        if not op.seeded:
            try:
                one = _shapes(op.fn, _unflat({**kw, **{n: a if ax is None else a[0]
                                                       for n, a, ax in zip(names, moved, axes)}}), op.params)
                out = forward(*moved)
                if all(o is None if s is None else o.shape == (size, *s) for o, s in zip(_flat(out), one)):
                    return out, (0,) * len(_flat(out)) if isinstance(out, tuple) else 0
            except (TypeError, ValueError):
                pass
        per = [_flat(forward(*[a if ax is None else a[b] for a, ax in zip(moved, axes)])) for b in range(size)]
        outs = tuple(mx.stack([p[i] for p in per]) for i in range(len(per[0])))
        return (outs, (0,) * len(outs)) if len(outs) > 1 else (outs[0], 0)

    return f, holes


OPS = {spec.name: _Op(spec) for spec in _spec.ops()}


def call(name, *args, **kwargs):
    """``braze.<family>.<name>(*args, **kwargs)`` on MLX arrays, differentiable and batchable."""
    return OPS[name](*args, **kwargs)
