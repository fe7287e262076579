"""pytest setup for the Python module: `ember` comes from the build (PYTHONPATH=<build>/python, as CTest sets it).
The cuda cases run where ember.cuda.is_available() (a GPU, or the emulated device of -DEMBER_CUDA=EMULATED) and are
skipped elsewhere, never passed."""
import os
import sys

import pytest

import ember

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
requires_cuda = pytest.mark.skipif(not ember.cuda.is_available(),
                                   reason="no usable CUDA device: " + ember.cuda.unavailable_reason())


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture
def python():
    return sys.executable
