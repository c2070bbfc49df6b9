"""torch peers of the sampling family where torch has the op built in, and
the sample composition a torch user writes (topk or a sort, softmax,
multinomial); the others (masks, penalties) are measured through braze's
reference composition in torch, which sorts the vocabulary as torch users do."""
from __future__ import annotations


def _scaled(logits, temperature):
    """What a torch user writes: no division without a temperature."""
    if not hasattr(temperature, "float") and temperature == 1.0:
        return logits.float()
    t = temperature.float()[:, None] if hasattr(temperature, "float") else temperature
    return logits.float() / t


def softmax(logits, *, temperature=1.0):
    return _scaled(logits, temperature).softmax(-1)


def log_softmax(logits, *, temperature=1.0):
    return _scaled(logits, temperature).log_softmax(-1)


def logsumexp(logits, *, temperature=1.0):
    return _scaled(logits, temperature).logsumexp(-1)


def argmax(logits):
    return logits.argmax(-1).int()


def _rows(v, like):
    """A per-row parameter as a [B, 1] tensor, or the scalar itself."""
    return v.to(like.device)[:, None] if hasattr(v, "float") else v


def sample(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0, out=None):
    """topk (when top_k is on), softmax, the min-p and top-p cuts, multinomial.
    torch draws its own random numbers, so its tokens follow the same
    distribution as braze's but are not the same tokens: the bench reports no
    max_err for it (draws_own_tokens)."""
    import torch

    t = _rows(temperature, logits)
    greedy = (t == 0) if hasattr(t, "float") else torch.full((logits.shape[0], 1), t == 0, device=logits.device)
    z = _scaled(logits, torch.where(greedy[:, 0], 1.0, t[:, 0].float()) if hasattr(t, "float") else (temperature or 1.0))
    idx = None
    k = _rows(top_k, logits)
    kmax = int(k.max()) if hasattr(k, "float") else int(k)
    if 0 < kmax < z.shape[-1]:
        z, idx = torch.topk(z, kmax, dim=-1)
        if hasattr(k, "float"):  # rows with a smaller k (or none) mask past it
            pos = torch.arange(kmax, device=z.device)[None, :]
            z = torch.where((k > 0) & (pos >= k), float("-inf"), z)
    probs = z.softmax(-1)
    mp = _rows(min_p, logits)
    if hasattr(mp, "float") or mp > 0:
        probs = torch.where(probs >= mp * probs.amax(-1, keepdim=True), probs, 0)
    p = _rows(top_p, logits)
    if hasattr(p, "float") or p < 1:
        sp, si = probs.sort(-1, descending=True)
        drop = sp.cumsum(-1) - sp > p * sp.sum(-1, keepdim=True)
        probs = probs.scatter(-1, si, sp.masked_fill(drop, 0))
    g = torch.Generator(device=logits.device).manual_seed((seed + offset) % 2**63)
    tok = torch.multinomial(probs, 1, generator=g)
    tok = (idx.gather(-1, tok) if idx is not None else tok)[:, 0]
    tok = torch.where(greedy[:, 0], z.argmax(-1) if idx is None else idx[:, 0], tok)
    return tok.int()


sample.draws_own_tokens = True

torch_ops = {"softmax": softmax, "log_softmax": log_softmax, "logsumexp": logsumexp, "argmax": argmax,
             "sample": sample}
