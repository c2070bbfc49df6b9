"""Broadcast (stride-0) and overlapping row layouts (issue 11, bugs 1 and 7).

Inputs may repeat memory: a broadcast view reads the same row for every row and
must give what its contiguous copy gives. Outputs may not: a view whose rows
share memory is a ValueError naming the argument, and nothing is written.
"""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from braze import norm, rope, sampling, testing
from braze.reference import norm as ref_norm

rng = np.random.default_rng(11)


def broadcast_rows(row, rows):
    """A (rows, len(row)) view of `row` whose row stride is 0."""
    return np.lib.stride_tricks.as_strided(row, (rows, row.size), (0, row.itemsize))


def guarded(n, dtype=np.float32):
    """A buffer of 7.0 with room on both sides: (whole buffer, the middle n elements)."""
    buf = np.full(n + 64, 7.0, dtype)
    return buf, buf[32:32 + n]


def raises_untouched(match, fn, buf):
    before = buf.copy()
    with pytest.raises(ValueError, match=match):
        fn()
    assert np.array_equal(buf, before), "memory written before the error"


# ---------------------------------------------------------------- inputs: broadcast rows work
def test_rms_norm_broadcast_input_matches_reference():
    row = rng.normal(size=8).astype(np.float32)
    x = broadcast_rows(row, 4)
    w = rng.normal(size=8).astype(np.float32)
    got = norm.rms_norm(x, w)
    assert np.array_equal(got, norm.rms_norm(np.ascontiguousarray(x), w))
    res = testing.compare(got, ref_norm.rms_norm(np.ascontiguousarray(x).astype(np.float64), w.astype(np.float64)),
                          (2e-5, 2e-5))
    assert res.ok, res.message


def test_broadcast_input_of_several_leading_axes():
    row = rng.normal(size=16).astype(np.float32)
    x = np.lib.stride_tricks.as_strided(row, (2, 3, 16), (0, 0, 4))
    assert np.array_equal(norm.rms_norm(x), norm.rms_norm(np.ascontiguousarray(x)))


def test_broadcast_inner_axis_with_strided_outer_axis_is_refused():
    """Rows 0,0,0,1,1,1 are no arithmetic sequence: refused, not read as six strided rows."""
    base = rng.normal(size=(2, 16)).astype(np.float32)
    x = np.lib.stride_tricks.as_strided(base, (2, 3, 16), (64, 0, 4))
    with pytest.raises(ValueError, match="x: the leading axes .* cannot be walked with one stride"):
        norm.rms_norm(x)


def test_overlapping_input_rows_are_read():
    buf = rng.normal(size=40).astype(np.float32)
    x = np.lib.stride_tricks.as_strided(buf, (5, 16), (4 * 4, 4))  # row stride 4 < 16
    assert np.array_equal(norm.rms_norm(x), norm.rms_norm(np.ascontiguousarray(x)))


def test_add_rms_norm_broadcast_residual():
    x = rng.normal(size=(4, 32)).astype(np.float32)
    r = broadcast_rows(rng.normal(size=32).astype(np.float32), 4)
    y, h = norm.add_rms_norm(x, r)
    y2, h2 = norm.add_rms_norm(x, np.ascontiguousarray(r))
    assert np.array_equal(y, y2) and np.array_equal(h, h2)


def test_rms_norm_vjp_broadcast_dy():
    x = rng.normal(size=(6, 24)).astype(np.float32)
    w = rng.normal(size=24).astype(np.float32)
    dy = broadcast_rows(rng.normal(size=24).astype(np.float32), 6)
    got = norm.rms_norm_vjp(x, w, dy)
    want = norm.rms_norm_vjp(x, w, np.ascontiguousarray(dy))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_softmax_broadcast_logits():
    x = broadcast_rows(rng.normal(size=50).astype(np.float32), 3)
    assert np.array_equal(sampling.softmax(x), sampling.softmax(np.ascontiguousarray(x)))


def test_apply_penalties_broadcast_token_ids():
    x = rng.normal(size=(3, 50)).astype(np.float32)
    ids = broadcast_rows(np.array([1, 4, 4, -1], np.int32), 3)
    got = sampling.apply_penalties(x, ids, repetition=1.3, frequency=0.2, presence=0.1)
    want = sampling.apply_penalties(x, np.ascontiguousarray(ids), repetition=1.3, frequency=0.2, presence=0.1)
    assert np.array_equal(got, want)


def test_rope_broadcast_tokens():
    """Token axes of stride 0 on x (one [H, D] block for every token) and on positions."""
    block = rng.normal(size=(2, 16)).astype(np.float32)
    x = np.lib.stride_tricks.as_strided(block, (5, 2, 16), (0, 64, 4))
    pos = np.arange(5, dtype=np.int32)
    assert np.array_equal(rope.rope(x, pos), rope.rope(np.ascontiguousarray(x), pos))
    same = np.lib.stride_tricks.as_strided(np.array([3], np.int64), (5,), (0,))
    assert np.array_equal(rope.rope(x, same), rope.rope(np.ascontiguousarray(x), np.full(5, 3, np.int64)))


def test_rope_qk_broadcast_q():
    q = np.lib.stride_tricks.as_strided(rng.normal(size=(2, 16)).astype(np.float32), (4, 2, 16), (0, 64, 4))
    k = rng.normal(size=(4, 1, 16)).astype(np.float32)
    pos = np.arange(4, dtype=np.int32)
    got = rope.rope_qk(q, k, pos)
    want = rope.rope_qk(np.ascontiguousarray(q), k, pos)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


# ---------------------------------------------------------------- outputs: overlapping rows refused
def test_rms_norm_broadcast_out_refused():
    x = rng.normal(size=(4, 8)).astype(np.float32)
    buf, mid = guarded(8)
    raises_untouched("out: rows overlap", lambda: norm.rms_norm(x, out=broadcast_rows(mid, 4)), buf)


def test_partially_overlapping_out_refused():
    x = rng.normal(size=(4, 16)).astype(np.float32)
    buf, mid = guarded(64)
    out = np.lib.stride_tricks.as_strided(mid, (4, 16), (8 * 4, 4))
    raises_untouched(r"out: rows overlap \(row stride 8 < row length 16\)", lambda: norm.rms_norm(x, out=out), buf)


def test_one_row_broadcast_out_is_fine():
    """Leading axes of size 1 are ignored: a single row overlaps nothing."""
    x = rng.normal(size=(1, 1, 8)).astype(np.float32)
    buf, mid = guarded(8)
    out = np.lib.stride_tricks.as_strided(mid, (1, 1, 8), (0, 0, 4))
    norm.rms_norm(x, out=out)
    assert np.array_equal(out, norm.rms_norm(x))


@pytest.mark.parametrize("which", ["out", "residual_out"])
def test_add_rms_norm_broadcast_outputs_refused(which):
    x = rng.normal(size=(4, 8)).astype(np.float32)
    r = rng.normal(size=(4, 8)).astype(np.float32)
    buf, mid = guarded(8)
    outs = {"out": np.empty_like(x), "residual_out": np.empty_like(x)}
    outs[which] = broadcast_rows(mid, 4)
    raises_untouched(f"{which}: rows overlap", lambda: norm.add_rms_norm(x, r, **outs), buf)


def test_rms_norm_vjp_broadcast_dx_refused():
    x = rng.normal(size=(4, 8)).astype(np.float32)
    w = np.ones(8, np.float32)
    buf, mid = guarded(8)
    dw = np.full(8, 7.0, np.float32)
    raises_untouched("dx: rows overlap",
                     lambda: norm.rms_norm_vjp(x, w, x.copy(), out=(broadcast_rows(mid, 4), dw)), buf)
    assert np.all(dw == 7.0)


def test_rope_broadcast_out_refused():
    x = rng.normal(size=(5, 2, 16)).astype(np.float32)
    buf, mid = guarded(32)
    out = np.lib.stride_tricks.as_strided(mid, (5, 2, 16), (0, 64, 4))
    raises_untouched("out: rows overlap", lambda: rope.rope(x, np.arange(5, dtype=np.int32), out=out), buf)


def test_rope_overlapping_heads_out_refused():
    x = rng.normal(size=(3, 4, 16)).astype(np.float32)
    buf, mid = guarded(3 * 64)
    out = np.lib.stride_tricks.as_strided(mid, (3, 4, 16), (64 * 4, 8 * 4, 4))  # head stride 8 < 16
    raises_untouched("out: rows overlap", lambda: rope.rope(x, np.arange(3, dtype=np.int32), out=out), buf)


def test_rope_qk_broadcast_k_out_refused():
    q = rng.normal(size=(4, 2, 16)).astype(np.float32)
    k = rng.normal(size=(4, 1, 16)).astype(np.float32)
    buf, mid = guarded(16)
    k_out = np.lib.stride_tricks.as_strided(mid, (4, 1, 16), (0, 64, 4))
    raises_untouched("k_out: rows overlap",
                     lambda: rope.rope_qk(q, k, np.arange(4, dtype=np.int32), k_out=k_out), buf)


def test_softmax_broadcast_out_refused():
    x = rng.normal(size=(3, 50)).astype(np.float32)
    buf, mid = guarded(50)
    raises_untouched("out: rows overlap", lambda: sampling.softmax(x, out=broadcast_rows(mid, 3)), buf)


def test_top_k_mask_in_place_on_broadcast_logits_refused():
    """In place is allowed only where the view can be written: a broadcast one cannot."""
    buf, mid = guarded(50)
    x = broadcast_rows(mid, 3)
    raises_untouched("out: rows overlap", lambda: sampling.top_k_mask(x, 5, out=x), buf)


# ---------------------------------------------------------------- torch views (bug 7)
def test_torch_expand_out_in_a_subprocess():
    """A torch broadcast view as out= used to write past its memory and crash the
    interpreter after the call; now it is a ValueError and the process exits cleanly."""
    pytest.importorskip("torch")
    code = textwrap.dedent("""
        import gc, torch
        from braze import norm
        x = torch.randn(4, 64)
        out = torch.zeros(64).expand(4, 64)
        try:
            norm.rms_norm(x, out=out)
        except ValueError as e:
            assert "out: rows overlap" in str(e), e
            print("refused")
        assert torch.count_nonzero(out) == 0
        y = norm.rms_norm(x.new_ones(64).expand(4, 64))  # the same view as an input works
        assert torch.allclose(y, torch.ones(4, 64))
        del out, x, y
        gc.collect()
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "refused" in p.stdout
