"""Text generated from the code for the docs, so the docs cannot drift from it (tests compare)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.config import field_docs

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"  # where the settings table lives


def settings_table() -> str:
    """The reference's settings table: every setting, its default and what it does."""
    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name, doc, default in field_docs():
        shown = "unset" if default is None else json.dumps(default)
        if len(shown) > 40:
            shown = shown[:37] + "…"
        rows.append(f"| `{name}` | `{shown}` | {doc} |")
    return "\n".join(rows)


START, END = "<!-- settings-table:start", "<!-- settings-table:end -->"


def with_settings_table(text: str) -> str:
    """The text with the settings table between its markers regenerated."""
    head, _, rest = text.partition(START)
    marker_line, _, rest = rest.partition("\n")
    _, _, tail = rest.partition(END)
    return f"{head}{START}{marker_line}\n{settings_table()}\n{END}{tail}"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--write"]:
        REFERENCE.write_text(with_settings_table(REFERENCE.read_text()))
    else:
        print(settings_table())
