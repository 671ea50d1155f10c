"""The package's shape: layers that only point down (how long a module or a function is, is ruff's
formatter and its complexity limit's business, in pyproject.toml, not a line cap's).

Every import in agent/ counts: module level, inside functions, and the "agent.x.y:attr" strings
of lazy command maps and importlib calls. A cycle between modules fails the test, naming it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "agent"
_LAZY_TARGET = re.compile(r"agent(\.\w+)+:\w+")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The agent modules `name` imports, in any way."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = ".".join(base + ([node.module] if node.module else []))
            targets += [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _LAZY_TARGET.fullmatch(node.value):
            targets.append(node.value.split(":")[0])  # "agent.cli.inspect:diff" in a lazy command map
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            targets += [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    found = set()
    for target in targets:
        while target and target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        if target in known and target != name:
            found.add(target)
    return found


def _cycle_from(start: str, edges: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(edges[node]):
            if nxt == start:
                return path + [start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, path + [nxt]))
    return None


def test_no_import_in_agent_closes_a_loop():
    known = _modules()
    edges = {name: _imports(name, path, known) for name, path in known.items()}
    loops = {" -> ".join(loop) for name in known if (loop := _cycle_from(name, edges))}
    assert not loops, "imports that close a loop:\n" + "\n".join(sorted(loops))


def test_the_loop_detector_finds_a_planted_loop():
    assert _cycle_from("a", {"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle_from("a", {"a": {"b"}, "b": set()}) is None
