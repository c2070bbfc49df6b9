"""Parity checking against the reference, shared by the test suite and ``braze check``.

Inputs are drawn fresh (never zeros) in the op's dtype; the oracle is the
reference composition run in float64 on those same rounded inputs. Each op
runs twice: once allocating its outputs, once writing into NaN-poisoned
``out=`` arrays, which must come back as the very arrays passed in.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from . import _call
from ._arrays import BF16


class _NoKernels(dict):
    """A kernel table in which no backend has any kernel."""

    def __getitem__(self, key):
        return None

    def __setitem__(self, key, value):
        pass


@contextlib.contextmanager
def force_reference():
    """Within the block every op runs its reference composition (``Call.fallback``),
    as on a backend without the kernel, and without the fallback warning. Swaps
    the kernel table rather than adding a check to every call."""
    saved, saved_forced = _call._kernels, _call._forced_reference
    _call._kernels, _call._forced_reference = _NoKernels(), True
    try:
        yield
    finally:
        _call._kernels, _call._forced_reference = saved, saved_forced


def to_numpy64(a):
    """Any array (numpy incl. ml_dtypes, torch, cupy, jax, mlx) -> float64 numpy on the host."""
    if a is None:
        return None
    mod = type(a).__module__.split(".")[0]
    if mod == "torch":
        a = a.detach().float().cpu().numpy() if a.is_floating_point() else a.cpu().numpy()
    elif mod == "cupy":
        a = a.get()
    a = np.asarray(a)
    return a.astype(np.float64) if a.dtype.kind in "fV" or a.dtype == BF16 else a


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@dataclass
class Result:
    ok: bool
    max_err: float
    rel_err: float
    message: str = ""


def compare(out, ref, tol, name="out", bound=None):
    """Elementwise |out - ref| <= atol * s + rtol * |ref| (+ bound) with s = max(1, rms(ref)),
    and ||out - ref|| <= rtol * ||ref|| + atol * s * sqrt(n) (+ ||bound||) (a relative norm
    error that tolerates a near-zero reference). NaN in out passes only where
    ref is NaN. ``bound``: an error the kernel may add by design (OpSpec.err_bound)."""
    atol, rtol = tol
    o, r = to_numpy64(out), to_numpy64(ref)
    if o is None or r is None:
        ok = o is None and r is None
        return Result(ok, 0.0, 0.0, "" if ok else f"{name}: expected {'None' if r is None else 'an array'}")
    if o.shape != r.shape:
        return Result(False, np.inf, np.inf, f"{name}: shape {o.shape} != reference {r.shape}")
    if r.size == 0:
        return Result(True, 0.0, 0.0)
    nan_r = np.isnan(r)
    if not np.array_equal(np.isnan(o), nan_r):
        return Result(False, np.inf, np.inf, f"{name}: NaN where the reference has none (unwritten or wrong)")
    same_inf = np.isinf(r) & (o == r)  # matching infinities (e.g. masked logits) are exact
    o, r = np.where(nan_r | same_inf, 0.0, o), np.where(nan_r | same_inf, 0.0, r)
    scale = max(1.0, float(np.sqrt(np.mean(r * r))))
    err = np.abs(o - r)
    max_err = float(err.max())
    rel = float(np.linalg.norm(o - r) / max(np.linalg.norm(r), 1e-30))
    extra = np.zeros_like(r) if bound is None else np.broadcast_to(np.asarray(bound, np.float64), r.shape)
    bad = err > atol * scale + rtol * np.abs(r) + extra
    norm_ok = np.linalg.norm(o - r) <= rtol * np.linalg.norm(r) + atol * scale * np.sqrt(r.size) + np.linalg.norm(extra)
    ok = not bad.any() and norm_ok
    msg = "" if ok else f"{name}: max error {max_err:.3g}, relative norm error {rel:.3g}, {int(bad.sum())} elements off"
    return Result(ok, max_err, rel, msg)


def convert_inputs(args, kwargs, backend):
    """numpy inputs -> the arrays a backend runs on (torch CUDA tensors for cuda),
    with the same layout: a strided view stays a view of the same strides."""
    if backend in ("cpu", "metal"):  # metal: the simulated backend takes host arrays
        return args, kwargs
    if backend == "cuda":
        def conv(a):
            return torch_view(a, "cuda") if isinstance(a, np.ndarray) else a

        return tuple(conv(a) for a in args), {k: conv(v) for k, v in kwargs.items()}
    raise ValueError(f"no test arrays for backend {backend}")


def torch_view(a, device):
    """The torch tensor on `device` holding numpy array `a` with a's shape, strides
    and offset: the array that owns a's memory is copied over whole, and a is
    re-made on it with as_strided. 0-d arrays stay 0-d; bfloat16 stays bfloat16."""
    import torch

    def to_torch(c):
        if c.dtype == BF16:  # bf16 -> f32 -> bf16 is exact
            return torch.from_numpy(c.astype(np.float32)).to(device, torch.bfloat16)
        return torch.from_numpy(c).to(device)

    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    isz = a.itemsize
    offset = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    if (root is not a and root.dtype == a.dtype and root.flags.c_contiguous and offset % isz == 0
            and all(st % isz == 0 and st >= 0 for st in a.strides)):
        flat = to_torch(root.reshape(-1))
        return torch.as_strided(flat, a.shape, [st // isz for st in a.strides], offset // isz)
    return to_torch(np.array(a, order="C", copy=True))


def _poisoned_like(r):
    if r is None:
        return None
    mod = type(r).__module__.split(".")[0]
    if mod == "torch":
        import torch

        return torch.full_like(r, float("nan")) if r.is_floating_point() else torch.full_like(r, -7)
    out = np.empty_like(r)
    out[...] = np.nan if r.dtype.kind == "f" or r.dtype == BF16 else -7
    return out


LAYOUTS = ("contiguous", "strided", "broadcast", "misaligned")


def _relayout(a, layout):
    """A float input in `layout`: "broadcast" repeats the first row over every
    leading axis with strides of 0 (a read-only view); "misaligned" moves the data one element
    past a 16-byte boundary (same strides). Other arrays are left as they are."""
    if not isinstance(a, np.ndarray) or not (a.dtype.kind == "f" or a.dtype == BF16):
        return a
    if layout == "broadcast" and a.ndim >= 2 and a.shape[0] > 1:
        return np.broadcast_to(a[(0,) * (a.ndim - 1)], a.shape)
    if layout == "misaligned" and a.size:
        buf = np.empty(a.nbytes // a.itemsize + 16 // a.itemsize + 1, a.dtype)
        start = (-buf.ctypes.data % 16) // a.itemsize + 1
        out = buf[start:start + a.size].reshape(a.shape)
        out[...] = a
        return out
    return a


def _guarded(r, pad=37):
    """An out= array like `r`, poisoned, inside a poisoned buffer with `pad`
    elements before and after it (the guard regions); with the buffer."""
    if r is None:
        return None, None
    mod = type(r).__module__.split(".")[0]
    if mod != "numpy" or r.size == 0:
        return _poisoned_like(r), None
    buf = _poisoned_like(np.empty(r.size + 2 * pad, r.dtype))
    return buf[pad:pad + r.size].reshape(r.shape), buf


def _guards_intact(buf, pad=37):
    if buf is None:
        return True
    edges = np.concatenate([buf[:pad], buf[-pad:]])
    poison = _poisoned_like(edges)
    return edges.tobytes() == poison.tobytes()


def check(spec, backend, dtype, shape, case=None, strided=False, seed=0):
    """Runs ``spec`` on ``backend`` and returns a Result (ok False with a message on mismatch).

    ``strided`` is a layout of the inputs (one of LAYOUTS; True means
    "strided"). The op runs twice: allocating its outputs, then writing into
    NaN-poisoned out= arrays inside guard regions that must stay untouched. It
    must return as many outputs as the reference."""
    case = case or {}
    layout = strided if isinstance(strided, str) else ("strided" if strided else "contiguous")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    rng = np.random.default_rng(seed)
    args, kwargs = spec.make_inputs(tuple(shape), dtype, rng, case, layout == "strided")
    args = tuple(_relayout(a, layout) for a in args)
    args64 = [to_numpy64(a) if isinstance(a, np.ndarray) else a for a in args]
    ref = _as_tuple(spec.reference(*args64, **kwargs))
    bound = spec.err_bound(args64, kwargs, backend, dtype) if spec.err_bound else None
    bargs, bkw = convert_inputs(args, kwargs, backend)
    tol = spec.tolerance(dtype)

    got = _as_tuple(spec.fn(*bargs, **bkw))
    if len(got) != len(ref):
        return Result(False, np.inf, np.inf, f"{len(got)} outputs, the reference has {len(ref)}")
    worst = Result(True, 0.0, 0.0)
    for i, (g, r) in enumerate(zip(got, ref)):
        res = compare(g, r, tol, f"output {i}", bound)
        if not res.ok:
            return res
        worst = Result(True, max(worst.max_err, res.max_err), max(worst.rel_err, res.rel_err))

    guarded = [_guarded(g) for g in got]
    outs = tuple(o for o, _ in guarded)
    # out= arrays may replace keyword inputs (append_kv's caches are its outputs)
    back = _as_tuple(spec.fn(*bargs, **{**bkw, **spec.out_kwargs(outs if len(outs) > 1 else outs[0])}))
    if len(back) != len(ref):
        return Result(False, np.inf, np.inf, f"out=: {len(back)} outputs, the reference has {len(ref)}")
    for i, ((given, buf), b, r) in enumerate(zip(guarded, back, ref)):
        if given is not None and b is not given:
            return Result(False, np.inf, np.inf, f"out= output {i}: a different array came back")
        if not _guards_intact(buf):
            return Result(False, np.inf, np.inf, f"out= output {i}: written outside the array")
        res = compare(b, r, tol, f"out= output {i}", bound)
        if not res.ok:
            return res
    return worst


@contextlib.contextmanager
def simulated_metal(module):
    """Runs host (numpy) arrays on ``module`` as the Metal backend: the Metal
    backend module built against the MSL simulator (tests/mtlsim), so every
    public function goes through the same Python path, bindings, checks and
    launch plans as on a Mac."""
    from . import _backends, _call

    before = _backends._modules.get("metal", _MISSING)
    _backends._modules["metal"] = module
    _backends.ROUTE["cpu"] = "metal"
    _call._kernels.clear()
    try:
        yield
    finally:
        _backends.ROUTE.pop("cpu", None)
        if before is _MISSING:
            _backends._modules.pop("metal", None)
        else:
            _backends._modules["metal"] = before
        _call._kernels.clear()


_MISSING = object()
