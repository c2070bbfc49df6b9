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


# (position of cu_seqlens / kv_lens among the inputs, the length to move) per attention op
_LENGTHS = {"decode": (4, "kv_lens"), "prefill": (3, "cu"), "prefill_paged": (4, "cu")}


@pytest.mark.parametrize("name", sorted(_LENGTHS))
def test_attention_peer_reads_lengths_once(name):
    """The attention peers read cu_seqlens / kv_lens on the host once per input set (not in every timed
    call), and still see lengths changed in place, or new lengths in a tensor that may reuse freed memory."""
    from braze.bench.peers import attention as pa

    spec = _spec.get(name)
    fn = pa.torch_ops[name]
    args, kw = spec.make_inputs(tuple(spec.shapes[1]), "float32", np.random.default_rng(1), {}, False)
    targs = [_torch(a) for a in args]
    pos, what = _LENGTHS[name]

    def check():
        out = fn(*targs, **kw)
        host = [a.numpy() if isinstance(a, torch.Tensor) else a for a in targs]
        ref = spec.reference(*[testing.to_numpy64(a) if isinstance(a, np.ndarray) else a for a in host], **kw)
        assert testing.compare(out, ref, spec.tolerance("float32")).ok

    check()
    check()  # the lengths from the cache
    if what == "cu":
        targs[pos][1] -= 1  # in place: one query of the first sequence moves to the second
    else:
        targs[pos][0] -= 1  # in place: the first sequence loses its last key
    check()
    fresh = targs[pos].clone()  # new values in a new tensor, the old one freed
    if what == "cu":
        fresh[1] += 1  # the query moves back
    else:
        fresh[-1] -= 1
    targs[pos] = fresh
    check()
