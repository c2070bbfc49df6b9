"""The JAX backward formulas: ``_grads`` over jnp (docs/jax.md, "Autograd")."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from ._grads import Fns, backward_table

FNS = Fns(sigmoid=jax.nn.sigmoid, erf=jax.lax.erf, tanh=jnp.tanh, exp=jnp.exp, minimum=jnp.minimum, clip=jnp.clip,
          split=lambda x: jnp.split(x, 2, axis=-1),
          interleave=lambda a, b: jnp.stack((a, b), axis=-1).reshape(*a.shape[:-1], 2 * a.shape[-1]),
          concat=lambda a, b: jnp.concatenate((a, b), axis=-1),
          f32=lambda x: x.astype(jnp.float32), cast=lambda x, like: x.astype(like.dtype))
BACKWARD = backward_table(FNS)
