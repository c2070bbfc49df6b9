"""CPU attention.decode in a plain loop: one sequence, Hq 32 / Hkv 8, pages of
16 over a shuffled block table, random normal q / k / v. Prints each case's
median of 30 calls and its us a key; one thread is timed by time.thread_time
(CPU time of this thread), more by the wall clock.
    python scripts/attention_decode_loop.py [THREADS] [DxL,...] [DTYPE,...]
    python scripts/attention_decode_loop.py 1 64x512,128x4096 float32,bfloat16
"""
import sys
import time

import numpy as np

import braze
from braze import _cpu


def main(threads=1, cases=((64, 512), (64, 4096), (128, 512), (128, 4096)),
         dtypes=("float32", "bfloat16", "float16")):
    import ml_dtypes
    _cpu.set_num_threads(threads)
    clock = time.thread_time if threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    hq, hkv, bs = 32, 8, 16
    for dt in dtypes:
        npdt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dt]
        for d, length in cases:
            nb = (length + bs - 1) // bs
            k = rng.standard_normal((nb, bs, hkv, d)).astype(npdt)
            v = rng.standard_normal((nb, bs, hkv, d)).astype(npdt)
            table = rng.permutation(nb).astype(np.int32)[None, :]
            lens = np.array([length], np.int32)
            q = rng.standard_normal((1, hq, d)).astype(npdt)
            out = np.empty((1, hq, d), npdt)
            for _ in range(3):
                braze.attention.decode(q, k, v, table, lens, out=out)
            ts = []
            for _ in range(30):
                t0 = clock()
                braze.attention.decode(q, k, v, table, lens, out=out)
                ts.append(clock() - t0)
            med = float(np.median(ts))
            kv_bytes = 2 * length * hkv * d * np.dtype(npdt).itemsize
            print(f"{dt:8s} D{d:<3d} L{length:<5d} threads {threads}: {med * 1e6:8.1f} us  "
                  f"{med * 1e6 / length:.3f} us/key  {kv_bytes / med / 1e9:.1f} GB/s of KV", flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    kw = {}
    if args:
        kw["threads"] = int(args[0])
    if len(args) > 1:
        kw["cases"] = [tuple(int(x) for x in c.split("x")) for c in args[1].split(",")]
    if len(args) > 2:
        kw["dtypes"] = args[2].split(",")
    main(**kw)
