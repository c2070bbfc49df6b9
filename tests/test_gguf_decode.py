"""braze.gguf_decode (examples/gguf_decode.py) end to end: a small llama GGUF with random weights,
written here with gguf's writer, decoded greedily by the example (braze ops) and
by a float64 numpy composition on the weights as gguf's own dequantize reads
them. Conventions (llama.cpp's, docs/example.md): W [out, in] stored with ne0 =
in; rope on consecutive pairs (2i, 2i + 1) of each head at angle
p * freq_base ** (-2i / head_dim); output.weight [vocab, hidden].
"""
import os

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize

import braze.quant
from conftest import cuda_ready

import braze.gguf_decode as example

VOCAB, HIDDEN, FFN, HEADS, KV_HEADS, HEAD_DIM, LAYERS = 320, 256, 512, 4, 2, 64, 2
EPS, ROPE_BASE = 1e-5, 10000.0
PROMPT, N_TOKENS = [5, 17, 250, 3, 99], 8

# GGML type of each tensor: q8_0 (gguf quantizes it), q4_K and q6_K (gguf 0.19
# does not: braze.quant.quantize writes their blocks), one float16 matrix (the
# dense matmul path) and a q8_0 embedding table (rows gathered, then dequantized).
TYPES = {"token_embd.weight": T.Q8_0, "output.weight": T.Q6_K,
         "attn_q": T.Q4_K, "attn_k": T.Q6_K, "attn_v": T.Q8_0, "attn_output": T.Q4_K,
         "ffn_gate": T.Q4_K, "ffn_up": T.Q8_0, "ffn_down": T.Q6_K,
         "blk.1.attn_v.weight": T.F16, "blk.1.ffn_up.weight": T.Q6_K}


def _type(name):
    return TYPES.get(name, TYPES.get(name.split(".")[-2] if name.startswith("blk.") else name, T.F32))


def _random_weights(seed=0):
    rng = np.random.default_rng(seed)
    w = {"token_embd.weight": rng.standard_normal((VOCAB, HIDDEN)),
         "output_norm.weight": 1 + 0.1 * rng.standard_normal(HIDDEN),
         "output.weight": 2.0 * rng.standard_normal((VOCAB, HIDDEN)) / np.sqrt(HIDDEN)}
    shapes = {"attn_q": (HEADS * HEAD_DIM, HIDDEN), "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
              "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN), "attn_output": (HIDDEN, HEADS * HEAD_DIM),
              "ffn_gate": (FFN, HIDDEN), "ffn_up": (FFN, HIDDEN), "ffn_down": (HIDDEN, FFN)}
    for i in range(LAYERS):
        for part in ("attn_norm", "ffn_norm"):
            w[f"blk.{i}.{part}.weight"] = 1 + 0.1 * rng.standard_normal(HIDDEN)
        for part, (n, k) in shapes.items():
            w[f"blk.{i}.{part}.weight"] = rng.standard_normal((n, k)) / np.sqrt(k)
    return {k: v.astype(np.float32) for k, v in w.items()}


def write_gguf(path, arch="llama", drop=()):
    """The test model as a GGUF file; ``arch`` and ``drop`` (tensor names left out) make bad files."""
    w = gguf.GGUFWriter(os.fspath(path), arch)
    w.add_block_count(LAYERS)
    w.add_context_length(256)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(EPS)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_token_list([f"<{i}>" for i in range(VOCAB)])
    for name, a in _random_weights().items():
        if name in drop:
            continue
        kind = _type(name) if a.ndim == 2 else T.F32
        if kind == T.F32:
            w.add_tensor(name, a)
        elif kind == T.F16:
            w.add_tensor(name, a.astype(np.float16))
        elif kind == T.Q8_0:
            w.add_tensor(name, gguf_quantize(a, kind), raw_dtype=kind)
        else:  # K-quants: braze's quantizer, GGML's block bytes written as they are
            fmt = {T.Q4_K: "q4_K", T.Q6_K: "q6_K"}[kind]
            w.add_tensor(name, np.asarray(braze.quant.quantize(a, fmt).data), raw_dtype=kind)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ----------------------------------------------------------------------------- the float64 reference

def read_reference_weights(path):
    """Every tensor of the file dequantized by gguf (not braze), float64, numpy order [out, in]."""
    r = gguf.GGUFReader(os.fspath(path), "r")
    out = {}
    for t in r.tensors:
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))
        out[t.name] = gguf_dequantize(t.data, t.tensor_type).astype(np.float64).reshape(shape)
    return out


def _rms_norm(x, g):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + EPS) * g


def _rope_pairs(x, pos):
    """llama.cpp's rope for llama: pair (2i, 2i + 1) turned by pos * base ** (-2i / D)."""
    d = x.shape[-1]
    ang = pos[:, None, None] * ROPE_BASE ** (-np.arange(0, d, 2) / d)
    c, s = np.cos(ang), np.sin(ang)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    y = np.empty_like(x)
    y[..., 0::2] = x0 * c - x1 * s
    y[..., 1::2] = x0 * s + x1 * c
    return y


def reference_logits(W, ids, rope=_rope_pairs):
    """Logits [V] of the last of ``ids`` (the whole sequence recomputed, causal)."""
    n = len(ids)
    pos = np.arange(n, dtype=np.float64)
    x = W["token_embd.weight"][ids]
    group = HEADS // KV_HEADS
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(LAYERS):
        b = f"blk.{i}."
        y = _rms_norm(x, W[b + "attn_norm.weight"])
        q = rope((y @ W[b + "attn_q.weight"].T).reshape(n, HEADS, HEAD_DIM), pos)
        k = rope((y @ W[b + "attn_k.weight"].T).reshape(n, KV_HEADS, HEAD_DIM), pos)
        v = (y @ W[b + "attn_v.weight"].T).reshape(n, KV_HEADS, HEAD_DIM)
        o = np.empty_like(q)
        for h in range(HEADS):
            s = q[:, h] @ k[:, h // group].T / np.sqrt(HEAD_DIM) + mask
            p = np.exp(s - s.max(-1, keepdims=True))
            o[:, h] = (p / p.sum(-1, keepdims=True)) @ v[:, h // group]
        x = x + o.reshape(n, -1) @ W[b + "attn_output.weight"].T
        y = _rms_norm(x, W[b + "ffn_norm.weight"])
        g, u = y @ W[b + "ffn_gate.weight"].T, y @ W[b + "ffn_up.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[b + "ffn_down.weight"].T
    return _rms_norm(x[-1], W["output_norm.weight"]) @ W["output.weight"].T


def reference_generate(W, prompt, n_tokens):
    ids, logits = list(prompt), []
    for _ in range(n_tokens):
        logits.append(reference_logits(W, ids))
        ids.append(int(np.argmax(logits[-1])))
    return np.stack(logits), ids[len(prompt):]


# ----------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    write_gguf(path)
    return path


@pytest.fixture(scope="module")
def reference(model_file):
    return reference_generate(read_reference_weights(model_file), PROMPT, N_TOKENS)


def test_file_is_what_the_test_meant(model_file):
    kinds = {t.name: int(t.tensor_type) for t in gguf.GGUFReader(os.fspath(model_file), "r").tensors}
    assert kinds["token_embd.weight"] == T.Q8_0 and kinds["blk.0.attn_q.weight"] == T.Q4_K
    assert kinds["blk.0.attn_k.weight"] == T.Q6_K and kinds["blk.1.attn_v.weight"] == T.F16
    tensors = braze.quant.load_gguf(model_file)
    assert tensors["blk.0.ffn_down.weight"].shape == (HIDDEN, FFN)  # [out, in]: ne0 = in, reversed


@pytest.fixture
def exact_activations():
    """The CPU GEMV with float32 x (braze.quant.set_int8_activations(False)), restored after."""
    before = braze.quant.int8_activations()
    braze.quant.set_int8_activations(False)
    yield
    braze.quant.set_int8_activations(before)


def test_int8_activations_stay_close(model_file, reference):
    """The CPU default quantizes x to int8 per block (ggml's scheme): the first logits stay within
    10% of their rms of the float64 reference (measured 4-7%; docs/quant.md) and the first token,
    whose top-two gap is 24% of rms, is the reference's. A wrong scale or block moves them by O(rms)."""
    assert braze.quant.int8_activations()
    want_logits, want_tokens = reference
    logits, tokens = example.generate(model_file, PROMPT, 1, device="cpu")
    scale = np.sqrt(np.mean(want_logits[0] ** 2))
    err = np.abs(logits[0] - want_logits[0]).max()
    assert 0 < err <= 0.1 * scale, f"max |logit error| {err:.3g} against rms {scale:.3g}"
    assert tokens[0] == want_tokens[0]


def test_logits_and_tokens_match_float64_reference(model_file, reference, exact_activations):
    want_logits, want_tokens = reference
    logits, tokens = example.generate(model_file, PROMPT, N_TOKENS, device="cpu")
    assert logits.shape == (N_TOKENS, VOCAB) and logits.dtype == np.float32
    # Tolerance: the example runs in float32 (matmuls accumulate up to K = 512
    # products in f32; attention, norms and rope in f32), the reference in
    # float64 on the same dequantized weights, so only f32 rounding separates
    # them: ~sqrt(K) u (u = 6e-8) relative per stage, ~1.4e-6 at K = 512,
    # compounded over two layers (measured: 1.0e-6 to 1.9e-6 of the logits'
    # rms at every step). 2e-5 * rms is a 10x margin; a wrong convention (rope
    # on halves, gate and up swapped, a wrong eps) moves logits by O(rms).
    for step in range(N_TOKENS):
        ref = want_logits[step]
        scale = np.sqrt(np.mean(ref ** 2))
        err = np.abs(logits[step] - ref).max()
        assert err <= 2e-5 * scale, f"step {step}: max |logit error| {err:.3g} > {2e-5 * scale:.3g}"
    # greedy ids are only a fair comparison where the reference's top two are
    # farther apart than the tolerance (true for this seed; checked, not assumed)
    for step in range(N_TOKENS):
        top2 = np.sort(want_logits[step])[-2:]
        assert top2[1] - top2[0] > 1e-3 * np.sqrt(np.mean(want_logits[step] ** 2)), f"step {step}: near tie"
    assert tokens == want_tokens


def test_reference_convention_matters(model_file, reference):
    """The comparison above can fail: rope on halves (the HF convention, wrong for a
    GGUF llama) changes the logits far beyond the tolerance."""
    def halves(x, pos):  # pairs (i, i + D/2): the rotate-half convention
        d = x.shape[-1]
        perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])
        y = np.empty_like(x)
        y[..., perm] = _rope_pairs(x[..., perm], pos)
        return y

    wrong = reference_logits(read_reference_weights(model_file), PROMPT, rope=halves)
    ref = reference[0][0]
    assert np.abs(wrong - ref).max() > 1e-2 * np.sqrt(np.mean(ref ** 2))


def test_command_line(model_file, reference, capsys, exact_activations):
    assert example.main([os.fspath(model_file), "--prompt", ",".join(map(str, PROMPT)), "--tokens", "3"]) == 0
    out = capsys.readouterr().out
    assert "tokens: " + ",".join(map(str, reference[1][:3])) in out
    assert "<%d>" % reference[1][0] in out  # the token strings of the file's list


def test_bad_files(tmp_path):
    gpt = tmp_path / "gpt2.gguf"
    write_gguf(gpt, arch="gpt2")
    with pytest.raises(ValueError, match="general.architecture is 'gpt2'"):
        example.load_model(gpt)
    missing = tmp_path / "missing.gguf"
    write_gguf(missing, drop=("blk.1.ffn_gate.weight",))
    with pytest.raises(ValueError, match=r"tensor 'blk.1.ffn_gate.weight' is missing"):
        example.load_model(missing)


def test_bad_prompt(model_file):
    with pytest.raises(ValueError, match=r"token id 320 is outside \[0, 320\)"):
        example.generate(model_file, [1, 320], 2)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
def test_cuda_matches_cpu(model_file, reference, exact_activations):
    cpu_logits, cpu_tokens = example.generate(model_file, PROMPT, N_TOKENS, device="cpu")
    cuda_logits, cuda_tokens = example.generate(model_file, PROMPT, N_TOKENS, device="cuda")
    assert cuda_tokens == cpu_tokens == reference[1]
    scale = np.sqrt(np.mean(reference[0] ** 2))
    assert np.abs(cuda_logits - reference[0]).max() <= 2e-5 * scale  # f32 on both: the CPU test's bound


def test_cuda_graph_needs_cuda(model_file):
    with pytest.raises(ValueError, match="cuda_graph=True needs the model on device cuda"):
        example.generate(model_file, PROMPT, 2, cuda_graph=True)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cuda_graph_step_equals_eager(model_file, dtype):
    """Decode steps replayed from one captured CUDA graph give the eager steps' logits and tokens
    (the same kernels on the same inputs: equal bits)."""
    model = example.load_model(model_file, device="cuda", dtype=dtype)
    eager_logits, eager_tokens = example.generate(model, PROMPT, N_TOKENS)
    graph_logits, graph_tokens = example.generate(model, PROMPT, N_TOKENS, cuda_graph=True)
    assert graph_tokens == eager_tokens
    np.testing.assert_array_equal(graph_logits, eager_logits)
