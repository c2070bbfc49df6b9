"""Per-call time of rms_norm under jax on the CPU: braze jitted through XLA
FFI, the plain braze function on a jax array, and the jnp composition jitted.

    python scripts/jax_overhead.py [--rows 1] [--cols 8192] [--calls 2000] [--repeats 5]

Each figure is the median over repeats of (wall time of `calls` calls, each
result blocked on) / calls, in microseconds.
"""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import braze
import braze.integrations.jax as bj


def per_call(fn, x, w, calls, repeats):
    fn(x, w).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            fn(x, w).block_until_ready()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--cols", type=int, default=8192)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((a.rows, a.cols)), jnp.float32)
    w = jnp.asarray(rng.standard_normal(a.cols), jnp.float32)

    def composition(x, w):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    paths = {
        "braze jitted (XLA FFI)": jax.jit(lambda x, w: bj.call("rms_norm", x, w)),
        "braze plain function": lambda x, w: braze.norm.rms_norm(x, w),
        "jnp composition jitted": jax.jit(composition),
        "empty jitted function (x + 0)": jax.jit(lambda x, w: x + 0),
    }
    xn, wn = np.asarray(x), np.asarray(w)
    want = np.asarray(braze.norm.rms_norm(xn, wn))
    print(f"rms_norm {a.rows} x {a.cols} float32, jax {jax.__version__}, {jax.devices()[0].platform}")
    for name, fn in paths.items():
        if "empty" not in name:
            np.testing.assert_allclose(np.asarray(fn(x, w)), want, rtol=2e-5, atol=2e-5)
        print(f"  {name:32s} {per_call(fn, x, w, a.calls, a.repeats):8.2f} us/call")
    host = _Ready(lambda x, w: braze.norm.rms_norm(x, w))
    print(f"  {'plain function on numpy arrays':32s} {per_call(host, xn, wn, a.calls, a.repeats):8.2f} us/call")


class _Ready:
    """A numpy-returning function with the block_until_ready the timing loop calls."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return _Done(self.fn(*args))


class _Done:
    def __init__(self, v):
        self.v = v

    def block_until_ready(self):
        return self.v


if __name__ == "__main__":
    main()
