"""Attention prefill at long contexts on CUDA: `braze.attention.prefill` beside torch SDPA with each
backend pinned and FlashInfer's single-sequence prefill (where installed), bf16, one sequence,
Hq 32 / Hkv 8, D 128, causal and not. Issue 16 asks for "never behind the best torch SDPA backend at
T 1024-16384"; `braze bench`'s prefill shapes stop at T 4096 because its float64 oracle of a T 16384
prefill would not fit the GPU, so here every output is compared with torch's flash backend (bf16).

    python scripts/cuda_prefill_long.py [T ...]        (default 1024 2048 4096 8192 16384)

GPU time by CUDA events: the median of 5 timings of 10 back-to-back calls, after two warm-up calls.
TFLOP/s = 4 T^2 Hq D (halved when causal) / time. The memory-efficient backend has no GQA form, so it
gets K / V with their heads repeated (made outside the timed calls).
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import braze

HQ, HKV, D = 32, 8, 128


def gpu_us(fn, reps=10, rounds=5):
    fn()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / reps)
    return sorted(times)[len(times) // 2]


def impls(q, k, v, cu, causal):
    """(name, fn) pairs, each returning out[T, Hq, D]."""
    out = torch.empty_like(q)
    yield "braze", lambda: braze.attention.prefill(q, k, v, cu, causal=causal, out=out)
    qt, kt, vt = (x.transpose(0, 1)[None] for x in (q, k, v))
    kr, vr = (x.repeat_interleave(HQ // HKV, dim=1) for x in (kt, vt))
    for name, backend, gqa in (("torch flash", SDPBackend.FLASH_ATTENTION, True),
                               ("torch cudnn", SDPBackend.CUDNN_ATTENTION, True),
                               ("torch efficient (K/V repeated)", SDPBackend.EFFICIENT_ATTENTION, False)):
        def run(backend=backend, gqa=gqa):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(qt, kt if gqa else kr, vt if gqa else vr, is_causal=causal,
                                                   enable_gqa=gqa)
            return o[0].transpose(0, 1)
        yield name, run
    try:
        import flashinfer
    except ImportError:
        return
    yield "flashinfer", lambda: flashinfer.single_prefill_with_kv_cache(q, k, v, causal=causal)


def main():
    lengths = [int(t) for t in sys.argv[1:]] or [1024, 2048, 4096, 8192, 16384]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, braze {braze.__version__}; bf16, B1, "
          f"Hq {HQ} / Hkv {HKV}, D {D}")
    print(f"{'T':>6} {'causal':>6} {'impl':<32} {'time':>10} {'TFLOP/s':>8} {'rel diff':>9}  braze / best torch")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for t in lengths:
        q = torch.randn(t, HQ, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        k = torch.randn(t, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        v = torch.randn(t, HKV, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        cu = torch.tensor([0, t], device="cuda", dtype=torch.int32)
        for causal in (True, False):
            flops = 4.0 * t * t * HQ * D / (2 if causal else 1)
            ref, rows = None, []
            for name, fn in impls(q, k, v, cu, causal):
                try:
                    o = fn().float()
                    us = gpu_us(fn)
                except RuntimeError as e:  # a backend that refuses the shape
                    print(f"{t:>6} {str(causal):>6} {name:<32} skipped: {str(e).splitlines()[0][:60]}")
                    continue
                if name == "torch flash":
                    ref = o
                rows.append((name, us, o))
            best_torch = min((us for n, us, _ in rows if n.startswith("torch")), default=float("nan"))
            for name, us, o in rows:
                diff = float((o - ref).abs().max() / ref.abs().max()) if ref is not None else float("nan")
                ratio = f"  {best_torch / us:.2f}x" if name == "braze" else ""
                print(f"{t:>6} {str(causal):>6} {name:<32} {us:>8.1f}us {flops / us / 1e6:>8.0f} {diff:>9.2g}{ratio}")
            del rows, ref
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
