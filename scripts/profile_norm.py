"""Kernels to look at under ncu: a device copy and the norm ops at the bench's
prefill shapes, each launched a few times (ncu profiles the launches it is told to).

    ncu --clock-control none -k regex:'norm_kernel|copy' python scripts/profile_norm.py
"""
import sys

import torch

import braze

shapes = [(16384, 8192), (65536, 4096), (4096, 4096)]
ops = sys.argv[1:] or ["rms_norm", "add_rms_norm"]
src = torch.randn(128 << 20, device="cuda", dtype=torch.bfloat16)
dst = torch.empty_like(src)
torch.mul(src, 1.0, out=dst)  # an elementwise kernel moving 256 MiB each way (copy_ is a memcpy, not a kernel)
for rows, cols in shapes:
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    r = torch.randn_like(x)
    w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    y, h = torch.empty_like(x), torch.empty_like(x)
    for _ in range(2):
        if "rms_norm" in ops:
            braze.norm.rms_norm(x, w, out=y)
        if "add_rms_norm" in ops:
            braze.norm.add_rms_norm(x, r, w, out=y, residual_out=h)
torch.cuda.synchronize()
