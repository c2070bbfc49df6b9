"""``braze bench --e2e`` and the random llama GGUF writer behind it."""
import json

import numpy as np
import pytest

import gguf
from gguf import GGMLQuantizationType as T

from braze import cli, gguf_decode
from braze.bench import e2e, gguf_random


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("e2e") / "tiny.gguf"
    gguf_random.write(path, "tiny", seed=1)
    return path


def test_random_file_layout(tiny):
    s = gguf_random.SHAPES["tiny"]
    with pytest.raises(ValueError, match="shape must be one of"):
        gguf_random.write(tiny.parent / "bad.gguf", "2b")
    r = gguf.GGUFReader(str(tiny), "r")
    assert r.fields["general.architecture"].contents() == "llama"
    assert r.fields["llama.block_count"].contents() == s.layers
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    assert len(tokens) == s.vocab and tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3 + 0x0A] == "<0x0A>"
    types = {t.name: t.tensor_type for t in r.tensors}
    assert types["output.weight"] == T.Q6_K and types["blk.0.attn_q.weight"] == T.Q4_K
    assert types["blk.0.ffn_norm.weight"] == T.F32
    # Q4_K_M's rule: q6_K for attn_v / ffn_down in the first and last eighth and every third layer between
    layers = 32
    six = [i for i in range(layers) if gguf_random.tensor_type(f"blk.{i}.ffn_down.weight", layers) == T.Q6_K]
    assert six == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    assert len(types) == 2 + 9 * s.layers + 1


def test_random_file_decodes_like_its_dequantized_weights(tiny):
    """The K-quant bytes braze wrote are what gguf's own dequantize reads: row 0 of a q6_K
    and a q4_K matrix through both readers."""
    r = gguf.GGUFReader(str(tiny), "r")
    from braze import quant
    ours = quant.load_gguf(str(tiny))
    for t in r.tensors:
        if t.name in ("output.weight", "blk.1.ffn_gate.weight"):
            want = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ours[t.name].shape)
            np.testing.assert_array_equal(np.asarray(quant.dequantize(ours[t.name])), want)


@pytest.mark.parametrize("exact", [False, True])
def test_fused_projections_change_nothing(tiny, exact):
    """q / k / v and gate / up of one format fused into one matrix each (the default) give
    the same logits, bit for bit, as one matmul per GGUF tensor: every output element is
    the same dot product (the int8 activations of x are per row, not per matrix)."""
    from braze import quant
    fused, apart = gguf_decode.load_model(str(tiny)), gguf_decode.load_model(str(tiny), fuse=False)
    # tiny: q4_K everywhere but layer 1's attn_v (q6_K, Q4_K_M's last eighth)
    assert [len(layer.qkv) for layer in fused.layers] == [1, 2] and all(len(x.gate_up) == 1 for x in fused.layers)
    assert [len(layer.qkv) for layer in apart.layers] == [3, 3]
    prompt = e2e._prompt(fused.config.vocab, 6, 3)
    quant.set_int8_activations(not exact)
    try:
        a, ta = gguf_decode.generate(fused, prompt, 4)
        b, tb = gguf_decode.generate(apart, prompt, 4)
    finally:
        quant.set_int8_activations(True)
    assert a.tobytes() == b.tobytes() and ta == tb


def test_e2e_command(tiny, tmp_path, capsys):
    out = tmp_path / "e2e.json"
    from braze import _cpu
    threads = _cpu.num_threads()
    assert cli.main(["bench", "--e2e", str(tiny), "--prompt-tokens", "8", "--decode-tokens", "4",
                     "--peers", "none", "--threads", "1", "--rounds", "2", "--json", str(out)]) == 0
    assert _cpu.num_threads() == threads  # --threads held for the run only
    text = capsys.readouterr().out
    assert "braze" in text and "decode tok/s" in text and "left out by --peers" in text
    report = json.loads(out.read_text())
    assert report["threads"] == 1 and report["prompt_tokens"] == 8 and report["config"]["layers"] == 2
    row = report["rows"][0]
    assert row["impl"] == "braze" and row["decode_tok_s"] > 0 and len(row["decode_tok_s_rounds"]) == 2
    assert [len(r) for r in row["decode_step_s"]] == [4, 4] and len(row["prefill_s"]) == 2
    # the timed run is the example's greedy decode of the same prompt
    prompt = e2e._prompt(report["config"]["vocab"], 8, 0)
    _, tokens = gguf_decode.generate(str(tiny), prompt, 5)
    times = []
    _, again = gguf_decode.generate(str(tiny), prompt, 5, timings=times)
    assert again == tokens and len(times) == 5 and all(t > 0 for t in times)


@pytest.mark.parametrize("argv, message", [
    (["--e2e", "/nonexistent.gguf"], "is not a file"),
    (["--prompt-tokens", "2"], "--prompt-tokens must be >= 4"),
    (["--threads", "0"], "--threads must be >= 1"),
    (["--rounds", "0"], "--rounds must be >= 1"),
    (["--cuda-graph"], "--cuda-graph needs --backend cuda"),
])
def test_e2e_errors(tiny, capsys, argv, message):
    base = ["bench", "--e2e", str(tiny), "--peers", "none"]
    assert cli.main(base + argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not e2e.llama_cpp_available(), reason="llama-cpp-python is not installed")
def test_llama_cpp_reads_the_file_and_agrees(tiny):
    """llama.cpp on the same file, fed the same tokens: its logits are braze's up to the
    int8 rounding of the activations on both sides (measured below 5% of rms on the tiny model)."""
    rows = e2e.run(str(tiny), prompt_tokens=8, decode_tokens=4, threads=1, rounds=1, out=lambda *a: None)
    assert rows[1]["impl"] == "llama.cpp"
    assert rows[1]["max_logit_err_rel_rms"] < 0.1
