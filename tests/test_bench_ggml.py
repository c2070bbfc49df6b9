"""The ggml peer of ``braze bench`` (bench/ggml_peer.py: ggml's own CPU matmul through
ctypes, where llama-cpp-python is installed) computes the product it stands for."""
import numpy as np
import pytest

from braze.bench import ggml_peer
from braze.reference import quant as ref
from braze.specs import quant_matmul as qm

pytestmark = pytest.mark.skipif(ggml_peer.library_dir() is None, reason="llama-cpp-python is not installed")


@pytest.mark.parametrize("fmt", sorted(ggml_peer.GGML_TYPES))
@pytest.mark.parametrize("n", [16, 12])  # 16: repacked where ggml repacks the format; 12: never
def test_ggml_matmul_matches_reference(fmt, n):
    rng = np.random.default_rng(1)
    k = 512
    data = qm.weight(fmt, n, k, "float32", rng)[0]
    engine = ggml_peer.matmul(2)
    for m in (1, 3, 9):
        x = rng.standard_normal((m, k)).astype(np.float32)
        got = engine(x, data, fmt)
        want = qm.matmul_reference(x, data, format=fmt)
        if fmt in ref.BLOCKS:
            w = ref.dequantize(data, format=fmt, dtype="float64")
        else:
            from braze.reference import quant_mx as ref_mx

            w = ref_mx.dequantize(data, None, None, None, format=fmt, k=k)
        # ggml quantizes x to int8 blocks as braze's CPU GEMV does: the same bound, plus f32 sums
        bound = qm.int8_x_bound(x, w, qm.INT8_X[fmt]) + 1e-5 * (np.abs(x) @ np.abs(w).T) + 1e-6
        assert got.shape == (m, n) and got.dtype == np.float32
        assert np.all(np.abs(got - want) <= bound), f"{fmt} n={n} m={m}: max err {np.abs(got - want).max()}"


def test_ggml_matmul_rejects_what_it_cannot_run():
    engine = ggml_peer.matmul(2)
    data = qm.weight("q8_0", 8, 64, "float32", np.random.default_rng(0))[0]
    with pytest.raises(TypeError, match="x must be float32"):
        engine(np.zeros((1, 64), np.float64), data, "q8_0")
    with pytest.raises(ValueError, match="format"):
        engine(np.zeros((1, 64), np.float32), data, "nvfp4")


def test_ggml_matmul_checks_shapes_before_ggml():
    """ggml aborts the process on shapes it rejects: the peer refuses them first, by argument."""
    engine = ggml_peer.matmul(2)
    data = qm.weight("q4_0", 8, 64, "float32", np.random.default_rng(0))[0]
    with pytest.raises(ValueError, match=r"x must be \[M, K\]"):
        engine(np.zeros(64, np.float32), data, "q4_0")
    for k in (96, 33):
        with pytest.raises(ValueError, match="data: 36 bytes a row do not hold K"):
            engine(np.zeros((1, k), np.float32), data, "q4_0")
    with pytest.raises(ValueError, match="data must be uint8"):
        engine(np.zeros((1, 64), np.float32), data.astype(np.float32), "q4_0")
    assert engine(np.zeros((0, 64), np.float32), data, "q4_0").shape == (0, 8)
    x = np.broadcast_to(np.linspace(-1, 1, 64, dtype=np.float32), (3, 64))  # stride-0 rows
    np.testing.assert_array_equal(engine(x, data, "q4_0"), engine(np.ascontiguousarray(x), data, "q4_0"))
