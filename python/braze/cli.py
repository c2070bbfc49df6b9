"""The ``braze`` command: info | list | check | bench."""
from __future__ import annotations

import argparse
import json
import platform
import sys

from . import __version__, _backends, _spec


def cmd_info(args):
    from . import _cpu
    from .bench.harness import device_name

    print(f"braze {__version__}  (python {platform.python_version()}, {platform.system()} {platform.machine()})")
    print(f"cpu: {device_name('cpu')}")
    print(f"cpu isa: active {_cpu.isa()}, supported {', '.join(_cpu.isas_supported())}; "
          f"threads {_cpu.num_threads()} (BRAZE_NUM_THREADS, BRAZE_CPU_ISA override)")
    for b in _backends.NAMES:
        built = _backends.built(b)
        usable = _backends.usable(b)
        line = f"backend {b:<6} built: {'yes' if built else 'no ':<4} usable: {'yes' if usable else 'no'}"
        if not usable:
            line += f"  ({_backends.why_not(b)})"
        print(line)
    if _backends.usable("cuda"):
        mod = _backends.module("cuda")
        for d in getattr(mod, "devices", lambda: [])():
            print(f"cuda device: {d}")
    return 0


def coverage():
    rows = []
    for s in _spec.ops():
        cells = {}
        for b in _backends.NAMES:
            if b not in s.backends:
                cells[b] = "-"
            elif b == "metal" and platform.system() != "Darwin":
                cells[b] = "simulated"
            elif _backends.has_kernel(b, s.kernel):
                cells[b] = "yes"
            elif _backends.built(b):
                cells[b] = "built, not usable here"
            else:
                cells[b] = "not built"
        rows.append({"family": s.family, "op": s.name, "dtypes": list(s.dtypes), **cells})
    return rows


def cmd_list(args):
    rows = coverage()
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'family':<10} {'op':<18} " + " ".join(f"{b:<22}" for b in _backends.NAMES))
    for r in rows:
        print(f"{r['family']:<10} {r['op']:<18} " + " ".join(f"{r[b]:<22}" for b in _backends.NAMES))
    print("\nsimulated: the Metal shaders are verified by the MSL simulator on Linux; they run natively on a Mac.")
    return 0


def cmd_check(args):
    from . import testing

    failures = 0
    print(f"{'op':<18} {'backend':<8} {'dtype':<9} {'cases':>5}  result")
    for s in _spec.ops(args.family):
        for b in _backends.NAMES:
            if b not in s.backends or not _backends.has_kernel(b, s.kernel):
                continue
            if b == "cuda" and not _cuda_tensors():
                continue
            for dt in s.dtypes:
                n, bad = 0, None
                shapes = list(s.shapes[:2]) + list(s.edge_shapes)
                for shape in shapes:
                    for case in s.cases:
                        n += 1
                        r = testing.check(s, b, dt, shape, case)
                        if not r.ok and bad is None:
                            bad = f"{shape} {case}: {r.message}"
                failures += bad is not None
                print(f"{s.name:<18} {b:<8} {dt:<9} {n:>5}  {'ok' if bad is None else 'FAIL ' + bad}")
    print(f"\n{'all passed' if not failures else f'{failures} failed'}")
    return 1 if failures else 0


def _cuda_tensors():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def cmd_bench(args):
    from .bench import run

    if args.plot:  # checked before minutes of timing, not after
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("braze bench: --plot needs matplotlib (pip install matplotlib, or 'braze[bench]')",
                  file=sys.stderr)
            return 2
    peers = set(args.peers.split(",")) if args.peers else None
    try:
        if args.e2e:
            from .bench import e2e

            e2e.run(args.e2e, backend=args.backend, dtype=None if args.dtype == "all" else args.dtype,
                    prompt_tokens=args.prompt_tokens, decode_tokens=args.decode_tokens, threads=args.threads,
                    rounds=args.rounds, cuda_graph=args.cuda_graph,
                    peers=peers, json_path=args.json)
            return 0
        run(family=args.family, op=args.op, backend=args.backend, dtype=args.dtype, full=args.full,
            json_path=args.json, plot=args.plot, progress=not args.no_progress, peers=peers)
    except (ValueError, RuntimeError) as e:
        print(f"braze bench: {e}", file=sys.stderr)
        return 2
    return 0


def _ops_epilog():
    lines = ["families and ops:"]
    for fam in _spec.FAMILIES:
        lines.append(f"  {fam:<9} " + ", ".join(s.name for s in _spec.ops(fam)))
    lines += ["", "Each row of the table: time (median), GB/s of the bytes the op must move, % of the copy",
              "ceiling measured beside it, and max_err against a float64 reference.",
              "examples:", "  braze bench --family norm", "  braze bench --op sample --full --dtype all --json out.json",
              "  braze bench --family sampling --plot sampling.png",
              "  braze bench --e2e model.gguf --threads 2"]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="braze", description="Fused LLM inference kernels on CPU, CUDA and Metal.")
    p.add_argument("--version", action="version", version=f"braze {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="version, backends built / usable / why not, devices, CPU ISA")
    pl = sub.add_parser("list", help="coverage matrix: op x backend")
    pl.add_argument("--json", action="store_true")
    pc = sub.add_parser("check", help="parity of every op x usable backend x dtype against the reference")
    pc.add_argument("--family")
    pb = sub.add_parser("bench", help="time ops beside the copy ceiling and the peers installed here",
                        description="Time each op at its bench shapes beside a copy of memory measured in the\n"
                                    "same run (the ceiling) and the peer implementations installed here.",
                        epilog=_ops_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    pb.add_argument("--family", choices=_spec.FAMILIES, help="only this family's ops (default: every family)")
    pb.add_argument("--op", help="only this op (see the list below)")
    pb.add_argument("--backend", default="cpu", choices=_backends.NAMES, help="where to run (default: cpu)")
    pb.add_argument("--dtype", choices=_spec.FLOAT_DTYPES + ("all",),
                    help="data dtype (default: float32 on cpu, bfloat16 on cuda, float16 on metal)")
    pb.add_argument("--full", action="store_true",
                    help="every bench shape of each op (default: its first decode and first prefill shape)")
    pb.add_argument("--json", metavar="PATH", help="also write the report (device, commit, ceiling, rows) as JSON")
    pb.add_argument("--plot", metavar="PATH",
                    help="also draw a PNG: each row's %% of the copy ceiling, labelled (needs matplotlib)")
    pb.add_argument("--peers", metavar="LIST",
                    help="comma list of peers to time beside braze: numpy, torch, gguf (dequantize), ggml "
                         "(quant matmul; from llama-cpp-python) on cpu; torch, torch.compile, liger, flashinfer "
                         "(cuda); llama.cpp (--e2e). Default: every one installed")
    pb.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    pe = pb.add_argument_group("a model end to end (--e2e)")
    pe.add_argument("--e2e", metavar="MODEL.gguf",
                    help="time a llama GGUF model's prefill and greedy decode (tokens/s) with braze's ops, beside "
                         "llama.cpp on the same file where llama-cpp-python is installed (peer 'llama.cpp'); "
                         "a random-weight file: python -m braze.bench.gguf_random OUT.gguf --shape 1b")
    pe.add_argument("--prompt-tokens", type=int, default=128, help="prompt length (default 128)")
    pe.add_argument("--decode-tokens", type=int, default=32, help="decode steps timed (default 32)")
    pe.add_argument("--rounds", type=int, default=3, help="braze and llama.cpp alternate this many times (default 3)")
    pe.add_argument("--threads", type=int, help="CPU threads for braze and llama.cpp (default: braze's)")
    pe.add_argument("--cuda-graph", action="store_true",
                    help="cuda: braze's decode steps replay one captured CUDA graph (as llama.cpp's do)")
    args = p.parse_args(argv)
    return {"info": cmd_info, "list": cmd_list, "check": cmd_check, "bench": cmd_bench}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
