"""The docs agree with the code (exit codes, the default rules, the settings table, every path and command they
name) and say each thing once."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path
from typing import Iterator

from agent.common.outcomes import ExitCode
from agent.cycle.prompt import default_rules
from agent.docs import START, with_settings_table
from agent.models.local.worker import PORTABLE_CMAKE_ARGS
from tests.helpers import REPO


def test_exit_code_table_in_the_reference_matches_the_code():
    text = (REPO / "docs" / "reference.md").read_text().split("\n## Exit codes\n", 1)[1].split("\n#", 1)[0]
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}


def test_root_rules_md_is_the_packaged_default():
    assert (REPO / "rules.md").read_text() == default_rules()


def test_the_settings_table_in_the_reference_lists_every_setting_with_its_default():
    reference = (REPO / "docs" / "reference.md").read_text()
    assert START in reference, "docs/reference.md lost its settings-table markers"
    assert reference == with_settings_table(reference), "run: python -m agent.docs --write"


# ------------------------------------------------------------------ each fact in one place

DOCS = [
    REPO / "README.md",
    REPO / "AGENTS.md",
    REPO / "CLAUDE.md",
    REPO / "SCRATCHPAD.md",
    *sorted((REPO / "docs").glob("*.md")),
]
_ITEM = re.compile(r"(?:[-*+]|\d+\.)\s")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*\[(])")
_BOLD_LEAD = re.compile(r"(?:[-*+]|\d+\.)?\s*\*\*([^*]+)\*\*")
_FILE_SUFFIXES = ("service", "timer", "prom", "lock", "log", "yaml", "json", "jsonl", "md", "txt", "env", "db")


def _normal(text: str) -> str:
    return " ".join(text.replace("*", "").replace("`", "").lower().split())


def _units(path: Path) -> tuple[list[tuple[int, str]], list[list[tuple[int, str]]]]:
    """(paragraphs and list items as (line, text), tables as lists of (line, row)), code blocks left out."""
    units: list[list] = []
    tables: list[list[tuple[int, str]]] = []
    fenced, current, table = False, None, None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if text.startswith("```"):
            fenced, current, table = not fenced, None, None
            continue
        if fenced:
            continue
        if text.startswith("|"):
            current = None
            if table is None:
                table = []
                tables.append(table)
            table.append((number, text))
            continue
        table = None
        if not text or text.startswith(("#", "<!--")):
            current = None
        elif current is None or _ITEM.match(text):
            current = [number, text]
            units.append(current)
        else:
            current[1] += " " + text
    return [(n, t) for n, t in units], tables


def _repeats() -> list[str]:
    """Every sentence, paragraph lead, table row or table key said twice, with where."""
    seen: dict[str, list[str]] = {}
    for path in DOCS:
        units, tables = _units(path)
        for what, where in (*_unit_facts(path.name, units), *_table_facts(path.name, tables)):
            seen.setdefault(what, []).append(where)
    return [f"{what} at {', '.join(places)}" for what, places in seen.items() if len(places) > 1]


def _unit_facts(name: str, units: list[tuple[int, str]]) -> Iterator[tuple[str, str]]:
    """(what is said, where) for each long sentence and each bold lead of the paragraphs and list items."""
    for number, text in units:
        where = f"{name}:{number}"
        for sentence in _SENTENCE_END.split(text):
            if len(_normal(sentence)) >= 50:
                yield f"sentence {_normal(sentence)!r}", where
        lead = _BOLD_LEAD.match(text)
        if lead:
            yield f"lead {name} {_normal(lead[1])!r}", where


def _table_facts(name: str, tables: list[list[tuple[int, str]]]) -> Iterator[tuple[str, str]]:
    """(what is said, where) for each long table row, and each row's key within its table."""
    for table in tables:
        for number, row in table:
            where = f"{name}:{number}"
            if re.fullmatch(r"[|\s:-]+", row):
                continue
            if len(_normal(row)) >= 30:
                yield f"row {_normal(row)!r}", where
            key = re.sub(r"\[[^\]]*\]", "", _normal(row.strip("|").split("|")[0])).strip()
            if re.search(r"[a-z]", key):  # a row's key (a command, a setting) once per table
                yield f"key {name}:{table[0][0]} {' '.join(key.split())!r}", where


def test_no_sentence_paragraph_or_table_row_is_said_twice_in_the_docs():
    repeats = _repeats()
    assert not repeats, "said twice (keep one, link to it):\n" + "\n".join(repeats)


def test_the_repeat_finder_finds_planted_repeats(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(
        "- **Safe by default.** One thing.\n- **Safe by default.** Another.\n\n"
        "A sentence long enough to count as a fact of its own, said here. And more.\n\n"
        "| `agent run [-q]` | one cycle |\n| `agent run` | one cycle, again |\n\n"
        "```\nA sentence long enough to count as a fact of its own, said here.\n```\n"
        "Then. A sentence long enough to count as a fact of its own, said here.\n"
    )
    monkeypatch.setattr(f"{__name__}.DOCS", [page])
    found = "\n".join(_repeats())
    assert "lead page.md 'safe by default.'" in found
    assert "sentence 'a sentence long enough" in found
    assert "page.md:4, page.md:12" in found  # not the copy in the code block (line 10)
    assert "'agent run'" in found


def _code_references(text: str) -> set[str]:
    paths = set(re.findall(r"(?<![\w/.~-])agent/[\w/]*(?:\.py)?", text))
    names = {
        name
        for name in re.findall(r"(?<![\w/.-])agent(?:\.[A-Za-z_]\w*)+", text)
        if name.rsplit(".", 1)[-1] not in _FILE_SUFFIXES
    }
    return paths | names


def _exists(reference: str) -> bool:
    if "/" in reference:
        return (REPO / reference).exists()
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        where = REPO / Path(*parts[:cut])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            target = importlib.import_module(module)
            for attribute in parts[cut:]:
                if not hasattr(target, attribute):
                    return False
                target = getattr(target, attribute)
            return True
    return False


def test_every_code_path_and_name_in_the_docs_exists():
    missing = [
        f"{path.name}: {reference}"
        for path in DOCS
        for reference in sorted(_code_references(path.read_text()))
        if not _exists(reference)
    ]
    assert not missing, "the docs name code that does not exist:\n" + "\n".join(missing)


def test_every_agent_command_in_the_docs_exists():
    from agent.cli import COMMANDS

    named = {(path.name, name) for path in DOCS for name in re.findall(r"`agent ([a-z][a-z-]*)", path.read_text())}
    missing = sorted(f"{page}: agent {name}" for page, name in named if name not in COMMANDS)
    assert not missing, "the docs name commands that do not exist:\n" + "\n".join(missing)


def test_the_reference_checks_catch_what_does_not_exist():
    text = (
        "see `agent/schema.py`, `agent.builtin_tools.fetch` and agent.tools.http.fetch in /etc/agent/env, agent.service"
    )
    assert _code_references(text) == {"agent/schema.py", "agent.builtin_tools.fetch", "agent.tools.http.fetch"}
    assert [ref for ref in sorted(_code_references(text)) if not _exists(ref)] == [
        "agent.builtin_tools.fetch",
        "agent/schema.py",
    ]


def _readme_setup_block() -> list[str]:
    readme = (REPO / "README.md").read_text()
    after_marker = readme[readme.index("\n<!-- set-up") :]
    return re.search(r"\n```sh\n(.*?)\n```\n", after_marker, re.DOTALL).group(1).splitlines()


def test_ci_runs_the_readme_set_up_block_as_it_is_and_installs_nothing_else():
    printed = subprocess.run(["bash", str(REPO / ".ci" / "readme-setup")], capture_output=True, text=True, check=True)
    assert printed.stdout.splitlines() == _readme_setup_block()
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash .ci/readme-setup" in ci and 'eval "$line"' in ci
    assert "pip install" not in ci and "CMAKE_ARGS" not in ci  # the README's commands alone


def test_the_readme_set_up_builds_the_pinned_runtime_portable_without_pips_cache():
    block = "\n".join(_readme_setup_block())
    assert "apt-get install -y" in block and "bubblewrap" in block and "git" in block  # the sandbox; the MCP tests
    assert f"CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" pip install --no-cache-dir -e '.[local]'" in block
    assert "python -m pytest" in block
    local = re.search(r"^local = \[(.*)\]$", (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    assert re.search(r'"llama-cpp-python\[server\]==\d+\.\d+\.\d+"', local), local  # a tested version, no other


def test_the_readme_is_a_five_minute_read():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines < 200, (
        f"README.md has {lines} lines: the reference goes to docs/reference.md, recipes and figures to docs/"
    )


# ------------------------------------------------------------------ links and files the docs name

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_REPO_PATH = re.compile(r"(?<![\w/.~-])(?:bench|bin|tests|docs|\.ci)/[\w./-]*\w")


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (code blocks left out)."""
    found: set[str] = set()
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            base, n = slug, 1
            while slug in found:
                slug, n = f"{base}-{n}", n + 1
            found.add(slug)
    return found


def _broken_links(page: Path) -> list[str]:
    broken = []
    for target in _LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def test_every_link_between_the_docs_reaches_a_file_and_heading():
    broken = [problem for page in DOCS for problem in _broken_links(page)]
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_the_link_check_finds_a_missing_heading_and_file(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Top\n## The embedded model's build\n```\n# not a heading\n```\n")
    (tmp_path / "other.md").write_text(
        "[a](page.md#the-embedded-models-build) [b](page.md#not-a-heading) [c](gone.md) [d](https://x.org/#y)\n"
    )
    assert _broken_links(tmp_path / "other.md") == [
        "other.md: page.md#not-a-heading (no such heading)",
        "other.md: gone.md (no such file)",
    ]


def test_every_repository_file_the_docs_name_exists():
    missing = [
        f"{path.name}: {named}"
        for path in DOCS
        for named in sorted(set(_REPO_PATH.findall(path.read_text())))
        if not (REPO / named).exists()
    ]
    assert not missing, "the docs name files that do not exist:\n" + "\n".join(missing)


def _test_names() -> set[str]:
    return {
        name for path in (REPO / "tests").rglob("test_*.py") for name in re.findall(r"def (test_\w+)", path.read_text())
    }


def _missing_tests(pages: list[Path]) -> list[str]:
    defined = _test_names()
    files = {str(path.relative_to(REPO / "tests")) for path in (REPO / "tests").rglob("test_*.py")}
    missing = []
    for page in pages:
        for cited in sorted(set(re.findall(r"`((?:\w+/)*test_\w+(?:\.py|\*\w*|\[\w+\])?)`", page.read_text()))):
            name = re.sub(r"\[\w+\]$", "", cited)
            if name.endswith(".py"):
                found = name.removeprefix("tests/") in files
            elif "*" in name:
                head, _, tail = name.partition("*")
                found = any(test.startswith(head) and test.endswith(tail) for test in defined)
            else:
                found = name in defined
            if not found:
                missing.append(f"{page.name}: {cited}")
    return missing


def test_every_test_the_docs_cite_exists():
    """ "What survives what" names the test that would fail without each guarantee: it must be there."""
    missing = _missing_tests(DOCS)
    assert not missing, "the docs cite tests that do not exist:\n" + "\n".join(missing)


def test_the_test_citation_check_finds_a_test_that_is_gone(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "`test_every_test_the_docs_cite_exists`, `test_the_test_citation_*`, `test_docs.py`, "
        "`system/test_gone.py`, `test_gone`, `test_gone_*`\n"
    )
    assert _missing_tests([page]) == ["page.md: system/test_gone.py", "page.md: test_gone", "page.md: test_gone_*"]


# ------------------------------------------------------------------ the code's own docstrings

_PY_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*\w+\.py)\b")
_SUBPACKAGE = re.compile(r"(?<![\w./-])([a-z_]\w*)/(?![\w/])")


def _docstrings(root: Path) -> Iterator[tuple[Path, str]]:
    import ast

    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text())
        texts = [ast.get_docstring(tree) or ""]
        texts += [
            ast.get_docstring(node) or ""
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
        yield path, "\n".join(texts)


def _stale_in_docstrings(root: Path) -> list[str]:
    """Code a docstring names that does not exist: dotted names (agent.x.y), paths (agent/x.py), and
    bare file names (x.py, store/x.py), which must be a file beside the module, in agent/ or in the repository."""
    stale = []
    for path, text in _docstrings(root):
        where = path.relative_to(root.parent)
        stale += [f"{where}: {ref}" for ref in sorted(_code_references(text)) if not _exists_under(root.parent, ref)]
        for name in sorted({name for name in _PY_NAME.findall(text) if not name.startswith("agent/")}):
            places = (path.parent / name, root / name, root.parent / name)
            if not any(place.is_file() for place in places):
                stale.append(f"{where}: {name}")
    return stale


def _exists_under(repo: Path, reference: str) -> bool:
    """`_exists` for the repository; for another tree (the planted test), read without importing: the longest
    prefix that is a module, then each remaining name defined at the top of its source."""
    if repo == REPO:
        return _exists(reference)
    if "/" in reference:
        return (repo / reference).exists()
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        where = repo / Path(*parts[:cut])
        module = where.with_suffix(".py") if where.with_suffix(".py").is_file() else where / "__init__.py"
        if module.is_file():
            source = module.read_text()
            return all(re.search(rf"^(?:def|class) {name}\b|^{name} =", source, re.M) for name in parts[cut:])
    return False


def _package_listings(root: Path) -> list[str]:
    """Every package whose docstring does not list exactly its modules (x.py) and subpackages (x/)."""
    import ast

    wrong = []
    for init in sorted(root.rglob("__init__.py")):
        folder = init.parent
        text = ast.get_docstring(ast.parse(init.read_text())) or ""
        listed = {name for name in _PY_NAME.findall(text) if "/" not in name} | {
            f"{name}/" for name in _SUBPACKAGE.findall(text)
        }
        actual = {p.name for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")} | {
            f"{p.name}/" for p in folder.iterdir() if (p / "__init__.py").is_file()
        }
        if listed & actual != actual or listed - actual - {f"{p.name}/" for p in folder.iterdir() if p.is_dir()}:
            missing, extra = sorted(actual - listed), sorted(listed - actual)
            wrong.append(f"{folder.relative_to(root.parent)}: not listed {missing}, listed but gone {extra}")
    return wrong


def test_every_module_docstring_names_code_that_exists():
    stale = _stale_in_docstrings(REPO / "agent")
    assert not stale, "docstrings name code that does not exist:\n" + "\n".join(stale)


def test_every_package_docstring_lists_exactly_its_modules():
    wrong = _package_listings(REPO / "agent")
    assert not wrong, "package docstrings out of step with their folders:\n" + "\n".join(wrong)


def test_the_docstring_checks_find_each_planted_stale_name(tmp_path):
    pkg = tmp_path / "agent" / "things"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "__init__.py").write_text('"""A subpackage: leaf.py."""\n')
    (pkg / "sub" / "leaf.py").write_text('"""A leaf."""\n')
    (tmp_path / "agent" / "__init__.py").write_text('"""The top: things/."""\n')
    (pkg / "__init__.py").write_text('"""Things:\n\n- real.py  a real one\n- gone.py  a module that left\n"""\n')
    (pkg / "real.py").write_text(
        '"""Uses agent.things.real, agent.things.vanished and agent/things/old.py, beside helper.py."""\n\n'
        'def f():\n    """Calls agent.things.sub.leaf and agent.nowhere."""\n'
    )
    (pkg / "unlisted.py").write_text('"""Not in the package docstring."""\n')
    stale = _stale_in_docstrings(tmp_path / "agent")
    assert stale == [
        "agent/things/__init__.py: gone.py",
        "agent/things/real.py: agent.nowhere",
        "agent/things/real.py: agent.things.vanished",
        "agent/things/real.py: agent/things/old.py",
        "agent/things/real.py: helper.py",
    ]
    assert _package_listings(tmp_path / "agent") == [
        "agent/things: not listed ['sub/', 'unlisted.py'], listed but gone ['gone.py']"
    ]


# ------------------------------------------------------------------ install hints that work


def _defined_extras() -> set[str]:
    text = (REPO / "pyproject.toml").read_text().split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([A-Za-z0-9_-]+) = \[", text, re.MULTILINE))


def _hinted_extras() -> dict[str, set[str]]:
    """Every extra an install hint names: '.[X]' and 'clone[X]' in the docs and the code, and
    install_hint("X") / LOCAL_EXTRA in the code, by file."""
    found: dict[str, set[str]] = {}
    files = [
        *(REPO / "agent").rglob("*.py"),
        *(REPO / "docs").glob("*.md"),
        *(REPO / n for n in ("README.md", "AGENTS.md")),
    ]
    for path in files:
        text = path.read_text()
        names = set(re.findall(r"(?:\.|clone)\[([a-z0-9_,-]+)\]'", text))
        names |= set(re.findall(r"install_hint\(['\"]([a-z0-9_-]+)['\"]\)", text))
        names |= set(re.findall(r'^LOCAL_EXTRA = "([a-z0-9_-]+)"', text, re.MULTILINE))
        if names:
            found[str(path.relative_to(REPO))] = {n for group in names for n in group.split(",")}
    return found


def test_every_extra_an_install_hint_names_is_defined_in_pyproject():
    defined = _defined_extras()
    hinted = _hinted_extras()
    assert {"local", "mcp"} <= {n for names in hinted.values() for n in names}  # the finder finds them
    assert {path: names - defined for path, names in hinted.items() if names - defined} == {}


def test_no_hint_installs_the_distribution_by_a_name_no_index_serves():
    files = [
        *(REPO / "agent").rglob("*.py"),
        *(REPO / "docs").glob("*.md"),
        *(REPO / n for n in ("README.md", "AGENTS.md")),
    ]
    assert [str(p.relative_to(REPO)) for p in files if "scratchpad-agent[" in p.read_text()] == []


def test_an_install_hint_works_from_the_clone_and_from_a_wheel():
    from agent.common.extras import extra_requirements, install_hint

    hint = install_hint("mcp")
    assert hint.startswith("pip install -e '.[mcp]'")
    pyproject = (REPO / "pyproject.toml").read_text()
    declared = re.search(r'^mcp = \["([^"]+)"\]$', pyproject, re.MULTILINE).group(1)
    if extra_requirements("mcp"):  # installed with its metadata (pip install -e, or a wheel)
        assert f"pip install '{declared}'" in hint
