"""Every op keeps the op contract (DESIGN §3); every backend claim has a kernel behind it."""
import os
import sys
from dataclasses import replace

import numpy as np
import pytest

from braze import _backends, _spec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUFFIX = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def metal_module():
    """The simulated braze._metal: its bindings and the host names of every
    shader of shaders/metal/ (host names are often made by macros)."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import mtlsim

    if mtlsim.needs_relaunch():
        pytest.skip("the registry check loads the simulator without sanitizers")
    return mtlsim.metal_module()


def problems(spec):
    """What `spec` lacks or claims without a kernel; empty when it keeps the contract."""
    out = []
    if not callable(spec.reference):
        out.append("no reference")
    for dt in spec.dtypes:
        if dt not in spec.tol or len(spec.tol[dt]) != 2:
            out.append(f"no tolerance for {dt}")
    if not spec.edge_shapes:
        out.append("no edge shapes")
    for kind in ("decode", "prefill"):
        if not spec.bench_shapes.get(kind):
            out.append(f"no {kind} bench shape")
    for shapes in spec.bench_shapes.values():
        for shape in shapes:
            for dt in spec.dtypes:
                nbytes, flops = spec.cost(tuple(shape), dt, {})
                if not (nbytes > 0 and flops >= 0):
                    out.append(f"cost model gives {nbytes} bytes, {flops} flops at {shape} {dt}")
    for shape in spec.bench_shapes.get("decode", [])[:1]:
        try:  # what `braze bench` builds: the first option case at the decode shape
            spec.make_inputs(tuple(shape), spec.dtypes[0], np.random.default_rng(0), dict(spec.cases[0]), False)
        except Exception as e:  # noqa: BLE001 - any failure is a contract problem
            out.append(f"bench inputs at {shape}: {type(e).__name__}: {e}")
    if spec.vjp is not None and spec.vjp not in _spec.REGISTRY:
        out.append(f"vjp op {spec.vjp} is not registered")
    for b in spec.backends:
        if b == "metal":
            if not sys.platform.startswith("linux"):
                continue  # the simulator runs on Linux
            mod = metal_module()
            missing = [f"{spec.name}_{SUFFIX[dt]}" for dt in spec.dtypes if not mod._has_kernel(f"{spec.name}_{SUFFIX[dt]}")]
            if missing:
                out.append(f"claims metal but shaders/metal/{spec.family} lacks {missing}")
            if not hasattr(mod, spec.kernel):
                out.append("claims metal but braze._metal binds no such op")
        elif b == "cuda" and _backends.built("cuda") and _backends.module("cuda") is not None:
            if not _backends.has_kernel("cuda", spec.kernel):
                out.append("claims cuda but braze._cuda has no kernel")
        elif b == "cuda":
            if not os.path.exists(os.path.join(ROOT, "csrc", "cuda", f"{spec.family}.cu")):
                out.append(f"claims cuda but csrc/cuda/{spec.family}.cu does not exist")
        elif b == "cpu" and not _backends.has_kernel("cpu", spec.kernel):
            out.append("claims cpu but braze._cpu has no kernel")
    return out


@pytest.mark.parametrize("spec", _spec.ops(), ids=lambda s: s.name)
def test_op_keeps_contract(spec):
    assert problems(spec) == []


def test_checker_catches_a_broken_spec():
    good = _spec.get("rms_norm")
    assert "no edge shapes" in problems(replace(good, edge_shapes=()))
    assert "no decode bench shape" in problems(replace(good, bench_shapes={"prefill": [(4, 4)]}))
    assert any("no tolerance" in p for p in problems(replace(good, tol={"float32": (1e-5, 1e-5)})))
    assert any("braze._cpu has no kernel" in p for p in problems(replace(good, name="no_such_op")))
    assert any("lacks" in p for p in problems(replace(good, name="no_such_op", backends=("metal",))))


def test_every_native_kernel_is_registered():
    """A kernel exported by a backend module is an op of the registry (no orphans)."""
    from braze import _cpu

    names = {s.kernel for s in _spec.ops()}
    exported = {n for n in dir(_cpu) if not n.startswith("_")}
    runtime = {"isa", "isas_supported", "set_isa", "num_threads", "set_num_threads", "copy", "as_bfloat16",
               "stream_min_bytes", "set_stream_min_bytes", "quant_int8_activations", "set_quant_int8_activations",
               "quant_vnni", "set_quant_vnni", "quant_amx", "set_quant_amx", "hw_bf16", "set_hw_bf16"}
    orphans = exported - names - runtime
    assert not orphans, f"kernels without an OpSpec: {sorted(orphans)}"


def test_cost_counts_each_input_and_output_once():
    spec = _spec.get("rms_norm")
    nbytes, _ = spec.cost((8, 4096), "float32", {})
    assert nbytes == (2 * 8 * 4096 + 4096) * 4
    assert np.isfinite(nbytes)


def test_thread_pool_survives_resizing():
    """Calls between resizes of the pool finish and are right (a new worker
    once took the previous job's generation for a new job: run() returned early
    or hung). In a subprocess, so that a hang fails the test."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import numpy as np, braze
        from braze.reference import sampling as ref
        x = np.random.default_rng(0).normal(size=(8, 20000)).astype(np.float32)
        want = ref.softmax(x.astype(np.float64))
        before = braze._cpu.num_threads()
        for i in range(1000):
            braze._cpu.set_num_threads(1 + i % 3)
            y = braze.sampling.softmax(x)
            assert np.abs(y - want).max() < 1e-6, i
        braze._cpu.set_num_threads(before)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
