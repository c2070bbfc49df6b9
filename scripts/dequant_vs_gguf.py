"""braze.quant.dequantize against the gguf package's numpy dequantize
(gguf.quants.dequantize) on the same bytes, in one process: the median of
several runs each, braze into a preallocated out= and returning a new array.

usage: python scripts/dequant_vs_gguf.py [--rows 4096] [--cols 4096]
           [--formats q8_0,q4_0,...] [--dtype float32] [--runs 9] [--gguf-runs 3]
"""
import argparse
import time

import numpy as np

import braze
from braze import _spec, quant

from gguf import GGMLQuantizationType as T
from gguf import quants as gq

GGML = {"q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1, "q5_0": T.Q5_0, "q5_1": T.Q5_1, "q2_K": T.Q2_K,
        "q3_K": T.Q3_K, "q4_K": T.Q4_K, "q5_K": T.Q5_K, "q6_K": T.Q6_K, "iq4_nl": T.IQ4_NL,
        "iq4_xs": T.IQ4_XS, "mxfp4_gguf": T.MXFP4, "nvfp4_gguf": T.NVFP4}


def median_s(fn, runs):
    fn()  # warm: pages of the output touched, pool started
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return float(np.median(t))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--formats", default="q8_0,q4_0,q4_K,q5_K,q6_K,mxfp4_gguf,nvfp4_gguf")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--gguf-runs", type=int, default=3)
    a = ap.parse_args()
    _spec.load_all()
    print(f"braze isa {braze._cpu.isa()}, {braze._cpu.num_threads()} threads; [{a.rows}, {a.cols}] -> {a.dtype}")
    print(f"{'format':<11} {'gguf ms':>9} {'braze out= ms':>14} {'braze new ms':>13} {'x gguf (out=)':>14} "
          f"{'x gguf (new)':>13}")
    for fmt in a.formats.split(","):
        spec = _spec.get(f"dequantize_{fmt}")
        (raw, *_), _kw = spec.make_inputs((a.rows, a.cols), "float32", np.random.default_rng(0), {}, False)
        raw = np.ascontiguousarray(raw)
        qt = quant.QuantizedTensor(fmt, (a.rows, a.cols), raw)
        want = gq.dequantize(raw, GGML[fmt])
        got = np.asarray(quant.dequantize(qt, dtype=a.dtype))
        if a.dtype == "float32":
            ok = np.array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
            assert ok, f"{fmt}: braze and gguf differ"
        out = np.empty_like(got)
        t_g = median_s(lambda: gq.dequantize(raw, GGML[fmt]), a.gguf_runs)
        t_o = median_s(lambda: quant.dequantize(qt, dtype=a.dtype, out=out), a.runs)
        t_n = median_s(lambda: quant.dequantize(qt, dtype=a.dtype), a.runs)
        print(f"{fmt:<11} {t_g * 1e3:9.1f} {t_o * 1e3:14.2f} {t_n * 1e3:13.2f} {t_g / t_o:14.1f} {t_g / t_n:13.1f}")


if __name__ == "__main__":
    main()
