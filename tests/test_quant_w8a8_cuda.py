"""braze._cuda.matmul_w8a8 (shaders/cuda/quant/w8a8.cuh) on a CUDA GPU: W8A8 matmul of
x quantized by quantize_activations and an int8 / fp8 weight.

- int8: the sums are exact int32 on every path (dp4a GEMV, mma s8 GEMM) and the f32
  epilogue is fma(f32(acc), x_scale * w_scale, bias) as on the CPU, so the CUDA result
  equals the CPU's bit for bit (every out dtype, bias included), and, without bias,
  torch._int_mm's exact int32 product put through the same epilogue in float64.
- fp8 (e4m3 x with e4m3 / e5m2 W): against the float64 reference, within
  (K + 2) 2^-24 sum|x w| (f32 sums, the GEMV and the GEMV slabs of GPUs without fp8
  mma) or, on the mma GEMM (m > 16, sm_89+; e4m3 x e4m3 on Hopper: the wgmma GEMM),
  2^-11 sum|x w| (the tensor cores' fp8 accumulation, promoted to f32 every 64 products
  (mma) or 128 (wgmma): a design bound not yet measured),
  plus the output's rounding; and against torch._scaled_mm (e4m3 x e4m3, row-wise
  scales) where torch has it on this GPU.
Rows cross the GEMV / GEMM switch (1, 2, 3, 5, 8, 16, 17, 64, 100, 200), N = 67 and
N = 1, K = 32, 37 (not a multiple of 16: the byte path) and 4112; strided and
misaligned x rows (the byte path), leading axes, out= strided, a second stream.

Skips cleanly without torch, a GPU or a usable braze._cuda.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import braze.quant as bq  # noqa: E402
from braze import _backends  # noqa: E402
from braze._arrays import BF16  # noqa: E402
from braze.reference import quant_w8a8 as ref  # noqa: E402

READY = torch.cuda.is_available() and _backends.usable("cuda")
pytestmark = [pytest.mark.cuda,
              pytest.mark.skipif(not READY, reason=f"no CUDA GPU, torch or braze._cuda here "
                                                   f"({_backends.why_not('cuda') or 'torch sees no GPU'})")]

DTYPES = ("float32", "float16", "bfloat16")
_TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
_NP = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
_U = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
ROWS = (1, 2, 3, 5, 8, 16, 17, 64, 100, 200)
KS = (32, 37, 4112)
FP8_MMA = 2.0 ** -11  # python/braze/specs/quant_w8a8.py, CUDA_FP8_MMA


def fp8_mma():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor >= 89


def host(t):
    t = t.detach().cpu()
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def make(xfmt, wfmt, m, n, k, seed, gran="row"):
    """(x codes, x_scale, QuantizedTensor) as torch CUDA tensors, made by braze on the GPU."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(m, k, generator=g).cuda()
    w = torch.randn(n, k, generator=g).cuda()
    xq, sx = bq.quantize_activations(x, xfmt)
    qw = bq.quantize(w, wfmt) if wfmt == "int8" else bq.quantize(w, wfmt, granularity=gran)
    return xq, sx, qw


def cpu_twin(qw):
    return bq.QuantizedTensor(qw.format, qw.shape, host(qw.data), host(qw.scales))


def sum_abs(xq, sx, qw):
    xv = np.abs(ref._codes_f64(np, host(xq), "e4m3")) * host(sx).astype(np.float64)[:, None]
    wv = np.abs(ref._codes_f64(np, host(qw.data), ref.W8A8_FORMATS[qw.format]))
    s = host(qw.scales).astype(np.float64).reshape(-1)
    return xv @ (wv * (s[0] if s.size == 1 else s[:, None])).T


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("m", ROWS)
def test_int8_bit_for_bit_with_cpu(m, k, dtype):
    xq, sx, qw = make("int8", "int8", m, 67, k, seed=m * 7 + k)
    bias = torch.randn(67, device="cuda").to(_TORCH[dtype])
    got = bq.matmul(xq, qw, x_scale=sx, bias=bias, out_dtype=dtype)
    torch.cuda.synchronize()
    want = bq.matmul(host(xq), cpu_twin(qw), x_scale=host(sx), bias=host(bias).astype(_NP[dtype]), out_dtype=dtype)
    assert got.dtype == _TORCH[dtype] and got.shape == (m, 67)
    assert host(got).astype(_NP[dtype]).tobytes() == np.asarray(want).tobytes()


@pytest.mark.parametrize("m", (17, 64, 200))
def test_int8_against_torch_int_mm(m):
    xq, sx, qw = make("int8", "int8", m, 64, 4096, seed=m)
    try:
        acc = torch._int_mm(xq, qw.data.t())  # exact int32 [M, N] (cuBLASLt: B column-major)
    except RuntimeError as e:  # the bit-for-bit comparison with the CPU still covers exactness
        pytest.skip(f"torch._int_mm: {e}")
    s = sx[:, None] * qw.scales[None, :]  # f32, as the kernel
    want = (acc.float().double() * s.double()).float()
    got = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
    assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("wfmt,gran", [("fp8_e4m3", "row"), ("fp8_e5m2", "row"), ("fp8_e4m3", "tensor")])
def test_fp8_against_reference(wfmt, gran, m, k, dtype):
    xq, sx, qw = make("fp8_e4m3", wfmt, m, 67, k, seed=m * 3 + k, gran=gran)
    bias = torch.randn(67, device="cuda").to(_TORCH[dtype])
    got = host(bq.matmul(xq, qw, x_scale=sx, bias=bias, out_dtype=dtype)).astype(np.float64)
    want = ref.matmul_w8a8(host(xq), host(sx), host(qw.data), host(qw.scales), host(bias).astype(np.float64),
                           format=wfmt, out_dtype="float64")
    sa = sum_abs(xq, sx, qw)
    acc = FP8_MMA * sa if (m > 16 and fp8_mma()) else (k + 2) * 2.0 ** -24 * sa
    u = _U[dtype]
    lim = u * np.abs(want) + acc * (1 + 2 * u) + 2.0 ** -24 * np.abs(want) + 1e-30
    err = np.abs(got - want)
    assert np.all(err <= lim), f"max excess {np.max(err - lim)}"


@pytest.mark.parametrize("m", (1, 16, 64, 256))
def test_fp8_against_torch_scaled_mm(m):
    if not fp8_mma():
        pytest.skip("torch._scaled_mm needs fp8 tensor cores (sm_89+)")
    n, k = 128, 4096
    xq, sx, qw = make("fp8_e4m3", "fp8_e4m3", m, n, k, seed=m)
    a = xq.view(torch.float8_e4m3fn)
    b = qw.data.view(torch.float8_e4m3fn).t()  # [K, N], column-major
    try:
        want = torch._scaled_mm(a, b, scale_a=sx[:, None].contiguous(), scale_b=qw.scales[None, :].contiguous(),
                                out_dtype=torch.bfloat16)
    except (RuntimeError, TypeError) as e:  # row-wise scales not supported by this torch / GPU
        pytest.skip(f"torch._scaled_mm with row-wise scales: {e}")
    got = bq.matmul(xq, qw, x_scale=sx)  # bfloat16 by default
    assert got.dtype == torch.bfloat16
    w64 = ref.matmul_w8a8(host(xq), host(sx), host(qw.data), host(qw.scales), format="fp8_e4m3", out_dtype="float64")
    sa = sum_abs(xq, sx, qw)
    # both round to bf16 once; each sums in its own order and precision
    lim = 2 * 2.0 ** -8 * np.abs(w64) + 2 * FP8_MMA * sa + 1e-30
    assert np.all(np.abs(host(got).astype(np.float64) - host(want).astype(np.float64)) <= lim)


def test_layouts_leading_axes_out_and_stream():
    xq, sx, qw = make("int8", "int8", 24, 40, 96, seed=5)
    flat = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
    lead = bq.matmul(xq.view(4, 6, 96), qw, x_scale=sx.view(4, 6), out_dtype="float32")
    assert torch.equal(lead.view(24, 40), flat)
    wide = torch.zeros(24, 96 + 3, dtype=torch.int8, device="cuda")
    wide[:, 1:97] = xq  # rows 99 bytes apart, off 16-byte alignment: the byte path
    assert torch.equal(bq.matmul(wide[:, 1:97], qw, x_scale=sx, out_dtype="float32"), flat)
    out = torch.full((24, 50), float("nan"), device="cuda")
    back = bq.matmul(xq, qw, x_scale=sx, out=out[:, 5:45])
    assert back.data_ptr() == out[:, 5:45].data_ptr()
    assert torch.equal(out[:, 5:45], flat) and out[:, :5].isnan().all() and out[:, 45:].isnan().all()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        on_s = bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")
    s.synchronize()
    assert torch.equal(on_s, flat)


def test_n_one_and_empty():
    xq, sx, qw = make("fp8_e4m3", "fp8_e4m3", 40, 1, 64, seed=6)
    got = host(bq.matmul(xq, qw, x_scale=sx, out_dtype="float32")).astype(np.float64)
    want = ref.matmul_w8a8(host(xq), host(sx), host(qw.data), host(qw.scales), format="fp8_e4m3",
                           out_dtype="float64")
    assert np.all(np.abs(got - want) <= FP8_MMA * sum_abs(xq, sx, qw) + 2.0 ** -23 * np.abs(want))
    assert bq.matmul(xq[:0], qw, x_scale=sx[:0]).shape == (0, 1)


def test_mixed_devices_are_refused():
    xq, sx, qw = make("int8", "int8", 2, 8, 32, seed=7)
    with pytest.raises(ValueError, match="x_scale"):
        bq.matmul(xq, qw, x_scale=sx.cpu())
