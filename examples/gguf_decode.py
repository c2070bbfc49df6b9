"""Greedy decoding of a Llama-architecture GGUF model with braze ops only.

The code is the module ``braze.gguf_decode`` (python/braze/gguf_decode.py, walked
through in docs/example.md); this file runs it from a checkout:

    python examples/gguf_decode.py MODEL.gguf --prompt 1,2,3 --tokens 16 [--device cpu|cuda|mps]
"""
import sys

from braze.gguf_decode import main

if __name__ == "__main__":
    sys.exit(main())
