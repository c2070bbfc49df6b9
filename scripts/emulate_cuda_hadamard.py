"""The CUDA Hadamard kernel's data movement replayed in numpy, without a GPU.

Mirrors hadamard_run's launch shape (csrc/cuda/ops.cu: E, G, R, padded block)
and every step of hadamard_kernel (shaders/cuda/ops/hadamard.cuh): the
j = V * (s + G * i) + v layout, register butterflies, __shfl_xor lanes, the
shared-memory passes over the warp bits, the H_M column mix with the masks of
core/hadamard.h, and the read-back, then compares with
braze.reference.ops.hadamard. Keep it in step with the kernel when either
changes; a GPU mismatch that this script does not show is then in what it
cannot model (synchronization, alignment, launch limits).
    python scripts/emulate_cuda_hadamard.py      # a few minutes of pure Python
"""
import os
import sys

import numpy as np
import types
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the reference module alone, without the native package
pkg = types.ModuleType('braze'); pkg.__path__ = [ROOT + '/python/braze']; sys.modules['braze'] = pkg
from braze.reference import ops as ref

H = {m: ref.hadamard_matrix(m) for m in (12, 20, 28)}
masks = {m: [sum(1 << j for j in range(m) if H[m][i][j] == -1) for i in range(m)] for m in H}
# check against core/hadamard.h
src = open(ROOT + '/csrc/core/hadamard.h').read()
for m in (12, 20, 28):
    line = [l for l in src.splitlines() if l.startswith(f'#define BRAZE_HADAMARD_{m} ')][0]
    vals = [int(v.strip().rstrip('u'), 16) for v in line.split('{')[1].split('}')[0].split(',')]
    assert vals == masks[m], m

def bfly(d):  # over every bit of the index of d (list)
    N = len(d); h = 1
    while h < N:
        for e in range(N):
            if e & h == 0:
                a, b = d[e], d[e + h]; d[e], d[e + h] = a + b, a - b
        h *= 2

def run(x, V, elems=16, scale=None):
    rows, n = x.shape
    M = next(m for m in (1, 12, 20, 28) if n % m == 0 and ((n // m) & (n // m - 1)) == 0)
    logP = (n // M).bit_length() - 1; P = 1 << logP
    E = min(P, elems)
    while M * (P // E) > 512: E *= 2
    logG = 0
    while (E << logG) < P: logG += 1
    per_row = M << logG
    R = min(128 // per_row, rows) if per_row < 128 else 1
    staged = M > 1 or logG > 5
    threads = R * per_row; block = -(-threads // 32) * 32
    assert block <= 512
    if E % V: V = 1
    I = E // V; G = 1 << logG
    groups = -(-rows // R)
    y = np.full_like(x, np.nan)
    sc = 1 / np.sqrt(n) if scale is None else scale
    for grp in range(groups):
        d = np.zeros((block, E))
        sm = np.full(R * M * P, np.nan) if staged else None
        meta = []
        for t in range(block):
            s = t & (G - 1); q = t >> logG; rb = q // M; a = q - rb * M
            mine = t < threads; r = grp * R + rb; active = mine and r < rows
            meta.append((s, q, a, r, mine, active))
            if active:
                for i in range(I):
                    for v in range(V):
                        d[t, i * V + v] = x[r, a * P + V * (s + G * i) + v]
        for t in range(block):
            row = list(d[t]); bfly(row); d[t] = row
        for b in range(min(logG, 5)):
            nd = d.copy()
            for t in range(block):
                o = d[t ^ (1 << b)]
                nd[t] = o - d[t] if (t >> b) & 1 else d[t] + o
            d = nd
        if staged:
            for t in range(block):
                s, q, a, r, mine, active = meta[t]
                if mine:
                    for i in range(I):
                        for v in range(V):
                            sm[q * P + V * (s + G * i) + v] = d[t, i * V + v]
            lo = (V.bit_length() - 1) + 5; W = logG - 5
            if W >= 1:
                subrows = R * M; tasks = subrows << (logP - W); hib = logP - lo - W
                assert hib >= 0
                for g in range(tasks):
                    low = g & ((1 << lo) - 1); rest = g >> lo
                    hi = rest & ((1 << hib) - 1); qq = rest >> hib
                    base = qq * P + low + (hi << (lo + W))
                    idx = [base + (e << lo) for e in range(1 << W)]
                    f = [sm[k] for k in idx]; bfly(f)
                    for k, v in zip(idx, f): sm[k] = v
            if M > 1:
                for g in range(R << logP):
                    base = (g >> logP) * M * P + (g & (P - 1))
                    u = [sm[base + l * P] for l in range(M)]
                    for i in range(M):
                        sm[base + i * P] = sum(-u[l] if (masks[M][i] >> l) & 1 else u[l] for l in range(M))
            for t in range(block):
                s, q, a, r, mine, active = meta[t]
                if mine:
                    for i in range(I):
                        for v in range(V):
                            d[t, i * V + v] = sm[q * P + V * (s + G * i) + v]
        for t in range(block):
            s, q, a, r, mine, active = meta[t]
            if active:
                for i in range(I):
                    for v in range(V):
                        y[r, a * P + V * (s + G * i) + v] = d[t, i * V + v] * sc
    return y, dict(M=M, E=E, G=G, R=R, block=block, V=V, staged=staged)

rng = np.random.default_rng(0)
shapes = [(2, 1), (3, 2), (2, 4), (2, 12), (3, 24), (2, 20), (2, 28), (2, 56), (4, 64), (15, 128), (6, 768),
          (5, 640), (4, 448), (2, 4096), (3, 1024), (1, 2048), (2, 8192), (1, 12 * 2048), (1, 20 * 1024),
          (1, 28 * 1024), (1, 32768), (1, 16384), (7, 16), (9, 8), (2, 12 * 512)]
for rows, n in shapes:
    for V in (1, 4, 8):
        for elems in ((16,) if n < 8192 else (16,)) + ((8, 32) if n in (4096, 1024) else ()):
            x = rng.standard_normal((rows, n))
            y, info = run(x, V, elems)
            want = ref.hadamard(x)
            err = np.max(np.abs(y - want))
            assert err < 1e-9, (rows, n, V, elems, info, err)
    print('ok', rows, n, info, flush=True)
