"""Text generated from the code for the docs, so the docs cannot drift from it (tests compare)."""

from __future__ import annotations

import json

from agent.config import field_docs


def settings_table() -> str:
    """The README's configuration table: every setting, its default and what it does."""
    rows = ["| setting | default | meaning |", "| --- | --- | --- |"]
    for name, doc, default in field_docs():
        shown = "unset" if default is None else json.dumps(default)
        if len(shown) > 40:
            shown = shown[:37] + "…"
        rows.append(f"| `{name}` | `{shown}` | {doc} |")
    return "\n".join(rows)


START, END = "<!-- settings-table:start", "<!-- settings-table:end -->"


def with_settings_table(readme: str) -> str:
    """The README text with the settings table between its markers regenerated."""
    head, _, rest = readme.partition(START)
    marker_line, _, rest = rest.partition("\n")
    _, _, tail = rest.partition(END)
    return f"{head}{START}{marker_line}\n{settings_table()}\n{END}{tail}"


if __name__ == "__main__":
    import sys
    from pathlib import Path

    if sys.argv[1:] == ["--write"]:
        readme = Path(__file__).resolve().parent.parent / "README.md"
        readme.write_text(with_settings_table(readme.read_text()))
    else:
        print(settings_table())
