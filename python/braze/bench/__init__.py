"""``braze bench``: each op at its bench shapes beside the copy ceiling measured
in the same run and the peers installed here (DESIGN §8)."""
from .harness import run  # noqa: F401
