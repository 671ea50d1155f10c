"""The one way a message says how to install an optional part (an extra of pyproject.toml): a
command that works from the clone (`pip install -e '.[mcp]'`, run in it) and one that works where
the runner was installed from a built wheel (the extra's own requirements, read from the installed
metadata, since no index serves this distribution by name). tests/test_docs.py checks that every
extra a hint in the code or the docs names is one pyproject.toml defines."""

from __future__ import annotations

import re

DISTRIBUTION = "scratchpad-agent"


def extra_requirements(extra: str) -> list[str]:
    """The requirements the installed distribution declares for `extra` ([] when it is not installed
    from metadata, e.g. run from a checkout on PYTHONPATH)."""
    from importlib import metadata  # here: only a message about a missing part pays for it

    try:
        declared = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    return [req.split(";", 1)[0].strip() for req in declared if ";" in req and marker.search(req.split(";", 1)[1])]


def install_hint(extra: str) -> str:
    """How to install `extra`: from the clone, and beside a wheel install."""
    from_clone = f"pip install -e '.[{extra}]' in the clone"
    requirements = extra_requirements(extra)
    if not requirements:
        return from_clone
    return f"{from_clone}, or where it was installed from a wheel: pip install " + " ".join(
        f"'{req}'" for req in requirements
    )
