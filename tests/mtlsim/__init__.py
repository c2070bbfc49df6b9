"""The MSL simulator: runs shaders/metal/*.metal on the CPU (docs/metal.md)."""
from .sim import (DTYPES, NORM_OPS, NORM_ROLES, ROPE_ROLES, SAMPLING_OPS, SAMPLING_ROLES, Library, NormLibrary,
                  RopeLibrary, SamplingLibrary, SimError, family_library, needs_relaunch, norm_library, rope_library,
                  sampling_library, sanitizer_env, shader_library)

__all__ = ["DTYPES", "NORM_OPS", "NORM_ROLES", "ROPE_ROLES", "SAMPLING_OPS", "SAMPLING_ROLES", "Library",
           "NormLibrary", "RopeLibrary", "SamplingLibrary", "SimError", "family_library", "needs_relaunch",
           "norm_library", "rope_library", "sampling_library", "sanitizer_env", "shader_library"]
