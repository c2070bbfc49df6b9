"""Decode-shape calls on CUDA timed two ways: GPU time (CUDA events around one
call, the GPU kept busy and the L2 evicted before it, as `braze bench` times
prefill rows) and the per-call time from Python back to back (as `braze bench`
times decode rows, launch overhead included). The gap between the two is the
host's share.

    python scripts/decode_gpu_time.py
"""
import torch

import braze
from braze.bench.timing import cuda_latency, cuda_time


def main():
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, 128256, device="cuda", dtype=torch.bfloat16, generator=g) * 2
    tok = torch.empty(1, device="cuda", dtype=torch.int32)
    p = torch.empty(1, 128256, device="cuda", dtype=torch.float32)
    h = torch.randn(1, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(8192, device="cuda", dtype=torch.bfloat16, generator=g)
    ids = torch.randint(0, 32000, (4096,), device="cuda", dtype=torch.int32, generator=g)
    table = torch.randn(32000, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    emb = torch.empty(4096, 4096, device="cuda", dtype=torch.bfloat16)
    src = torch.empty(32 << 20, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    hx = torch.randn(16384, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    hy = torch.empty_like(hx)
    big, big_out = torch.empty(128 << 20, device="cuda", dtype=torch.uint8), torch.empty(128 << 20, device="cuda", dtype=torch.uint8)
    rows = [
        # the embedding's bytes (32 MB gathered, 32 MB written) beside a copy of as many
        ("embedding 4096 ids x 4096 bf16 (64 MB moved)", lambda _: braze.ops.embedding(ids, table, out=emb)),
        ("copy 32 MB -> 32 MB", lambda _: dst.copy_(src)),
        ("hadamard 16384 x 4096 bf16 (256 MB moved)", lambda _: braze.ops.hadamard(hx, out=hy)),
        ("copy 128 MB -> 128 MB", lambda _: big_out.copy_(big)),
        ("sample 1x128256 bf16, no filter", lambda _: braze.sampling.sample(x, seed=1, out=tok)),
        ("sample 1x128256 bf16, top_k=50 top_p=0.9", lambda _: braze.sampling.sample(x, top_k=50, top_p=0.9, seed=1, out=tok)),
        ("sample 1x128256 bf16, top_p=0.9", lambda _: braze.sampling.sample(x, top_p=0.9, seed=1, out=tok)),
        ("softmax 1x128256 bf16", lambda _: braze.sampling.softmax(x, out=p)),
        ("torch softmax 1x128256 bf16", lambda _: torch.softmax(x, -1)),
        ("rms_norm 1x8192 bf16", lambda _: braze.norm.rms_norm(h, w)),
        ("torch x.mul(1) 1x8192 (one launch)", lambda _: h.mul(1)),
    ]
    print(f"{'call':<44} {'GPU us':>8} {'per call us':>12}")
    for name, fn in rows:
        print(f"{name:<44} {cuda_time(fn, [None]) * 1e6:8.2f} {cuda_latency(fn, [None]) * 1e6:12.2f}")


if __name__ == "__main__":
    main()
