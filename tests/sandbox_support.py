"""Whether the sandbox can run here, for the tests that need it, and the small C programs they run in it.

They skip where bubblewrap is unusable, except when the environment variable CI is set: there
they fail, so a CI run in which the sandbox tests were skipped fails.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

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


def built(source: Path, folder: Path, *flags: str) -> Path:
    """The C program `source` (tests/system/*.c) built with gcc into `folder`, mode 0755."""
    from tests.users import _unavailable

    program = folder / source.stem
    try:
        made = subprocess.run(["gcc", "-O", *flags, "-o", str(program), str(source)], capture_output=True, text=True)
    except FileNotFoundError:
        _unavailable("gcc is not installed (the README's apt-get line installs build-essential)")
    assert made.returncode == 0, made.stderr
    program.chmod(0o755)
    return program
