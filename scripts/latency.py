"""Where a decode-size call's time goes on CUDA: the whole call from Python
beside torch's builtin, then each piece of braze's path timed alone.

    python scripts/latency.py [--calls N]

Per-call microseconds, back to back (the GPU is not the limit at this size:
rms_norm 1 x 8192 bf16 moves 32 KB).
"""
import argparse
import time

import torch
import torch.nn.functional as F

import braze
from braze import _arrays, _backends
from braze._call import Call


def timed(fn, calls):
    """Seconds a call, one round of `calls` back-to-back calls."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls


def per_call(rows, calls, rounds=7):
    """Best per-call microseconds of each row, the rows interleaved round by
    round so that a slow stretch of the shared host hits all of them alike."""
    for _, fn in rows:
        for _ in range(20):
            fn()
    best = [float("inf")] * len(rows)
    for _ in range(rounds):
        for i, (_, fn) in enumerate(rows):
            best[i] = min(best[i], timed(fn, calls))
    return [b * 1e6 for b in best]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    n = ap.parse_args().calls
    x = torch.randn(1, 8192, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    x0, y0 = x[:0], y[:0]
    cuda = _backends.module("cuda")
    to_dl = _arrays.Torch.native
    rows = [
        ("torch F.rms_norm", lambda: F.rms_norm(x, (8192,), w, 1e-6)),
        ("torch x.mul(1)  (one elementwise launch)", lambda: x.mul(1)),
        ("braze rms_norm", lambda: braze.norm.rms_norm(x, w, eps=1e-6)),
        ("braze rms_norm out=", lambda: braze.norm.rms_norm(x, w, eps=1e-6, out=y)),
        ("  Call('rms_norm', x)", lambda: Call("rms_norm", x)),
        ("  x.new_empty", lambda: x.new_empty(x.shape)),
        ("  torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("  3 x _to_dlpack", lambda: (to_dl(x), to_dl(w), to_dl(y))),
        ("  _cuda.rms_norm(capsules)", lambda: cuda.rms_norm(to_dl(x), to_dl(w), to_dl(y), 1e-6, 0.0, 0)),
        ("  _cuda.rms_norm(capsules), 0 rows: no launch",
         lambda: cuda.rms_norm(to_dl(x0), to_dl(w), to_dl(y0), 1e-6, 0.0, 0)),
        ("  x.device", lambda: x.device),
    ]
    print(f"{'what':<44} {'us/call':>8}")
    for (name, _), us in zip(rows, per_call(rows, n)):
        print(f"{name:<44} {us:8.2f}")


if __name__ == "__main__":
    main()
