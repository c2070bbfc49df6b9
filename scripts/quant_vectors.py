"""Makes tests/data/quant_vectors.npz: GGML formats quantized by llama.cpp's own
quantizer (``ggml_quantize_chunk`` of libggml-base, no importance matrix), so the
tests compare braze's quantizers with llama.cpp's without building it.

Usage: python scripts/quant_vectors.py /path/to/libggml-base.so
(built from llama.cpp's ggml/ directory, e.g. the copy vendored in the
llama-cpp-python source distribution: cmake -S ggml -B build && cmake --build
build --target ggml-base). The inputs are drawn here from a fixed seed: normal
rows, heavy-tailed rows, rows with outliers, all-zero and constant blocks.
"""
import ctypes
import os
import sys

import numpy as np

# GGML type ids (gguf.GGMLQuantizationType)
TYPES = {"q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8, "q2_K": 10, "q3_K": 11, "q4_K": 12, "q5_K": 13,
         "q6_K": 14, "iq4_nl": 20, "iq4_xs": 23}
BYTES = {"q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24), "q8_0": (32, 34),
         "q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176), "q6_K": (256, 210),
         "iq4_nl": (32, 18), "iq4_xs": (256, 136)}
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "quant_vectors.npz")


def inputs(seed=20240):
    rng = np.random.default_rng(seed)
    n, k = 16, 1024
    w = rng.standard_normal((n, k)).astype(np.float32) * 0.02
    w[1] = rng.standard_t(3, k) * 0.05                      # heavy tails
    w[2] = rng.uniform(-1, 1, k)
    w[3, ::97] *= 40                                         # outliers
    w[4, :256] = 0                                           # an all-zero super-block
    w[4, 256:288] = 0.5                                      # a constant block
    w[5] = np.abs(w[5])                                      # one-signed rows
    w[6] = -np.abs(w[6]) - 0.1
    w[7] *= 1e4
    w[8] *= 1e-6
    return w


def main(lib_path):
    lib = ctypes.CDLL(lib_path)
    f = lib.ggml_quantize_chunk
    f.restype = ctypes.c_size_t
    f.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                  ctypes.c_void_p]
    w = inputs()
    n, k = w.shape
    out = {"w": w}
    for name, t in TYPES.items():
        block, nbytes = BYTES[name]
        dst = np.zeros((n, k // block * nbytes), np.uint8)
        written = f(t, w.ctypes.data, dst.ctypes.data, 0, n, k, None)
        assert written == dst.nbytes, (name, written, dst.nbytes)
        out[name] = dst
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT}: {', '.join(TYPES)}")


if __name__ == "__main__":
    main(sys.argv[1])
