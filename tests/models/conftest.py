"""Fixtures the provider tests share."""

from __future__ import annotations

import pytest

from tests.models.openai_server import OpenAIServer


@pytest.fixture
def server():
    """An OpenAI-compatible stub on 127.0.0.1, stopped after the test."""
    with OpenAIServer() as srv:
        yield srv
