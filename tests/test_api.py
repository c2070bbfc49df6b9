"""The public surface: each family module exports exactly its registry's ops (plus
documented compositions), nothing else leaks, and every public function is annotated
and documented with its shapes and dtypes."""
import inspect
import os

import pytest

import braze
from braze import _spec

COMPOSITIONS = {"rope": {"frequencies"},  # public functions that are not kernels (docs/design.md)
                # quant: its registry entries are per format; the public functions take the format
                "quant": {"QuantizedTensor", "quantize", "dequantize", "load_gguf", "formats",
                          "quantize_activations", "matmul", "int8_activations", "set_int8_activations"}}


@pytest.mark.parametrize("family", _spec.FAMILIES)
def test_all_is_the_registry(family):
    mod = getattr(braze, family)
    ops = {s.name for s in _spec.ops(family) if s.fn.__module__ == mod.__name__}
    assert set(mod.__all__) == ops | COMPOSITIONS.get(family, set())
    assert len(mod.__all__) == len(set(mod.__all__))


@pytest.mark.parametrize("family", _spec.FAMILIES)
def test_no_name_leaks(family):
    mod = getattr(braze, family)
    leaked = [n for n in dir(mod) if not n.startswith("_") and n not in mod.__all__]
    assert leaked == []


@pytest.mark.parametrize("family", _spec.FAMILIES)
def test_public_functions_annotated_and_documented(family):
    mod = getattr(braze, family)
    for name in mod.__all__:
        fn = getattr(mod, name)
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        for p in sig.parameters.values():
            assert p.annotation is not inspect.Parameter.empty, f"{name}({p.name})"
        doc = inspect.getdoc(fn) or ""
        assert "[" in doc and any(d in doc for d in ("float32", "int32")), f"{name}: no shape / dtype in its docstring"


def test_py_typed_ships_with_the_package():
    assert os.path.isfile(os.path.join(os.path.dirname(braze.__file__), "py.typed"))


def test_array_like_is_the_dlpack_protocol():
    np = pytest.importorskip("numpy")
    assert isinstance(np.ones(2), braze.ArrayLike)
    assert not isinstance([1.0], braze.ArrayLike)
