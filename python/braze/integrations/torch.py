"""Every registry op as a ``torch.library`` custom op (namespace ``braze``), so
``torch.compile(fullgraph=True)`` sees braze calls and autograd runs through
the VJP kernels.

Per op ``name`` of ``braze._spec`` two ops are registered, their schemas read
from the public function's signature (no list per op: an op added to the
registry is covered when this module is imported, and a parameter type not
understood here fails the import, and so the tests):

- ``braze::name``: the functional form. Its fake implementation is the op's
  own public function run on fake tensors under ``force_reference()``: the
  same argument checks, the reference composition's shapes and dtypes.
- ``braze::name_out``: the ``out=`` / in-place form, mutating its out slots
  (``Tensor(a!)``), returning nothing.

Parameters that take a number or a per-row array (``RowFloat`` / ``RowInt``)
become two schema arguments, ``name`` and ``name_rows``; ``seed`` / ``offset``
(unsigned 64-bit) travel as int64 bit patterns. An output the public function
returns as None (``dweight`` without ``weight``) comes back from the op as an
empty tensor of NONE_SHAPE, which ``call`` turns back into None.

Families whose specs need more than a signature (docs/torch.md, "Attention and
quant"), each derived from the registry rather than listed:

- a ``Union[Array, Tuple[...]]`` return (attention's ``return_lse``): the op
  always returns the tuple, the optional outputs as NONE_SHAPE when its
  ``return_*`` flag is off;
- an op whose spec's ``out_kwargs`` names ordinary parameters (``append_kv``:
  ``k_cache``, ``v_cache``) writes those in place: they are ``Tensor(a!)``, the
  op returns nothing and has no ``_out`` form;
- specs that share a native entry point (``QuantSpec.native``: one spec per
  quant format) are served by one op named after it, whose signature is
  ``_torch_quant.ENTRIES``'s; the format is a ``str`` argument.

Fake implementations of ops whose reference is host (numpy) code
(``spec.host_reference``) or reads index values such as sequence lengths
(``spec.reference_reads_values``) run the public function's kernel path with
every kernel a no-op (``_shapes_only``): the very allocations the kernels write.

Eager calls of ``braze.norm.rms_norm(x)`` do NOT go through the dispatcher (it
costs microseconds a decode step cannot spare); under ``torch.compile`` Dynamo
substitutes ``call`` for the public function, which does. For autograd in eager
use ``braze.integrations.torch.call("rms_norm", ...)`` or ``torch.ops.braze.*``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
import numbers
import threading
from dataclasses import dataclass

import torch
from torch._subclasses.fake_tensor import FakeTensor

from .. import _arrays, _call, _spec
from ..testing import force_reference
from . import _torch_grads, _torch_quant

NS = "braze"
NONE_SHAPE = (0,) * 8  # no real output of a braze op has eight axes
_U64 = ("seed", "offset")
_SCALAR = {"float": "float", "int": "int", "bool": "bool", "str": "str",
           "Optional[int]": "int?", "Optional[float]": "float?", "Optional[str]": "str?"}


@dataclass(frozen=True)
class Param:
    name: str
    kind: str        # tensor, tensor?, a scalar schema type, row_float, row_int, u64
    default: object  # inspect.Parameter.empty when required
    keyword: bool
    slots: int = 0   # out parameters: how many tensors they hold


@dataclass(frozen=True)
class OpDesc:
    spec: _spec.OpSpec
    params: tuple
    outs: tuple      # out parameters (Param with slots)
    returns: int     # number of tensors returned
    names_all: frozenset
    slot_names: tuple  # the out op's names of the out slots
    schema: str
    out_schema: str
    inplace: tuple = ()   # parameters written in place (the op returns nothing)
    flag: str = ""        # a Union return: the bool parameter that asks for the tuple


def _ann(a):
    return a if isinstance(a, str) else getattr(a, "__name__", repr(a))


def _param(p):
    ann = _ann(p.annotation)
    kw = p.kind == p.KEYWORD_ONLY
    if p.name == "out" or p.name.endswith("_out"):
        slots = ann.count("Array")
        if not ann.startswith("Optional[") or slots == 0:
            raise TypeError(f"{p.name}: cannot map out annotation {ann!r} to torch")
        return Param(p.name, "out", None, kw, slots)
    if ann == "Array":
        kind = "tensor"
    elif ann == "Optional[Array]":
        kind = "tensor?"
    elif ann == "RowFloat":
        kind = "row_float"
    elif ann == "RowInt":
        kind = "row_int"
    elif ann == "int" and p.name in _U64:
        kind = "u64"
    elif ann in _SCALAR:
        kind = _SCALAR[ann]
    else:
        raise TypeError(f"{p.name}: cannot map annotation {ann!r} to a torch schema type")
    return Param(p.name, kind, p.default, kw)


def _default(v):
    if v is None:
        return "None"
    if isinstance(v, str):
        return '"' + v + '"'
    return repr(v)


def _schema_args(params, inplace=()):
    # every schema argument positional: the dispatcher then hands the Python
    # kernels one flat tuple in schema order
    parts, letters = [], iter("abcdefgh")
    for p in params:
        if p.name in inplace:
            parts.append(f"Tensor({next(letters)}!) {p.name}")
            continue
        d = "" if p.default is inspect.Parameter.empty else "=" + _default(p.default)
        if p.kind in ("row_float", "row_int"):
            t = "float" if p.kind == "row_float" else "int"
            parts.append(f"{t} {p.name}{d}")
            parts.append(f"Tensor? {p.name}_rows=None")
        elif p.kind == "u64":
            parts.append(f"int {p.name}{d}")
        else:
            parts.append(f"{p.kind.replace('tensor', 'Tensor')} {p.name}{d}")
    return parts


def _inplace(spec, params, returns):
    """The parameters the op writes in place: those its spec's out_kwargs hands
    the outputs to (append_kv: its outputs ARE k_cache and v_cache)."""
    try:
        names = spec.out_kwargs(tuple(range(returns)) if returns > 1 else 0)
    except Exception:  # an out_kwargs that needs real arrays names out slots only
        return ()
    return tuple(p.name for p in params if p.name in names and p.kind == "tensor")


def describe(spec):
    """The torch description of one registry op (raises TypeError where a
    parameter or the return type has no torch mapping)."""
    sig = inspect.signature(spec.fn)
    allp = [_param(p) for p in sig.parameters.values()]
    params = tuple(p for p in allp if p.kind != "out")
    outs = tuple(p for p in allp if p.kind == "out")
    ret = _ann(sig.return_annotation)
    flag = ""
    if ret.startswith("Union[Array, Tuple[") and ret.endswith("]]"):  # out, or (out, extras) when asked
        flags = [p.name for p in params if p.kind == "bool" and p.name.startswith("return_")]
        if len(flags) != 1:
            raise TypeError(f"{spec.name}: a Union return needs one bool return_* parameter, got {flags}")
        flag, ret = flags[0], ret[len("Union[Array, "):-1]
    returns = ret.count("Array")
    if returns == 0 or not (ret == "Array" or ret.startswith("Tuple[")):
        raise TypeError(f"{spec.name}: cannot map return annotation {ret!r} to torch")
    inplace = _inplace(spec, params, returns)
    if inplace and (outs or len(inplace) != returns):
        raise TypeError(f"{spec.name}: in-place parameters {inplace} must be all its outputs, with no out=")
    args = _schema_args(params, inplace)
    slot_names = tuple(f"{o.name}{i if o.slots > 1 else ''}" for o in outs for i in range(o.slots))
    rt = "()" if inplace else "Tensor" if returns == 1 else "(" + ", ".join(["Tensor"] * returns) + ")"
    # the out slots first: they have no default, and custom ops take no keyword-only tensors
    out_args = [f"Tensor({letter}!) {n}" for letter, n in zip("abcdefgh", slot_names)] + list(args)
    return OpDesc(spec, params, outs, returns, frozenset(p.name for p in allp), slot_names,
                  f"({', '.join(args)}) -> {rt}", f"({', '.join(out_args)}) -> ()", inplace, flag)


# ---------------------------------------------------------------- argument encoding
_TYPES = {"float": (numbers.Real, torch.SymFloat), "int": (numbers.Integral, torch.SymInt), "u64": (numbers.Integral,),
          "bool": (bool,), "str": (str,), "tensor": (torch.Tensor,)}


def _check(p, v):
    """TypeError naming the argument, where the dispatcher would raise a RuntimeError."""
    kind = p.kind.rstrip("?")
    if v is None and (p.kind.endswith("?") or p.default is None):
        return v
    if kind in ("row_float", "row_int"):
        if isinstance(v, torch.Tensor):
            return v
        kind = kind[4:]
    ok = isinstance(v, _TYPES[kind]) and (kind == "bool" or not isinstance(v, bool))
    if not ok:
        what = {"tensor": "a torch.Tensor", "float": "a real number", "int": "an integer",
                "u64": "an integer", "bool": "a bool", "str": "a str"}[kind]
        raise TypeError(f"{p.name} must be {what}, got {type(v).__name__}")
    return float(v) if kind == "float" and type(v) is not float and not isinstance(v, torch.SymFloat) else v


def _encode(d, bound):
    """The public call's arguments by name -> schema arguments."""
    vals = []
    for p in d.params:
        v = bound.get(p.name, p.default)
        if v is inspect.Parameter.empty:
            raise TypeError(f"{d.spec.name}() missing required argument '{p.name}'")
        v = _check(p, v)
        if p.kind in ("row_float", "row_int"):
            if isinstance(v, torch.Tensor):  # the scalar slot keeps a valid value (the fake reads it)
                scalar = p.default if p.default is not inspect.Parameter.empty else 1.0 if p.kind == "row_float" else 0
                vals += [scalar, v]
            else:
                vals += [v, None]
        elif p.kind == "u64" and isinstance(v, int) and not isinstance(v, bool) and 2**63 <= v < 2**64:
            vals.append(v - 2**64)
        else:
            vals.append(v)
    return vals


def _decode(d, vals):
    """Schema arguments -> (positional, keyword) arguments of the public function."""
    args, kwargs, it = [], {}, iter(vals)
    for p in d.params:
        v = next(it)
        if isinstance(v, torch.Tensor) and v.requires_grad:
            v = v.detach()  # autograd is this op's own (register_autograd), not the public function's warning
        if p.kind in ("row_float", "row_int"):
            rows = next(it)
            v = rows if rows is not None else v
        elif p.kind == "u64" and isinstance(v, int) and v < 0:
            v += 2**64
        if p.keyword:
            kwargs[p.name] = v
        else:
            args.append(v)
    return args, kwargs


def _out_kwargs(d, slots):
    kw, it = {}, iter(slots)
    for o in d.outs:
        vs = [next(it) for _ in range(o.slots)]
        kw[o.name] = vs[0] if o.slots == 1 else tuple(vs)
    return kw


def _as_outputs(d, res, args, like):
    """A public result -> the op's tuple of fresh tensors (None -> NONE_SHAPE)."""
    res = res if isinstance(res, tuple) else (res,)
    res = res + (None,) * (d.returns - len(res))  # a Union return's single form
    ins = [a for a in args if isinstance(a, torch.Tensor)]
    outs = []
    for r in res:
        if r is None:
            r = torch.empty(NONE_SHAPE, dtype=like.dtype, device=like.device)
        elif not isinstance(r, torch.Tensor):  # philox_uniform without ``like``: numpy
            r = torch.as_tensor(r, device=like.device)
        elif any(r is a or r._base is a for a in ins):  # a reference that hands back its input
            r = r.clone()
        outs.append(r)
    return outs[0] if d.returns == 1 else tuple(outs)


def _like(vals):
    for v in vals:
        if isinstance(v, torch.Tensor):
            return v
    return torch.empty(0)


# ---------------------------------------------------------------- fake (shapes only)
def _noop_kernel(*args, **kwargs):
    return None


class _ShapeKernels(dict):
    """The kernel table while a thread computes shapes: in that thread every
    kernel is a no-op (the public function still checks its arguments and
    allocates its outputs); other threads keep the real table."""

    def __init__(self, real):
        super().__init__()
        self.real, self.threads = real, {}

    def __getitem__(self, key):
        if threading.get_ident() in self.threads:
            return _noop_kernel
        return self.real[key]

    def __setitem__(self, key, value):
        if threading.get_ident() not in self.threads:
            self.real[key] = value


class _FakeTorch(_arrays.Torch):
    """Fake tensors have no data: a (no-op) kernel gets the tensor itself, not a DLPack capsule."""

    @staticmethod
    def native(a):
        return a


# A fake tensor never reaches a real kernel as a capsule of a meaningless pointer.
_arrays._by_type[FakeTensor] = _FakeTorch
_shape_lock = threading.Lock()


@contextlib.contextmanager
def _shapes_only():
    tid = threading.get_ident()
    with _shape_lock:
        table = _call._kernels
        if not isinstance(table, _ShapeKernels):
            table = _call._kernels = _ShapeKernels(table)
        table.threads[tid] = table.threads.get(tid, 0) + 1
    try:
        yield
    finally:
        with _shape_lock:
            table.threads[tid] -= 1
            if not table.threads[tid]:
                del table.threads[tid]
            if not table.threads and _call._kernels is table:
                _call._kernels = table.real


# ---------------------------------------------------------------- registration
OPS: dict[str, OpDesc] = {}
SHARED: dict[str, str] = {}  # registry op -> the op serving it (one quant op for every format)
_LIB = torch.library.Library(NS, "DEF")


def _register(spec):
    d = describe(spec)
    qual = f"{NS}::{spec.name}"

    names = _names(d)
    # a host (numpy) reference cannot run on fake tensors: the kernel path computes the shapes
    shapes = _shapes_only if spec.host_reference or spec.reference_reads_values else force_reference

    def impl(*vals, **kw):
        vals = _flat(names, vals, kw)
        args, kwargs = _decode(d, vals)
        res = spec.fn(*args, **kwargs)
        return None if d.inplace else _as_outputs(d, res, vals, _like(vals))

    def fake(*vals, **kw):
        vals = _flat(names, vals, kw)
        args, kwargs = _decode(d, _scalar_rows(names, vals))
        with shapes():
            res = spec.fn(*args, **kwargs)
        return None if d.inplace else _as_outputs(d, res, vals, _like(vals))

    # Library.impl rather than torch.library.custom_op: one Python layer less
    # per call on the dispatcher path (measured in docs/torch.md)
    _LIB.define(spec.name + d.schema)
    _LIB.impl(spec.name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(qual, fake, lib=_LIB)
    _torch_grads.register(qual, d)

    if d.outs:
        out_names = [(n, None) for n in d.slot_names] + names

        def impl_out(*vals, **kw):
            vals = _flat(out_names, vals, kw)
            n = len(d.slot_names)
            args, kwargs = _decode(d, vals[n:])
            spec.fn(*args, **kwargs, **_out_kwargs(d, vals[:n]))

        _LIB.define(spec.name + "_out" + d.out_schema)
        _LIB.impl(spec.name + "_out", impl_out, "CompositeExplicitAutograd")
        torch.library.register_fake(qual + "_out", lambda *vals, **kw: None, lib=_LIB)
    OPS[spec.name] = d
    return d


def _names(d):
    """The functional op's argument names and defaults, in schema order."""
    out = []
    for p in d.params:
        out.append((p.name, p.default))
        if p.kind in ("row_float", "row_int"):
            out.append((p.name + "_rows", None))
    return out


def _flat(names, vals, kw):
    """The schema's full argument tuple: the dispatcher leaves out trailing
    arguments equal to their defaults."""
    if len(vals) == len(names):
        return vals
    return tuple(vals) + tuple(kw.get(n, dv) for n, dv in names[len(vals):])


def _scalar_rows(names, vals):
    """Per-row parameter arrays dropped for their scalar (valid) values: they do
    not change an output's shape, and the public function reads them natively
    (no fake tensor has data)."""
    return tuple(None if n.endswith("_rows") else v for (n, _), v in zip(names, vals))


def _bind(d, args, kwargs):
    """The public call's arguments by name (inspect's bind costs microseconds and
    Dynamo does not trace it); unknown or missing ones raise TypeError."""
    bound = dict(kwargs)
    pos = [p for p in d.params if not p.keyword]
    if len(args) > len(pos):
        raise TypeError(f"{d.spec.name}() takes {len(pos)} positional arguments but {len(args)} were given")
    for p, a in zip(pos, args):
        if p.name in bound:
            raise TypeError(f"{d.spec.name}() got multiple values for argument '{p.name}'")
        bound[p.name] = a
    known = d.names_all
    for k in bound:
        if k not in known:
            raise TypeError(f"{d.spec.name}() got an unexpected keyword argument '{k}'")
    for p in pos:
        if p.name not in bound and p.default is inspect.Parameter.empty:
            raise TypeError(f"{d.spec.name}() missing required argument '{p.name}'")
    return bound


def call(name, *args, **kwargs):
    """``braze.<family>.<name>(*args, **kwargs)`` through the custom op: what
    torch.compile traces, and the form that autograd differentiates."""
    d = OPS[name]
    bound = _bind(d, args, kwargs)
    slots = []
    for o in d.outs:
        v = bound.get(o.name)
        slots += [None] * o.slots if v is None else ([v] if o.slots == 1 else list(v))
    whole = True
    if d.flag:  # the public function returns the tuple when asked, or when a later output's slot is given
        whole = bound.get(d.flag, False) is True or any(s is not None for s in slots[1:])
        if whole:
            bound[d.flag] = True
    vals = _encode(d, bound)
    if d.inplace:
        getattr(torch.ops.braze, name)(*vals)
        res = tuple(bound[n] for n in d.inplace)
        return res[0] if len(res) == 1 else res
    if slots and all(s is not None for s in slots):
        getattr(torch.ops.braze, name + "_out")(*slots, *vals)
        return (slots[0] if len(slots) == 1 else tuple(slots)) if whole else slots[0]
    res = getattr(torch.ops.braze, name)(*vals)
    res = res if isinstance(res, tuple) else (res,)
    res = tuple(None if r.shape == NONE_SHAPE else r for r in res)
    if any(s is not None for s in slots):  # some out slots given: write those
        res = tuple(r if s is None or r is None else s.copy_(r) for r, s in zip(res, slots))
    if not whole:
        return res[0]
    return res[0] if d.returns == 1 else res


def _traceable(name):
    def traced(*args, **kwargs):
        return call(name, *args, **kwargs)
    traced.__name__ = f"braze_{name}"
    return traced


UNMAPPED: dict[str, str] = {}  # op -> why it has no torch op (tests fail on any)


def _register_spec(spec):
    if spec.kernel == spec.name:
        _register(spec)
        torch.compiler.substitute_in_graph(spec.fn, skip_signature_check=True)(_traceable(spec.name))
        return
    # one native entry point serving many registry specs (a quant format each): one op for all
    shared = spec.kernel
    if shared not in OPS:
        entry = _torch_quant.ENTRIES.get(shared)
        if entry is None:
            raise TypeError(f"{spec.name}: no torch op for its native entry point {shared!r}")
        _register(dataclasses.replace(spec, name=shared, fn=entry, out_kwargs=lambda r: {"out": r}))
    SHARED[spec.name] = shared


def op_name(spec):
    """The torch op (``torch.ops.braze.<name>``) that serves a registry spec."""
    return SHARED.get(spec.name, spec.name)


def register_all():
    """Registers every op of the registry not yet registered; returns OPS. An op
    whose signature has no torch mapping lands in UNMAPPED instead of failing
    the import, so the other ops stay usable."""
    for spec in _spec.ops():
        if spec.name not in OPS and spec.name not in SHARED and spec.name not in UNMAPPED:
            try:
                _register_spec(spec)
            except TypeError as e:
                UNMAPPED[spec.name] = str(e)
    if not _substituted:
        _substituted.append(True)
        for public, traced in _torch_quant.substitutes(call).items():
            torch.compiler.substitute_in_graph(public, skip_signature_check=True)(traced)
    return OPS


_substituted = []
register_all()
