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


@pytest.mark.parametrize("name", ["prefill", "prefill_paged"])
def test_attention_peer_reads_lengths_once(name):
    """The prefill peers read cu_seqlens / kv_lens on the host once per input set (not on every timed call),
    and still see a set whose lengths were changed in place."""
    from braze.bench.peers import attention as pa

    spec = _spec.get(name)
    fn = pa.torch_ops[name]
    shape = spec.shapes[1]
    args, kw = spec.make_inputs(tuple(shape), "float32", np.random.default_rng(1), {}, False)
    targs = [_torch(a) for a in args]
    cu = targs[4] if name == "prefill_paged" else targs[3]
    for _ in range(2):  # the second call takes the lengths from the cache
        out = fn(*targs, **kw)
        ref = spec.reference(*[testing.to_numpy64(a) if isinstance(a, np.ndarray) else a for a in args], **kw)
        assert testing.compare(out, ref, spec.tolerance("float32")).ok
    # one sequence's queries moved to its neighbour, in place: the peer reads the new lengths
    cu[1] -= 1
    args = [a.numpy() if isinstance(a, torch.Tensor) else a for a in targs]
    out = fn(*targs, **kw)
    ref = spec.reference(*[testing.to_numpy64(a) if isinstance(a, np.ndarray) else a for a in args], **kw)
    assert testing.compare(out, ref, spec.tolerance("float32")).ok
