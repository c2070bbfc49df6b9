"""The tuning variants of the CUDA ops kernels (docs/cuda.md, "Tuning hooks"):
each variant is chosen once per process from the environment, so every one
runs test_cuda.py's own ops tests (test_attention.py's for decode) in a child
pytest with its setting. The default (act 1, embedding 3, the split Hadamard kernel, mma decode) is what those files
run themselves.
"""
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from braze import _backends  # noqa: E402

READY = torch.cuda.is_available() and _backends.usable("cuda")
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not READY, reason="no CUDA GPU, torch or braze._cuda here")]

HERE = pathlib.Path(__file__).resolve().parent


def _child(env, select, path="test_cuda.py"):
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
           str(HERE / path), "-k", select]
    r = subprocess.run(cmd, env=dict(os.environ, **env), capture_output=True, text=True, timeout=600)
    tail = "\n".join((r.stdout + r.stderr).splitlines()[-25:])
    assert r.returncode == 0, f"{env}: child pytest failed (rc {r.returncode}):\n{tail}"
    assert " passed" in tail, f"{env}: the child ran no test:\n{tail}"


def _bad_setting(var, value, call, expected):
    """Runs `call` (Python after `import torch, braze`) in a child with var=value and checks it raised
    the ValueError "{var} must be {expected}, got '{value}'"."""
    code = f"import torch, braze\ntry:\n    {call}\nexcept ValueError as e:\n    print('VALUE', e)\n"
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **{var: value}),
                       capture_output=True, text=True, timeout=120)
    assert f"VALUE {var} must be {expected}, got '{value}'" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("variant", [1, 2, 3, 4])
def test_variant_silu_gelu_swiglu_embedding(variant):
    _child({"BRAZE_CUDA_ACT_VARIANT": str(variant), "BRAZE_CUDA_EMB_VARIANT": str(variant)},
           "ops_act or ops_embedding or ops_empty or ops_cuda_graph")


@pytest.mark.parametrize("elems", [8, 16, 32])
def test_variant_hadamard_shuffle_kernel(elems):
    """BRAZE_CUDA_HAD_SPLIT=0: rows of 64..4096 too on the shuffle kernel, each element count."""
    _child({"BRAZE_CUDA_HAD_ELEMS": str(elems), "BRAZE_CUDA_HAD_SPLIT": "0"}, "ops_hadamard")


def test_variant_hadamard_split_prefetch():
    """BRAZE_CUDA_HAD_SPLIT=2: the split kernel with each block's next rows prefetched by cp.async."""
    _child({"BRAZE_CUDA_HAD_SPLIT": "2"}, "ops_hadamard")


def test_variant_decode_simt():
    """BRAZE_CUDA_DECODE=simt: decode on the attend kernel, against the same references."""
    _child({"BRAZE_CUDA_DECODE": "simt"}, "cuda_decode_kernel", "test_attention.py")


def test_variant_bad_setting_silu_and_mul_raises():
    _bad_setting("BRAZE_CUDA_ACT_VARIANT", "9", "braze.ops.silu_and_mul(torch.ones(2, 64, device='cuda'))",
                 "an integer in [0, 4]")


def test_variant_gemm_mma():
    """BRAZE_CUDA_GEMM=mma: many-row f16 / bf16 matmuls on the mma.sync GEMM (Hopper takes the wgmma
    GEMM by default, where the build has it)."""
    _child({"BRAZE_CUDA_GEMM": "mma"}, "matmul_rows or strided_bias or fp8_scalings", "test_quant_matmul_cuda.py")


def test_variant_gemv_simt():
    """BRAZE_CUDA_GEMV=simt: 2..16 rows of f16 / bf16 x on q4_0 / q4_K on the SIMT GEMV (the default
    takes the tensor-core GEMV there); test_gemv_mma_taken checks which kernel ran."""
    _child({"BRAZE_CUDA_GEMV": "simt"}, "matmul_rows or strided_bias or fast_dot or gemv_mma",
           "test_quant_matmul_cuda.py")


def test_variant_bad_setting_gemv_raises():
    # 5 rows of bf16 x on q4_K: the first call that asks for the tensor-core GEMV reads the setting
    call = ("from braze import _cuda; _cuda.matmul('q4_K', torch.ones(5, 256, device='cuda', dtype=torch.bfloat16), "
            "torch.zeros(4, 144, device='cuda', dtype=torch.uint8), None, None, None, None, "
            "torch.empty(5, 4, device='cuda', dtype=torch.bfloat16), 0, 0)")
    _bad_setting("BRAZE_CUDA_GEMV", "tc", call, "'mma' or 'simt'")


def test_variant_prefill_attn_mma():
    """BRAZE_CUDA_ATTN=mma: ragged prefill of head_dim 128 on the mma.sync flash kernel (Hopper takes the
    wgmma kernel by default, where the build has it), against the same references."""
    _child({"BRAZE_CUDA_ATTN": "mma"}, "cuda_flash_prefill or cuda_prefill", "test_attention.py")


def test_variant_bad_setting_prefill_raises():
    call = ("q = torch.ones(4, 2, 128, device='cuda', dtype=torch.bfloat16); "
            "braze.attention.prefill(q, q, q, torch.tensor([0, 4], dtype=torch.int32, device='cuda'))")
    _bad_setting("BRAZE_CUDA_ATTN", "fast", call, "'mma' or 'wgmma'")


def test_variant_w8a8_gemm_mma():
    """BRAZE_CUDA_GEMM=mma: W8A8 e4m3 beyond 16 rows on the mma.sync GEMM (Hopper takes the promoted
    wgmma GEMM by default)."""
    _child({"BRAZE_CUDA_GEMM": "mma"}, "fp8", "test_quant_w8a8_cuda.py")
