"""braze: hand-written fused kernels for LLM inference, one API over CPU, CUDA and Metal.

Families: ``braze.norm``, ``braze.rope``, ``braze.sampling``, ``braze.ops``,
``braze.attention``, ``braze.quant``. Every function takes numpy,
torch, CuPy, JAX or MLX arrays and returns the caller's array type on the
caller's device, without copies. ``braze.ArrayLike`` and ``braze.Array`` are
the types the annotations use.
"""
__version__ = "0.1.0"

from . import attention  # noqa: E402
from . import norm  # noqa: E402
from . import ops  # noqa: E402
from . import quant  # noqa: E402
from . import rope  # noqa: E402
from . import sampling  # noqa: E402
from ._typing import Array, ArrayLike  # noqa: E402

__all__ = ["norm", "rope", "sampling", "ops", "attention", "quant", "Array", "ArrayLike", "__version__"]
