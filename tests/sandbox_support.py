"""Whether the sandbox can run here, for the tests that need it.

They skip where bubblewrap is unusable, except when the environment variable CI is set: there
they fail, so a CI run in which the sandbox tests were skipped fails.
"""

from __future__ import annotations

import functools
import os

import pytest

from agent.config import Settings
from agent.tools.sandbox import probe


@functools.lru_cache(maxsize=1)
def _probe():
    return probe(Settings())


@pytest.fixture
def sandbox_required() -> None:
    found = _probe()
    if found.works:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and the sandbox does not work here: {found.why}")
    pytest.skip(f"the sandbox does not work here: {found.why}")
