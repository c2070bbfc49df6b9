"""The MSL simulator: runs shaders/metal/*.metal on the CPU (docs/metal.md)."""
from .sim import (DTYPES, NORM_OPS, NORM_ROLES, ROPE_ROLES, Library, NormLibrary, RopeLibrary, SimError,
                  family_library, needs_relaunch, norm_library, rope_library, sanitizer_env, shader_library)

__all__ = ["DTYPES", "NORM_OPS", "NORM_ROLES", "ROPE_ROLES", "Library", "NormLibrary", "RopeLibrary",
           "SimError", "family_library", "needs_relaunch", "norm_library", "rope_library", "sanitizer_env",
           "shader_library"]
