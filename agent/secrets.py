"""Secrets: which values are secret, and the one place they are redacted or withheld.

Every writer (snapshots, logs, the index, printed output), every prompt builder and every tool
asks one `Secrets` object. It is built once per command from the settings and the environment.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping

REDACTED = "[REDACTED]"

# A secret shorter than this is not redacted: replacing every "abc" in notes would do harm.
MIN_SECRET_LENGTH = 8

# Variable names that usually hold credentials; child processes never see them.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|COOKIE|SESSION|AUTH|PRIVATE", re.IGNORECASE)


class Secrets:
    """The secret values of one command, and what may be shown or passed on without them."""

    def __init__(self, values: Iterable[str] = (), names: Iterable[str] = ()):
        self.names = frozenset(names)
        self.values = tuple(sorted({v for v in values if v and len(v) >= MIN_SECRET_LENGTH}, key=len, reverse=True))

    @classmethod
    def from_settings(cls, settings: Any, env: Mapping[str, str] | None = None) -> "Secrets":
        env = os.environ if env is None else env
        names = settings.secret_names
        return cls((env.get(name, "") for name in names), names)

    def __bool__(self) -> bool:
        return bool(self.values)

    def redact_text(self, text: str) -> str:
        for secret in self.values:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def redact(self, value: Any) -> Any:
        """`value` with every secret in its strings (keys too) replaced, at any nesting depth."""
        if not self.values:
            return value
        if not isinstance(value, (list, dict)):
            return self._leaf(value)
        out: list | dict = [] if isinstance(value, list) else {}
        stack = [(value, out)]  # iterative: a hostile value nested 100,000 deep must not crash
        while stack:
            source, target = stack.pop()
            items = source.items() if isinstance(source, dict) else ((None, v) for v in source)
            for key, item in items:
                if isinstance(item, (list, dict)):
                    child: list | dict = [] if isinstance(item, list) else {}
                    stack.append((item, child))
                else:
                    child = self._leaf(item)
                if isinstance(target, dict):
                    target[self._leaf(key)] = child
                else:
                    target.append(child)
        return out

    def _leaf(self, value: Any) -> Any:
        return self.redact_text(value) if isinstance(value, str) else value

    def child_env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a child process: no secret variable, no variable holding a secret.

        Removed: the configured secret names, any name that looks like a credential (KEY, TOKEN,
        SECRET, PASSWORD, ...), and any variable whose value is a known secret.
        """
        env = os.environ if env is None else env
        return {k: v for k, v in env.items()
                if k not in self.names and not SECRET_NAME.search(k) and v not in self.values}
