"""FlashInfer on the GPU machine (scripts/flashinfer_carry.sh): compile the JIT modules the `braze bench`
attention peers use (bf16, Hq 32 / Hkv 8, D 128, pages of 16), check them against the torch peers, and time
each once (CUDA events, a sanity figure only). Run from the repository root: python scripts/flashinfer_warm.py"""
import importlib.util
import time

import torch

spec = importlib.util.spec_from_file_location("peers_attn", "python/braze/bench/peers/attention.py")
pa = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pa)
import flashinfer  # noqa: E402  (after the peers: they import nothing at load)
print("flashinfer", flashinfer.__version__, "torch", torch.__version__, torch.cuda.get_device_name(), flush=True)
dev, dt = "cuda", torch.bfloat16
hq, hkv, d, bs = 32, 8, 128, 16
torch.manual_seed(0)

def tm(fn, n=20):
    fn(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / n * 1e3

for b, L in ((4, 1000), (64, 4096), (1, 32768)):
    t0 = time.time()
    nb = (L + bs - 1) // bs
    q = torch.randn(b, hq, d, device=dev, dtype=dt)
    kc = torch.randn(b * nb + 3, bs, hkv, d, device=dev, dtype=dt)
    vc = torch.randn_like(kc)
    bt = torch.randperm(b * nb + 3, device=dev)[: b * nb].view(b, nb).int()
    kl = torch.full((b,), L, device=dev, dtype=torch.int32)
    out = pa.flashinfer_decode(q, kc, vc, bt, kl)
    torch.cuda.synchronize()
    ref = pa.decode(q, kc, vc, bt, kl)
    err = (out.float() - ref.float()).abs().max().item()
    us = tm(lambda: pa.flashinfer_decode(q, kc, vc, bt, kl))
    print(f"decode B{b} L{L}: first call {time.time() - t0:.1f} s, max err {err:.3g}, {us:.1f} us", flush=True)
    del kc, vc

for T in (512, 4096):
    for causal in (True, False):
        t0 = time.time()
        q = torch.randn(T, hq, d, device=dev, dtype=dt)
        k = torch.randn(T, hkv, d, device=dev, dtype=dt); v = torch.randn_like(k)
        cu = torch.tensor([0, T], device=dev, dtype=torch.int32)
        out = pa.flashinfer_prefill(q, k, v, cu, causal=causal)
        torch.cuda.synchronize()
        ref = pa.prefill(q, k, v, cu, causal=causal)
        err = (out.float() - ref.float()).abs().max().item()
        us = tm(lambda: pa.flashinfer_prefill(q, k, v, cu, causal=causal))
        fl = 2 * 2 * T * T * hq * d / (2 if causal else 1)
        print(f"prefill T{T} causal={causal}: first call {time.time() - t0:.1f} s, max err {err:.3g}, {us:.1f} us, "
              f"{fl / us / 1e6:.0f} TFLOP/s", flush=True)
