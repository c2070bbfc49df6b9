"""The torch peers `braze bench` times compute the op they stand for."""
import numpy as np
import pytest

from braze import _spec, testing
from braze.bench import peers

torch = pytest.importorskip("torch")


def _torch(a):
    return torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm", "add_rms_norm", "rms_norm_vjp", "layer_norm_vjp",
                                  "rope", "rope_qk", "softmax", "log_softmax", "logsumexp", "argmax"])
def test_torch_peer_matches_reference(name):
    spec = _spec.get(name)
    fn = peers.torch_op(spec)
    assert fn is not spec.reference, f"{name} has no torch peer of its own"
    for shape in spec.shapes[:3]:
        for case in spec.cases:
            args, kw = spec.make_inputs(tuple(shape), "float32", np.random.default_rng(0), case, False)
            ref = spec.reference(*[testing.to_numpy64(a) if isinstance(a, np.ndarray) else a for a in args], **kw)
            out = fn(*[_torch(a) for a in args], **{k: _torch(v) for k, v in kw.items()})
            for o, r in zip(out if isinstance(out, tuple) else (out,), ref if isinstance(ref, tuple) else (ref,)):
                res = testing.compare(o, r, spec.tolerance("float32"))
                assert res.ok, f"{name} {shape} {case}: {res.message}"
