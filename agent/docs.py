"""Text generated from the code for the docs, so the docs cannot drift from it (tests compare)."""

from __future__ import annotations

import json


def settings_table() -> str:
    """The README's configuration table: every setting, its default and what it does."""
    from .config import field_docs

    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name, doc, default in field_docs():
        shown = "unset" if default is None else json.dumps(default)
        if len(shown) > 40:
            shown = shown[:37] + "…"
        rows.append(f"| `{name}` | `{shown}` | {doc} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(settings_table())
