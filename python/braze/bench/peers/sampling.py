"""torch peers of the sampling family where torch has the op built in; the
others (masks, penalties, sample) are measured through braze's reference
composition in torch, which sorts the vocabulary as torch users do."""
from __future__ import annotations


def _scaled(logits, temperature):
    """What a torch user writes: no division without a temperature."""
    if not hasattr(temperature, "float") and temperature == 1.0:
        return logits.float()
    t = temperature.float()[:, None] if hasattr(temperature, "float") else temperature
    return logits.float() / t


def softmax(logits, *, temperature=1.0):
    return _scaled(logits, temperature).softmax(-1)


def log_softmax(logits, *, temperature=1.0):
    return _scaled(logits, temperature).log_softmax(-1)


def logsumexp(logits, *, temperature=1.0):
    return _scaled(logits, temperature).logsumexp(-1)


def argmax(logits):
    return logits.argmax(-1).int()


torch_ops = {"softmax": softmax, "log_softmax": log_softmax, "logsumexp": logsumexp, "argmax": argmax}
