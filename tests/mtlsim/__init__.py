"""The MSL simulator: runs shaders/metal/*.metal on the CPU (docs/metal.md)."""
from .sim import (Library, SimError, metal_module, needs_relaunch, sanitizer_env, set_schedule,
                  shader_library)

__all__ = ["Library", "SimError", "metal_module", "needs_relaunch", "sanitizer_env", "set_schedule",
           "shader_library"]
