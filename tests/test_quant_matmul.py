"""braze.quant.matmul beyond the registry's parity tests (tests/test_quant.py runs
those for every matmul_<format> spec): GGUF tensors against the gguf package's
decode and numpy, row-count consistency across the GEMV path, leading axes, thread
count and ISA independence, and the errors of bad input."""
import numpy as np
import pytest

import braze
from braze import quant
from braze._arrays import BF16
from braze.specs.quant_matmul import weight
from conftest import cpu_isa

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants as gq  # noqa: E402

GGUF_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "q2_K": T.Q2_K,
              "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K, "iq4_nl": T.IQ4_NL,
              "iq4_xs": T.IQ4_XS}
LEGACY = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}


def close(got, want, dtype, k):
    """|got - want| <= atol * sqrt(K) * rms(x) * rms(W) + rtol * |want| (docs/quant.md)."""
    atol, rtol = {"float32": (2e-6, 1e-5), "float16": (2e-4, 1.5e-3), "bfloat16": (2e-3, 8e-3)}[dtype]
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(1.0, float(np.sqrt(np.mean(want * want))))
    err = np.abs(got - want)
    assert (err <= atol * scale + rtol * np.abs(want)).all(), f"max error {err.max():.3g}, scale {scale:.3g}"


def gguf_tensor(fmt, n, k, rng):
    """Raw bytes of a GGUF tensor [n, k] of `fmt`, flat as GGUFReader hands them over."""
    if fmt in LEGACY:
        raw = gq.quantize(rng.standard_normal((n, k)).astype(np.float32), GGUF_TYPES[fmt])
    else:
        raw = weight(fmt, n, k, "float32", rng)[0]
    return np.ascontiguousarray(raw).reshape(-1)


@pytest.mark.parametrize("m", [1, 5, 40])
@pytest.mark.parametrize("fmt", list(GGUF_TYPES))
def test_gguf_tensor_matches_gguf_dequantize_then_numpy(fmt, m):
    rng = np.random.default_rng(11)
    n, k = 37, 4 * 256
    raw = gguf_tensor(fmt, n, k, rng)
    qw = quant.QuantizedTensor.from_gguf(raw, int(GGUF_TYPES[fmt]), (n, k))
    x = rng.standard_normal((m, k)).astype(np.float32)
    w = gq.dequantize(raw.reshape(n, -1), GGUF_TYPES[fmt]).astype(np.float64)
    want = x.astype(np.float64) @ w.T
    close(quant.matmul(x, qw), want, "float32", k)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("fmt", ["q4_0", "q4_K", "q6_K", "mxfp4", "nvfp4", "int8", "affine4", "dense"])
def test_each_row_of_a_gemv_batch_is_the_one_row_product(fmt, dtype):
    """Rows 2..16 take the GEMV path with more rows per W read: each row's result is
    bit for bit the one-row call's (every row sums its own products in the same order)."""
    rng = np.random.default_rng(5)
    n, k = 29, 512
    data, scales, biases, ts, group = weight(fmt, n, k, dtype, rng)
    qw = data if fmt == "dense" else quant.QuantizedTensor(fmt, (n, k), data, scales, biases, ts, group)
    x = rng.standard_normal((16, k)).astype(NP[dtype])
    singles = np.stack([quant.matmul(x[i:i + 1], qw)[0] for i in range(16)])
    for m in range(2, 17):
        got = quant.matmul(x[:m], qw)
        assert got.tobytes() == singles[:m].tobytes(), m


def test_gemm_agrees_with_gemv():
    rng = np.random.default_rng(6)
    qw = quant.QuantizedTensor("q4_K", (40, 768), weight("q4_K", 40, 768, "float32", rng)[0])
    x = rng.standard_normal((48, 768)).astype(np.float32)
    gemm = quant.matmul(x, qw)  # 48 rows: the GEMM path
    gemv = np.concatenate([quant.matmul(x[i:i + 16], qw) for i in range(0, 48, 16)])
    close(gemm, gemv, "float32", 768)


@pytest.mark.parametrize("m", [2, 24])
def test_leading_axes_and_strided_rows(m):
    rng = np.random.default_rng(7)
    k = 256
    qw = quant.QuantizedTensor("q8_0", (11, k), weight("q8_0", 11, k, "float32", rng)[0])
    big = rng.standard_normal((m, 6, k + 9)).astype(np.float32)
    x = big[:, ::2, :k]  # [m, 3, K]: rows strided, leading axes not mergeable without a copy
    got = quant.matmul(x, qw)
    assert got.shape == (m, 3, 11)
    flat = quant.matmul(np.ascontiguousarray(x).reshape(-1, k), qw)
    assert got.reshape(-1, 11).tobytes() == flat.tobytes()
    out = np.full((m, 3, 11), np.nan, np.float32)
    assert quant.matmul(x, qw, out=out) is out
    assert out.tobytes() == got.tobytes()
    v = quant.matmul(x[0, 0], qw)  # one row, no leading axes (the GEMV: within tolerance of a GEMM row)
    assert v.shape == (11,)
    close(v, got[0, 0], "float32", k)


@pytest.mark.parametrize("m", [1, 7, 40])
def test_results_do_not_depend_on_the_thread_count(m):
    rng = np.random.default_rng(8)
    n, k = 301, 1024
    qw = quant.QuantizedTensor("q4_0", (n, k), weight("q4_0", n, k, "float32", rng)[0])
    x = rng.standard_normal((m, k)).astype(np.float32)
    before = braze._cpu.num_threads()
    try:
        got = []
        for t in (1, 2, 3):
            braze._cpu.set_num_threads(t)
            got.append(quant.matmul(x, qw).tobytes())
    finally:
        braze._cpu.set_num_threads(before)
    assert got[0] == got[1] == got[2]


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
def test_every_cpu_isa(isa):
    rng = np.random.default_rng(9)
    n, k = 23, 512
    for fmt in ("q5_1", "q3_K", "iq4_xs", "mxfp6_e3m2", "fp8_e5m2", "affine3", "dense"):
        data, scales, biases, ts, group = weight(fmt, n, k, "float16", rng)
        qw = data if fmt == "dense" else quant.QuantizedTensor(fmt, (n, k), data, scales, biases, ts, group)
        x = rng.standard_normal((20, k)).astype(np.float16)
        bias = rng.standard_normal(n).astype(np.float16)
        want = braze.reference.quant.matmul(x.astype(np.float64), data, scales, biases, ts, bias.astype(np.float64),
                                            format="" if fmt == "dense" else fmt, group_size=group)
        with cpu_isa(isa):
            for m in (1, 3, 20):
                close(quant.matmul(x[:m], qw, bias=bias), want[:m], "float16", k)


# ---------------------------------------------------------------- bad input
def q4(n=3, k=64):
    return quant.quantize(np.random.default_rng(0).standard_normal((n, k)).astype(np.float32), "q4_0")


@pytest.mark.parametrize("call,err,match", [
    (lambda o: quant.matmul(np.ones((2, 96), np.float32), q4(), out=o), ValueError,
     r"x: K = 96 \(its last axis\) does not match the weight's K = 64"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), np.ones((3, 64), np.float16), out=o), TypeError,
     "qw \\(a dense weight\\) must have x's dtype float32, got float16"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), np.ones((3, 32), np.float32), out=o), ValueError,
     "x: K = 64 .* does not match the weight's K = 32"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), np.ones(64, np.float32), out=o), ValueError,
     r"qw must be \[N, K\]"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), q4(), bias=np.ones(4, np.float32), out=o), ValueError,
     r"bias must have shape \(3,\)"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), q4(), bias=np.ones(3, np.float16), out=o), TypeError,
     "bias"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), q4(), out=np.zeros((2, 4), np.float32)), ValueError,
     r"out must have shape \(2, 3\)"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), q4(), out=np.zeros((2, 3), np.float16)), TypeError,
     "out"),
    (lambda o: quant.matmul(np.ones((2, 64), np.float32), [[1.0] * 64] * 3, out=o), TypeError,
     "qw must be a QuantizedTensor or a float array"),
    (lambda o: quant.matmul(np.ones((2, 64), np.int32), q4(), out=o), TypeError, "x"),
    (lambda o: quant.matmul(np.float32(1.0), q4(), out=o), ValueError, "x must be"),
])
def test_bad_input_names_the_argument(call, err, match):
    out = np.full((2, 3), np.nan, np.float32)
    with pytest.raises(err, match=match):
        call(out)
    assert np.isnan(out).all()


def test_out_must_view_the_rows():
    qw = q4()
    x = np.ones((2, 2, 64), np.float32)
    out = np.full((2, 5, 3), np.nan, np.float32)[:, 0:4:2]  # [2, 2, 3]: rows 24 and 60 bytes apart, not mergeable
    with pytest.raises(ValueError, match="out's leading axes must merge"):
        quant.matmul(x, qw, out=out)
    assert np.isnan(out).all()


def test_torch_tensors_and_compile():
    torch = pytest.importorskip("torch")
    import braze.integrations.torch  # noqa: F401  (the ops torch.compile traces; docs/torch.md)
    rng = np.random.default_rng(10)
    w = torch.from_numpy(rng.standard_normal((24, 256)).astype(np.float32))
    qw = quant.quantize(w, "q4_K")
    x = torch.from_numpy(rng.standard_normal((3, 5, 256)).astype(np.float32)).to(torch.bfloat16)
    bias = torch.ones(24, dtype=torch.bfloat16)
    got = quant.matmul(x, qw, bias=bias)
    assert isinstance(got, torch.Tensor) and got.shape == (3, 5, 24) and got.dtype == torch.bfloat16
    want = x.double() @ quant.dequantize(qw).double().T + 1.0
    close(got.float().numpy(), want.numpy(), "bfloat16", 256)
    compiled = torch.compile(lambda a: quant.matmul(a, qw, bias=bias), fullgraph=True)
    assert torch.equal(compiled(x), got)
