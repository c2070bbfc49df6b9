import pytest

from braze import _backends


def cuda_ready():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and _backends.usable("cuda")


def backend_params():
    """cpu always; cuda (marked) where a GPU, torch and braze._cuda are all here."""
    return [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda,
                         pytest.mark.skipif(not cuda_ready(), reason="no CUDA GPU, torch or braze._cuda here")])]
