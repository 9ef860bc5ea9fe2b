"""Shared fixtures: every model test runs on each backend this build offers."""

import numpy as np
import pytest

import nlsepy as nl


def pytest_collection_modifyitems(config, items):
    have_cuda = "cuda" in nl.backends()
    skip = pytest.mark.skip(reason="needs the CUDA backend and a GPU")
    for item in items:
        if "cuda" in item.keywords and not have_cuda:
            item.add_marker(skip)


@pytest.fixture(params=nl.backends())
def backend(request):
    """Each backend of this build and machine ("cpu", and "cuda" with a GPU)."""
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20260521)
