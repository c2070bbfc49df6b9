"""W8A8 matmul (braze.quant.matmul with x quantized by quantize_activations) on the
CPU and on simulated Metal: against the float64 reference, against torch's own fp8
decode in float64, bit for bit where the int8 sums are exact, odd shapes, leading
axes, strided rows, ISA / thread-count independence, and every error path.

int8 exactness: the kernels sum int8 x int8 exactly in int32, so without a bias the
result is f32(acc) * f32(x_scale * w_scale) rounded once (a multiply-add with 0),
then rounded to the out dtype: numpy computes exactly that (the float64 product of
two f32 values is exact). With a bias the fused multiply-add is one rounding of
a * s + b, which float64 can round twice: checked to one f32 ulp.

fp8: each product of two fp8 values is exact in f32; the f32 sums err at most
K * 2^-24 * sum|products| (any order), far below what a wrong decode or scale moves.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import braze
import braze.quant as bq
from braze._arrays import BF16
from braze.reference import quant_w8a8 as ref
from conftest import cpu_isa, on_backend
from mtlsim.pytest_support import sanitized_rerun, simulated

test_under_sanitizers = sanitized_rerun(__file__)  # MTLSIM_SANITIZE=1: the Metal cases under ASan / UBSan

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
DTYPES = list(NP)
BACKENDS = [pytest.param("cpu", id="cpu"), pytest.param("metal", id="metal", marks=[simulated])]
PAIRS = [("int8", "int8", None), ("fp8_e4m3", "fp8_e4m3", "row"), ("fp8_e4m3", "fp8_e5m2", "row"),
         ("fp8_e4m3", "fp8_e4m3", "tensor"), ("fp8_e4m3", "fp8_e5m2", "tensor")]
PAIR_IDS = [f"{w}-{g or 'row'}" for _, w, g in PAIRS]
SHAPES = [(1, 7, 32), (3, 33, 32), (17, 65, 96), (100, 19, 40), (5, 9, 37)]


def weight(fmt, gran, n, k, rng):
    w = rng.normal(0, 1, (n, k)).astype(np.float32)
    return bq.quantize(w, fmt) if fmt == "int8" else bq.quantize(w, fmt, granularity=gran)


def activations(xfmt, m, k, rng, lead=None):
    x = rng.normal(0, 1, (m, k)).astype(np.float32)
    xq, sx = bq.quantize_activations(x, xfmt)
    if lead is not None:
        xq, sx = xq.reshape(lead + (k,)), sx.reshape(lead)
    return xq, sx


def reference(xq, sx, qw, bias=None, dtype="float32"):
    return ref.matmul_w8a8(xq, sx, qw.data, qw.scales, bias, format=qw.format, out_dtype=dtype)


def int8_product(xq, sx, qw):
    """f32(acc) * f32(x_scale * w_scale), exact in float64 (two 24-bit significands)."""
    acc = xq.astype(np.int64) @ qw.data.astype(np.int64).T
    s = sx.astype(np.float32)[:, None] * qw.scales.astype(np.float32)[None, :]
    return acc.astype(np.float32).astype(np.float64) * s.astype(np.float64)


def exact_int8(xq, sx, qw, dtype):
    """The kernels' int8 result bit for bit (no bias): exact sums, f32 epilogue."""
    return int8_product(xq, sx, qw).astype(np.float32).astype(NP[dtype])


def fp8_bound(xq, sx, qw):
    """K * 2^-24 * sum_k |x w| (scaled): the f32 summation bound."""
    k = xq.shape[-1]
    xv = np.abs(ref._codes_f64(np, xq, "e4m3")) * sx[:, None]
    wv = np.abs(ref._codes_f64(np, qw.data, ref.W8A8_FORMATS[qw.format]))
    s = np.asarray(qw.scales, np.float64)
    wv = wv * (s[0] if s.size == 1 else s[:, None])
    return (k + 2) * 2.0 ** -24 * (xv @ wv.T)


def close(got, want, dtype, extra=0.0):
    got = np.asarray(got).astype(np.float64)
    want = np.asarray(want).astype(np.float64)
    u = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    tiny = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}[dtype]
    err = np.abs(got - want)
    lim = u * np.abs(want) + extra * (1 + 2 * u) + tiny
    assert np.all(np.isfinite(got))
    assert np.all(err <= lim), f"max excess {np.max(err - lim)} at {np.unravel_index(np.argmax(err - lim), err.shape)}"


# ---------------------------------------------------------------- parity
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("xfmt,wfmt,gran", PAIRS, ids=PAIR_IDS)
def test_matches_reference(xfmt, wfmt, gran, shape, dtype, backend):
    m, n, k = shape
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    qw = weight(wfmt, gran, n, k, rng)
    xq, sx = activations(xfmt, m, k, rng)
    bias = rng.normal(0, 1, n).astype(NP[dtype])
    with on_backend(backend):
        y = bq.matmul(xq, qw, x_scale=sx, out_dtype=dtype)
        yb = bq.matmul(xq, qw, x_scale=sx, bias=bias, out_dtype=dtype)
    assert y.shape == (m, n) and y.dtype == NP[dtype] and yb.dtype == NP[dtype]
    if wfmt == "int8":
        assert y.tobytes() == exact_int8(xq, sx, qw, dtype).tobytes()
        want = int8_product(xq, sx, qw) + bias.astype(np.float64)  # one float64 rounding
        close(yb, want, dtype, extra=2.0 ** -23 * np.abs(want))  # f32, then the out dtype
    else:
        b = fp8_bound(xq, sx, qw)
        close(y, reference(xq, sx, qw, None, "float32").astype(np.float64), dtype, b)
        close(yb, reference(xq, sx, qw, bias.astype(np.float64), "float32").astype(np.float64), dtype, b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("col,k", [(5, 32), (20, 32), (36, 37)], ids=["vector", "second-vector", "tail"])
@pytest.mark.parametrize("wfmt", ["fp8_e4m3", "fp8_e5m2"])
def test_every_fp8_code_pair(wfmt, col, k, backend):
    """x row c holds e4m3 code c and W row d code d, in one column (zeros elsewhere): out[c, d]
    is the one product value(c) * value(d), exact in f32, NaN and inf included (e4m3 0x7f / 0xff,
    e5m2 inf and NaN), for a column in the first / second vector of a row and in its scalar tail."""
    codes = np.arange(256, dtype=np.uint8)
    xq = np.zeros((256, k), np.uint8)
    xq[:, col] = codes
    data = np.zeros((256, k), np.uint8)
    data[:, col] = codes
    qw = bq.QuantizedTensor(wfmt, (256, k), data, np.ones(256, np.float32))
    ones = np.ones(256, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        want = reference(xq, ones, qw, None, "float32")
    isas = braze._cpu.isas_supported() if backend == "cpu" else [None]
    for isa in isas:  # the CPU's AVX-512 / AVX2 bit-moving decode and the base build's table
        with on_backend(backend), (cpu_isa(isa) if isa else on_backend("cpu")):
            for rows in (slice(0, 16), slice(0, 256)):  # the GEMV and the tiled path
                got = bq.matmul(xq[rows], qw, x_scale=ones[rows], out_dtype="float32")
                assert np.array_equal(got, want[rows], equal_nan=True), isa
                assert np.isnan(got).sum() == np.isnan(want[rows]).sum() > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_int8_metal_equals_cpu_bit_for_bit(backend):
    """Every backend's int8 result is the same bits, bias included (same fma)."""
    rng = np.random.default_rng(3)
    qw = weight("int8", None, 37, 200, rng)
    for m in (1, 5, 16, 17, 70):
        xq, sx = activations("int8", m, 200, rng)
        bias = rng.normal(0, 1, 37).astype(BF16)
        want = bq.matmul(xq, qw, x_scale=sx, bias=bias)
        with on_backend(backend):
            got = bq.matmul(xq, qw, x_scale=sx, bias=bias)
        assert got.dtype == BF16 and got.tobytes() == want.tobytes()


def test_fp8_against_torch_decode():
    """The fp8 codes decoded by torch (float8_e4m3fn / float8_e5m2) and multiplied in float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for wfmt, tdt in (("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)):
        qw = weight(wfmt, "row", 45, 96, rng)
        for m in (1, 3, 17, 100):
            xq, sx = activations("fp8_e4m3", m, 96, rng)
            tx = torch.from_numpy(xq).view(torch.float8_e4m3fn).double() * torch.from_numpy(sx).double()[:, None]
            tw = torch.from_numpy(qw.data).view(tdt).double() * torch.from_numpy(qw.scales).double()[:, None]
            want = (tx @ tw.T).numpy()
            got = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
            close(got, want, "float32", fp8_bound(xq, sx, qw))


def test_int8_against_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    qw = weight("int8", None, 33, 64, rng)
    xq, sx = activations("int8", 17, 64, rng)
    tx, ts = torch.from_numpy(xq), torch.from_numpy(sx)
    td, tws = torch.from_numpy(qw.data), torch.from_numpy(qw.scales)
    tq = bq.QuantizedTensor("int8", (33, 64), td, tws)
    got = bq.matmul(tx, tq, x_scale=ts, out_dtype="float32")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    acc = tx.long() @ td.long().T  # exact
    want = acc.double() * ts.double()[:, None] * tws.double()[None, :]
    assert torch.allclose(got.double(), want, rtol=2 ** -22, atol=0)
    assert got.numpy().tobytes() == exact_int8(xq, sx, qw, "float32").tobytes()


def test_end_to_end_close_to_float_matmul():
    """quantize_activations + quantize + W8A8 approximates the float product (int8 within 2%)."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (9, 256)).astype(np.float32)
    w = rng.normal(0, 1, (31, 256)).astype(np.float32)
    full = x.astype(np.float64) @ w.astype(np.float64).T
    for xfmt, wfmt, tol in (("int8", "int8", 0.02), ("fp8_e4m3", "fp8_e4m3", 0.08), ("fp8_e4m3", "fp8_e5m2", 0.15)):
        xq, sx = bq.quantize_activations(x, xfmt)
        y = bq.matmul(xq, bq.quantize(w, wfmt), x_scale=sx, out_dtype="float32")
        rel = np.linalg.norm(y - full) / np.linalg.norm(full)
        assert rel < tol, (wfmt, rel)


# ---------------------------------------------------------------- layouts
@pytest.mark.parametrize("backend", BACKENDS)
def test_leading_axes_and_strided_rows(backend):
    rng = np.random.default_rng(8)
    qw = weight("int8", None, 11, 48, rng)
    xq, sx = activations("int8", 6, 48, rng)
    with on_backend(backend):
        flat = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
        lead = bq.matmul(xq.reshape(2, 3, 48), qw, x_scale=sx.reshape(2, 3), out_dtype="float32")
        lead1 = bq.matmul(xq.reshape(2, 3, 48), qw, x_scale=sx, out_dtype="float32")
        wide = np.zeros((6, 48 + 13), np.int8)
        wide[:, 5:53] = xq
        strided = bq.matmul(wide[:, 5:53], qw, x_scale=sx, out_dtype="float32")
        out = np.full((6, 20), np.nan, np.float32)
        back = bq.matmul(xq, qw, x_scale=sx, out=out[:, 3:14])
    assert lead.shape == (2, 3, 11) and lead1.shape == (2, 3, 11)
    assert lead.reshape(6, 11).tobytes() == flat.tobytes() == lead1.reshape(6, 11).tobytes()
    assert strided.tobytes() == flat.tobytes()
    assert back.base is out or np.shares_memory(back, out)
    assert np.array_equal(out[:, 3:14], flat) and np.isnan(out[:, :3]).all() and np.isnan(out[:, 14:]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_shapes(backend):
    rng = np.random.default_rng(9)
    qw = weight("fp8_e4m3", "row", 5, 32, rng)
    xq, sx = activations("fp8_e4m3", 3, 32, rng)
    with on_backend(backend):
        assert bq.matmul(xq[:0], qw, x_scale=sx[:0]).shape == (0, 5)
        empty_w = bq.QuantizedTensor("fp8_e4m3", (0, 32), qw.data[:0], qw.scales[:0])
        assert bq.matmul(xq, empty_w, x_scale=sx).shape == (3, 0)


def test_out_dtype_defaults_to_bfloat16_and_follows_out():
    rng = np.random.default_rng(10)
    qw = weight("int8", None, 4, 32, rng)
    xq, sx = activations("int8", 2, 32, rng)
    assert bq.matmul(xq, qw, x_scale=sx).dtype == BF16
    out = np.empty((2, 4), np.float16)
    assert bq.matmul(xq, qw, x_scale=sx, out=out) is out


@pytest.mark.parametrize("isa", ["base", "avx2", "avx512"])
@pytest.mark.parametrize("xfmt,wfmt,gran", PAIRS[:3], ids=PAIR_IDS[:3])
def test_every_isa_and_thread_count(isa, xfmt, wfmt, gran):
    if isa not in braze._cpu.isas_supported():
        pytest.skip(f"{isa} not supported here")
    rng = np.random.default_rng(11)
    qw = weight(wfmt, gran, 70, 300, rng)
    xq, sx = activations(xfmt, 40, 300, rng)
    want = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
    before = braze._cpu.num_threads()
    try:
        with cpu_isa(isa):
            for t in (1, 2, 3):
                braze._cpu.set_num_threads(t)
                got = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
                if wfmt == "int8":
                    assert got.tobytes() == want.tobytes() == exact_int8(xq, sx, qw, "float32").tobytes()
                else:
                    close(got, reference(xq, sx, qw, None, "float32"), "float32", fp8_bound(xq, sx, qw))
                    if t > 1:
                        assert got.tobytes() == first.tobytes()  # noqa: F821 - thread count never changes bits
                    first = got
    finally:
        braze._cpu.set_num_threads(before)


def test_vnni_on_and_off_same_bits():
    if not braze._cpu.quant_vnni() and "avx512" not in braze._cpu.isas_supported():
        pytest.skip("no AVX-512 here")
    rng = np.random.default_rng(12)
    qw = weight("int8", None, 9, 200, rng)
    xq, sx = activations("int8", 5, 200, rng)
    xq[0, :64] = -128  # the extreme level: the +128 offset of VNNI's unsigned operand must stay exact
    want = exact_int8(xq, sx, qw, "float32")
    before = braze._cpu.quant_vnni()
    try:
        for on in ([False, True] if braze._cpu.quant_vnni() else [False]):
            braze._cpu.set_quant_vnni(on)
            assert bq.matmul(xq, qw, x_scale=sx, out_dtype="float32").tobytes() == want.tobytes()
    finally:
        if before:
            braze._cpu.set_quant_vnni(True)


# ---------------------------------------------------------------- AMX
# The int8 GEMM (more than 16 rows) runs on the AMX tile unit where the CPU, the OS and the
# build allow it (braze._cpu.quant_amx(); BRAZE_CPU_AMX=0 turns it off), else the VNNI /
# vpmaddwd kernels. "emulated" runs the same AMX kernel source on a software model of the
# tile instructions (csrc/cpu/amx_emulate.h), so its packing, tails and indexing are tested
# on machines without AMX too; "hardware" needs the tile unit.
AMX = braze._cpu.quant_amx()
AMX_MODES = [pytest.param("hardware", marks=pytest.mark.skipif(not AMX, reason="no usable AMX-INT8 here "
                                                                "(CPU, OS or build), or BRAZE_CPU_AMX=0")),
             "emulated"]


@contextlib.contextmanager
def amx_path(mode):
    try:
        if mode == "hardware":
            braze._cpu.set_quant_amx(True)
        else:
            braze._cpu._set_quant_amx_emulated(True)
        yield
    finally:
        braze._cpu._set_quant_amx_emulated(False)
        braze._cpu.set_quant_amx(AMX)


@contextlib.contextmanager
def vnni_path():
    try:
        braze._cpu.set_quant_amx(False)
        yield
    finally:
        braze._cpu.set_quant_amx(AMX)


def _amx_vs_vnni(mode, xq, sx, qw, **kw):
    """(AMX result, VNNI result) of the same call."""
    with amx_path(mode):
        got = bq.matmul(xq, qw, x_scale=sx, **kw)
        got = got.copy() if "out" in kw else got
    with vnni_path():
        want = bq.matmul(xq, qw, x_scale=sx, **kw)
    return got, want


def _int8_weight(data, rng):
    return bq.QuantizedTensor("int8", data.shape, data, rng.uniform(0.5, 2, data.shape[0]).astype(np.float32))


@pytest.mark.parametrize("mode", AMX_MODES)
@pytest.mark.parametrize("k", [4, 37, 64, 68, 4100])
def test_amx_equals_vnni_bit_for_bit(k, mode):
    """The AMX GEMM against the VNNI kernel and the exact sums: row counts that are not
    multiples of the 16-row tiles, every N from 1 to 70 (W row tails of the 16-row tiles and
    of the 64-row tasks), K tails of the 64-byte tile step and of 4-byte groups, the extreme
    level -128 on both sides, bias, and the out dtypes."""
    rng = np.random.default_rng(20 + k)
    ns = range(1, 71) if k <= 68 else (1, 15, 16, 17, 33, 48, 64, 65, 70)
    for m in (17, 33, 100):
        x = rng.integers(-128, 128, (m, k), dtype=np.int8)
        x[0] = -128
        sx = rng.uniform(0.5, 2, m).astype(np.float32)
        for n in ns:
            data = rng.integers(-128, 128, (n, k), dtype=np.int8)
            data[-1] = -128
            qw = _int8_weight(data, rng)
            got, want = _amx_vs_vnni(mode, x, sx, qw, out_dtype="float32")
            assert got.tobytes() == want.tobytes() == exact_int8(x, sx, qw, "float32").tobytes(), (m, n, k)
    bias = rng.normal(0, 1, 70).astype(NP["bfloat16"])  # the last qw: 70 rows
    for dtype in DTYPES:
        got, want = _amx_vs_vnni(mode, x, sx, qw, bias=bias.astype(NP[dtype]), out_dtype=dtype)
        assert got.dtype == NP[dtype] and got.tobytes() == want.tobytes(), dtype


@pytest.mark.parametrize("mode", AMX_MODES)
def test_amx_strided_rows_and_out(mode):
    """x and W rows a stride apart (odd offsets: no alignment, and bytes past K that must not
    be read into the sums), out a strided view; 64-row tasks over 130 rows (a 2-row tail
    task) and 4096-byte rows."""
    rng = np.random.default_rng(21)
    m, n, k = 130, 67, 4096
    wide = rng.integers(-128, 128, (m, k + 77), dtype=np.int8)
    x = wide[:, 3:3 + k]
    sx = rng.uniform(1e-4, 2e-4, m).astype(np.float32)  # float16 outputs: sums up to 2^26
    wwide = rng.integers(-128, 128, (n, k + 5), dtype=np.int8)
    qw = _int8_weight(wwide[:, 1:1 + k], rng)
    acc = x.astype(np.int64) @ qw.data.astype(np.int64).T
    s = sx[:, None] * qw.scales[None, :]
    want = (acc.astype(np.float32).astype(np.float64) * s.astype(np.float64)).astype(np.float32).astype(np.float16)
    out = np.full((m, n + 9), np.nan, np.float16)
    got, vnni = _amx_vs_vnni(mode, x, sx, qw, out=out[:, 4:4 + n])
    assert got.tobytes() == vnni.tobytes() == want.tobytes()
    assert np.isnan(out[:, :4]).all() and np.isnan(out[:, 4 + n:]).all()


@pytest.mark.parametrize("isa", ["base", "avx2", "avx512"])
def test_amx_emulated_in_every_isa_and_thread_count(isa):
    """The AMX path is taken from each ISA build's GEMM (the emulated unit where the CPU has
    none) and does not depend on the thread count."""
    if isa not in braze._cpu.isas_supported():
        pytest.skip(f"{isa} not supported here")
    rng = np.random.default_rng(23)
    qw = _int8_weight(rng.integers(-128, 128, (70, 300), dtype=np.int8), rng)
    x = rng.integers(-128, 128, (40, 300), dtype=np.int8)
    sx = rng.uniform(0.5, 2, 40).astype(np.float32)
    want = exact_int8(x, sx, qw, "float32")
    before = braze._cpu.num_threads()
    try:
        with cpu_isa(isa), amx_path("emulated"):
            for t in (1, 2, 3):
                braze._cpu.set_num_threads(t)
                assert bq.matmul(x, qw, x_scale=sx, out_dtype="float32").tobytes() == want.tobytes(), t
    finally:
        braze._cpu.set_num_threads(before)


def test_amx_switch_and_environment():
    """BRAZE_CPU_AMX=0 (read at first use) starts with the VNNI kernel, with the same bits;
    set_quant_amx(True) where AMX is not usable is a ValueError."""
    rng = np.random.default_rng(22)
    x = rng.integers(-128, 128, (40, 200), dtype=np.int8)
    sx = rng.uniform(0.5, 2, 40).astype(np.float32)
    qw = _int8_weight(rng.integers(-128, 128, (50, 200), dtype=np.int8), rng)
    here = bq.matmul(x, qw, x_scale=sx, out_dtype="float32")
    code = ("import sys, numpy as np, braze, braze.quant as bq\n"
            "a = np.load(sys.argv[1])\n"
            "qw = bq.QuantizedTensor('int8', a['w'].shape, a['w'], a['ws'])\n"
            "y = bq.matmul(a['x'], qw, x_scale=a['sx'], out_dtype='float32')\n"
            "print(int(braze._cpu.quant_amx()), y.tobytes().hex())\n")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.npz")
        np.savez(path, x=x, sx=sx, w=qw.data, ws=qw.scales)
        for env, amx in (("0", False), ("1", AMX or None)):
            r = subprocess.run([sys.executable, "-c", code, path], env={**os.environ, "BRAZE_CPU_AMX": env},
                               capture_output=True, text=True, check=True)
            flag, hexed = r.stdout.splitlines()[-1].split()  # the last line: an editable build may print first
            if amx is not None:
                assert flag == str(int(amx)), env
            assert bytes.fromhex(hexed) == here.tobytes(), env
    if not AMX and os.environ.get("BRAZE_CPU_AMX") != "0":
        with pytest.raises(ValueError, match="on: this CPU"):
            braze._cpu.set_quant_amx(True)
    with vnni_path():
        assert not braze._cpu.quant_amx()
    assert braze._cpu.quant_amx() == AMX


# ---------------------------------------------------------------- errors
def _setup(rng=None):
    rng = rng or np.random.default_rng(13)
    return weight("int8", None, 4, 32, rng), *activations("int8", 2, 32, rng)


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_name_the_argument_and_write_nothing(backend):
    rng = np.random.default_rng(14)
    qw, xq, sx = _setup(rng)
    q8 = weight("fp8_e4m3", "row", 4, 32, rng)
    xe, se = activations("fp8_e4m3", 2, 32, rng)
    block = weight("fp8_e4m3", "block", 4, 32, rng)
    out = np.full((2, 4), np.nan, np.float32)
    cases = [
        (dict(x=xq, qw=qw), ValueError, "x_scale is required"),
        (dict(x=xq.astype(np.float32), qw=qw, x_scale=sx), ValueError, "x_scale applies to quantized x"),
        (dict(x=xq, qw=q8, x_scale=sx), ValueError, "x: int8 x does not pair"),
        (dict(x=xe, qw=qw, x_scale=se), ValueError, r"x: e4m3 \(uint8\) x does not pair"),
        (dict(x=xe, qw=block, x_scale=se), ValueError, "block-scaled fp8"),
        (dict(x=xq, qw=bq.quantize(np.ones((4, 32), np.float32), "q8_0"), x_scale=sx), ValueError, "qw: quantized x"),
        (dict(x=xq, qw=np.ones((4, 32), np.float32), x_scale=sx), ValueError, "qw: quantized x"),
        (dict(x=xq[:, :16], qw=qw, x_scale=sx), ValueError, "x: K = 16"),
        (dict(x=xq, qw=qw, x_scale=sx[:1]), ValueError, "x_scale"),
        (dict(x=xq, qw=qw, x_scale=sx.astype(np.float16)), TypeError, "x_scale"),
        (dict(x=xq, qw=qw, x_scale=sx, bias=np.zeros(4, np.float16)), TypeError, "bias"),
        (dict(x=xq, qw=qw, x_scale=sx, bias=np.zeros(5, np.float32), out=out), ValueError, "bias"),
        (dict(x=xq, qw=qw, x_scale=sx, out=np.zeros((2, 5), np.float32)), ValueError, "out"),
        (dict(x=xq, qw=qw, x_scale=sx, out=out, out_dtype="float16"), ValueError, "out has dtype float32"),
        (dict(x=xq, qw=qw, x_scale=sx, out_dtype="int8"), ValueError, "out_dtype"),
        (dict(x=xq.astype(np.float32), qw=qw, out_dtype="float16"), ValueError, "out_dtype"),
        (dict(x=xq, qw=qw, x_scale=sx, out=out, bias=np.zeros(4, np.float32), out_dtype="float32"), None, None),
    ]
    with on_backend(backend):
        for kw, exc, msg in cases:
            out[...] = np.nan
            if exc is None:
                bq.matmul(**kw)
                assert not np.isnan(out).any()
                continue
            with pytest.raises(exc, match=msg):
                bq.matmul(**kw)
            assert np.isnan(out).all(), kw


def test_int8_k_limit():
    rng = np.random.default_rng(15)
    k = 131072 + 8
    qw = bq.QuantizedTensor("int8", (1, k), np.ones((1, k), np.int8), np.ones(1, np.float32))
    xq = np.ones((1, k), np.int8)
    with pytest.raises(ValueError, match="x: K = 131080 is above 131072"):
        bq.matmul(xq, qw, x_scale=np.ones(1, np.float32))
    k = 131072  # at the limit: 127 * 127 * K fits int32, exactly
    qw = bq.QuantizedTensor("int8", (1, k), np.full((1, k), 127, np.int8), np.ones(1, np.float32))
    y = bq.matmul(np.full((1, k), -127, np.int8), qw, x_scale=np.ones(1, np.float32), out_dtype="float32")
    assert y[0, 0] == np.float32(-127 * 127 * k)
    del rng


def test_float_x_unchanged():
    """A float x with an int8 weight keeps the float path (dequantized W, x's dtype)."""
    rng = np.random.default_rng(16)
    qw = weight("int8", None, 6, 32, rng)
    x = rng.normal(0, 1, (3, 32)).astype(np.float32)
    y = bq.matmul(x, qw)
    assert y.dtype == np.float32
    assert bq.matmul(x, qw, out_dtype="float32").tobytes() == y.tobytes()


def test_torch_tensors_and_compile():
    """torch in, torch out (leading axes, bias), and torch.compile(fullgraph) traces the W8A8 op."""
    torch = pytest.importorskip("torch")
    import braze.integrations.torch  # noqa: F401  (the ops torch.compile traces; docs/torch.md)
    rng = np.random.default_rng(17)
    w = torch.from_numpy(rng.standard_normal((24, 64)).astype(np.float32))
    x = torch.from_numpy(rng.standard_normal((6, 64)).astype(np.float32))
    for xfmt, wfmt in (("int8", "int8"), ("fp8_e4m3", "fp8_e5m2")):
        qw = bq.quantize(w, wfmt)
        xq, sx = bq.quantize_activations(x, xfmt)
        assert isinstance(xq, torch.Tensor)
        bias = torch.ones(24, dtype=torch.bfloat16)
        got = bq.matmul(xq.view(2, 3, 64), qw, x_scale=sx.view(2, 3), bias=bias)
        assert isinstance(got, torch.Tensor) and got.shape == (2, 3, 24) and got.dtype == torch.bfloat16
        qn = bq.QuantizedTensor(wfmt, (24, 64), qw.data.numpy(), qw.scales.numpy())
        want = reference(xq.numpy(), sx.numpy(), qn, np.ones(24), "float32").astype(np.float64)
        close(got.float().numpy().reshape(6, 24), want, "bfloat16", fp8_bound(xq.numpy(), sx.numpy(), qn)
              if wfmt != "int8" else 2.0 ** -23 * np.abs(want))
        compiled = torch.compile(lambda a, s: bq.matmul(a, qw, x_scale=s, bias=bias), fullgraph=True)
        assert torch.equal(compiled(xq.view(2, 3, 64), sx.view(2, 3)), got)


def test_reference_fallback_numpy_and_torch():
    """Where a backend has no kernel the reference composition runs in the caller's framework:
    the same values as the kernel (int8: to the rounding of the one f32 step), out= filled."""
    torch = pytest.importorskip("torch")
    from braze import testing

    rng = np.random.default_rng(18)
    for xfmt, wfmt in (("int8", "int8"), ("fp8_e4m3", "fp8_e4m3")):
        qw = weight(wfmt, "row", 9, 48, rng)
        xq, sx = activations(xfmt, 4, 48, rng)
        kern = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
        tq = bq.QuantizedTensor(wfmt, (9, 48), torch.from_numpy(qw.data), torch.from_numpy(qw.scales))
        with testing.force_reference():
            ref_np = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
            out = torch.full((4, 9), float("nan"))
            ref_t = bq.matmul(torch.from_numpy(xq), tq, x_scale=torch.from_numpy(sx), out=out)
        assert ref_np.dtype == np.float32 and ref_t is out
        close(ref_np, kern.astype(np.float64), "float32", 2.0 ** -22 * np.abs(kern))
        assert np.array_equal(ref_t.numpy(), ref_np)


def test_cuda_fp8_gemm_bound_is_small_and_shaped():
    """The registry's extra CUDA tolerance (fp8 mma, m > 16) is [M, N], zero elsewhere, and far
    below what a wrong product moves (a few 1e-4 of sum|x w|)."""
    from braze import _spec, testing

    spec = _spec.get("matmul_w8a8_fp8_e5m2")
    for m, want_none in ((16, True), (17, False)):
        args, kw = spec.make_inputs((m, 9, 64), "float32", np.random.default_rng(19), {}, False)
        args64 = [testing.to_numpy64(a) for a in args]
        b = spec.err_bound(args64, kw, "cuda", "float32")
        assert (b is None) == want_none
        assert spec.err_bound(args64, kw, "cpu", "float32") is None
        if b is not None:
            y = np.abs(np.asarray(spec.reference(*args64, **kw), np.float64))
            assert b.shape == (m, 9) and np.all(b > 0) and np.all(b < 0.01 * (y + 1))
