"""CPU attention.prefill in a plain loop: one causal sequence, Hq 32 / Hkv 8,
D 128, random normal q / k / v, f32, out= preallocated. Prints each T's
minimum of R calls and its GFLOP/s (the causal half: 4 T^2 Hq D / 2); one
thread is timed by time.thread_time, more by the wall clock.
    python scripts/attention_prefill_loop.py [THREADS] [T,...] [R]
    python scripts/attention_prefill_loop.py 2 512,2048 7
"""
import sys
import time

import numpy as np

import braze
from braze import _cpu


def main(threads=2, lengths=(512,), repeats=7):
    _cpu.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    hq, hkv, d = 32, 8, 128
    for t in lengths:
        rng = np.random.default_rng(0)
        q = rng.standard_normal((t, hq, d), dtype=np.float32)
        k, v = (rng.standard_normal((t, hkv, d), dtype=np.float32) for _ in range(2))
        cu = np.array([0, t], np.int32)
        out = np.empty_like(q)
        times = []
        for _ in range(repeats):
            t0 = clock()
            braze.attention.prefill(q, k, v, cu, causal=True, out=out)
            times.append(clock() - t0)
        best = min(times)
        print(f"T{t} {threads} thread(s): min {best * 1e3:.2f} ms  {4 * t * t / 2 * hq * d / best / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(int(a[0]) if a else 2, tuple(int(x) for x in a[1].split(",")) if len(a) > 1 else (512,),
         int(a[2]) if len(a) > 2 else 7)
