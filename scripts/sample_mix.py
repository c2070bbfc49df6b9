"""CPU timings of sample with each filter mix beside softmax and argmax on the
same logits (braze bench times only an op's first case). Medians over repeats,
as braze bench takes them; run it several times, the machine is shared.

    python scripts/sample_mix.py [rows] [cols]
"""
import sys

import numpy as np

import braze
from braze.bench.timing import cpu_time
from braze.specs._inputs import rows as normal_rows

MIXES = [{}, {"top_k": 50}, {"top_p": 0.9}, {"min_p": 0.05}, {"top_k": 50, "top_p": 0.9, "min_p": 0.05},
         {"temperature": 0.8}, {"temperature": 0.8, "top_k": 50, "top_p": 0.9, "min_p": 0.05}]


def torch_sample(x, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0):
    """What a torch user writes: topk (or a sort for top-p alone), softmax, multinomial."""
    import torch

    z = x / temperature if temperature != 1.0 else x
    idx = None
    if top_k:
        z, idx = torch.topk(z, top_k, dim=-1)
    probs = z.softmax(-1)
    if min_p > 0:
        probs = torch.where(probs >= min_p * probs.amax(-1, keepdim=True), probs, 0)
    if top_p < 1:
        sp, si = probs.sort(-1, descending=True)
        drop = sp.cumsum(-1) - sp > top_p * sp.sum(-1, keepdim=True)
        probs = probs.scatter(-1, si, sp.masked_fill(drop, 0))
    tok = torch.multinomial(probs, 1)
    return (idx.gather(-1, tok) if idx is not None else tok)[:, 0]


def main():
    b, v = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (64, 128256)
    x = normal_rows((b, v), "float32", np.random.default_rng(0), scale=2.0)
    S = braze.sampling
    y = np.empty_like(x)
    out = lambda name, t: print(f"{name:<44} {t * 1e3:8.3f} ms")  # noqa: E731
    out("braze softmax", cpu_time(lambda s: S.softmax(s, out=y), [x]))
    out("braze argmax", cpu_time(lambda s: S.argmax(s), [x]))
    out("numpy argmax", cpu_time(lambda s: np.argmax(s, -1), [x]))
    for kw in MIXES:
        out(f"braze sample {kw}", cpu_time(lambda s, kw=kw: S.sample(s, seed=1, **kw), [x]))
    try:
        import torch
    except ImportError:
        return
    xt = torch.from_numpy(x)
    for kw in MIXES:
        out(f"torch sample {kw}", cpu_time(lambda s, kw=kw: torch_sample(s, **kw), [xt]))


if __name__ == "__main__":
    main()
