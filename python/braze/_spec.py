"""The op registry: one OpSpec per kernel op (DESIGN §3).

An OpSpec names the op's family, public function, reference composition,
dtypes and backends, and carries what tests and benchmarks need: input
generators, tolerances, edge shapes, a cost model and bench shapes. Each
family declares its specs in ``braze/specs/<family>.py``; tests, ``braze
check`` and ``braze bench`` are generated from this registry.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
FAMILIES = ("norm", "rope", "sampling", "ops", "attention", "quant")

# (atol, rtol) per dtype: errors are measured against a float64 reference
# computed from the same (rounded) inputs; atol scales with max(1, rms(ref)).
DEFAULT_TOL = {"float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}


@dataclass(frozen=True)
class OpSpec:
    family: str
    name: str
    fn: Callable
    reference: Callable
    # make_inputs(shape, dtype, rng, case, strided) -> (args, kwargs) as numpy arrays
    make_inputs: Callable
    # out_kwargs(result) -> kwargs that pass preallocated outputs shaped like result
    out_kwargs: Callable
    # cost(shape, dtype, case) -> (bytes that must move, flops)
    cost: Callable
    dtypes: tuple = FLOAT_DTYPES
    backends: tuple = ("cpu",)
    tol: dict = field(default_factory=lambda: dict(DEFAULT_TOL))
    cases: tuple = ({},)          # option variants every parity test covers
    shapes: tuple = ()            # ordinary test shapes
    edge_shapes: tuple = ()       # one row, one element, odd lengths, long rows, empty
    bench_shapes: dict = field(default_factory=dict)  # {"decode": [...], "prefill": [...], "cuda:prefill": [...]}
    # input layouts the parity tests run (braze.testing.LAYOUTS): strided rows,
    # broadcast (stride-0) rows, data off a 16-byte boundary
    layouts: tuple = ("contiguous", "strided", "broadcast", "misaligned")
    vjp: str | None = None        # name of the op's VJP op, for training ops
    # the reference is numpy code: the bench computes its oracle on the host, not on the GPU
    host_reference: bool = False
    # the reference reads the values of index arrays (lengths, block tables) on the host, so it
    # cannot run on shapes alone (torch fake tensors): framework fakes take the kernel path
    reference_reads_values: bool = False
    doc: str = ""
    # err_bound(args, kwargs, backend, dtype) -> None or an array (broadcast to the output) of
    # error the kernel may add by design on that backend and dtype (args float64 numpy), on top of tol
    err_bound: Callable | None = None

    def tolerance(self, dtype):
        return self.tol[dtype]

    @property
    def kernel(self):
        """The symbol each backend module must export."""
        return self.name


REGISTRY: dict[str, OpSpec] = {}


def register(spec: OpSpec):
    if spec.name in REGISTRY:
        raise ValueError(f"op {spec.name} registered twice")
    REGISTRY[spec.name] = spec
    return spec


def load_all():
    for fam in FAMILIES:
        importlib.import_module(f"braze.specs.{fam}")
    return REGISTRY


def get(name):
    load_all()
    return REGISTRY[name]


def ops(family=None):
    load_all()
    return [s for s in REGISTRY.values() if family is None or s.family == family]
