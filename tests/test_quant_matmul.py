"""braze.quant.matmul beyond the registry's parity tests (tests/test_quant.py runs
those for every matmul_<format> spec): GGUF tensors against the gguf package's
decode and numpy, row-count consistency across the GEMV path, leading axes, thread
count and ISA independence, and the errors of bad input."""
import numpy as np
import pytest

import braze
from braze import quant
from braze._arrays import BF16
from braze.specs.quant_matmul import INT8_X, int8_x_active, int8_x_bound, weight
from conftest import cpu_isa

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as T  # noqa: E402
from gguf import quants as gq  # noqa: E402

GGUF_TYPES = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "q2_K": T.Q2_K,
              "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K, "iq4_nl": T.IQ4_NL,
              "iq4_xs": T.IQ4_XS}
LEGACY = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}


def within(got, want, dtype, bound=0.0):
    """|got - want| <= atol * sqrt(K) * rms(x) * rms(W) + rtol * |want| (+ bound: the int8
    activations' own error, int8_x_bound) (docs/quant.md); with the largest error."""
    atol, rtol = {"float32": (2e-6, 1e-5), "float16": (2e-4, 1.5e-3), "bfloat16": (2e-3, 8e-3)}[dtype]
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = max(1.0, float(np.sqrt(np.mean(want * want))))
    err = np.abs(got - want)
    return bool((err <= atol * scale + rtol * np.abs(want) + bound).all()), float(err.max())


def close(got, want, dtype, k, bound=0.0):
    ok, err = within(got, want, dtype, bound)
    assert ok, f"max error {err:.3g}"


def x_bound(fmt, x, w):
    """int8_x_bound where the CPU GEMV quantizes x (``x [..., K]``, W [N, K] float), else 0."""
    lead = np.shape(x)[:-1]
    x = np.asarray(x, np.float64).reshape(-1, np.shape(x)[-1])
    if not int8_x_active(fmt, x.shape[0]):
        return 0.0
    return int8_x_bound(x, w, INT8_X[fmt]).reshape(lead + (np.shape(w)[0],))


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
    close(quant.matmul(x, qw), want, "float32", k, x_bound(fmt, x, w))


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


def test_many_rows_are_slabs_of_the_gemv():
    """With int8 activations (the default) more than 16 rows run the GEMV kernel in
    slabs of 16 rows: each row's result is bit-identical to the row alone. With them
    off, the f32 GEMM: within the int8 bound of that, and to f32 rounding of f64."""
    rng = np.random.default_rng(6)
    qw = quant.QuantizedTensor("q4_K", (40, 768), weight("q4_K", 40, 768, "float32", rng)[0])
    x = rng.standard_normal((48, 768)).astype(np.float32)
    rows = quant.matmul(x, qw)
    singles = np.concatenate([quant.matmul(x[i:i + 1], qw) for i in range(48)])
    assert rows.tobytes() == singles.tobytes()
    assert quant.matmul(x[:17], qw).tobytes() == singles[:17].tobytes()
    quant.set_int8_activations(False)
    try:
        gemm = quant.matmul(x, qw)
    finally:
        quant.set_int8_activations(True)
    w = quant.dequantize(qw).astype(np.float64)
    close(gemm, x.astype(np.float64) @ w.T, "float32", 768)
    close(gemm, rows, "float32", 768, int8_x_bound(x, w, 256))
    assert not np.array_equal(gemm, rows)  # the two paths are different roundings


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
    close(v, got[0, 0], "float32", k, x_bound("q8_0", x[0, 0], quant.dequantize(qw)))


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


def legacy_paths():
    """(isa, vnni) for each int8 GEMV path of the legacy blocks this CPU runs."""
    isas = braze._cpu.isas_supported()
    paths = [(isa, False) for isa in ("avx2", "avx512") if isa in isas]
    if "avx512" in isas and braze._cpu.quant_vnni():
        paths.append(("avx512", True))
    return paths


@pytest.mark.skipif(len(legacy_paths()) < 2, reason="one int8 GEMV path of the legacy blocks on this CPU")
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"])
def test_legacy_blocks_are_bit_identical_on_every_path(fmt):
    """avx2 (two 256-bit accumulators), avx512 (two blocks a vector, K in chunks that stay in L1)
    and avx512 + VNNI (vpdpbusd on unsigned levels from x's offsets) sum the same exact int32
    lanes into the same float lanes in the same order: the results agree bit for bit, at an
    odd block count and a K of many chunks, for 1 to 16 rows."""
    rng = np.random.default_rng(21)
    n = 21
    vnni = braze._cpu.quant_vnni()
    for k in (3 * 32, 1001 * 32):
        qw = quant.QuantizedTensor(fmt, (n, k), weight(fmt, n, k, "float32", rng)[0])
        x = (rng.standard_normal((16, k)) * rng.uniform(0.1, 10, (16, 1))).astype(np.float32)
        for m in (1, 2, 5, 16):
            got = {}
            for isa, v in legacy_paths():
                with cpu_isa(isa):
                    braze._cpu.set_quant_vnni(v)
                    try:
                        got[isa, v] = np.asarray(quant.matmul(x[:m], qw))
                    finally:
                        braze._cpu.set_quant_vnni(vnni)
            first = next(iter(got.values()))
            assert np.isfinite(first).all()
            for key, y in got.items():
                assert np.array_equal(y.view(np.uint32), first.view(np.uint32)), (key, k, m)


@pytest.mark.skipif(not legacy_paths(), reason="no AVX2 / AVX-512 int8 GEMV on this CPU")
@pytest.mark.parametrize("blocks", range(1, 10))
def test_q4_0_every_tail_of_four_blocks(blocks):
    """q4_0's kernel (Q40Dot) takes four blocks a step and a row's last 1-3 blocks apart
    (masked loads and a lane mask on AVX-512, half vectors on AVX2): at every block count,
    each path (avx2, avx512, avx512 + VNNI) and row count gives the int8 model's product to
    f32 tolerance, and all of them the same bits as the first path's one-row call."""
    rng = np.random.default_rng(30 + blocks)
    n, k = 13, 32 * blocks
    qw = quant.QuantizedTensor("q4_0", (n, k), weight("q4_0", n, k, "float32", rng)[0])
    w = quant.dequantize(qw).astype(np.float64)
    x = (rng.standard_normal((16, k)) * rng.uniform(0.1, 10, (16, 1))).astype(np.float32)
    vnni = braze._cpu.quant_vnni()
    got = {}
    for isa, v in legacy_paths():
        with cpu_isa(isa):
            braze._cpu.set_quant_vnni(v)
            try:
                for m in (1, 2, 5, 16):
                    got[isa, v, m] = np.asarray(quant.matmul(x[:m], qw))
            finally:
                braze._cpu.set_quant_vnni(vnni)
    for (isa, v, m), y in got.items():
        close(y, int8_model(x[:m], 32) @ w.T, "float32", k)
    first = got[next(iter(got))]
    for key, y in got.items():
        assert np.array_equal(y[:1].view(np.uint32), first[:1].view(np.uint32)), key
        m = key[2]
        assert np.array_equal(y.view(np.uint32), got[legacy_paths()[0] + (m,)].view(np.uint32)), key


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
        w = want_w(fmt, data, scales, biases, ts, group, k)
        with cpu_isa(isa):
            for m in (1, 3, 20):
                close(quant.matmul(x[:m], qw, bias=bias), want[:m], "float16", k, x_bound(fmt, x[:m], w))


def want_w(fmt, data, scales, biases, ts, group, k):
    """W [N, K] float64 as the reference dequantizes it (eye(K) through its matmul)."""
    if fmt == "dense":
        return np.asarray(data, np.float64)
    eye = np.eye(k)
    return braze.reference.quant.matmul(eye, data, scales, biases, ts, format=fmt, group_size=group).T


def int8_model(x, xb):
    """x as the int8-activation GEMV sees it: d * round(x / d) per block, d = max|x| / 127
    (float32 arithmetic, ties to even), float64."""
    x = np.asarray(x, np.float32)
    m, k = x.shape
    blocks = x.reshape(m, k // xb, xb)
    d = np.abs(blocks).max(axis=2, keepdims=True) / np.float32(127)
    inv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
    q = np.clip(np.rint(blocks * inv), -127, 127)
    return (q.astype(np.float64) * d.astype(np.float64)).reshape(m, k)


@pytest.mark.parametrize("isa", braze._cpu.isas_supported())
@pytest.mark.parametrize("fmt", list(INT8_X))
def test_int8_activations_match_their_model(fmt, isa):
    """The int8-activation GEMV equals, within the f32 tolerance, the exact product of the
    dequantized W with x quantized by the documented rule (int8_model): the kernels' integer
    dots and scale combination are checked tightly, the activation rounding separately."""
    rng = np.random.default_rng(12)
    n, k = 19, 1024
    data, scales, biases, ts, group = weight(fmt, n, k, "float32", rng)
    qw = quant.QuantizedTensor(fmt, (n, k), data, scales, biases, ts, group)
    w = want_w(fmt, data, scales, biases, ts, group, k)
    x = (rng.standard_normal((16, k)) * rng.uniform(0.1, 10, (16, 1))).astype(np.float32)
    with cpu_isa(isa):
        for m in (1, 3, 16):
            got = quant.matmul(x[:m], qw)
            close(got, int8_model(x[:m], INT8_X[fmt]) @ w.T, "float32", k)
            close(got, x[:m].astype(np.float64) @ w.T, "float32", k, int8_x_bound(x[:m], w, INT8_X[fmt]))


def test_exact_f32_path_on_request():
    rng = np.random.default_rng(13)
    n, k = 21, 512
    for fmt in ("q4_0", "q4_K", "q6_K"):
        data = weight(fmt, n, k, "float32", rng)[0]
        qw = quant.QuantizedTensor(fmt, (n, k), data)
        x = rng.standard_normal((4, k)).astype(np.float32)
        want = x.astype(np.float64) @ quant.dequantize(qw).astype(np.float64).T
        assert braze._cpu.quant_int8_activations()
        braze._cpu.set_quant_int8_activations(False)
        try:
            exact = quant.matmul(x, qw)
        finally:
            braze._cpu.set_quant_int8_activations(True)
        close(exact, want, "float32", k)
        assert not within(quant.matmul(x, qw), want, "float32")[0], fmt  # int8 x is not exact


def _swap_nibbles(b, lo, hi):
    b[..., lo:hi] = (b[..., lo:hi] >> 4) | (b[..., lo:hi] << 4)


def _next_scale(b, lo, hi):
    b[..., lo:hi] = np.roll(b[..., lo:hi], 1, axis=-1)


# (format, bytes of a block, a bug): nibbles read from the wrong half, or each sub-block
# (element) scaled by its neighbour's scale
BUGS = [("q4_0", 18, lambda b: _swap_nibbles(b, 2, 18)), ("q8_0", 34, lambda b: _next_scale(b, 2, 34)),
        ("q4_K", 144, lambda b: _swap_nibbles(b, 16, 144)), ("q4_K", 144, lambda b: _next_scale(b, 4, 16)),
        ("q6_K", 210, lambda b: _swap_nibbles(b, 0, 128)), ("q6_K", 210, lambda b: _next_scale(b, 192, 208)),
        ("q5_K", 176, lambda b: _next_scale(b, 16, 48))]


@pytest.mark.parametrize("fmt,nbytes,bug", BUGS)
def test_the_int8_bound_fails_a_wrong_scale_or_a_shifted_nibble(fmt, nbytes, bug):
    """The int8-activation tolerance is tight enough to catch a kernel bug: the product of a
    corrupted weight fails the check against the true one's reference."""
    rng = np.random.default_rng(14)
    n, k = 33, 1024
    data = weight(fmt, n, k, "float32", rng)[0]
    qw = quant.QuantizedTensor(fmt, (n, k), data)
    x = rng.standard_normal((2, k)).astype(np.float32)
    w = quant.dequantize(qw).astype(np.float64)
    want, bound = x.astype(np.float64) @ w.T, int8_x_bound(x, w, INT8_X[fmt])
    assert within(quant.matmul(x, qw), want, "float32", bound)[0]
    bad = np.array(data).reshape(n, k // INT8_X[fmt], nbytes)  # INT8_X: the x block, here the W block
    bug(bad)
    got = quant.matmul(x, quant.QuantizedTensor(fmt, (n, k), bad.reshape(n, -1)))
    assert not within(got, want, "float32", bound)[0]


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
    w = quant.dequantize(qw).double()
    want = x.double() @ w.T + 1.0
    close(got.float().numpy(), want.numpy(), "bfloat16", 256, x_bound("q4_K", x.float().numpy(), w.numpy()))
    compiled = torch.compile(lambda a: quant.matmul(a, qw, bias=bias), fullgraph=True)
    assert torch.equal(compiled(x), got)
