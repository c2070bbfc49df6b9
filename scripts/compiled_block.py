"""A Llama-style decoder block built twice, from braze's ops and from torch's
own, each under torch.compile (and captured in a CUDA graph), timed per call.

    python scripts/compiled_block.py                      # H200 shapes, CUDA, bf16
    python scripts/compiled_block.py --device cpu --small # a quick check here

The block: RMSNorm, QKV projection, RoPE on q and k, attention, output
projection, residual add + RMSNorm, gate/up projection, SiLU-and-mul, down
projection and residual. The projections are torch matmuls in both (they are
the same cuBLAS calls); the rest is braze (rms_norm, rope_qk, append_kv +
paged decode or ragged prefill, add_rms_norm, silu_and_mul) or torch
(F.rms_norm, rotate-half RoPE, a contiguous KV cache + SDPA with GQA,
F.silu(g) * u). Decode: B sequences with L cached tokens each, one new token;
prefill: B sequences of T tokens, causal. Both blocks' outputs are compared
before anything is timed.
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F

import braze
import braze.integrations.torch  # noqa: F401  (registers torch.ops.braze for torch.compile)


def weights(hidden, heads, kv_heads, d, inter, dtype, device, seed=0):
    g = torch.Generator().manual_seed(seed)

    def w(*shape, s=0.02):
        return (torch.randn(*shape, generator=g) * s).to(device, dtype)

    return dict(w_in=1 + w(hidden, s=0.1), w_post=1 + w(hidden, s=0.1),
                wqkv=w((heads + 2 * kv_heads) * d, hidden), wo=w(hidden, heads * d),
                wgu=w(2 * inter, hidden), wd=w(hidden, inter))


def split_qkv(qkv, heads, kv_heads, d):
    t = qkv.shape[0]
    qkv = qkv.view(t, heads + 2 * kv_heads, d)
    return qkv[:, :heads], qkv[:, heads:heads + kv_heads], qkv[:, heads + kv_heads:]


def mlp_braze(a, x, p):
    h2, res = braze.norm.add_rms_norm(a, x, p["w_post"], eps=1e-5)
    return braze.ops.silu_and_mul(h2 @ p["wgu"].t()) @ p["wd"].t() + res


def mlp_torch(a, x, p):
    res = a + x
    h2 = F.rms_norm(res, (res.shape[-1],), p["w_post"], eps=1e-5)
    g, u = (h2 @ p["wgu"].t()).chunk(2, dim=-1)
    return (F.silu(g) * u) @ p["wd"].t() + res


def rope_torch(t, pos, base=10000.0):
    """Rotate-half RoPE of t [tokens, heads, d] at positions pos [tokens], in f32."""
    d = t.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, d, 2, device=t.device, dtype=torch.float32) / d)
    ang = pos.float()[:, None] * inv[None]
    cos, sin = ang.cos()[:, None], ang.sin()[:, None]
    t1, t2 = t.float().chunk(2, dim=-1)
    return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], dim=-1).to(t.dtype)


def decode_braze(x, pos, kc, vc, table, kv_lens, slots, p, dims):
    heads, kv_heads, d = dims
    h = braze.norm.rms_norm(x, p["w_in"], eps=1e-5)
    q, k, v = split_qkv(h @ p["wqkv"].t(), heads, kv_heads, d)
    q, k = braze.rope.rope_qk(q, k, pos)
    braze.attention.append_kv(k, v, kc, vc, slots)
    o = braze.attention.decode(q, kc, vc, table, kv_lens)
    return mlp_braze(o.reshape(x.shape[0], -1) @ p["wo"].t(), x, p)


def decode_torch(x, pos, kc, vc, p, dims):
    """kc, vc: [B, Hkv, Lmax, d]; the new token goes to position pos[b] of sequence b."""
    heads, kv_heads, d = dims
    b = x.shape[0]
    h = F.rms_norm(x, (x.shape[-1],), p["w_in"], eps=1e-5)
    q, k, v = split_qkv(h @ p["wqkv"].t(), heads, kv_heads, d)
    q, k = rope_torch(q, pos), rope_torch(k, pos)
    rows = torch.arange(b, device=x.device)
    kc[rows, :, pos] = k
    vc[rows, :, pos] = v
    n = kc.shape[2]  # every sequence is full to Lmax (the script's shapes)
    o = F.scaled_dot_product_attention(q[:, :, None], kc[:, :, :n], vc[:, :, :n], enable_gqa=True)
    return mlp_torch(o.reshape(b, -1) @ p["wo"].t(), x, p)


def prefill_braze(x, pos, cu, p, dims):
    heads, kv_heads, d = dims
    h = braze.norm.rms_norm(x, p["w_in"], eps=1e-5)
    q, k, v = split_qkv(h @ p["wqkv"].t(), heads, kv_heads, d)
    q, k = braze.rope.rope_qk(q, k, pos)
    o = braze.attention.prefill(q, k, v, cu)
    return mlp_braze(o.reshape(x.shape[0], -1) @ p["wo"].t(), x, p)


def prefill_torch(x, pos, p, dims, b):
    heads, kv_heads, d = dims
    t = x.shape[0] // b
    h = F.rms_norm(x, (x.shape[-1],), p["w_in"], eps=1e-5)
    q, k, v = split_qkv(h @ p["wqkv"].t(), heads, kv_heads, d)
    q, k = rope_torch(q, pos), rope_torch(k, pos)
    q, k, v = (z.view(b, t, -1, d).transpose(1, 2) for z in (q, k, v))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return mlp_torch(o.transpose(1, 2).reshape(b * t, -1) @ p["wo"].t(), x, p)


def timed(fn, device, iters, repeats=5):
    """Median over repeats of the mean time of iters calls, in microseconds."""
    for _ in range(3):
        fn()
    res = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(iters):
                fn()
            b.record()
            b.synchronize()
            res.append(a.elapsed_time(b) * 1e3 / iters)
        else:
            import time
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            res.append((time.perf_counter() - t0) * 1e6 / iters)
    return statistics.median(res)


def graphed(fn, device):
    """fn captured in a CUDA graph (warmed up on a side stream); replay is the call."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def check(name, got, want, tol):
    err = (got.float() - want.float()).abs().max().item()
    scale = want.float().abs().max().item()
    ok = err <= tol * max(scale, 1.0)
    print(f"  {name}: max |braze - torch| {err:.3g} (output max {scale:.3g}) {'ok' if ok else 'MISMATCH'}")
    return ok


def run_decode(a, dims, p, dtype, device):
    heads, kv_heads, d = dims
    b, L, bs = a.batch, a.kv_len, 16
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(b, a.hidden, generator=g)).to(device, dtype)
    pos = torch.full((b,), L - 1, dtype=torch.int32, device=device)
    # torch's contiguous cache and braze's paged one hold the same past keys / values
    kt = (torch.randn(b, kv_heads, L, d, generator=g)).to(device, dtype)
    vt = (torch.randn(b, kv_heads, L, d, generator=g)).to(device, dtype)
    nblk = (L + bs - 1) // bs
    perm = torch.randperm(b * nblk, generator=g)
    table = perm.view(b, nblk).to(device, torch.int32)
    kc = torch.zeros(b * nblk, bs, kv_heads, d, dtype=dtype, device=device)
    vc = torch.zeros_like(kc)
    tok = torch.arange(L, device=device)
    for i in range(b):
        blk = table[i].long()[tok // bs]
        kc[blk, tok % bs] = kt[i].transpose(0, 1)
        vc[blk, tok % bs] = vt[i].transpose(0, 1)
    kv_lens = torch.full((b,), L, dtype=torch.int32, device=device)
    slots = (table[:, (L - 1) // bs].long() * bs + (L - 1) % bs).to(torch.int32)
    posl = pos.long()

    fb = lambda: decode_braze(x, pos, kc, vc, table, kv_lens, slots, p, dims)  # noqa: E731
    ft = lambda: decode_torch(x, posl, kt, vt, p, dims)  # noqa: E731
    return fb, ft, dict(kind="decode", batch=b, kv_len=L)


def run_prefill(a, dims, p, dtype, device):
    b, t = a.batch, a.tokens
    g = torch.Generator().manual_seed(2)
    x = torch.randn(b * t, a.hidden, generator=g).to(device, dtype)
    pos = torch.arange(t, dtype=torch.int32, device=device).repeat(b)
    cu = torch.arange(0, b * t + 1, t, dtype=torch.int32, device=device)
    posl = pos.long()
    fb = lambda: prefill_braze(x, pos, cu, p, dims)  # noqa: E731
    ft = lambda: prefill_torch(x, posl, p, dims, b)  # noqa: E731
    return fb, ft, dict(kind="prefill", batch=b, tokens=t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--small", action="store_true", help="a small block (hidden 256, 4/2 heads of 64)")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--cases", default="decode:1:4096,decode:64:4096,prefill:1:2048,prefill:4:512",
                    help="kind:batch:kv_len-or-tokens, comma separated")
    a = ap.parse_args(argv)
    device, dtype = a.device, getattr(torch, a.dtype)
    if a.small:
        a.hidden, dims, a.inter = 256, (4, 2, 64), 512
    else:
        a.hidden, dims, a.inter = 4096, (32, 8, 128), 14336
    p = weights(a.hidden, *dims, a.inter, dtype, device)
    rows, ok = [], True
    with torch.no_grad():
        for case in a.cases.split(","):
            kind, b, n = case.split(":")
            a.batch = int(b)
            if kind == "decode":
                a.kv_len = int(n)
                fb, ft, info = run_decode(a, dims, p, dtype, device)
            else:
                a.tokens = int(n)
                fb, ft, info = run_prefill(a, dims, p, dtype, device)
            print(f"{case}:")
            torch._dynamo.reset()
            cb = torch.compile(fb, fullgraph=True)
            ct = torch.compile(ft, fullgraph=True)
            tol = 2e-2 if dtype != torch.float32 else 1e-4
            ok &= check("eager", fb(), ft(), tol)
            ok &= check("compiled", cb(), ct(), tol)
            row = dict(info, device=torch.cuda.get_device_name() if device == "cuda" else "cpu", dtype=a.dtype)
            row["us"] = {"braze eager": timed(fb, device, a.iters), "torch eager": timed(ft, device, a.iters),
                         "braze compiled": timed(cb, device, a.iters), "torch compiled": timed(ct, device, a.iters)}
            if device == "cuda":
                gb, ob = graphed(cb, device)
                gt, ot = graphed(ct, device)
                gb.replay()
                gt.replay()
                ok &= check("compiled + CUDA graph", ob, ot, tol)
                ok &= check("graph replay = compiled call", ob, cb(), tol)
                row["us"]["braze compiled+graph"] = timed(gb.replay, device, a.iters)
                row["us"]["torch compiled+graph"] = timed(gt.replay, device, a.iters)
            for k, v in row["us"].items():
                print(f"    {k:24s} {v:10.1f} us")
            rows.append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
