"""Diagnose CUDA vs CPU sample() disagreements on split rows (GPU run only).

For each differing row: the f64 reference token, the uniform, and where the
drawn target sits against the cumulative mass of the two tokens, so a draw on
a boundary (rounding) can be told from a wrong candidate set (a bug).
"""
import sys

import ml_dtypes
import numpy as np
import torch

import braze
from braze.reference import sampling as ref

CASES = ({}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.1}, {"top_k": 50, "top_p": 0.9},
         {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05}, {"temperature": 0.0},
         {"top_k": 6000}, {"top_k": 6000, "top_p": 0.95}, {"temperature": 2.0, "top_p": 0.5})
rows, cols = (int(a) for a in (sys.argv[1:3] if len(sys.argv) > 2 else (200, 70000)))
x32 = np.random.default_rng(cols + rows).normal(0, 3.0, size=(rows, cols)).astype(np.float32)
t = torch.from_numpy(x32).to(torch.bfloat16).cuda()
xc = t.cpu().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
x64 = xc.astype(np.float64)
bad = 0
for case in CASES:
    for offset in (0, 1, 77):
        got = braze.sampling.sample(t, seed=99, offset=offset, **case).cpu().numpy()
        want = np.asarray(braze.sampling.sample(xc, seed=99, offset=offset, **case))
        diff = np.nonzero(got != want)[0]
        if not len(diff):
            continue
        r64 = np.asarray(ref.sample(x64, seed=99, offset=offset, **case))
        u = ref.row_uniforms(99, offset, rows)
        for r in diff[:4]:
            bad += 1
            temp = case.get("temperature", 1.0) or 1.0
            z = x64[r] / temp
            e = np.exp(z - z.max())
            kept = np.asarray(ref.top_k_mask(x64[r:r + 1], case.get("top_k", 0)))[0] if case.get("top_k") else x64[r]
            kept = np.where(e >= case.get("min_p", 0.0), kept, -np.inf)
            kept = np.asarray(ref.top_p_mask(kept[None], case.get("top_p", 1.0), temperature=temp))[0]
            w = np.where(kept > -np.inf, e, 0)
            cum = np.cumsum(w)
            target = float(np.float64(u[r])) * cum[-1]
            def at(tok):
                return (cum[tok - 1] if tok > 0 else 0.0, cum[tok]) if 0 <= tok < cols else None
            print(f"case {case} offset {offset} row {r}: cuda {got[r]} cpu {want[r]} ref64 {r64[r]} "
                  f"u {u[r]:.9g} kept {int((w > 0).sum())} target/total {target / cum[-1]:.12g} "
                  f"cuda-span {np.array(at(got[r])) / cum[-1] if at(got[r]) else None} "
                  f"cpu-span {np.array(at(want[r])) / cum[-1] if at(want[r]) else None}")
print("differing rows:", bad)
