"""Programs the tests run that the project does not depend on (datasette, checkov, an OTLP
receiver), each in a virtual environment of its own, made on first use from the package index with
the version pinned here. Under CI (the variable CI set) a tool that cannot be installed fails the
test; elsewhere (no network) the test is skipped, saying what is missing.

The environments live in `$AGENT_TEST_TOOLS` (default: `.tools/` in the repository, ignored by git),
one folder per tool and version, and are reused by later runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TOOLS = {  # name -> (requirements, the program it provides)
    "datasette": (["datasette==0.65.5"], "datasette"),
    # Arize Phoenix: a real OTLP/HTTP receiver that stores spans offline and serves them back (REST)
    "phoenix": (["arize-phoenix==20.26.1"], "phoenix"),
    "checkov": (["checkov==3.3.30"], "checkov"),
}


def tool(name: str) -> Path:
    """The path of tool `name`'s program, installing it first if its environment is not made yet."""
    requirements, program = TOOLS[name]
    root = Path(os.environ.get("AGENT_TEST_TOOLS") or REPO / ".tools") / f"{name}-{requirements[0].split('==')[-1]}"
    made, executable = root / "installed", root / "bin" / program
    if made.is_file() and made.read_text() == "\n".join(requirements) and executable.exists():
        return executable
    shutil.rmtree(root, ignore_errors=True)
    steps = ([sys.executable, "-m", "venv", str(root)], [str(root / "bin" / "pip"), "install", "-q", *requirements])
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800, env=_quiet_env())
        if done.returncode != 0:
            why = f"{name} could not be installed ({' '.join(step[-2:])}): {done.stderr.strip()[-300:]}"
            if os.environ.get("CI"):
                pytest.fail(f"CI must run this test, but {why}", pytrace=False)
            pytest.skip(why)
    made.write_text("\n".join(requirements))
    return executable


def _quiet_env() -> dict[str, str]:
    return {**os.environ, "PHOENIX_TELEMETRY_ENABLED": "false", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def require_module(name: str, extra: str) -> None:
    """Skip (fail under CI) a test whose module `name`, from the project's `extra`, is not importable."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        why = f"{name} is not importable (pip install -e '.[{extra}]')"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this test, but {why}", pytrace=False)
        pytest.skip(why)
