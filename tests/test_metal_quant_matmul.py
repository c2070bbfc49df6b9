"""matmul on Metal (shaders/metal/quant/matmul.metal), run through the simulated
braze._metal: its native ``matmul(format, x, data, scales, biases, tensor_scale,
bias, out, group)`` on numpy arrays (the real bindings, core checks, plan and
shaders), against float64: W = braze's CPU dequantize (float32 values, exact in
float64), ``x @ W.T + bias``.

Tolerance: the kernels accumulate in float32 (x, W upcast; on the GEMM path
f32 simdgroup matrices for every dtype) and round once, so
    |got - ref| <= u_out |ref| + 16 * 2^-24 * sqrt(K) * max|x| * max|W| (+ 1 ulp of the output for subnormals)
with u_out the output's unit roundoff (2^-24, 2^-11, 2^-8). The second term is
float32 accumulation (the measured f32 errors reach 0.27 of it, f16 / bf16 far less). A case with
exactly representable partial sums is checked bit for bit (one rounding, bias
added before it)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import braze.quant as bq
from braze._arrays import BF16, Numpy
from braze.specs.quant import random_blocks

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import mtlsim  # noqa: E402
from mtlsim.pytest_support import sanitized_rerun, simulated  # noqa: E402

test_under_sanitizers = sanitized_rerun(__file__)  # not under `simulated`: it runs where the rest skip

NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
DTYPES = list(NP)
UNIT = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
TINY = {"float32": 2.0 ** -149, "float16": 2.0 ** -24, "bfloat16": 2.0 ** -133}
ACC = 16 * 2.0 ** -24
BLOCK = {f: b for f, b, *_ in __import__("braze")._cpu._quant_formats()}
FORMATS = list(BLOCK) + ["dense"]
SPLIT_OPTS = {"fp8_e4m3": dict(granularity="row"), "fp8_e5m2": dict(granularity="block"),
              "affine3": dict(group_size=32), "affine4": dict(group_size=64), "affine6": dict(group_size=128)}
ROWS = (1, 3, 16, 17, 40)  # GEMV up to 16 rows, GEMM beyond


def metal():
    return mtlsim.metal_module()


def gguf_fp4_blocks(fmt, n, k, rng):
    """Random mxfp4_gguf / nvfp4_gguf blocks with scales near 1 (random scale bytes reach 2^127)."""
    if fmt == "mxfp4_gguf":
        b = rng.integers(0, 256, (n, k // 32, 17), dtype=np.uint8)
        b[..., 0] = rng.integers(122, 130, (n, k // 32))  # e8m0: 2^(x - 128) halves
    else:
        b = rng.integers(0, 256, (n, k // 64, 36), dtype=np.uint8)
        b[..., :4] = rng.integers(0x28, 0x48, (n, k // 64, 4))  # ue4m3 sub-scales 1/4 .. 4
    return b.reshape(n, -1)


class Weight:
    """A weight [N, K] as matmul takes it, and its float64 values."""

    def __init__(self, fmt, n, k, dtype, rng):
        self.format = "" if fmt == "dense" else fmt
        self.scales = self.biases = self.tensor_scale = None
        self.group = 0
        if fmt == "dense":
            self.data = rng.normal(0, 0.1, (n, k)).astype(NP[dtype])
            self.w64 = self.data.astype(np.float64)
            return
        if fmt in ("mxfp4_gguf", "nvfp4_gguf"):
            qw = bq.QuantizedTensor(fmt, (n, k), gguf_fp4_blocks(fmt, n, k, rng))
        elif fmt in bq.formats() and bq.formats()[fmt].layout == "blocks":
            qw = bq.QuantizedTensor(fmt, (n, k), random_blocks(fmt, n, k, rng))
        else:
            w = (rng.normal(0, 0.1, (n, k)) * np.exp(rng.uniform(-2, 2, (n, 1)))).astype(np.float32)
            qw = bq.quantize(w, fmt, **SPLIT_OPTS.get(fmt, {}))  # on the CPU backend
        self.data, self.scales, self.biases, self.tensor_scale = qw.data, qw.scales, qw.biases, qw.tensor_scale
        self.group = qw.group_size or 0
        self.w64 = bq.dequantize(qw).astype(np.float64)
        assert np.isfinite(self.w64).all()

    @classmethod
    def given(cls, fmt, data, w64):
        """A weight of explicit data (block formats and dense only)."""
        w = cls.__new__(cls)
        w.format, w.data, w.w64 = fmt, data, w64
        w.scales = w.biases = w.tensor_scale = None
        w.group = 0
        return w

    def args(self):
        return [Numpy.native(a) if a is not None else None
                for a in (self.data, self.scales, self.biases, self.tensor_scale)]


def run(w, x, bias, out):
    """The native matmul on the simulator, writing `out`."""
    metal().matmul(w.format, Numpy.native(x), *w.args(), None if bias is None else Numpy.native(bias),
                   Numpy.native(out), w.group)
    return out


def check(got, x, w, bias, dtype):
    x64 = x.astype(np.float64)
    ref = x64 @ w.w64.T + (0.0 if bias is None else bias.astype(np.float64))
    k = x.shape[1]
    tol = UNIT[dtype] * np.abs(ref) + ACC * np.sqrt(max(k, 1)) * np.abs(x64).max(initial=0) * np.abs(
        w.w64).max(initial=0) + TINY[dtype]
    err = np.abs(got.astype(np.float64) - ref)
    assert np.isfinite(got.astype(np.float64)).all()
    bad = err > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} beyond tolerance; worst {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"


def one_block(fmt):
    if fmt.startswith("affine"):
        return SPLIT_OPTS.get(fmt, {}).get("group_size", 64)  # one scale group
    b = BLOCK.get(fmt, 1)
    return b if b > 1 else 13  # fp8 / int8 / dense: K is free, 13 leaves a partial chunk


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_matmul_one_block_every_row_count(fmt, dtype):
    """K = one block, N = 37 (not a multiple of the GEMV's 4 rows or the GEMM's 32), bias, m from 1 to 40."""
    rng = np.random.default_rng(len(fmt) * 7 + DTYPES.index(dtype))
    n, k = 37, one_block(fmt)
    w = Weight(fmt, n, k, dtype, rng)
    bias = rng.normal(0, 1, n).astype(NP[dtype])
    for m in ROWS:
        x = rng.normal(0, 1, (m, k)).astype(NP[dtype])
        got = run(w, x, bias, np.full((m, n), np.nan, NP[dtype]))
        check(got, x, w, bias, dtype)


LONG = [("q4_0", 2048), ("q6_K", 768), ("iq4_xs", 512), ("mxfp6_e2m3", 160), ("nvfp4", 48), ("nvfp4_gguf", 192),
        ("fp8_e4m3", 301), ("int8", 75), ("affine4", 192), ("dense", 45)]


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fmt,k", LONG)
def test_matmul_many_blocks_strided_rows(fmt, k, dtype):
    """Several blocks (K past one 32-step, partial last steps), x and out rows strided, no bias."""
    rng = np.random.default_rng(k)
    n = 21
    w = Weight(fmt, n, k, dtype, rng)
    for m in (5, 33):
        xs = rng.normal(0, 1, (2 * m, k + 3)).astype(NP[dtype])
        x = xs[::2, 1:k + 1]
        outs = np.full((m, n + 6), -7.0, NP[dtype])
        got = run(w, x, None, outs[:, 2:n + 2])
        check(got, x, w, None, dtype)
        assert (outs[:, :2].astype(np.float32) == -7.0).all() and (outs[:, n + 2:].astype(np.float32) == -7.0).all()


@simulated
def test_matmul_dense_strided_and_broadcast_rows():
    """A dense W with strided rows; x and W with stride-0 (broadcast) rows."""
    rng = np.random.default_rng(5)
    for m in (2, 20):
        for dtype in DTYPES:
            full = rng.normal(0, 0.1, (9, 50)).astype(NP[dtype])
            w = Weight.given("", full[:, 4:44], full[:, 4:44].astype(np.float64))
            x = rng.normal(0, 1, (m, 40)).astype(NP[dtype])
            check(run(w, x, None, np.empty((m, 9), NP[dtype])), x, w, None, dtype)
            xb = np.broadcast_to(x[0], x.shape)
            wb = np.broadcast_to(full[0, :40], (9, 40))
            w = Weight.given("", wb, wb.astype(np.float64))
            check(run(w, xb, None, np.empty((m, 9), NP[dtype])), xb, w, None, dtype)


def q8_0_exact(n, k, rng):
    """q8_0 blocks with scale 2^-4: products with x of few-bit values are exact in float32."""
    b = np.zeros((n, k // 32, 34), np.uint8)
    b[..., 0:2] = np.full((n, k // 32, 1), 2.0 ** -4, np.float16).view(np.uint8)
    b[..., 2:] = rng.integers(-127, 128, (n, k // 32, 32)).astype(np.int8).view(np.uint8)
    return b.reshape(n, -1)


@simulated
@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_rounds_once_after_the_bias(dtype):
    """Exact float32 sums (small integers times powers of two), so the only rounding is the last:
    the result must equal the exact value rounded once to the dtype, bit for bit, on both paths."""
    rng = np.random.default_rng(11)
    n, k = 19, 64
    qw = bq.QuantizedTensor("q8_0", (n, k), q8_0_exact(n, k, rng))
    w = Weight.given("q8_0", qw.data, bq.dequantize(qw).astype(np.float64))
    bias = (rng.integers(-64, 64, n) / 32.0 + 2.0 ** -9).astype(NP[dtype])  # below half an ulp of most sums
    wd = (rng.integers(-64, 64, (n, k)) / 16.0).astype(NP[dtype])
    dense = Weight.given("", wd, wd.astype(np.float64))
    for m in (3, 40):
        x = (rng.integers(-100, 100, (m, k)) / 8.0).astype(NP[dtype])
        for weight in (w, dense):
            exact = x.astype(np.float64) @ weight.w64.T + bias.astype(np.float64)
            assert (exact.astype(np.float32).astype(np.float64) == exact).all()  # exact in float32
            want = exact.astype(np.float32).astype(NP[dtype])
            got = run(weight, x, bias, np.empty((m, n), NP[dtype]))
            assert (got.view(np.uint16 if dtype != "float32" else np.uint32) ==
                    want.view(np.uint16 if dtype != "float32" else np.uint32)).all(), (weight.format, m)


@simulated
def test_matmul_k_zero_gives_the_bias_and_m_zero_writes_nothing():
    rng = np.random.default_rng(2)
    w = Weight.given("", np.zeros((6, 0), np.float32), np.zeros((6, 0)))
    bias = rng.normal(0, 1, 6).astype(np.float32)
    for m in (2, 20):
        got = run(w, np.zeros((m, 0), np.float32), bias, np.full((m, 6), np.nan, np.float32))
        assert (got == bias).all()
    out = np.full((0, 6), np.nan, np.float32)
    run(w, np.zeros((0, 0), np.float32), bias, out)


@simulated
def test_matmul_bad_input_raises_before_writing():
    rng = np.random.default_rng(4)
    w = Weight("q4_0", 8, 64, "float32", rng)
    x = rng.normal(0, 1, (3, 64)).astype(np.float32)
    out = np.full((3, 8), 5.0, np.float32)
    with pytest.raises(TypeError, match="bias"):
        run(w, x, np.zeros(8, np.float16), out)
    with pytest.raises(ValueError, match="out"):
        run(w, rng.normal(0, 1, (4, 64)).astype(np.float32), None, out)
    assert (out == 5.0).all()


@simulated
def test_host_names_cover_every_format_and_path():
    mod = metal()
    for fmt in FORMATS:
        for dt in ("f32", "f16", "bf16"):
            assert mod._has_kernel(f"matmul_{fmt}_{dt}") and mod._has_kernel(f"matmul_gemm_{fmt}_{dt}"), (fmt, dt)
