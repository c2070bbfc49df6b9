"""Tokens of braze.sampling.sample over a grid of top-p rows, for comparing two builds.

    python scripts/sample_token_grid.py old.npy           # with the old build installed
    python scripts/sample_token_grid.py new.npy           # with the new one
    python scripts/sample_token_grid.py --compare old.npy new.npy

The grid: 8 top-p mixes (with min_p and temperatures), 6 kinds of rows (spreads 0.5-6, ties,
n = 7 up to 151936), f32 / bf16 / f16, every CPU ISA this machine runs, 3 seeds: 20736 draws.
"""
import sys

import ml_dtypes
import numpy as np

MIXES = [{"top_p": 0.9}, {"top_p": 0.5}, {"top_p": 0.99}, {"top_p": 0.999}, {"temperature": 0.7, "top_p": 0.8},
         {"temperature": 1.5, "top_p": 0.95}, {"min_p": 0.001, "top_p": 0.95}, {"top_p": 0.1}]
ROWS = [(32000, 3.0), (128256, 1.0), (50000, 6.0), (151936, 2.0), (7, 1.0), (1000, 0.5)]


def grid():
    import braze
    from braze import sampling

    rng = np.random.default_rng(7)
    out = []
    for isa in braze._cpu.isas_supported():
        braze._cpu.set_isa(isa)
        for kind, (n, spread) in enumerate(ROWS):
            x = (rng.standard_normal((16, n)) * spread).astype(np.float32)
            if kind == 5:
                x = np.round(x * 4) / 4  # ties at every threshold
            for dt in (np.float32, ml_dtypes.bfloat16, np.float16):
                for kw in MIXES:
                    for seed in (0, 1, 2):
                        out.append(sampling.sample(x.astype(dt), seed=seed, **kw))
    return np.stack(out)


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
        print(f"draws {a.size}, differ {int((a != b).sum())}")
    else:
        np.save(sys.argv[1], grid())
