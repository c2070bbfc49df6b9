"""Peer implementations to benchmark against, by family.

Each family module may define ``torch_ops = {op: fn}`` and ``liger_ops = {op: fn}``
(each fn takes the same arguments as the braze op, as torch tensors), and
``cpu_ops(op) -> [(peer name, fn)]`` for other CPU libraries (fn takes the
op's numpy arguments). An op
without a torch peer is measured through its reference composition running
in torch (array-API), which is what a user without braze would write.
"""
from __future__ import annotations

import importlib


def family(name):
    try:
        return importlib.import_module(f"braze.bench.peers.{name}")
    except ImportError:
        return None


def torch_op(spec):
    mod = family(spec.family)
    fn = getattr(mod, "torch_ops", {}).get(spec.name) if mod else None
    return fn or spec.reference


def liger_op(spec):
    mod = family(spec.family)
    return getattr(mod, "liger_ops", {}).get(spec.name) if mod else None


def cpu_ops(spec):
    mod = family(spec.family)
    fn = getattr(mod, "cpu_ops", None) if mod else None
    return fn(spec.name) if fn else []
