"""Writes a Llama-architecture GGUF file of random weights, for ``braze bench --e2e``.

    python -m braze.bench.gguf_random OUT.gguf [--shape 1b] [--seed 0]

Shapes are those of published models (the weights are random, so the file says
nothing of any model's quality): ``tiny`` (2 layers, a test size), ``1b``
(Llama-3.2-1B: hidden 2048, 16 layers, FFN 8192, 32 / 8 heads, vocab 128256) and
``8b`` (Llama-3-8B: hidden 4096, 32 layers, FFN 14336, 32 / 8 heads).

Types follow llama.cpp's Q4_K_M rule (a fact of its quantizer, restated here):
q4_K everywhere, q6_K for ``output.weight`` and for ``attn_v`` / ``ffn_down`` of
the first and last eighth of the layers and of every third layer between. The
K-quant blocks are written by ``braze.quant.quantize`` (CPU), the bytes as GGML
lays them out, so any GGUF reader (gguf's, llama.cpp's) reads the file.

The metadata is what llama.cpp needs to load it: the llama.* sizes, and a
SentencePiece-style vocabulary (``<unk>``, ``<s>``, ``</s>``, the 256 byte tokens
``<0x00>`` .. ``<0xFF>``, then ``<i>``) with scores and token types.
"""
from __future__ import annotations

import argparse
import os
import sys
import numpy as np

from ..gguf_decode import Config


def _shape(vocab, hidden, layers, ffn, heads, kv_heads, context=8192) -> Config:
    """The file's hyper-parameters as the decoder reads them back (head_dim = hidden / heads)."""
    return Config(vocab=vocab, hidden=hidden, layers=layers, ffn=ffn, heads=heads, kv_heads=kv_heads,
                  head_dim=hidden // heads, rotary_dim=hidden // heads, eps=1e-5, rope_base=500000.0,
                  rope_scaling=None, context=context)


SHAPES = {
    "tiny": _shape(vocab=512, hidden=256, layers=2, ffn=768, heads=4, kv_heads=2, context=1024),
    "1b": _shape(vocab=128256, hidden=2048, layers=16, ffn=8192, heads=32, kv_heads=8),
    "8b": _shape(vocab=128256, hidden=4096, layers=32, ffn=14336, heads=32, kv_heads=8),
}

# GGML type ids (gguf.GGMLQuantizationType) and braze's names of the ones written here
_F32, _Q4_K, _Q6_K = 0, 12, 14
_FORMAT = {_Q4_K: "q4_K", _Q6_K: "q6_K"}
_FILE_TYPE_Q4_K_M = 15  # llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
_TOKEN_NORMAL, _TOKEN_UNKNOWN, _TOKEN_CONTROL, _TOKEN_BYTE = 1, 2, 3, 6


def _more_bits(layer: int, layers: int) -> bool:
    """Q4_K_M's rule for attn_v / ffn_down: q6_K in the first and last eighth, and every third layer between."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def tensor_type(name: str, layers: int) -> int:
    if name == "output.weight":
        return _Q6_K
    if name.endswith(("attn_v.weight", "ffn_down.weight")):
        return _Q6_K if _more_bits(int(name.split(".")[1]), layers) else _Q4_K
    return _Q4_K


def _vocabulary(n: int):
    special = ["<unk>", "<s>", "</s>"]
    tokens = special + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"<{i}>" for i in range(len(tokens), n)]
    types = [_TOKEN_UNKNOWN, _TOKEN_CONTROL, _TOKEN_CONTROL] + [_TOKEN_BYTE] * 256
    types += [_TOKEN_NORMAL] * (n - len(types))
    return tokens[:n], types[:n]


def _matrices(s: Config):
    """(name, [out, in]) of every matrix, file order."""
    hd = s.head_dim
    yield "token_embd.weight", (s.vocab, s.hidden)
    for i in range(s.layers):
        p = f"blk.{i}."
        yield p + "attn_q.weight", (s.heads * hd, s.hidden)
        yield p + "attn_k.weight", (s.kv_heads * hd, s.hidden)
        yield p + "attn_v.weight", (s.kv_heads * hd, s.hidden)
        yield p + "attn_output.weight", (s.hidden, s.heads * hd)
        yield p + "ffn_gate.weight", (s.ffn, s.hidden)
        yield p + "ffn_up.weight", (s.ffn, s.hidden)
        yield p + "ffn_down.weight", (s.hidden, s.ffn)
    yield "output.weight", (s.vocab, s.hidden)


def write(path: "str | os.PathLike", shape: "str | Config" = "1b", seed: int = 0, progress: bool = False) -> Config:
    """Writes the file; returns its Config (``shape``: a name of SHAPES or a Config). Matrices ~ N(0, 1/in) (embeddings N(0, 1)),
    norm gains ~ 1 + N(0, 0.01)."""
    import gguf

    from .. import quant

    if isinstance(shape, str) and shape not in SHAPES:
        raise ValueError(f"shape must be one of {sorted(SHAPES)} or a Config, got {shape!r}")
    s = SHAPES[shape] if isinstance(shape, str) else shape
    if s.vocab < 259:
        raise ValueError(f"vocab must hold the 3 special and 256 byte tokens, got {s.vocab}")
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_block_count(s.layers)
    w.add_context_length(s.context)
    w.add_embedding_length(s.hidden)
    w.add_feed_forward_length(s.ffn)
    w.add_head_count(s.heads)
    w.add_head_count_kv(s.kv_heads)
    w.add_rope_dimension_count(s.rotary_dim)
    w.add_layer_norm_rms_eps(s.eps)
    w.add_rope_freq_base(s.rope_base)
    w.add_file_type(_FILE_TYPE_Q4_K_M)
    tokens, types = _vocabulary(s.vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * s.vocab)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def gain(name):
        w.add_tensor(name, (1 + 0.1 * rng.standard_normal(s.hidden)).astype(np.float32))

    names = list(_matrices(s))
    for n, (name, (rows, cols)) in enumerate(names):
        a = rng.standard_normal((rows, cols), dtype=np.float32)
        if name != "token_embd.weight":
            a *= np.float32(1 / np.sqrt(cols))
        kind = tensor_type(name, s.layers)
        w.add_tensor(name, np.asarray(quant.quantize(a, _FORMAT[kind]).data), raw_dtype=gguf.GGMLQuantizationType(kind))
        if name.endswith("ffn_down.weight"):  # the layer's norms after its matrices
            layer = name.split(".")[1]
            gain(f"blk.{layer}.attn_norm.weight")
            gain(f"blk.{layer}.ffn_norm.weight")
        if progress:
            print(f"\r{n + 1}/{len(names)} {name}", end="", file=sys.stderr, flush=True)
    gain("output_norm.weight")
    if progress:
        print(file=sys.stderr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m braze.bench.gguf_random",
                                 description="Write a llama GGUF file of random weights (Q4_K_M-style types).")
    ap.add_argument("path", help="the file to write")
    ap.add_argument("--shape", default="1b", choices=sorted(SHAPES), help="model sizes (default 1b)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    s = write(args.path, args.shape, args.seed, progress=True)
    print(f"{args.path}: {s}, {os.path.getsize(args.path) / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
