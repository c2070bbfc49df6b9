"""The benchmark run: every op x shape x dtype for braze and peers, each beside a copy ceiling."""
from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys

import numpy as np

from .. import _backends, _spec, testing
from . import peers as _peers
from .timing import cpu_time, cuda_latency, cuda_time

DEFAULT_DTYPE = {"cpu": "float32", "cuda": "bfloat16", "metal": "float16"}
ROTATE_BYTES = {"cpu": 96 << 20, "cuda": 256 << 20}  # inputs rotated past the last-level cache


def commit():
    if os.environ.get("BRAZE_COMMIT"):  # a copy of the tree without .git (e.g. a GPU machine)
        return os.environ["BRAZE_COMMIT"]
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(backend):
    if backend == "cuda":
        import torch

        return torch.cuda.get_device_name()
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from .. import _cpu

    return f"{name} ({_cpu.num_threads()} threads, {_cpu.isa()})"


def llc_bytes():
    """The last-level cache one core sees (sysfs, as the CPU backend reads it); 32 MiB elsewhere."""
    for level in ("3", "2"):
        try:
            with open(f"/sys/devices/system/cpu/cpu0/cache/index{level}/size") as f:
                v = f.read().strip()
        except OSError:
            continue
        unit = {"K": 1 << 10, "M": 1 << 20}.get(v[-1:], 1)
        try:
            return int(v.rstrip("KM")) * unit
        except ValueError:
            continue
    return 32 << 20


class Ceiling:
    """A large device copy, bytes read + written per second. It is measured
    again next to every op and shape, and each row is compared with the copy
    measured beside it: on a shared machine the bandwidth drifts within a run.
    The report's ceiling is the median of those measurements. CPU rows small
    enough to stay in the cache are compared with a copy of their own size
    instead (see measure)."""

    def __init__(self, backend):
        self.backend, self.seen, self.kind = backend, [], "large copy"
        if backend == "cuda":
            import torch

            self.src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
            self.dst = torch.empty_like(self.src)
        else:
            from .. import _cpu

            self.src = np.random.default_rng(0).integers(0, 255, 256 << 20, dtype=np.uint8)
            self.dst = np.empty_like(self.src)
            self.copy = _cpu.copy

    def measure(self, nbytes=None, nsets=1):
        """The copy's GB/s. On the CPU, an op whose rotated inputs fit in the last-level cache
        (nsets x nbytes at most llc_bytes()) is compared with a copy of its own size rotated the
        same way (cache-resident too), not with the DRAM copy it could outrun. That copy is never
        taken below the DRAM copy measured beside it: where the cache is shared with other tenants
        (a VM whose sysfs reports the whole socket's L3), a mid-size copy with ordinary stores can
        run slower than the large one, and would put a streaming op above 100%."""
        if self.backend == "cpu" and nbytes and nbytes * nsets <= llc_bytes():
            half = max(int(nbytes) // 2, 64)
            bufs = [(np.full(half, 1, np.uint8), np.empty(half, np.uint8)) for _ in range(nsets)]
            # the faster of the pool's copy and one thread's (a small copy pays the pool's wake-up)
            t = min(cpu_time(lambda b: self.copy(b[0], b[1]), bufs, min_time=0.05, min_reps=20),
                    cpu_time(lambda b: np.copyto(b[1], b[0]), bufs, min_time=0.05, min_reps=20))
            dram = self.measure()  # the report's (DRAM) ceiling keeps its sample beside this row
            self.kind = "same-size copy in cache"
            return max(2 * half / t / 1e9, dram)
        self.kind = "large copy"
        if self.backend == "cuda":
            t = cuda_time(lambda _: self.dst.copy_(self.src), [None], min_time=0.02, min_reps=10)
            nbytes = self.src.numel()
        else:
            t = cpu_time(lambda _: self.copy(self.src, self.dst), [None], min_time=0.1, min_reps=5)
            nbytes = self.src.nbytes
        self.seen.append(2 * nbytes / t / 1e9)
        return self.seen[-1]

    def median(self):
        return float(np.median(self.seen))


class Progress:
    def __init__(self, total, enabled):
        self.total, self.done, self.enabled = max(total, 1), 0, enabled

    def step(self, label):
        self.done += 1
        if self.enabled:
            n = int(30 * self.done / self.total)
            sys.stderr.write(f"\r[{'#' * n}{'.' * (30 - n)}] {self.done}/{self.total} {label[:40]:<40}")
            sys.stderr.flush()

    def close(self):
        if self.enabled:
            sys.stderr.write("\n")


def _impls(spec, backend, peer_filter):
    """(name, callable(args, kwargs)) for braze and each peer usable here."""
    impls = [("braze", lambda a, k: spec.fn(*a, **k))]
    have_torch = _importable("torch")
    if backend == "cpu":
        impls.append(("numpy", lambda a, k: spec.reference(*a, **k)))
        for peer, pfn in _peers.cpu_ops(spec):
            impls.append((peer, lambda a, k, _f=pfn: _f(*a, **k)))
        if have_torch:
            impls.append(("torch", _torch_on_cpu(_peers.torch_op(spec))))
    elif backend == "cuda" and have_torch:
        import torch

        fn = _peers.torch_op(spec)
        impls.append(("torch", lambda a, k: fn(*a, **k)))
        if not spec.name.endswith("_vjp"):  # autograd.grad inside a compiled region only graph-breaks
            compiled = torch.compile(fn, dynamic=False)
            impls.append(("torch.compile", lambda a, k: compiled(*a, **k)))
        lig = _peers.liger_op(spec)
        if lig is not None and _importable("liger_kernel"):
            impls.append(("liger", lambda a, k: lig(*a, **k)))
        for pname, pfn in _peers.cuda_peers(spec):
            impls.append((pname, lambda a, k, _f=pfn: _f(*a, **k)))
    return [(n, f) for n, f in impls if peer_filter is None or n == "braze" or n in peer_filter]


def _torch_on_cpu(fn):
    import torch

    def to_t(a):
        if isinstance(a, np.ndarray):
            if a.dtype.name == "bfloat16":
                return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
            return torch.from_numpy(a)
        return a

    cache = {}

    def run(args, kwargs):
        key = id(args[0])
        if key not in cache:  # convert once per input set, outside the timed region
            cache[key] = (tuple(to_t(a) for a in args), {k: to_t(v) for k, v in kwargs.items()})
        ta, tk = cache[key]
        return fn(*ta, **tk)

    return run


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _f64(a, backend, host=False):
    """The float64 oracle's inputs, on the device that computes the oracle fastest
    (the host for a numpy-only reference)."""
    if not isinstance(a, np.ndarray):
        return a
    a64 = testing.to_numpy64(a)
    if backend == "cuda" and not host:
        import torch

        return torch.from_numpy(a64).cuda()
    return a64


def _max_err(result, ref):
    """Largest |result - ref| over all outputs. Where the reference is infinite
    (a masked logit) an equal result counts as exact and any other as inf, so a
    mask op's error is over its kept values once the kept sets agree; NaN only
    where the two disagree on NaN."""
    errs = []
    for r, o in zip(ref if isinstance(ref, tuple) else (ref,), result if isinstance(result, tuple) else (result,)):
        if r is None or o is None:
            continue
        if type(r).__module__.startswith("torch"):  # the CUDA oracle stays on the GPU (large prefill shapes)
            import torch

            o = o.double()
            if not torch.equal(torch.isnan(r), torch.isnan(o)):
                return float("nan")
            same = (o == r) | torch.isnan(r)
            errs.append(float(torch.where(same, 0.0, (o - r).abs()).max()) if r.numel() else 0.0)
            continue
        r, o = testing.to_numpy64(r), testing.to_numpy64(o)
        if r.size == 0:
            continue
        if not np.array_equal(np.isnan(r), np.isnan(o)):
            return float("nan")
        same = (o == r) | np.isnan(r)  # covers equal infinities without computing inf - inf
        d = np.where(same, 0.0, np.abs(np.where(same, 0.0, o) - np.where(same, 0.0, r)))
        errs.append(float(d.max()))
    return max(errs) if errs else 0.0


def select_shapes(spec, full, backend="cpu"):
    """(kind, shape) pairs to time: the spec's "<backend>:decode" / "<backend>:prefill"
    lists where it has any for this backend, else its plain "decode" / "prefill"."""
    own = {k.split(":", 1)[1]: v for k, v in spec.bench_shapes.items() if k.startswith(backend + ":")}
    table = own or spec.bench_shapes
    shapes = []
    for kind in ("decode", "prefill"):
        s = table.get(kind, [])
        shapes += [(kind, tuple(x)) for x in (s if full else s[:1])]
    return shapes


def _host_memory_available():
    """MemAvailable from /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _bench_shape(spec, dt, kind, shape, backend, rng, ceil, timer, peers, report):
    """Times braze and each peer at one shape; rows (or skips) go into report."""
    case = dict(spec.cases[0])  # the op's first option case is its plain use
    nbytes, flops = spec.cost(shape, dt, case)
    # enough input sets that one rotation passes ROTATE_BYTES (at most 16 on the CPU, 4 on a GPU)
    most = 16 if backend == "cpu" else 4
    nsets = int(min(most, max(1, math.ceil(ROTATE_BYTES.get(backend, 0) / max(nbytes, 1)))))
    # the input sets, and about 6x the op's bytes for the float64 oracle (its copies of the inputs
    # and outputs, twice as wide, and its temporaries), the peers' outputs: 5.8x measured for
    # silu_and_mul_vjp 4096 x 28672, 4.7x for silu_and_mul 16384 x 28672
    need, avail = (nsets + 6) * nbytes, _host_memory_available()
    if backend == "cpu" and avail is not None and need > 0.9 * avail:
        report.setdefault("skipped", []).append(
            f"every impl {spec.name} {shape} {dt}: needs about {need / 2**30:.1f} GiB (its inputs, outputs and the "
            f"float64 oracle), {avail / 2**30:.1f} GiB available here")
        return
    host = [spec.make_inputs(shape, dt, rng, dict(case), False) for _ in range(nsets)]
    sets = [testing.convert_inputs(a, k, backend) for a, k in host]
    ref = spec.reference(*[_f64(a, backend, spec.host_reference) for a in host[0][0]], **host[0][1])
    ceiling = ceil.measure(nbytes, nsets)
    for name, impl in _impls(spec, backend, peers):
        outs = tsets = None  # the last implementation's outputs, freed before this one runs
        if name.startswith("torch") and backend == "cuda" and spec.host_reference \
                and _peers.torch_op(spec) is spec.reference:
            report.setdefault("skipped", []).append(
                f"{name} {spec.name} {shape}: no torch composition of this op (its reference is numpy code)")
            continue
        try:
            if name == "braze" and kind == "prefill":
                outs = [spec.out_kwargs(impl(a, k)) for a, k in sets]  # engines reuse their buffers
                fn = lambda s, _i=impl: _i(s[0], {**s[1], **s[2]})  # noqa: E731
                tsets = [(a, k, o) for (a, k), o in zip(sets, outs)]
            else:
                fn = lambda s, _i=impl: _i(s[0], s[1])  # noqa: E731
                tsets = sets
            res = fn(tsets[0])
            own = name.startswith("torch") and getattr(_peers.torch_op(spec), "draws_own_tokens", False)
            err = float("nan") if own else _max_err(res, ref)  # its own random draws: no token parity
            del res
            if backend == "cuda" and kind == "decode":
                t = cuda_latency(fn, tsets)
            else:
                t = timer(fn, tsets)
        except Exception as e:  # a peer that cannot run this case is reported, not fatal
            if name == "braze":
                raise
            report.setdefault("skipped", []).append(f"{name} {spec.name} {shape}: {type(e).__name__}: {e}")
            continue
        gbs = nbytes / t / 1e9
        report["rows"].append({"op": spec.name, "shape": list(shape), "dtype": dt, "backend": backend,
                               "impl": name, "ms": round(t * 1e3, 5), "gbs": round(gbs, 2),
                               "pct_ceiling": round(100 * gbs / ceiling, 1), "max_err": err,
                               "kind": kind, "flops": flops, "bytes": nbytes,
                               "ceiling_gbs": round(ceiling, 2), "ceiling_kind": ceil.kind})


def run(family=None, op=None, backend="cpu", dtype=None, full=False, json_path=None, plot=None,
        progress=True, peers=None, out=sys.stdout):
    if backend not in _backends.NAMES:
        raise ValueError(f"backend must be one of {_backends.NAMES}, got {backend!r}")
    if not _backends.usable(backend):
        raise RuntimeError(f"backend {backend} is not usable here: {_backends.why_not(backend)}")
    specs = [s for s in _spec.ops(family) if (op is None or s.name == op) and backend in s.backends]
    if not specs:
        raise ValueError(f"no op matches family={family!r} op={op!r} on {backend}")
    dtypes = list(_spec.FLOAT_DTYPES) if dtype == "all" else [dtype or DEFAULT_DTYPE[backend]]
    timer = cuda_time if backend == "cuda" else cpu_time

    ceil = Ceiling(backend)
    report = {"device": device_name(backend), "backend": backend, "commit": commit(),
              "ceiling_gbs": None, "rows": []}
    work = [(s, d, k, sh) for s in specs for d in dtypes if d in s.dtypes for k, sh in select_shapes(s, full, backend)]
    bar = Progress(len(work), progress and sys.stderr.isatty())
    rng = np.random.default_rng(0)
    for spec, dt, kind, shape in work:
        bar.step(f"{spec.name} {shape}")
        # one shape at a time: its inputs, outputs and oracle are freed before the next shape's
        # are made (the largest CPU shapes take several GB each)
        _bench_shape(spec, dt, kind, shape, backend, rng, ceil, timer, peers, report)
    bar.close()
    report["ceiling_gbs"] = round(ceil.median(), 2)
    print_table(report, out)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1)
    if plot:
        from .plot import ceiling_bars

        ceiling_bars(report, plot)
    return report


def print_table(report, out=sys.stdout):
    out.write(f"device: {report['device']}  backend: {report['backend']}  commit: {report['commit']}\n")
    big = [r["ceiling_gbs"] for r in report["rows"] if r.get("ceiling_kind", "large copy") == "large copy"]
    seen = big or [report["ceiling_gbs"]]
    out.write(f"copy ceiling: {report['ceiling_gbs']:.1f} GB/s median (bytes read + written; measured beside "
              f"each op, {min(seen):.1f}-{max(seen):.1f}; each row's % is against its own)\n")
    if len(big) < len(report["rows"]):
        out.write("rows marked * fit in the cache: their % is against a copy of their own size, rotated the same "
                  "way, or the large copy where that is faster\n")
    out.write("\n")
    hdr = f"{'op':<16} {'shape':<14} {'dtype':<9} {'impl':<14} {'time':>11} {'GB/s':>8} {'%ceil':>6} {'max_err':>9}"
    out.write(hdr + "\n" + "-" * len(hdr) + "\n")
    def mark(r):
        return " " if r.get("ceiling_kind", "large copy") == "large copy" else "*"

    for r in report["rows"]:
        t = r["ms"]
        ts = f"{t * 1e3:.1f} us" if t < 1 else f"{t:.3f} ms"
        out.write(f"{r['op']:<16} {'x'.join(map(str, r['shape'])):<14} {r['dtype']:<9} {r['impl']:<14} {ts:>11} "
                  f"{r['gbs']:>8.1f} {r['pct_ceiling']:>6.1f}{mark(r)}{r['max_err']:>9.2g}\n")
    for s in report.get("skipped", []):
        out.write(f"skipped: {s}\n")
