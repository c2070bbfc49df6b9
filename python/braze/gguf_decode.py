"""Greedy decoding of a Llama-architecture GGUF model with braze ops only.

    python -m braze.gguf_decode MODEL.gguf --prompt 1,2,3 --tokens 16 [--device cpu|cuda|mps]
    python examples/gguf_decode.py ...        (the same, from a checkout)

The file is memory-mapped (``gguf.GGUFReader`` through ``braze.quant.load_gguf``)
and quantized weights stay quantized: every projection is ``braze.quant.matmul``
reading the packed GGUF blocks. The math of a step is braze's: embedding
(``ops.embedding``, or ``quant.dequantize`` of the gathered rows of a quantized
table), ``norm.rms_norm`` / ``norm.add_rms_norm``, ``rope.rope_qk``, the paged
KV cache (``attention.append_kv``, ``attention.prefill_paged``,
``attention.decode``), ``ops.silu_and_mul`` and ``sampling.argmax``. numpy /
torch only reshape, slice, index and allocate.

Devices: ``cpu`` runs on numpy arrays (the weights are views of the file's
memory map); ``cuda`` copies the weights into torch tensors on the GPU and
braze dispatches to its CUDA kernels by the arrays' device; ``mps`` (alias
``metal``) does the same with torch tensors on Apple's GPU, which braze routes
to its Metal kernels (wired, not run in this repository's CI: no Mac there).

Importable: :func:`load_model` and :func:`generate` (which returns every step's
logits and the greedy tokens) are what ``tests/test_gguf_decode.py`` and
``braze bench --e2e`` call. The walk-through is docs/example.md, including the
GGUF conventions read here (llama.cpp's).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import __version__, attention, norm, ops, quant, rope, sampling

ARCHITECTURE = "llama"
BLOCK_SIZE = 16  # tokens per page of the KV cache
LAYER_TENSORS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                 "ffn_down")


# ----------------------------------------------------------------------------- configuration

@dataclass(frozen=True)
class Config:
    """The hyper-parameters a decode step needs, read from the GGUF metadata."""

    vocab: int
    hidden: int
    layers: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    rotary_dim: int
    eps: float
    rope_base: float
    rope_scaling: Optional[dict]
    context: int


def _field(reader, path: str, key: str, default=None, required: bool = True):
    f = reader.fields.get(key)
    if f is None:
        if required:
            raise ValueError(f"{path}: metadata key {key!r} is missing")
        return default
    return f.contents()


def read_config(reader, path: str) -> Config:
    """The Config of an open ``gguf.GGUFReader``; ValueError naming the key for a
    file that is not of the llama architecture or lacks a key."""
    arch = _field(reader, path, "general.architecture")
    if arch != ARCHITECTURE:
        raise ValueError(f"{path}: general.architecture is {arch!r}; this example runs {ARCHITECTURE!r} files only")
    p = ARCHITECTURE + "."
    hidden = int(_field(reader, path, p + "embedding_length"))
    heads = int(_field(reader, path, p + "attention.head_count"))
    kv_heads = int(_field(reader, path, p + "attention.head_count_kv", default=heads, required=False))
    if heads <= 0 or kv_heads <= 0 or heads % kv_heads:
        raise ValueError(f"{path}: {p}attention.head_count ({heads}) must be a positive multiple of "
                         f"{p}attention.head_count_kv ({kv_heads})")
    head_dim = int(_field(reader, path, p + "attention.key_length", default=hidden // heads, required=False))
    vdim = int(_field(reader, path, p + "attention.value_length", default=head_dim, required=False))
    if vdim != head_dim:
        raise ValueError(f"{path}: {p}attention.value_length ({vdim}) differs from key_length ({head_dim})")
    scaling = None
    kind = _field(reader, path, p + "rope.scaling.type", default="none", required=False)
    if kind == "linear":
        scaling = {"type": "linear", "factor": float(_field(reader, path, p + "rope.scaling.factor"))}
    elif kind != "none":
        raise ValueError(f"{path}: {p}rope.scaling.type {kind!r} is not read by this example (none or linear)")
    tokens = _field(reader, path, "tokenizer.ggml.tokens", default=None, required=False)
    return Config(
        vocab=len(tokens) if tokens is not None else 0,  # 0: taken from token_embd.weight
        hidden=hidden,
        layers=int(_field(reader, path, p + "block_count")),
        ffn=int(_field(reader, path, p + "feed_forward_length")),
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        rotary_dim=int(_field(reader, path, p + "rope.dimension_count", default=head_dim, required=False)),
        eps=float(_field(reader, path, p + "attention.layer_norm_rms_epsilon")),
        rope_base=float(_field(reader, path, p + "rope.freq_base", default=10000.0, required=False)),
        rope_scaling=scaling,
        context=int(_field(reader, path, p + "context_length")),
    )


# ----------------------------------------------------------------------------- arrays on a device

class Placement:
    """Where the arrays live: numpy on the CPU, torch on cuda / mps. Only glue
    (allocation, copies to the device, dtype casts) goes through here."""

    def __init__(self, device: str = "cpu", dtype: str = "float32"):
        if dtype not in ("float32", "float16", "bfloat16"):
            raise ValueError(f"dtype must be float32, float16 or bfloat16, got {dtype!r}")
        self.device = {"metal": "mps"}.get(device, device)
        if self.device not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device must be cpu, cuda or mps (metal), got {device!r}")
        self.dtype_name = dtype
        self.torch = None
        if self.device == "cpu":
            if dtype == "bfloat16":
                from ._arrays import BF16  # ml_dtypes.bfloat16, as braze takes it
                self.dtype = BF16
            else:
                self.dtype = np.dtype(dtype)
        else:
            import torch

            if self.device == "cuda" and not torch.cuda.is_available():
                raise RuntimeError("--device cuda: torch sees no CUDA GPU")
            if self.device == "mps" and not torch.backends.mps.is_available():
                raise RuntimeError("--device mps: torch sees no Metal (MPS) device")
            self.torch = torch
            self.dtype = getattr(torch, dtype)

    def put(self, a, dtype=None):
        """A numpy array (or memmap view) as this placement's array, cast to dtype if given."""
        if self.torch is None:
            return a if dtype is None or a.dtype == dtype else a.astype(dtype)
        with warnings.catch_warnings():  # the memory map is read-only; the copy to the device is not
            warnings.simplefilter("ignore", UserWarning)
            if str(a.dtype) == "bfloat16":  # ml_dtypes: torch reads its bits
                t = self.torch.from_numpy(np.ascontiguousarray(a).view(np.uint16)).view(self.torch.bfloat16)
            else:
                t = self.torch.from_numpy(np.ascontiguousarray(a))
            return t.to(device=self.device, dtype=dtype)

    def float(self, a):
        """A float weight (norm gains, embedding tables) in the activation dtype."""
        return self.put(a, self.dtype)

    def concat(self, arrays):
        """Arrays of this placement joined along axis 0 (a new array)."""
        if self.torch is None:
            return np.concatenate(arrays)
        return self.torch.cat(arrays)

    def zeros(self, shape):
        if self.torch is None:
            return np.zeros(shape, self.dtype)
        return self.torch.zeros(shape, dtype=self.dtype, device=self.device)

    def empty(self, shape):
        if self.torch is None:
            return np.empty(shape, self.dtype)
        return self.torch.empty(shape, dtype=self.dtype, device=self.device)

    def int32(self, values):
        a = np.asarray(values, np.int32)
        return a if self.torch is None else self.torch.from_numpy(a).to(self.device)

    def host(self, a):
        """A float32 numpy copy (the logits handed back to the caller)."""
        if self.torch is None:
            return np.array(a, np.float32)
        return a.detach().to("cpu", self.torch.float32).numpy()


# ----------------------------------------------------------------------------- weights

@dataclass
class Layer:
    attn_norm: object
    attn_q: object
    attn_k: object
    attn_v: object
    attn_output: object
    ffn_norm: object
    ffn_gate: object
    ffn_up: object
    ffn_down: object
    # The fused projections: ``[(weight, first output column), ...]`` covering
    # ``[q | k | v]`` and ``[gate | up]``; neighbours of one format share one matrix
    # (their rows concatenated), so a step runs fewer, larger matmuls.
    qkv: list = None
    gate_up: list = None


@dataclass
class Model:
    config: Config
    place: Placement
    token_embd: object  # QuantizedTensor [V, H] or float [V, H]
    layers: List[Layer]
    output_norm: object
    output: object  # QuantizedTensor [V, H] or float [V, H] (token_embd when the file ties them)
    inv_freq: object  # float32 [rotary_dim / 2]
    tokens: Optional[List[str]]


def _matrix(place: Placement, t, name: str, shape: Tuple[int, int], path: str):
    """A [N, K] weight on the placement: a QuantizedTensor's arrays moved as they are,
    a float matrix cast to the activation dtype (quant.matmul wants x's dtype)."""
    got = tuple(int(s) for s in t.shape)
    if got != shape:
        raise ValueError(f"{path}: tensor {name!r} has shape {list(got)} (numpy order [out, in]), want {list(shape)}")
    if isinstance(t, quant.QuantizedTensor):
        if place.torch is None:
            return t  # a view of the memory map
        return quant.QuantizedTensor(t.format, t.shape, place.put(t.data))
    return place.float(t)


def _vector(place: Placement, t, name: str, n: int, path: str):
    if isinstance(t, quant.QuantizedTensor) or tuple(int(s) for s in t.shape) != (n,):
        raise ValueError(f"{path}: tensor {name!r} must be a float vector of {n} elements, "
                         f"got {t!r} of shape {list(t.shape)}")
    return place.float(t)


def _fusable(a, b) -> bool:
    """Whether two [N, K] weights can be one matrix of their rows: float arrays of one
    dtype, or GGUF block formats (a row is whole blocks, no side arrays) of one format."""
    if isinstance(a, quant.QuantizedTensor) != isinstance(b, quant.QuantizedTensor):
        return False
    if isinstance(a, quant.QuantizedTensor):
        return a.format == b.format and a.scales is None and b.scales is None and a.shape[1] == b.shape[1]
    return a.dtype == b.dtype and a.shape[1] == b.shape[1]


def _fuse(place: Placement, weights, fuse: bool = True) -> list:
    """``[(weight, first output column)]``: runs of fusable neighbours concatenated by
    rows (with ``fuse`` False, every weight on its own)."""
    runs, col = [], 0
    for w in weights:
        if fuse and runs and _fusable(runs[-1][-1], w):
            runs[-1].append(w)
        else:
            runs.append([w])
    out = []
    for run in runs:
        if len(run) == 1:
            w = run[0]
        elif isinstance(run[0], quant.QuantizedTensor):
            data = place.concat([r.data for r in run])
            w = quant.QuantizedTensor(run[0].format, (sum(r.shape[0] for r in run), run[0].shape[1]), data)
        else:
            w = place.concat(run)
        out.append((w, col))
        col += sum(int(r.shape[0]) for r in run)
    return out


def load_model(path: "str | os.PathLike", *, device: str = "cpu", dtype: str = "float32",
               fuse: bool = True) -> Model:
    """Reads a llama-architecture GGUF file: its metadata and every tensor (memory
    mapped; quantized ones stay in their GGUF blocks). ``device`` cpu (numpy), cuda
    or mps (torch); ``dtype`` of the activations and KV cache. ``fuse``: q / k / v and
    gate / up of one format become one matrix each (a copy of those weights out of
    the memory map); False keeps every projection a view of the file."""
    from gguf import GGUFReader

    path = os.fspath(path)
    place = Placement(device, dtype)
    reader = GGUFReader(path, "r")
    cfg = read_config(reader, path)
    tensors = quant.load_gguf(path)

    def get(name):
        if name not in tensors:
            raise ValueError(f"{path}: tensor {name!r} is missing")
        return tensors[name]

    emb = get("token_embd.weight")
    vocab = int(emb.shape[0])
    if cfg.vocab and cfg.vocab != vocab:
        raise ValueError(f"{path}: tokenizer.ggml.tokens lists {cfg.vocab} tokens, token_embd.weight has {vocab} rows")
    cfg = Config(**{**cfg.__dict__, "vocab": vocab})
    h, q_rows, kv_rows = cfg.hidden, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    shapes = {"attn_q": (q_rows, h), "attn_k": (kv_rows, h), "attn_v": (kv_rows, h), "attn_output": (h, q_rows),
              "ffn_gate": (cfg.ffn, h), "ffn_up": (cfg.ffn, h), "ffn_down": (h, cfg.ffn)}
    layers = []
    for i in range(cfg.layers):
        w = {}
        for part in LAYER_TENSORS:
            name = f"blk.{i}.{part}.weight"
            if part.endswith("_norm"):
                w[part] = _vector(place, get(name), name, h, path)
            else:
                w[part] = _matrix(place, get(name), name, shapes[part], path)
        layer = Layer(**w)
        layer.qkv = _fuse(place, [layer.attn_q, layer.attn_k, layer.attn_v], fuse)
        layer.gate_up = _fuse(place, [layer.ffn_gate, layer.ffn_up], fuse)
        layers.append(layer)
    token_embd = _matrix(place, emb, "token_embd.weight", (vocab, h), path)
    out_t = tensors.get("output.weight")  # absent: tied to the embedding (llama.cpp's rule)
    output = token_embd if out_t is None else _matrix(place, out_t, "output.weight", (vocab, h), path)

    if cfg.rotary_dim % 2 or not 0 < cfg.rotary_dim <= cfg.head_dim:
        raise ValueError(f"{path}: llama.rope.dimension_count {cfg.rotary_dim} must be even and <= {cfg.head_dim}")
    inv_freq, _ = rope.frequencies(cfg.rotary_dim, base=cfg.rope_base, scaling=cfg.rope_scaling)
    if "rope_freqs.weight" in tensors:  # per-pair divisors of the angle (Llama 3.1-style files)
        factors = np.asarray(tensors["rope_freqs.weight"], np.float32)
        if factors.shape != (cfg.rotary_dim // 2,):
            raise ValueError(f"{path}: rope_freqs.weight has shape {list(factors.shape)}, "
                             f"want [{cfg.rotary_dim // 2}]")
        inv_freq = (inv_freq / factors).astype(np.float32)
    token_strings = _field(reader, path, "tokenizer.ggml.tokens", required=False)
    return Model(config=cfg, place=place, token_embd=token_embd, layers=layers,
                 output_norm=_vector(place, get("output_norm.weight"), "output_norm.weight", h, path),
                 output=output, inv_freq=place.put(np.ascontiguousarray(inv_freq, np.float32)),
                 tokens=token_strings)


# ----------------------------------------------------------------------------- KV cache

class PagedKVCache:
    """One sequence's paged cache: per layer ``k``, ``v`` ``[blocks, BLOCK_SIZE, Hkv, D]``.
    The sequence owns blocks 0..blocks-1 in order, so token p sits in slot p."""

    def __init__(self, model: Model, capacity: int):
        cfg, place = model.config, model.place
        self.blocks = max(1, math.ceil(capacity / BLOCK_SIZE))
        self.capacity = self.blocks * BLOCK_SIZE
        shape = (self.blocks, BLOCK_SIZE, cfg.kv_heads, cfg.head_dim)
        self.k = [place.zeros(shape) for _ in range(cfg.layers)]
        self.v = [place.zeros(shape) for _ in range(cfg.layers)]
        self.block_table = place.int32(np.arange(self.blocks)[None, :])  # [1, blocks]
        self.length = 0  # tokens written


# ----------------------------------------------------------------------------- the step

def embed(model: Model, ids):
    """``[T]`` ids -> ``[T, H]`` rows of the embedding table in the activation dtype."""
    t, place = model.token_embd, model.place
    if isinstance(t, quant.QuantizedTensor):
        # a quantized table: gather the ids' packed rows (bytes), then braze decodes them
        rows = t.data[ids.astype(np.int64) if place.torch is None else ids.long()]
        return quant.dequantize(quant.QuantizedTensor(t.format, (int(ids.shape[0]), t.shape[1]), rows),
                                dtype=place.dtype_name)
    return ops.embedding(ids, t)


def attention_block(model: Model, layer: Layer, index: int, y, positions, cache: PagedKVCache, lens):
    """Self-attention of the T new tokens (normed input ``y[T, H]``) at ``positions``,
    their keys and values appended to the cache; returns ``[T, H]`` (before the residual).
    ``lens``: ``(kv_lens, cu_seqlens)`` on the device, the same for every layer
    (``cu_seqlens`` None for one token)."""
    cfg = model.config
    n = int(y.shape[0])
    qd, kd = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    qkv = _project(model, y, layer.qkv, qd + 2 * kd)  # [T, q | k | v]
    q = qkv[:, :qd].reshape(n, cfg.heads, cfg.head_dim)  # views: rows strided by the row of qkv
    k = qkv[:, qd:qd + kd].reshape(n, cfg.kv_heads, cfg.head_dim)
    v = qkv[:, qd + kd:].reshape(n, cfg.kv_heads, cfg.head_dim)
    # GGUF's llama rows are permuted for llama.cpp's rope: consecutive pairs (2i, 2i + 1)
    rope.rope_qk(q, k, positions, inv_freq=model.inv_freq, rotary_dim=cfg.rotary_dim, interleaved=True,
                 q_out=q, k_out=k)
    attention.append_kv(k, v, cache.k[index], cache.v[index], positions)  # slot = position
    kv_lens, cu = lens
    if n == 1:
        o = attention.decode(q, cache.k[index], cache.v[index], cache.block_table, kv_lens)
    else:
        o = attention.prefill_paged(q, cache.k[index], cache.v[index], cache.block_table, cu, kv_lens)
    return quant.matmul(o.reshape(n, cfg.heads * cfg.head_dim), layer.attn_output)


def mlp_block(model: Model, layer: Layer, y):
    """The gated MLP ``down(silu(gate y) * up y)`` of ``y[T, H]``."""
    gate_up = _project(model, y, layer.gate_up, 2 * model.config.ffn)  # [gate | up], silu_and_mul's layout
    return quant.matmul(ops.silu_and_mul(gate_up), layer.ffn_down)


def _project(model: Model, y, parts, width: int):
    """``y[T, H]`` times the fused projections ``parts`` side by side: ``[T, width]``,
    each matmul writing its columns of one buffer (``out=`` takes the strided slice)."""
    if len(parts) == 1:
        return quant.matmul(y, parts[0][0])
    out = model.place.empty((int(y.shape[0]), width))
    for w, col in parts:
        quant.matmul(y, w, out=out[:, col:col + int(w.shape[0])])
    return out


def forward(model: Model, ids, cache: PagedKVCache):
    """Runs ``ids[T]`` (int32, on the device) after the cache's tokens; returns the
    logits ``[1, V]`` of the last one (activation dtype) and advances the cache."""
    n = int(ids.shape[0])
    if cache.length + n > cache.capacity:
        raise ValueError(f"the cache holds {cache.capacity} tokens; {cache.length} + {n} do not fit")
    positions = model.place.int32(np.arange(cache.length, cache.length + n))
    # the cached length after this step, copied to the device once (not once a layer:
    # each host-to-device copy of a torch tensor waits for the GPU's queue)
    lens = (model.place.int32([cache.length + n]), model.place.int32([0, n]) if n > 1 else None)
    logits = forward_at(model, ids, positions, lens, cache)
    cache.length += n
    return logits


def forward_at(model: Model, ids, positions, lens, cache: PagedKVCache):
    """The math of :func:`forward`, with the positions ``[T]`` and ``lens``
    (``(kv_lens [1], cu_seqlens [2] or None)``) given as device arrays; reads and
    writes the cache's pages, not its ``length``. Nothing in it reads a device value
    on the host, so on CUDA it can be captured in a graph (:class:`CudaGraphStep`)."""
    cfg = model.config
    n = int(ids.shape[0])
    h = embed(model, ids)  # the residual stream [T, H]
    y = norm.rms_norm(h, model.layers[0].attn_norm, eps=cfg.eps)
    for i, layer in enumerate(model.layers):
        a = attention_block(model, layer, i, y, positions, cache, lens)
        y, h = norm.add_rms_norm(a, h, layer.ffn_norm, eps=cfg.eps, residual_out=h)
        m = mlp_block(model, layer, y)
        if i + 1 < len(model.layers):
            y, h = norm.add_rms_norm(m, h, model.layers[i + 1].attn_norm, eps=cfg.eps, residual_out=h)
        else:  # only the last token's logits are wanted
            y, _ = norm.add_rms_norm(m[n - 1:], h[n - 1:], model.output_norm, eps=cfg.eps)
    return quant.matmul(y, model.output)


class CudaGraphStep:
    """One decode step (T = 1) of ``model`` over ``cache``, captured once in a CUDA
    graph (torch's) and replayed: a step is one graph launch where the eager step is
    about 190 kernel launches issued from Python. The token id, its position and the
    cached length live in device buffers that each call updates (three small
    device-side writes, no host synchronization) before the replay; the logits come
    back in the same static ``[1, V]`` tensor every step (read them before the next
    call). Capture runs the step once first (on a side stream, as torch asks), which
    writes the K / V of the current position: the replay writes the same values."""

    def __init__(self, model: Model, cache: PagedKVCache, ids):
        torch = model.place.torch
        if torch is None or model.place.device != "cuda":
            raise ValueError("cuda_graph: a CUDA graph needs the model on device cuda")
        self.model, self.cache = model, cache
        p = cache.length
        self.ids = ids.clone()
        self.positions = model.place.int32([p])
        self.lens = (model.place.int32([p + 1]), None)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            forward_at(model, self.ids, self.positions, self.lens, cache)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = forward_at(model, self.ids, self.positions, self.lens, cache)

    def __call__(self, ids):
        """The logits ``[1, V]`` after feeding ``ids[1]`` (int32, on the GPU) at the
        cache's next position; advances the cache."""
        cache = self.cache
        if cache.length + 1 > cache.capacity:
            raise ValueError(f"the cache holds {cache.capacity} tokens; {cache.length} + 1 do not fit")
        self.ids.copy_(ids)
        self.positions.fill_(cache.length)
        self.lens[0].fill_(cache.length + 1)
        self.graph.replay()
        cache.length += 1
        return self.logits


def generate(model, prompt: Sequence[int], n_tokens: int, *, device: str = "cpu",
             dtype: str = "float32", timings: Optional[List[float]] = None,
             cuda_graph: bool = False) -> Tuple[np.ndarray, List[int]]:
    """Prefills ``prompt`` (token ids) and decodes greedily: returns the logits of every
    step, float32 ``[n_tokens, V]`` (row 0: the prompt's last position; row s: the
    decode step that fed token s - 1), and the ``n_tokens`` chosen token ids.
    ``model``: a :class:`Model` or the path of a GGUF file (loaded on ``device``).
    ``timings``: a list that gets each step's wall time in seconds (the step's
    logits copied to the host, so a GPU's work is finished), prefill first.
    ``cuda_graph``: on CUDA, decode steps replay one captured graph
    (:class:`CudaGraphStep`; the prefill and the capturing step run eagerly)."""
    if not isinstance(model, Model):
        model = load_model(model, device=device, dtype=dtype)
    if cuda_graph and model.place.device != "cuda":
        raise ValueError(f"cuda_graph=True needs the model on device cuda, not {model.place.device!r}")
    cfg = model.config
    prompt = [int(t) for t in prompt]
    if not prompt:
        raise ValueError("prompt must hold at least one token id")
    bad = [t for t in prompt if not 0 <= t < cfg.vocab]
    if bad:
        raise ValueError(f"prompt: token id {bad[0]} is outside [0, {cfg.vocab}) (the model's vocabulary)")
    if n_tokens < 1:
        raise ValueError(f"n_tokens must be >= 1, got {n_tokens}")
    total = len(prompt) + n_tokens - 1  # the last token is chosen, never fed
    if total > cfg.context:
        raise ValueError(f"{len(prompt)} prompt + {n_tokens} new tokens exceed llama.context_length {cfg.context}")
    cache = PagedKVCache(model, total)
    ids = model.place.int32(prompt)
    logits, tokens = [], []
    graphed = None
    for step in range(n_tokens):
        t0 = time.perf_counter()
        if cuda_graph and step == 1:  # the first decode step: captured (and run eagerly once) here
            graphed = CudaGraphStep(model, cache, ids)
        row = graphed(ids) if graphed is not None else forward(model, ids, cache)  # [1, V]
        nxt = sampling.argmax(row)  # int32 [1], stays on the device
        logits.append(model.place.host(row)[0])
        tokens.append(int(nxt[0]))
        if timings is not None:
            timings.append(time.perf_counter() - t0)
        ids = nxt
    return np.stack(logits), tokens


# ----------------------------------------------------------------------------- command line

def _ids(text: str) -> List[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--prompt takes comma-separated token ids, got {text!r}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="Greedy decoding of a llama GGUF model with braze ops.")
    ap.add_argument("model", help="a GGUF file of the llama architecture")
    ap.add_argument("--prompt", type=_ids, required=True, help="token ids, comma-separated (e.g. 1,2,3)")
    ap.add_argument("--tokens", type=int, default=16, help="tokens to generate (default 16)")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "mps", "metal"))
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"),
                    help="activations and KV cache (default float32)")
    ap.add_argument("--cuda-graph", action="store_true", help="cuda: replay each decode step as one CUDA graph")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    t1 = time.perf_counter()
    _, tokens = generate(model, args.prompt, args.tokens, cuda_graph=args.cuda_graph)
    t2 = time.perf_counter()
    print(f"braze {__version__}, {args.device}, {model.config.layers} layers, vocab {model.config.vocab}")
    print("tokens:", ",".join(map(str, tokens)))
    if model.tokens is not None:
        print("text:  ", repr("".join(model.tokens[t] for t in tokens)))
    print(f"load {t1 - t0:.2f} s, prefill + {args.tokens - 1} decode steps {t2 - t1:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
