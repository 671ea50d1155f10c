"""The package's shape: one folder per concept, in layers that only point down (how long a module or
a function is, is ruff's formatter and its complexity limit's business, in pyproject.toml, not a line
cap's).

Every import in agent/ counts: module level, inside functions, and the "agent.x.y:attr" strings of
lazy command maps and importlib calls. Only an import under `if TYPE_CHECKING:` is left out: it names
a type for the reader and never runs. A cycle between modules fails the test, naming it; so does an
import from a package to one in a layer above it.
"""

from __future__ import annotations

import ast
import inspect
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
    tree = ast.parse(path.read_text())
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
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


# From the top down: a package (or a module standing directly in agent/) may import its own modules
# and those of any layer below its own, never one above or beside it.
LAYERS = [
    {"__main__"},  # `python -m agent`
    {"docs", "cli"},  # the operator's commands, and the settings table they document
    {"cycle"},  # the core loop: one cycle, its limits, the dispatcher, the prompt, idle cycles, the journal
    {"after"},  # what a cycle leaves behind: report, transcript, aftercare, incidents, health, hook, metrics, traces
    {"gates"},  # approvals, checks, budgets, stalls, holds
    {"memory"},  # the built-in sections and reflection, queue edits, the inbox, sections, consolidation
    {"tools"},  # what the model may call
    {"models"},  # the model interface and every model
    {"config"},  # settings
    {"scratchpad"},  # the scratchpad's files: active.yaml and the snapshot pairs
    {"store"},  # files on disk: the home, its records (logs/agent.db), ids, locks
    {"state", "secrets", "setting_checks"},  # the state's rules, redaction, settings' constraints
    {"common"},  # leaf helpers: outcomes, tags, escaping, JSON schema, YAML
]
MAX_TOP_LEVEL_MODULES = 8


def _unit(module: str) -> str:
    """The package (or top-level module) of agent/ a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(unit: str) -> int:
    return next(n for n, layer in enumerate(LAYERS) if unit in layer)


def _upward_imports(edges: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in edges.items():
        for target in targets:
            a, b = _unit(name), _unit(target)
            if a != b and "__init__" not in (a, b) and _layer(a) >= _layer(b):
                wrong.append(f"{name} -> {target}")
    return sorted(wrong)


def test_every_package_and_top_level_module_has_a_layer():
    units = {_unit(name) for name in _modules()} - {"__init__"}
    assert units == set().union(*LAYERS), "LAYERS must name exactly agent/'s packages and top-level modules"


def test_packages_import_only_from_layers_below_their_own():
    known = _modules()
    edges = {name: _imports(name, path, known) for name, path in known.items()}
    assert not _upward_imports(edges), "imports that point up or sideways:\n" + "\n".join(_upward_imports(edges))


def test_the_layer_rule_finds_an_upward_import():
    assert _upward_imports({"agent.store.home": {"agent.cycle.run"}}) == ["agent.store.home -> agent.cycle.run"]
    assert _upward_imports({"agent.state": {"agent.secrets"}}) == ["agent.state -> agent.secrets"]
    assert _upward_imports({"agent.cycle.run": {"agent.store.home", "agent.cycle.limits"}}) == []


def test_a_type_only_import_is_not_a_dependency(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agent.cycle import run\n")
    assert _imports("agent.store.m", module, {"agent.cycle.run": module}) == set()
    module.write_text("from agent.cycle import run\n")
    assert _imports("agent.store.m", module, {"agent.cycle.run": module}) == {"agent.cycle.run"}


def test_at_most_eight_modules_stand_directly_in_agent():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_every_package_says_what_it_holds():
    for init in PACKAGE.rglob("__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), f"{init.relative_to(REPO)} has no docstring"


# The cycle reads in one short file: its steps, each a call into the module that owns it.
MAX_CYCLE_IMPORTS = 15
MAX_LOOP_ARGUMENTS = 6


def test_the_cycle_imports_few_modules_and_its_loop_takes_few_arguments():
    known = _modules()
    imported = _imports("agent.cycle.run", known["agent.cycle.run"], known)
    assert len(imported) <= MAX_CYCLE_IMPORTS, sorted(imported)
    from agent.cycle.loop import Loop

    arguments = [name for name in inspect.signature(Loop).parameters]
    assert len(arguments) <= MAX_LOOP_ARGUMENTS, arguments
    gates = {name for name in imported if name.startswith("agent.gates.")}
    assert gates <= {"agent.gates.registry", "agent.gates.base"}, f"the cycle names a gate itself: {gates}"
