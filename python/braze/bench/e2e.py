"""``braze bench --e2e MODEL.gguf``: a llama GGUF model's prefill and greedy decode,
run by braze (``braze.gguf_decode``) and, where ``llama-cpp-python`` is installed,
by llama.cpp on the same file, threads and backend.

What is timed (wall clock, each step's logits copied to the host, so a GPU's work
is finished; the same on both sides):
- prefill: one forward pass over the prompt (``prompt`` random token ids), its
  last position's logits;
- decode: ``decode`` single-token steps after it, each fed the previous step's
  greedy token. tokens/s = 1 / median step time, over every step of every round;
  the table also gives the range of the rounds' own rates.

The two sides alternate, ``rounds`` times (default 3), so that a neighbour's
load on a shared machine falls on both.

Before timing, each side runs the same prompt and 2 decode steps once: that
touches every weight page of the memory map, loads kernels and lets llama.cpp
build its graphs for these batch sizes (its first evaluation of a new size
takes hundreds of ms).

llama.cpp runs in a child process (``llama_peer``) and is fed braze's tokens
(teacher forcing), so its logits at every step
are comparable with braze's even where the two argmaxes part: the report gives
the largest ``max |a - b| / rms(b)`` over the steps and how many greedy tokens
agree. The two differ by design: both quantize the activations to int8 blocks on
the CPU (braze's default, ``braze.quant.int8_activations``), but not in the same
order of operations.
"""
from __future__ import annotations

import json
import os
import statistics
from typing import Optional

import numpy as np

from .. import _cpu, gguf_decode

WARMUP_PROMPT, WARMUP_STEPS = 4, 2  # the shortest run allowed; the warm-up's decode steps


def _rate(times):
    return 1.0 / statistics.median(times) if times else float("nan")


def llama_cpp_available() -> bool:
    """Installed (found, not imported: only the child process loads it)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def run_llama_cpp(path, device, threads, prompt, tokens):
    """llama.cpp on the same file in a child process (``llama_peer``: its CUDA build
    crashed on the H200 loading a model into a process that had imported torch), fed
    ``prompt`` then ``tokens[:-1]`` (braze's greedy choices); returns its logits per
    step [len(tokens), V] and the step times."""
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        req, res = os.path.join(d, "request.json"), os.path.join(d, "result.npz")
        with open(req, "w") as f:
            json.dump({"path": os.fspath(path), "device": device, "threads": threads, "prompt": list(prompt),
                       "tokens": list(tokens), "warmup_steps": WARMUP_STEPS}, f)
        # run as a file, never imported here or as ``-m braze.bench...``: the child imports
        # llama_cpp and numpy only, neither braze nor torch
        peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_peer.py")
        p = subprocess.run([sys.executable, peer, req, res], capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"llama.cpp's run failed (exit {p.returncode}): {(p.stderr or p.stdout)[-2000:]}")
        with np.load(res) as r:
            return r["logits"], list(r["times"])


def _agreement(ours, theirs, tokens):
    rel = max(float(np.abs(a - b).max() / np.sqrt(np.mean(b.astype(np.float64) ** 2))) for a, b in zip(ours, theirs))
    same = sum(int(np.argmax(b)) == t for b, t in zip(theirs, tokens))
    return rel, same


def _row(r, out):
    extra = (f"max |diff| {r['max_logit_err_rel_rms']:.2%} of rms, same greedy token {r['greedy_tokens_agree']}"
             if "max_logit_err_rel_rms" in r else "")
    spread = f"{min(r['decode_tok_s_rounds']):.1f}-{max(r['decode_tok_s_rounds']):.1f}"
    out(f"{r['impl']:<10} {r['prefill_tok_s']:>14.1f} {r['decode_tok_s']:>13.2f} {1e3 / r['decode_tok_s']:>9.2f} "
        f"{spread:>13}  {extra}")


def _prompt(vocab, n, seed):
    """n token ids drawn past the special and byte tokens of a SentencePiece vocabulary
    (from 0 for a vocabulary too small to have them)."""
    lo = 259 if vocab > 2 * 259 else 0
    return [int(t) for t in np.random.default_rng(seed).integers(lo, vocab, n)]




def _summary(impl, rounds, prompt_tokens):
    """A row from the rounds' step times (each round: prefill, then the decode steps):
    prefill from the median round, decode from the median of every step of every round."""
    prefill = statistics.median(r[0] for r in rounds)
    steps = [t for r in rounds for t in r[1:]]
    per_round = [_rate(r[1:]) for r in rounds]
    return {"impl": impl, "prefill_tok_s": prompt_tokens / prefill, "decode_tok_s": _rate(steps),
            "decode_tok_s_rounds": per_round, "prefill_s": [r[0] for r in rounds],
            "decode_step_s": [list(r[1:]) for r in rounds]}


def run(path, *, backend="cpu", dtype=None, prompt_tokens=128, decode_tokens=32, threads=None, rounds=3,
        peers=None, json_path: Optional[str] = None, seed=0, out=print, cuda_graph=False):
    """Times braze (and llama.cpp where installed and not left out of ``peers``) on
    the GGUF file ``path``, ``rounds`` times each, alternating (a neighbour's load on
    a shared machine then falls on both); prints the table and returns its rows.
    ``threads`` holds for this call only. ``cuda_graph``: braze's decode steps replay a
    captured CUDA graph (``gguf_decode.generate(..., cuda_graph=True)``; cuda only)."""
    if not os.path.isfile(path):
        raise ValueError(f"--e2e: {path!r} is not a file")
    if prompt_tokens < WARMUP_PROMPT or decode_tokens < WARMUP_STEPS:
        raise ValueError(f"--prompt-tokens must be >= {WARMUP_PROMPT} and --decode-tokens >= {WARMUP_STEPS}")
    if rounds < 1:
        raise ValueError(f"--rounds must be >= 1, got {rounds}")
    if backend not in ("cpu", "cuda", "metal"):
        raise ValueError(f"--backend must be cpu, cuda or metal for --e2e, got {backend!r}")
    device = {"metal": "mps"}.get(backend, backend)
    dtype = dtype or {"cpu": "float32", "cuda": "bfloat16", "mps": "float16"}[device]
    if cuda_graph and device != "cuda":
        raise ValueError(f"--cuda-graph needs --backend cuda, got {backend!r}")
    if threads is not None and threads < 1:
        raise ValueError(f"--threads must be >= 1, got {threads}")
    before = _cpu.num_threads()
    if threads is not None:
        _cpu.set_num_threads(threads)  # for this run only: restored below
    try:
        return _run(path, backend, device, dtype, _cpu.num_threads(), prompt_tokens, decode_tokens, rounds, peers,
                    json_path, seed, out, cuda_graph)
    finally:
        if _cpu.num_threads() != before:
            _cpu.set_num_threads(before)


def _run(path, backend, device, dtype, threads, prompt_tokens, decode_tokens, rounds, peers, json_path, seed, out,
         cuda_graph):
    from .harness import commit, device_name

    model = gguf_decode.load_model(path, device=device, dtype=dtype)
    cfg = model.config
    prompt = _prompt(cfg.vocab, prompt_tokens, seed)
    gguf_decode.generate(model, prompt, WARMUP_STEPS, cuda_graph=cuda_graph)
    if peers is not None and "llama.cpp" not in peers:
        peer_note = "llama.cpp: left out by --peers"
    elif not llama_cpp_available():
        peer_note = "llama.cpp: not run (pip install llama-cpp-python to compare)"
    else:
        peer_note = None
    ours, theirs, logits, tokens, their_logits, failure = [], [], None, None, None, None
    for _ in range(rounds):
        times = []
        logits, tokens = gguf_decode.generate(model, prompt, decode_tokens + 1, timings=times, cuda_graph=cuda_graph)
        ours.append(times)
        if peer_note is None and failure is None:
            try:
                their_logits, lt = run_llama_cpp(path, device, threads, prompt, tokens)
                theirs.append(lt)
            except RuntimeError as e:  # braze's figures still print; the failure is raised after
                failure = e
    rows = [_summary("braze", ours, prompt_tokens)]
    if theirs:
        rel, same = _agreement(logits, their_logits, tokens)
        rows.append(dict(_summary("llama.cpp", theirs, prompt_tokens), max_logit_err_rel_rms=rel,
                         greedy_tokens_agree=f"{same}/{len(tokens)}"))
    out(f"{os.path.basename(path)}: {cfg.layers} layers, hidden {cfg.hidden}, FFN {cfg.ffn}, "
        f"{cfg.heads}/{cfg.kv_heads} heads, vocab {cfg.vocab}")
    out(f"{backend} ({device_name(backend)}), {dtype} activations; prompt {prompt_tokens} tokens, "
        f"{decode_tokens} decode steps, {rounds} rounds" + (", braze's decode steps as one CUDA graph" if cuda_graph else ""))
    out(f"{'impl':<10} {'prefill tok/s':>14} {'decode tok/s':>13} {'ms/token':>9} {'rounds':>13}  logits beside braze's")
    for r in rows:
        _row(r, out)
    if peer_note:
        out(peer_note)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"model": os.path.abspath(path), "config": cfg.__dict__, "backend": backend, "dtype": dtype,
                       "threads": threads, "prompt_tokens": prompt_tokens, "decode_tokens": decode_tokens,
                       "rounds": rounds, "cuda_graph": cuda_graph, "device": device_name(backend), "commit": commit(),
                       "rows": rows},
                      f, indent=1)
    if failure is not None:
        raise failure
    return rows
