"""braze ops as torch.library custom ops: registration covers the registry,
opcheck, torch.compile(fullgraph=True) against eager, autograd (gradcheck in
f64 on the reference path; kernels against autograd of the composition)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import cuda_ready  # noqa: E402

import braze  # noqa: E402
from braze import _spec, testing  # noqa: E402
from braze.integrations import torch as bt  # noqa: E402
from braze.reference import norm as rnorm, ops as rops, rope as rrope  # noqa: E402

DEVICES = [pytest.param("cpu", id="cpu"),
           pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda,
                        pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")])]
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _torch(a, device, dtype):
    if isinstance(a, np.ndarray):
        if a.dtype.kind in "iu":
            return torch.from_numpy(np.ascontiguousarray(a)).to(device)
        # each array keeps its own dtype (bfloat16 is ml_dtypes'; inv_freq stays float32)
        return torch.from_numpy(np.asarray(a, np.float32)).to(device, TORCH_DTYPES[str(a.dtype)])
    if isinstance(a, tuple):
        return tuple(_torch(v, device, dtype) for v in a)
    return a


def _inputs(spec, device, dtype="float32", case_index=0, seed=0):
    rng = np.random.default_rng(seed)
    shape = spec.shapes[0]
    args, kwargs = spec.make_inputs(shape, dtype, rng, spec.cases[case_index], False)
    args = tuple(_torch(a, device, dtype) for a in args)
    kwargs = {k: _torch(v, device, dtype) for k, v in kwargs.items()}
    if spec.name == "philox_uniform":
        kwargs["like"] = torch.empty(0, device=device)
    return args, kwargs


def _shared_args(spec, args, kwargs):
    """A registry spec's arguments as the op serving it takes them (bt.op_name): the quant
    specs of one format each pass a format's arrays positionally, the shared dequantize op by name."""
    if bt.op_name(spec) != "dequantize":
        return args, kwargs
    kw = dict(kwargs)
    rest = list(args[1:])
    if rest:
        kw["scales"] = rest.pop(0)
    if rest:
        kw["biases" if kw["format"].startswith("affine") else "tensor_scale"] = rest.pop(0)
    return args[:1], kw


def _op_inputs(spec, device, dtype="float32", case_index=0, seed=0):
    args, kwargs = _inputs(spec, device, dtype, case_index, seed)
    return _shared_args(spec, args, kwargs)


def _finite_codes(name, args, kwargs):
    """opcheck compares eager and compiled outputs with NaN != NaN: codes that decode to NaN or
    inf (random fp8 bytes; one byte an element) become 0 here. The registry's parity tests
    cover those codes."""
    if name != "dequantize":
        return args, kwargs
    y = bt.call(name, *args, **kwargs)
    bad = ~torch.isfinite(y)
    if bad.any():
        assert args[0].shape == y.shape, "non-finite outputs of a format packing several elements a byte"
        data = args[0].clone()
        data[bad] = 0
        args = (data,) + tuple(args[1:])
    return args, kwargs


SPECS = _spec.ops()


def test_every_registry_op_has_a_torch_op():
    assert not bt.UNMAPPED, bt.UNMAPPED
    assert {s.name for s in SPECS} == set(bt.register_all()) - set(bt.SHARED.values()) | set(bt.SHARED)
    for spec in SPECS:
        name = bt.op_name(spec)
        d = bt.OPS[name]
        assert hasattr(torch.ops.braze, name), name
        # out= forms: every op with out slots; an in-place op (append_kv) is its own out form
        assert hasattr(torch.ops.braze, name + "_out") == bool(d.outs), name
        assert not (d.inplace and d.outs), name
    # the quant formats share one op per native entry point
    assert {bt.SHARED[s.name] for s in SPECS if s.family == "quant"} == {
        "dequantize", "quantize", "quantize_activations", "matmul", "matmul_w8a8"}
    assert bt.OPS["append_kv"].inplace == ("k_cache", "v_cache")


def test_an_unmappable_signature_is_reported():
    def op(x: "Array", table: "Dict[str, int]") -> "Array":
        return x
    spec = _spec.OpSpec(family="ops", name="bogus", fn=op, reference=op, make_inputs=None, out_kwargs=None,
                        cost=None)
    with pytest.raises(TypeError, match="table"):
        bt.describe(spec)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_opcheck(spec, dtype, device):
    if dtype not in spec.dtypes:
        pytest.skip(f"{spec.name} does not take {dtype}")
    name = bt.op_name(spec)
    d = bt.OPS[name]
    for ci in sorted({0, len(spec.cases) - 1}):  # opcheck is slow: the first and last option case
        args, kwargs = _finite_codes(name, *_op_inputs(spec, device, dtype, ci))
        bound = bt._bind(d, args, kwargs)
        vals = bt._encode(d, bound)
        torch.library.opcheck(getattr(torch.ops.braze, name).default, vals)
        if not d.outs:
            continue
        # the out= form: output slots shaped by the functional op (which computes every
        # optional output: the out form writes them all)
        if d.flag:
            vals = bt._encode(d, dict(bound, **{d.flag: True}))
        res = getattr(torch.ops.braze, name)(*vals)
        res = res if isinstance(res, tuple) else (res,)
        slots = [torch.full_like(r, float("nan")) if r.is_floating_point() else torch.empty_like(r) for r in res]
        torch.library.opcheck(getattr(torch.ops.braze, name + "_out").default, tuple(slots) + tuple(vals))


def _same(g, w):
    assert (w is None) == (g is None)
    if w is None:
        return
    if g.dtype != w.dtype and g.element_size() == w.element_size():  # the registry's int8 views of uint8 codes
        g = g.view(w.dtype)
    torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_call_matches_the_public_function(spec):
    d = bt.OPS[bt.op_name(spec)]
    for ci in sorted({0, len(spec.cases) - 1}):
        args, kwargs = _inputs(spec, "cpu", "float32", ci, seed=1)
        want = spec.fn(*args, **kwargs)
        sargs, skw = _shared_args(spec, args, kwargs)
        got = bt.call(bt.op_name(spec), *sargs, **skw)
        assert isinstance(got, tuple) == isinstance(want, tuple) or bt.op_name(spec) == "quantize"
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            _same(g, w)
        if not d.outs and not d.inplace:
            continue
        # out= through the mutating op writes the given arrays and returns them
        outs = spec.out_kwargs(got)
        outs = {k: tuple(torch.empty_like(t) if t is not None else None for t in v) if isinstance(v, tuple)
                else torch.empty_like(v) for k, v in outs.items()}
        sargs, skw = _shared_args(spec, args, dict(kwargs, **outs))
        got2 = bt.call(bt.op_name(spec), *sargs, **skw)
        flat_out = [t for v in outs.values() for t in (v if isinstance(v, tuple) else (v,))]
        for t, g in zip(flat_out, got2 if isinstance(got2, tuple) else (got2,)):
            assert t is None or g is t
        for w, g in zip(want if isinstance(want, tuple) else (want,), got2 if isinstance(got2, tuple) else (got2,)):
            _same(g, w)


def test_bad_arguments_raise_before_dispatch():
    x = torch.randn(2, 8)
    with pytest.raises(TypeError, match="bogus"):
        bt.call("rms_norm", x, bogus=1)
    with pytest.raises(TypeError, match="eps"):
        bt.call("rms_norm", x, eps="small")


class Block(torch.nn.Module):
    """A decode step's pieces: norm, rope, gated MLP, residual add, sampling."""

    def __init__(self, hidden=64, heads=4, kv_heads=2):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.w_norm = torch.nn.Parameter(torch.randn(hidden, generator=g) * 0.1 + 1)
        self.qkv = torch.nn.Parameter(torch.randn(hidden, (heads + 2 * kv_heads) * self.d, generator=g) * 0.1)
        self.up = torch.nn.Parameter(torch.randn(hidden, 4 * hidden, generator=g) * 0.1)
        self.down = torch.nn.Parameter(torch.randn(2 * hidden, hidden, generator=g) * 0.1)

    def forward(self, x, residual, positions):
        h = braze.norm.rms_norm(x, self.w_norm, eps=1e-6)
        qkv = (h @ self.qkv).view(x.shape[0], self.heads + 2 * self.kv_heads, self.d)
        q, k = braze.rope.rope_qk(qkv[:, :self.heads], qkv[:, self.heads:self.heads + self.kv_heads], positions)
        attn = (q.reshape(x.shape[0], -1) + k.repeat(1, self.heads // self.kv_heads, 1).reshape(x.shape[0], -1))
        y, res = braze.norm.add_rms_norm(attn, residual, self.w_norm)
        m = braze.ops.silu_and_mul(y @ self.up) + braze.ops.gelu_and_mul(y @ self.up, approximate="tanh")
        logits = m @ self.down + res
        return braze.sampling.argmax(logits), braze.sampling.softmax(logits, temperature=0.7), logits


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_matches_eager(backend, device):
    torch._dynamo.reset()
    m = Block().to(device)
    x = torch.randn(3, 64, device=device)
    res = torch.randn(3, 64, device=device)
    pos = torch.tensor([5, 17, 400], device=device, dtype=torch.int32)
    with torch.no_grad():
        want = m(x, res, pos)
        got = torch.compile(m, fullgraph=True, backend=backend)(x, res, pos)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _traced(fn, *args):
    """fn's fullgraph-compiled result and the call_function targets of its trace."""
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    got = torch.compile(fn, fullgraph=True, backend=backend)(*args)
    return got, seen


def test_compile_traces_the_custom_ops():
    y = torch.empty(2, 32)

    def f(x, w):
        braze.norm.rms_norm(x, w, out=y)  # the mutating form
        return braze.ops.silu(y) + braze.norm.rms_norm(x, w, weight_offset=1.0)

    x, w = torch.randn(2, 32), torch.randn(32)
    got, seen = _traced(f, x, w)
    assert "braze.rms_norm_out" in seen and "braze.silu" in seen, seen
    torch.testing.assert_close(got, f(x, w))


# ---------------------------------------------------------------- autograd
def _rope_inputs(dtype, device):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(5, 4, 32, generator=g, dtype=dtype).to(device)
    k = torch.randn(5, 2, 32, generator=g, dtype=dtype).to(device)
    pos = torch.tensor([0, 3, 9, 100, 4096], device=device)
    return q, k, pos


GRAD_CASES = {
    # name: (make(dtype, device) -> (differentiable tensors, other args), braze fn, reference fn, kwargs)
    "rms_norm": (lambda dt, dev: ((torch.randn(4, 48, dtype=dt), torch.randn(48, dtype=dt) + 1), ()),
                 braze.norm.rms_norm, rnorm.rms_norm, {"eps": 1e-6, "weight_offset": 0.5}),
    "layer_norm": (lambda dt, dev: ((torch.randn(4, 48, dtype=dt), torch.randn(48, dtype=dt), torch.randn(48, dtype=dt)),
                                    ()), braze.norm.layer_norm, rnorm.layer_norm, {"eps": 1e-5}),
    "add_rms_norm": (lambda dt, dev: ((torch.randn(4, 48, dtype=dt), torch.randn(4, 48, dtype=dt),
                                       torch.randn(48, dtype=dt)), ()),
                     braze.norm.add_rms_norm, rnorm.add_rms_norm, {"eps": 1e-6}),
    "rope": (lambda dt, dev: ((_rope_inputs(dt, dev)[0],), (_rope_inputs(dt, dev)[2],)),
             braze.rope.rope, rrope.rope, {"attention_scale": 0.8, "rotary_dim": 16, "interleaved": True}),
    "rope_qk": (lambda dt, dev: (_rope_inputs(dt, dev)[:2], (_rope_inputs(dt, dev)[2],)),
                braze.rope.rope_qk, rrope.rope_qk, {}),
    "silu_and_mul": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 2,), ()), braze.ops.silu_and_mul,
                     rops.silu_and_mul, {"interleaved": True}),
    "gelu_and_mul": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 2,), ()), braze.ops.gelu_and_mul,
                     rops.gelu_and_mul, {}),
    "gelu_and_mul_tanh": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 2,), ()), braze.ops.gelu_and_mul,
                          rops.gelu_and_mul, {"approximate": "tanh"}),
    "swiglu_clamped": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 4,), ()), braze.ops.swiglu_clamped,
                       # a limit no bfloat16 input equals: at the kink any subgradient is right (torch's
                       # minimum splits a tie, clamp passes it, braze drops it)
                       rops.swiglu_clamped, {"limit": 3.05}),
    "silu": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 2,), ()), braze.ops.silu, rops.silu, {}),
    "gelu": (lambda dt, dev: ((torch.randn(4, 64, dtype=dt) * 2,), ()), braze.ops.gelu, rops.gelu, {}),
}


def _name(case):
    return case.replace("_tanh", "")


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradcheck_f64_reference_path(case):
    make, fn, _, kw = GRAD_CASES[case]
    torch.manual_seed(0)
    diff, rest = make(torch.float64, "cpu")
    diff = tuple(t.detach().requires_grad_() for t in diff)
    with testing.force_reference():
        assert torch.autograd.gradcheck(lambda *t: bt.call(_name(case), *t, *rest, **kw), diff)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 2e-4), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grad_matches_autograd_of_the_composition(case, dtype, tol, device):
    make, fn, ref, kw = GRAD_CASES[case]
    torch.manual_seed(1)
    diff, rest = make(dtype, device)
    diff = tuple(t.to(device) for t in diff)
    a = tuple(t.detach().requires_grad_() for t in diff)
    b = tuple(t.detach().requires_grad_() for t in diff)
    out_a = bt.call(_name(case), *a, *rest, **kw)
    # the composition in float32 on the same (rounded) inputs: a bfloat16 composition rounds every
    # intermediate, which is the reference's error, not the kernel's (swiglu_clamped's bf16 grads
    # differed by more than 3e-2 on the H200 that way)
    out_b = ref(*(t.float() for t in b), *rest, **kw)
    out_a = out_a if isinstance(out_a, tuple) else (out_a,)
    out_b = out_b if isinstance(out_b, tuple) else (out_b,)
    cot = [torch.randn_like(o) for o in out_b]
    ga = torch.autograd.grad(out_a, a, cot)
    gb = torch.autograd.grad(out_b, b, cot)
    for x, y in zip(ga, gb):
        scale = max(1.0, y.float().abs().max().item())
        torch.testing.assert_close(x.float(), y.float(), rtol=tol, atol=tol * scale)


def test_compiled_training_step_matches_eager():
    torch._dynamo.reset()

    def loss(x, w, pos):
        h = braze.norm.rms_norm(x, w)
        r = braze.rope.rope(h.view(3, 2, 16), pos)
        return braze.ops.silu_and_mul(r.reshape(3, 32)).square().sum()

    x, w = torch.randn(3, 32, requires_grad=True), torch.randn(32, requires_grad=True)
    pos = torch.tensor([1, 2, 300])
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    gc = torch.autograd.grad(compiled(x, w, pos), (x, w))
    ge = torch.autograd.grad(_eager_loss(x, w, pos), (x, w))
    for a, b in zip(gc, ge):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def _eager_loss(x, w, pos):
    h = bt.call("rms_norm", x, w)
    r = bt.call("rope", h.view(3, 2, 16), pos)
    return bt.call("silu_and_mul", r.reshape(3, 32)).square().sum()


# ---------------------------------------------------------------- attention and quant under torch.compile
def _paged_step_inputs(device, b=3, hq=4, hkv=2, d=64, hidden=64, bs=4, max_blocks=5):
    """A q4_0 weight, tokens, an empty paged cache and its block table: a decode step's inputs."""
    g = torch.Generator().manual_seed(7)
    w = torch.randn((hq + 2 * hkv) * d, hidden, generator=g) * 0.1
    qw = braze.quant.quantize(w.to(device), "q4_0")
    x = torch.randn(b, hidden, generator=g).to(device)
    kc = torch.randn(b * max_blocks, bs, hkv, d, generator=g).to(device)
    vc = torch.randn(b * max_blocks, bs, hkv, d, generator=g).to(device)
    table = torch.randperm(b * max_blocks, generator=g).view(b, max_blocks).to(device, torch.int32)
    kv_lens = torch.tensor([7, 1, 20], dtype=torch.int32, device=device)
    last = kv_lens.long() - 1  # the new token's slot: block table entry, offset in block
    slots = (table.long().gather(1, (last // bs)[:, None])[:, 0] * bs + last % bs).to(torch.int32)
    return qw, x, kc, vc, table, kv_lens, slots, (hq, hkv, d)


def _decode_step(qw, x, kc, vc, table, kv_lens, slots, heads):
    hq, hkv, d = heads
    w = braze.quant.dequantize(qw, dtype=torch.float32)
    qkv = (x @ w.t()).view(x.shape[0], hq + 2 * hkv, d)
    q, k, v = qkv[:, :hq], qkv[:, hq:hq + hkv], qkv[:, hq + hkv:]
    braze.attention.append_kv(k, v, kc, vc, slots)
    o, lse = braze.attention.decode(q, kc, vc, table, kv_lens, return_lse=True, softcap=30.0)
    xq, sx = braze.quant.quantize_activations(o.reshape(x.shape[0], -1), "int8")
    return o, lse, xq, sx


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_dequantize_and_paged_decode_match_eager(backend, device):
    torch._dynamo.reset()
    qw, x, kc, vc, table, kv_lens, slots, heads = _paged_step_inputs(device)
    kc2, vc2 = kc.clone(), vc.clone()
    with torch.no_grad():
        want = _decode_step(qw, x, kc, vc, table, kv_lens, slots, heads)
        got = torch.compile(_decode_step, fullgraph=True, backend=backend)(qw, x, kc2, vc2, table, kv_lens, slots,
                                                                           heads)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # the compiled append_kv wrote the caller's caches in place, as eager did
    torch.testing.assert_close(kc2, kc, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(vc2, vc, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")
def test_compiled_decode_step_in_a_cuda_graph():
    """A compiled decode step (dequantize, append_kv, paged decode, quantize) captured in a CUDA graph:
    each replay does what one eager call does, the caches included."""
    torch._dynamo.reset()
    qw, x, kc, vc, table, kv_lens, slots, heads = _paged_step_inputs("cuda")
    kc2, vc2 = kc.clone(), vc.clone()
    step = torch.compile(_decode_step, fullgraph=True)
    with torch.no_grad():
        want = _decode_step(qw, x, kc, vc, table, kv_lens, slots, heads)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # compile and warm up outside the capture
            step(qw, x, kc2.clone(), vc2.clone(), table, kv_lens, slots, heads)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            got = step(qw, x, kc2, vc2, table, kv_lens, slots, heads)
        for _ in range(2):  # replays write the same slots: the same caches and outputs
            graph.replay()
    torch.cuda.synchronize()
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(kc2, kc, rtol=0, atol=0)
    torch.testing.assert_close(vc2, vc, rtol=0, atol=0)


def test_compile_traces_attention_and_quant_ops():
    _, seen = _traced(_decode_step, *_paged_step_inputs("cpu"))
    for op in ("braze.dequantize", "braze.append_kv", "braze.decode", "braze.quantize_activations"):
        assert op in seen, (op, seen)


def test_compile_prefill_merge_and_quantize():
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(9, h, 64, generator=g) for h in (4, 2, 2))
    cu = torch.tensor([0, 4, 9], dtype=torch.int32)
    w = torch.randn(8, 64, generator=g)

    def f(q, k, v, cu, w):
        oa, la = braze.attention.prefill(q, k, v, cu, window=3, return_lse=True)
        ob, lb = braze.attention.prefill(q, k, v, cu, causal=False, return_lse=True)
        o, lse = braze.attention.merge_states(oa, la, ob, lb)
        qw = braze.quant.quantize(w, "mxfp4")
        return o, lse, braze.attention.prefill(q, k, v, cu), braze.quant.dequantize(qw, dtype=torch.bfloat16)

    want = f(q, k, v, cu, w)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v, cu, w)
    for a, b in zip(want, got):
        torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-6)


def test_attention_out_slots_and_lse():
    """decode with out= only returns out; with lse_out only, (out, lse) as the public function does."""
    qw, x, kc, vc, table, kv_lens, slots, (hq, hkv, d) = _paged_step_inputs("cpu")
    q = torch.randn(3, hq, d)
    want_o, want_lse = braze.attention.decode(q, kc, vc, table, kv_lens, return_lse=True)
    out = torch.empty_like(want_o)
    assert bt.call("decode", q, kc, vc, table, kv_lens, out=out) is out
    torch.testing.assert_close(out, want_o, rtol=0, atol=0)
    lse = torch.empty_like(want_lse)
    o, l2 = bt.call("decode", q, kc, vc, table, kv_lens, lse_out=lse)
    assert l2 is lse
    torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)
    torch.testing.assert_close(o, want_o, rtol=0, atol=0)
    with pytest.raises(ValueError, match="window"):
        bt.call("decode", q, kc, vc, table, kv_lens, window=0)
    with pytest.raises(ValueError, match="format"):
        bt.call("dequantize", qw.data, "q9_9")


def test_shapes_only_fake_leaves_other_threads_their_kernels():
    """The fakes of host-reference ops no-op the kernels of their own thread only, and restore the table."""
    import threading

    from braze import _call

    q = torch.randn(2, 4, 64)
    k = torch.randn(5, 2, 64)
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    qq = torch.randn(5, 4, 64)
    want = braze.attention.prefill(qq, k, k, cu)
    real = _call._kernels
    got = []
    with bt._shapes_only():
        y = braze.attention.merge_states(q, torch.zeros(2, 4), q, torch.zeros(2, 4))[0]  # no-op kernel: shapes only
        assert y.shape == q.shape
        t = threading.Thread(target=lambda: got.append(braze.attention.prefill(qq, k, k, cu)))
        t.start()
        t.join()
    assert _call._kernels is real
    torch.testing.assert_close(got[0], want, rtol=0, atol=0)
