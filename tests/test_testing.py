"""The parity harness itself: arrays handed to a GPU backend keep their layout."""
import numpy as np
import pytest

import ml_dtypes
from braze import testing

torch = pytest.importorskip("torch")


def _same(t, a):
    assert tuple(t.shape) == a.shape
    assert tuple(t.stride()) == tuple(s // a.itemsize for s in a.strides)
    np.testing.assert_array_equal(t.float().numpy(), a.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_views_keep_their_strides(dtype):
    full = np.arange(5 * 3 * 8, dtype=np.float32).reshape(5, 3, 8).astype(dtype)
    for view in (full[..., :5], full[:, 1, :], full[:, 1:, :], full[1:4:2]):
        _same(testing.torch_view(view, "cpu"), view)


def test_contiguous_and_0d():
    a = np.arange(12, dtype=np.int64).reshape(3, 4)
    _same(testing.torch_view(a, "cpu"), a)
    s = np.asarray(np.int32(7))
    t = testing.torch_view(s, "cpu")
    assert t.shape == () and int(t) == 7


def test_writes_through_the_view_land_in_the_same_buffer():
    full = np.zeros((4, 6), np.float32)
    t = testing.torch_view(full[:, :3], "cpu")
    t.fill_(1.0)
    base = t._base if t._base is not None else t
    assert float(base.sum()) == 12.0  # only the view's 4 x 3 elements
