"""Per-call cost of the torch custom-op path over the plain function at decode
shapes (the issue's budget: 1.5 us), on CPU or CUDA.

    python scripts/torch_op_latency.py [--device cpu|cuda] [--calls N]

Rows: the plain public function, the op called directly through the
dispatcher (``torch.ops.braze.<op>``), and ``braze.integrations.torch.call``
(argument binding + dispatcher: what a compiled graph does not pay, since the
graph calls the op directly, but eager autograd users do).
"""
import argparse
import time

import torch

import braze
from braze.integrations import torch as bt


def per_call(fn, calls, sync):
    for _ in range(50):
        fn()
    sync()
    best = float("inf")
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args()
    dev, bf = a.device, torch.bfloat16
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    x = torch.randn(1, 8192, device=dev, dtype=bf)
    w = torch.randn(8192, device=dev, dtype=bf)
    q = torch.randn(1, 32, 128, device=dev, dtype=bf)
    k = torch.randn(1, 8, 128, device=dev, dtype=bf)
    pos = torch.tensor([100], device=dev, dtype=torch.int32)
    g = torch.randn(1, 2 * 14336, device=dev, dtype=bf)
    # decode: B1, Llama-3-8B heads, 256 cached tokens (short, so the overhead is not lost in the kernel)
    qd = torch.randn(1, 32, 128, device=dev, dtype=bf)
    kc = torch.randn(16, 16, 8, 128, device=dev, dtype=bf)
    vc = torch.randn(16, 16, 8, 128, device=dev, dtype=bf)
    table = torch.arange(16, device=dev, dtype=torch.int32).view(1, 16)
    lens = torch.tensor([256], device=dev, dtype=torch.int32)
    qw = braze.quant.quantize(torch.randn(16, 4096, device=dev, dtype=bf), "q4_0")
    ops = torch.ops.braze
    cases = [
        ("rms_norm 1x8192 bf16", lambda: braze.norm.rms_norm(x, w, eps=1e-6),
         lambda: ops.rms_norm(x, w, 1e-6, 0.0), lambda: bt.call("rms_norm", x, w, eps=1e-6)),
        ("rope_qk 1x(32+8)x128 bf16", lambda: braze.rope.rope_qk(q, k, pos),
         lambda: ops.rope_qk(q, k, pos, None, 10000.0, None, False, 1.0, False),
         lambda: bt.call("rope_qk", q, k, pos)),
        ("silu_and_mul 1x28672 bf16", lambda: braze.ops.silu_and_mul(g),
         lambda: ops.silu_and_mul(g, False), lambda: bt.call("silu_and_mul", g)),
        ("decode B1 32/8x128 L256 bf16", lambda: braze.attention.decode(qd, kc, vc, table, lens),
         lambda: ops.decode(qd, kc, vc, table, lens), lambda: bt.call("decode", qd, kc, vc, table, lens)),
        ("dequantize q4_0 16x4096", lambda: braze.quant.dequantize(qw, dtype="bfloat16"),
         lambda: ops.dequantize(qw.data, "q4_0", k=4096, dtype="bfloat16"),
         lambda: bt.call("dequantize", qw.data, "q4_0", k=4096, dtype="bfloat16")),
    ]
    print(f"{'op':<28} {'plain us':>9} {'torch.ops us':>13} {'+over':>7} {'call() us':>10} {'+over':>7}")
    for name, plain, op, via in cases:
        p, o, c = (per_call(f, a.calls, sync) for f in (plain, op, via))
        print(f"{name:<28} {p:9.2f} {o:13.2f} {o - p:7.2f} {c:10.2f} {c - p:7.2f}")


if __name__ == "__main__":
    main()
