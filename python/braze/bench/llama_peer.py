"""llama.cpp's side of ``braze bench --e2e``, run in a process of its own.

llama-cpp-python's CUDA build crashes when it loads a model into a process
that imported torch first (seen on the H200: two CUDA runtimes / cuBLAS builds
in one process), and braze's CUDA path uses torch tensors. So the parent
writes the request as JSON, this module runs llama.cpp and writes the logits
and step times to an ``.npz``. It imports llama_cpp, then numpy, and nothing
else: with numpy imported first, the CUDA build segfaulted loading a model
on the H200 host (numpy 2.5 with its OpenBLAS; 2026-12-05).

    python -m braze.bench.llama_peer REQUEST.json RESULT.npz
"""
from __future__ import annotations

import json
import sys
import time

import llama_cpp  # before numpy (see above)
import numpy as np


def run(path, device, threads, prompt, tokens, warmup_steps):
    """Evaluates ``prompt`` then ``tokens[:-1]`` one by one (teacher forcing) after a
    warm-up on the same prompt; returns the last position's logits of each
    evaluation [len(tokens), V] and its wall time (logits copied out)."""
    from llama_cpp import Llama

    n = max(len(prompt), 8)
    llm = Llama(model_path=path, n_ctx=len(prompt) + len(tokens) + 8, n_batch=n, n_ubatch=n, n_threads=threads,
                n_threads_batch=threads, n_gpu_layers=-1 if device == "cuda" else 0,
                logits_all=False,  # the last position's logits only, as braze computes them
                verbose=False)
    vocab = llm.n_vocab()
    llm.eval(prompt)  # its first evaluation of a new batch size builds graphs (hundreds of ms)
    for t in tokens[:warmup_steps]:
        llm.eval([t])
    llm.reset()
    logits, times = [], []
    for ids in [list(prompt)] + [[t] for t in tokens[:-1]]:
        t0 = time.perf_counter()
        llm.eval(ids)
        last = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        logits.append(np.ctypeslib.as_array(last, shape=(vocab,)).copy())
        times.append(time.perf_counter() - t0)
    return np.stack(logits), np.array(times)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        req = json.load(f)
    logits, times = run(req["path"], req["device"], req["threads"], req["prompt"], req["tokens"],
                        req["warmup_steps"])
    np.savez(argv[1], logits=logits, times=times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
