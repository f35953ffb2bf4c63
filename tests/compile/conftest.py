"""Compile tests start from a clean Dynamo state so that compile counts mean what they say."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
