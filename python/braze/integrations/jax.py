"""Every registry op as a JAX function that runs inside ``jax.jit`` through
XLA FFI, with no host round trip and no copy (docs/jax.md).

``braze.integrations.jax.OPS[name]`` (also ``call(name, ...)``) takes the
public function's arguments, JAX arrays in place of arrays, and returns JAX
arrays. Per call, at trace time:

1. the public function runs on stand-in arrays with its kernel replaced by a
   recorder (``_record``): its own argument checks raise their own
   TypeError / ValueError, and it reveals the native entry point, the
   converted scalars and the outputs it allocates;
2. the native entry's prepare step runs on those shapes (``braze_xla_check``
   in braze._cpu): the kernel's own checks, still at trace time;
3. ``jax.ffi.ffi_call("braze", ...)`` emits the call: the entry's name and its
   scalars are attributes, the arrays operands and results. The handler
   (csrc/jax/) turns the buffers into braze Tensors and runs the same
   prepare + launcher as the nanobind entry point.

Nothing is listed per op: the FFI table (csrc/jax/table.cpp) has one entry per
native entry point, mirroring the nanobind bindings, and every registry op
whose public function calls one is wrapped; an op whose public function
calls none fails at trace time with a TypeError saying so (the tests run
every registry op).

``jax.grad`` works through ``jax.custom_vjp`` for the ops of
``_jax_grads.BACKWARD``; ``jax.vmap`` works for every op (``_batch``).
"""
from __future__ import annotations

import ctypes
import functools
import inspect
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import _spec
from . import _jax_grads
from ._record import Aval, recording

TARGET = "braze"


# ---------------------------------------------------------------- the native side
@dataclass(frozen=True)
class Slot:
    name: str
    kind: str        # "a" (array) or a scalar kind: f, i, b, u, s
    input: bool = True
    output: bool = False
    optional: bool = False


def _parse(line):
    name, *words = line.split()
    slots = []
    for w in words:
        if ":" in w:
            n, k = w.split(":")
            slots.append(Slot(n, k))
            continue
        out, inp = w[0] in ">&", w[0] != ">"
        w = w.lstrip(">&")
        slots.append(Slot(w.rstrip("?"), "a", inp, out, w.endswith("?")))
    return name, tuple(slots)


def _load():
    from .. import _cpu

    if not hasattr(jax, "ffi") or not hasattr(jax.ffi, "ffi_call"):
        raise ImportError(f"braze.integrations.jax needs jax.ffi (jax >= 0.4.38), got jax {jax.__version__}")

    lib = ctypes.CDLL(_cpu.__file__)
    if not hasattr(lib, "braze_xla_declarations"):
        raise ImportError("braze was built without its XLA FFI handlers (jaxlib's headers were not found "
                          "at build time; docs/jax.md, 'Build')")
    lib.braze_xla_declarations.restype = ctypes.c_char_p
    lib.braze_xla_check.restype = ctypes.c_int
    lib.braze_xla_check.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p,
                                    ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double),
                                    ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, ctypes.c_char_p,
                                    ctypes.c_size_t]
    decls = dict(_parse(line) for line in lib.braze_xla_declarations().decode().splitlines())
    jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(lib.braze_xla_cpu), platform="cpu")
    try:
        from .. import _cuda
    except ImportError:
        _cuda = None
    if _cuda is not None:
        culib = ctypes.CDLL(_cuda.__file__)
        if hasattr(culib, "braze_xla_cuda"):
            jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(culib.braze_xla_cuda), platform="CUDA")
    return lib, decls


_LIB, DECLS = _load()
_ERRORS = {1: TypeError, 2: ValueError}


def _backend():
    """The braze backend whose kernel path a traced call takes: jax's default platform's."""
    return "cuda" if jax.default_backend() in ("gpu", "cuda") else "cpu"


def _dtype(name):
    return jnp.bfloat16 if name == "bfloat16" else np.dtype(name)


def _u64(v):
    v = int(v)
    return v - 2**64 if v >= 2**63 else v


def _check(native, present, arrays, scalars):
    """The native entry's prepare step on shapes alone: its TypeError / ValueError now."""
    dims = [d for a in arrays for d in (a.ndim, *a.shape)]
    n = max(1, len(scalars))
    f = [float(v) if k in "fib" else 0.0 for k, v in scalars] + [0.0]
    i = [int(v) if k in "ib" else _u64(v) if k == "u" else 0 for k, v in scalars] + [0]
    strings = "\n".join(v for k, v in scalars if k == "s")
    err = ctypes.create_string_buffer(2048)
    rc = _LIB.braze_xla_check(native.encode(), present, " ".join(a.dtype for a in arrays).encode(),
                              (ctypes.c_int64 * max(1, len(dims)))(*dims), (ctypes.c_double * (n + 1))(*f),
                              (ctypes.c_int64 * (n + 1))(*i), strings.encode(), err, len(err))
    if rc:
        raise _ERRORS.get(rc, RuntimeError)(err.value.decode())


# uint64 (seed, offset) travels as its int64 bit pattern: jax takes no unsigned attributes
_ATTR = {"f": np.float64, "i": np.int64, "b": np.bool_, "u": lambda v: np.int64(_u64(v)), "s": str}


@dataclass
class Plan:
    """One traced call: the FFI call to emit and how its results map back."""
    native: str
    operands: tuple    # indices into the caller's arrays, in operand order
    results: tuple     # jax.ShapeDtypeStruct per result
    aliases: dict      # operand index -> result index (arrays written in place)
    attrs: dict
    slot_of: dict      # id(stand-in) -> result index


def _plan(op, calls):
    if len(calls) != 1:
        raise TypeError(f"{op}: its public function makes {len(calls)} kernel calls; an XLA FFI call needs one")
    native, args, kwargs = calls[0]
    slots = DECLS.get(native)
    if slots is None:
        raise TypeError(f"{op}: the XLA FFI table has no entry for the native {native!r}")
    pos = list(args)
    present, k, arrays, scalars = 0, 0, [], []
    operands, results, aliases, attrs, slot_of = [], [], {}, {"op": native}, {}
    for s in slots:
        v = kwargs[s.name] if s.name in kwargs else pos.pop(0) if pos else None
        if s.kind != "a":
            scalars.append((s.kind, v))
            attrs[s.name] = _ATTR[s.kind](v)
            continue
        if isinstance(v, Aval):
            present |= 1 << k
            arrays.append(v)
            if s.input:
                if v.source is None:
                    raise TypeError(f"{op}: {s.name} is an array its public function allocated")
                operands.append(v.source)
            if s.output:
                if s.input:
                    aliases[len(operands) - 1] = len(results)
                slot_of[id(v)] = len(results)
                results.append(jax.ShapeDtypeStruct(v.shape, _dtype(v.dtype)))
        k += 1  # anything else in an array slot (None, the trailing stream) is an absent array
    _check(native, present, arrays, scalars)
    attrs["present"] = np.int64(present)
    return Plan(native, tuple(operands), tuple(results), aliases, attrs, slot_of)


def _emit(plan, operands):
    fn = jax.ffi.ffi_call(TARGET, plan.results, vmap_method="sequential",
                          input_output_aliases=plan.aliases or None)
    return fn(*operands, **plan.attrs)


def _unflatten(res, plan, outs):
    if isinstance(res, Aval):
        return outs[plan.slot_of[id(res)]]
    if isinstance(res, tuple):
        return tuple(_unflatten(r, plan, outs) for r in res)
    return res  # None


# ---------------------------------------------------------------- one registry op
def _is_array(v):
    return isinstance(v, (jax.Array, np.ndarray))


def _dtype_name(a):
    return "bfloat16" if a.dtype == jnp.bfloat16 else np.dtype(a.dtype).name


def _run(spec, bound):
    """The public function's call ``bound`` (name -> value) through the FFI call."""
    res, plan, outs = _run_flat(spec, bound)
    return _unflatten(res, plan, outs)


def _run_flat(spec, bound):
    """(the public result of stand-ins, the plan, the FFI call's results)."""
    arrays, names = [], []

    def stand_in(name, v, at=None):
        if (name == "out" or name.endswith("_out")) and v is not None:
            raise TypeError(f"{name} cannot be given: jax arrays are immutable (the op returns its outputs)")
        if _is_array(v):
            arrays.append(jnp.asarray(v))
            names.append((name, at))
            return Aval(v.shape, _dtype_name(v), len(arrays) - 1)
        if isinstance(v, tuple) and at is None:  # a tuple of arrays (split quant formats' data)
            return tuple(stand_in(name, e, i) for i, e in enumerate(v))
        return v

    args, kwargs = [], {}
    for p in spec.params:
        if p.name not in bound:
            if p.name == "like":  # a framework hint (philox_uniform): a stand-in that is no operand
                kwargs["like"] = Aval((0,), "float32")
            continue
        v = stand_in(p.name, bound[p.name])
        if p.kind == p.KEYWORD_ONLY:
            kwargs[p.name] = v
        elif p.kind == p.VAR_POSITIONAL:
            args.extend(v)
        else:
            args.append(v)
    with recording(_backend()) as calls:
        res = spec.fn(*args, **kwargs)
    plan = _plan(spec.name, calls)
    return res, plan, _batch(spec, bound, plan, arrays, names)


@dataclass(frozen=True)
class _Spec:
    name: str
    fn: object
    params: tuple
    sig: inspect.Signature


def _public(spec):
    """The JAX function of one registry op: the public signature, jax arrays in and out."""
    sig = inspect.signature(spec.fn)
    s = _Spec(spec.name, spec.fn, tuple(sig.parameters.values()), sig)
    grad = _jax_grads.BACKWARD.get(spec.name)

    def op(*args, **kwargs):
        bound = dict(s.sig.bind(*args, **kwargs).arguments)
        if grad is None:
            return _run(s, bound)
        names = tuple(n for n, v in bound.items() if _is_array(v))
        static = tuple((n, v) for n, v in bound.items() if n not in names)
        try:
            f = _differentiable(s, names, static)
        except TypeError:  # an unhashable scalar argument: a custom_vjp for this call only
            f = _differentiable.__wrapped__(s, names, static)
        return f(*(bound[n] for n in names))

    op.__name__ = spec.name
    op.__doc__ = f"braze's {spec.name} under jax (jit, grad, vmap); arguments as {spec.fn.__module__}.{spec.name}."
    return op


@functools.lru_cache(maxsize=None)
def _differentiable(s, names, static):
    """The op as a jax.custom_vjp of its array arguments (the scalars fixed)."""
    kw = dict(static)
    backward = _jax_grads.BACKWARD[s.name]

    @jax.custom_vjp
    def f(*arrays):
        return _run(s, {**kw, **dict(zip(names, arrays))})

    def fwd(*arrays):
        out = f(*arrays)
        return out, (arrays, out)

    def bwd(res, g):
        arrays, out = res
        grads = backward({**kw, **dict(zip(names, arrays))}, out, g, OPS)
        return tuple(grads.get(n) for n in names)

    f.defvjp(fwd, bwd)
    return f


# ---------------------------------------------------------------- vmap
def _batch(spec, bound, plan, arrays, names):
    """The FFI call, with a batching rule: under ``jax.vmap`` the op runs once
    on the batched arrays (the batch axis one more leading row axis) when its
    own checks accept that call and every output gains exactly that axis (a
    row-wise op whose parameters are not batched); otherwise once per batch
    element (``vmap_method="sequential"``). Ops that draw random numbers by
    row index (a ``u`` seed) always take the sequential path."""
    operands = [arrays[i] for i in plan.operands]
    if not operands:
        return list(_emit(plan, operands))
    seeded = any(s.kind == "u" for s in DECLS[plan.native])

    @jax.custom_batching.custom_vmap
    def f(*ops):
        return tuple(_emit(plan, ops))

    @f.def_vmap
    def rule(axis_size, in_batched, *ops):
        if not seeded:
            wide = dict(bound)
            for j, i in enumerate(plan.operands):
                name, at = names[i]
                wide[name] = ops[j] if at is None else wide[name][:at] + (ops[j],) + wide[name][at + 1:]
            try:
                _, wplan, outs = _run_flat(spec, wide)
            except (TypeError, ValueError):
                wplan = None
            if wplan is not None and wplan.native == plan.native and len(wplan.results) == len(plan.results) and all(
                    w.shape == (axis_size, *r.shape) for w, r in zip(wplan.results, plan.results)):
                return tuple(outs), (True,) * len(outs)
        axes = [0 if b else None for b in in_batched]
        outs = jax.vmap(lambda *o: tuple(_emit(plan, o)), in_axes=axes, axis_size=axis_size)(*ops)
        return tuple(outs), (True,) * len(outs)

    return list(f(*operands))


# ---------------------------------------------------------------- the registry
OPS: dict = {}


def register_all():
    for spec in _spec.ops():
        if spec.name not in OPS:
            OPS[spec.name] = _public(spec)
    return OPS


def call(name, *args, **kwargs):
    """``braze.<family>.<name>(*args, **kwargs)`` under jax: jittable, differentiable where it has a VJP."""
    return OPS[name](*args, **kwargs)


register_all()
