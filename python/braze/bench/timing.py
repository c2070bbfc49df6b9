"""Timers: wall clock on the CPU, CUDA events on the GPU; medians of many repeats."""
from __future__ import annotations

import statistics
import time


def cpu_time(fn, sets, min_time=0.25, max_reps=200, min_reps=3):
    """Median seconds per call of fn(inputs) rotating over `sets`."""
    fn(sets[0])
    times, total, i = [], 0.0, 0
    while (total < min_time or len(times) < min_reps) and len(times) < max_reps:
        s = time.perf_counter()
        fn(sets[i % len(sets)])
        dt = time.perf_counter() - s
        times.append(dt)
        total += dt
        i += 1
    return statistics.median(times)


def cuda_time(fn, sets, min_time=0.1, max_reps=200, min_reps=10):
    """GPU time of one call, from events around it. Before each call a read
    of 512 MiB keeps the GPU busy while the host prepares the call (so the
    host's per-call overhead is not counted as kernel time) and evicts L2. A
    read, not a fill: a fill would leave the L2 full of dirty lines that the
    timed call would pay to write back."""
    import torch

    flush = torch.ones(128 << 20, dtype=torch.float32, device="cuda")
    for k in range(3):
        fn(sets[k % len(sets)])
    torch.cuda.synchronize()
    pairs, total, i = [], 0.0, 0
    while (total < min_time or len(pairs) < min_reps) and len(pairs) < max_reps:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.sum()
        a.record()
        fn(sets[i % len(sets)])
        b.record()
        b.synchronize()
        dt = a.elapsed_time(b) / 1e3
        pairs.append(dt)
        total += dt
        i += 1
    return statistics.median(pairs)


def cuda_latency(fn, sets, calls=500):
    """Per-call time from Python, back to back, one synchronize at the end: what
    a decode step pays for the call (launch overhead included)."""
    import torch

    for k in range(10):
        fn(sets[k % len(sets)])
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        s = time.perf_counter()
        for i in range(calls):
            fn(sets[i % len(sets)])
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - s) / calls)
    return best
