"""torch peers of the quant family (quantize_activations: braze.bench.peers.quant_mx)."""
from .quant_mx import torch_ops  # noqa: F401
