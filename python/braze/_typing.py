"""Types of the public API, for annotations (``braze.ArrayLike``, ``braze.Array``).

braze takes any array that exports DLPack -- numpy (ml_dtypes bfloat16
included), torch, CuPy, JAX, MLX -- and returns the caller's own array type,
so an op is typed ``(x: Array, ...) -> Array`` with ``Array`` a type variable
bound to that protocol.
"""
from typing import Any, Protocol, TypeVar, Union, runtime_checkable

__all__ = ["ArrayLike", "Array", "RowFloat", "RowInt"]


@runtime_checkable
class ArrayLike(Protocol):
    """An array of numpy, torch, CuPy, JAX or MLX (anything with DLPack's device query)."""

    def __dlpack_device__(self) -> Any: ...


Array = TypeVar("Array", bound=ArrayLike)
"""The caller's array type: an op returns arrays of the type it was given."""

RowFloat = Union[float, ArrayLike]
"""A per-row real parameter: a Python number, or a float32 array ``[B]`` on the logits' device."""

RowInt = Union[int, ArrayLike]
"""A per-row integer parameter: a Python int, or an int32 array ``[B]`` on the logits' device."""
