"""The JAX backward formulas: ``_grads``' table (docs/jax.md, "Autograd")."""
from __future__ import annotations

from ._grads import BACKWARD  # noqa: F401
