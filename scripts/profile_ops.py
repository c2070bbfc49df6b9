"""Kernels to look at under ncu, at the bench's H200 shapes, each launched twice
(profile the second): dequantize (q8_0, q4_0, q4_K to bf16, 4096 x 14336),
quantize_activations fp8 per token (4096 x 8192 bf16), quant.matmul GEMV
(M=1, q4_0 / q8_0 / bf16), hadamard (16384 x 4096 bf16), sample (1 x 128256).

    ncu --clock-control none -k regex:'dequantize|row_quant|gemv|hadamard|sample' \
        python scripts/profile_ops.py [op ...]
"""
import sys

import torch

import braze

ops = sys.argv[1:] or ["dequantize", "quantize_activations", "matmul", "hadamard", "sample"]
g = torch.Generator(device="cuda").manual_seed(0)
bf = torch.bfloat16
N, K = 4096, 14336
w = torch.randn(N, K, device="cuda", dtype=bf, generator=g)
for _ in range(2):
    if "dequantize" in ops:
        for fmt in ("q8_0", "q4_0", "q4_K"):
            qw = braze.quant.quantize(w, fmt)
            braze.quant.dequantize(qw, dtype=bf)
    if "quantize_activations" in ops:
        a = torch.randn(4096, 8192, device="cuda", dtype=bf, generator=g)
        braze.quant.quantize_activations(a, "fp8_e4m3")
    if "matmul" in ops:
        x = torch.randn(1, K, device="cuda", dtype=bf, generator=g)
        for fmt in ("q8_0", "q4_0"):
            braze.quant.matmul(x, braze.quant.quantize(w, fmt))
        braze.quant.matmul(x, w)
    if "hadamard" in ops:
        h = torch.randn(16384, 4096, device="cuda", dtype=bf, generator=g)
        braze.ops.hadamard(h)
    if "sample" in ops:
        lg = torch.randn(1, 128256, device="cuda", dtype=bf, generator=g) * 2
        braze.sampling.sample(lg, top_k=50, top_p=0.9, seed=1)
torch.cuda.synchronize()
