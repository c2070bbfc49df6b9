"""The ops family: registry parity on every backend, plus what the registry cannot say:
in-place forms, out-of-range ids, the Hadamard tables, the erf of the reference, errors."""
import math
import os
import re

import numpy as np
import pytest

import braze
from braze import _spec, testing
from braze.reference import ops as ref
from conftest import cpu_isa, parity_test

SPECS = _spec.ops("ops")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

test_parity = parity_test(SPECS)
