"""Hostile scratchpads: every unusable active.yaml gives a clear message, exit 6, and not one
byte of the home changes (DESIGN: "Bad input gets a clear error and loses nothing").

Each case writes a hostile scratchpad/active.yaml into a home that already has a cycle's
files, runs `agent run` (and `agent show`-free paths: reset is not involved), and checks:
the exit code is 6 (ExitCode.INVALID_SCRATCHPAD), the message names the file and the problem,
and every file in the home is byte-for-byte what it was (the only file allowed to appear is
the empty lock file, which exists after the first cycle anyway).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from agent.common.outcomes import ExitCode
from agent.common.safe_yaml import load_yaml
from agent.scratchpad import MAX_SCRATCHPAD_BYTES, read_state_file
from tests.helpers import run_cli, tree_digest, write_script

REPO = Path(__file__).resolve().parents[2]

LAUGHS = "lol0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"lol{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10)
)


def _write_bytes(data: bytes):
    def make(active: Path, tmp: Path) -> None:
        active.write_bytes(data)

    return make


def _write_text(text: str):
    return _write_bytes(text.encode("utf-8"))


def _big_file(active: Path, tmp: Path) -> None:
    with open(active, "wb") as handle:  # 50 MB of valid-looking YAML
        handle.write(b"notes: |\n")
        line = b"  " + b"x" * 1021 + b"\n"
        for _ in range(50 * 1024):
            handle.write(line)


def _directory(active: Path, tmp: Path) -> None:
    active.mkdir()
    (active / "inside.yaml").write_text("goals: [a]\n")


def _symlink_outside(active: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere.yaml"
    outside.write_text("goals: [stolen]\nnotes: from outside the home\n")
    active.symlink_to(outside)


def _symlink_dangling(active: Path, tmp: Path) -> None:
    active.symlink_to(active.parent / "nothing-here.yaml")


def _symlink_loop(active: Path, tmp: Path) -> None:
    active.symlink_to(active)


def _fifo(active: Path, tmp: Path) -> None:
    os.mkfifo(active)


# (id, how to make active.yaml, a regex the message must match)
CASES = [
    ("bad-yaml", _write_text("goals: [unclosed, list\nnotes: x\n"), r"invalid YAML at line \d+, column \d+"),
    ("bad-indent", _write_text("goals:\n  - a\n - b\n"), r"invalid YAML at line"),
    (
        "tag-python-apply",
        _write_text("!!python/object/apply:os.system ['touch PWNED']\n"),
        r"YAML tags that build objects are not allowed .*python/object/apply",
    ),
    (
        "tag-python-name",
        _write_text("goals: !!python/name:os.system\n"),
        r"YAML tags that build objects are not allowed",
    ),
    (
        "tag-python-new-in-field",
        _write_text("notes: !!python/object/new:subprocess.Popen [[touch, PWNED]]\n"),
        r"YAML tags that build objects are not allowed",
    ),
    ("top-level-list", _write_text("- goals\n- notes\n"), r"top level must be a mapping of fields, got a list"),
    ("top-level-string", _write_text("just some words\n"), r"top level must be a mapping of fields, got the text"),
    ("top-level-number", _write_text("42\n"), r"top level must be a mapping of fields, got the number"),
    (
        "goals-wrong-type",
        _write_text("goals: write the report\n"),
        r"field 'goals' must be a list of strings, got the text",
    ),
    ("goal-item-wrong-type", _write_text("goals: [ok, {nested: map}]\n"), r"field 'goals\[1\]' must be a string"),
    (
        "current-task-number",
        _write_text("current_task: 7\n"),
        r"field 'current_task' must be a string or null, got the number",
    ),
    ("completed-tasks-numbers", _write_text("completed_tasks: [1, 2]\n"), r"field 'completed_tasks\[0\]' must be"),
    ("notes-list", _write_text("notes: [a, b]\n"), r"field 'notes' must be a string, got a list"),
    ("pending-mapping", _write_text("pending_actions: {a: b}\n"), r"field 'pending_actions' must be a list"),
    ("non-string-key", _write_text("goals: []\n7: seven\n"), r"key 7 is not a string but a number"),
    ("duplicate-keys", _write_text("goals: [first]\nnotes: a\ngoals: [second]\n"), r"found duplicate key 'goals'"),
    ("duplicate-nested-keys", _write_text("completed_tasks:\n- task: a\n  task: b\n"), r"found duplicate key 'task'"),
    ("fifty-megabytes", _big_file, r"over the [\d,]+-byte limit for a scratchpad"),
    (
        "binary-junk",
        _write_bytes(bytes(range(256)) * 64),
        r"is not UTF-8 text \(byte \d+ is 0x[0-9a-f]+\); is it binary\?",
    ),
    ("invalid-utf8", _write_bytes(b"goals: [caf\xe9]\n"), r"is not UTF-8 text"),
    ("nul-bytes", _write_bytes(b"goals: [a\x00b]\n"), r"invalid YAML.*(control|special) characters are not allowed"),
    ("empty-file", _write_bytes(b""), r"is empty; run `agent reset`"),
    ("whitespace-only", _write_bytes(b"  \n\n\t\n"), r"is empty"),
    ("yaml-null-document", _write_text("~\n"), r"top level must be a mapping of fields, got null"),
    ("directory", _directory, r"is a directory, not a file"),
    ("symlink-outside-home", _symlink_outside, r"is a symlink to .*elsewhere.yaml, outside the home"),
    ("symlink-dangling", _symlink_dangling, r"is a symlink to .*nothing-here.yaml, which does not exist"),
    ("symlink-loop", _symlink_loop, r"is a symlink that cannot be resolved"),
    ("fifo", _fifo, r"is not a regular file"),
    (
        "deeply-nested-100k",
        _write_text("goals: " + "[" * 100_000 + "]" * 100_000 + "\n"),
        r"nested more than 64 levels deep",
    ),
    (
        "deeply-nested-block",
        _write_text("notes:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200))),
        r"nested more than 64 levels deep",
    ),
    ("billion-laughs", _write_text(LAUGHS), r"aliases expand to over [\d,]+ more values than the file holds"),
    ("recursive-alias-list", _write_text("extra: &a [*a]\n"), r"alias \*a is inside its own anchor"),
    ("recursive-alias-map", _write_text("extra: &a {self: *a}\n"), r"alias \*a is inside its own anchor"),
    ("undefined-alias", _write_text("goals: *nowhere\n"), r"found undefined alias"),
    ("multiple-documents", _write_text("goals: [a]\n---\ngoals: [b]\n"), r"expected a single document"),
]


@pytest.fixture
def lived_in_home(tmp_path: Path) -> Path:
    """A home that has run one cycle: snapshots, a log, the index, the lock file all exist."""
    home = tmp_path / "home"
    assert run_cli("init", str(home)).exit_code == 0
    script = write_script(
        tmp_path,
        [{"tool": "update_scratchpad", "args": {"goals": ["keep me"]}}, {"tool": "done", "args": {"summary": "first"}}],
    )
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0, result.output
    return home


@pytest.mark.parametrize("make", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_scratchpad_is_refused_and_nothing_changes(lived_in_home: Path, tmp_path: Path, make, request):
    message_pattern = dict((c[0], c[2]) for c in CASES)[request.node.callspec.id]
    home = lived_in_home
    active = home / "scratchpad" / "active.yaml"
    active.unlink()
    make(active, tmp_path)
    before = tree_digest(home)
    listing = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "must not run"}}], "s2.yaml")

    started = time.monotonic()
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    elapsed = time.monotonic() - started

    assert result.exit_code == ExitCode.INVALID_SCRATCHPAD, result.output
    assert f"agent: error: {active}" in result.stderr  # names the file
    assert re.search(message_pattern, result.stderr), result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1  # one clear line
    assert tree_digest(home) == before  # not one byte changed
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == listing  # nothing added or removed
    assert not (home / "PWNED").exists() and not Path("PWNED").exists()
    assert elapsed < 10, f"refusing took {elapsed:.1f}s"


def test_billion_laughs_is_refused_fast_and_small():
    """The alias bomb is refused while parsing, before any expansion (time and memory bounded)."""
    import tracemalloc

    tracemalloc.start()
    started = time.monotonic()
    with pytest.raises(Exception, match="alias bomb"):
        load_yaml(LAUGHS)
    elapsed = time.monotonic() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 1.0
    assert peak < 5_000_000


def test_modest_anchors_and_merge_keys_still_load():
    """The alias limit does not reject ordinary hand-written anchors."""
    data = load_yaml("base: &b {owner: ops}\nother:\n  <<: *b\n  extra: 1\ngoals: &g [a, b]\npending_actions: *g\n")
    assert data["other"] == {"owner": "ops", "extra": 1}
    assert data["pending_actions"] == ["a", "b"]


def test_just_under_size_limit_is_read(tmp_path: Path):
    """The size limit is a limit, not an off-by-one: a file at the limit is still a scratchpad."""
    path = tmp_path / "active.yaml"
    head = b"notes: "
    path.write_bytes(head + b"x" * (MAX_SCRATCHPAD_BYTES - len(head) - 1) + b"\n")
    state = read_state_file(path, tmp_path)
    assert len(state["notes"]) == MAX_SCRATCHPAD_BYTES - len(head) - 1


def test_symlink_inside_home_is_followed(lived_in_home: Path):
    active = lived_in_home / "scratchpad" / "active.yaml"
    real = lived_in_home / "scratchpad" / "real.yaml"
    real.write_bytes(active.read_bytes())
    active.unlink()
    active.symlink_to(real)
    assert read_state_file(active, lived_in_home)["goals"] == ["keep me"]


def test_hostile_template_for_reset_is_refused_and_nothing_changes(lived_in_home: Path):
    """`agent reset --template` reads a file the operator wrote: same rules, nothing written."""
    (lived_in_home / "templates").mkdir()
    (lived_in_home / "templates" / "evil.yaml").write_text("!!python/object/apply:os.system ['touch PWNED']\n")
    before = tree_digest(lived_in_home)
    result = run_cli("reset", "--home", str(lived_in_home), "--template", "evil")
    assert result.exit_code == ExitCode.INVALID_SCRATCHPAD
    assert "YAML tags that build objects are not allowed" in result.stderr
    assert tree_digest(lived_in_home) == before
    assert not (lived_in_home / "PWNED").exists()


def test_hostile_config_yaml_is_a_usage_error_not_a_crash(lived_in_home: Path):
    """config.yaml goes through the same loader: an alias bomb or deep nesting is exit 2."""
    for text in (LAUGHS, "shell_allowlist: " + "[" * 100_000 + "]" * 100_000 + "\n"):
        (lived_in_home / "config.yaml").write_text(text)
        before = tree_digest(lived_in_home)
        result = run_cli("run", "--home", str(lived_in_home), "--model", "scripted:/nonexistent.yaml")
        assert result.exit_code == ExitCode.USAGE, result.output
        assert "config.yaml" in result.stderr and "Traceback" not in result.output
        assert tree_digest(lived_in_home) == before


def test_only_safe_yaml_loaders_and_dumpers_in_the_code_base():
    """Grep the package: no yaml.load without our safe loader, no unsafe/full loaders or dumpers,
    no pickle/marshal/eval on anything read from disk or a model."""
    forbidden = [
        r"yaml\.(unsafe_load|full_load|load_all|unsafe_load_all|full_load_all)\b",
        r"\b(Unsafe|Full)?Loader\s*=\s*yaml\.(Loader|UnsafeLoader|FullLoader|CLoader|CFullLoader|CUnsafeLoader)\b",
        r"yaml\.(Loader|UnsafeLoader|FullLoader|CLoader|CFullLoader|CUnsafeLoader|Dumper|CDumper)\b",
        r"\byaml\.dump\(.*Dumper=yaml\.Dumper",
        r"\bimport (pickle|marshal|shelve)\b",
        r"(?<![\w.])eval\(|(?<![\w.])exec\(",
    ]
    offenders = []
    for path in sorted((REPO / "agent").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for pattern in forbidden:
            for match in re.finditer(pattern, text):
                offenders.append(f"{path.relative_to(REPO)}: {match.group(0)}")
        for match in re.finditer(r"yaml\.load\(([^)]*)\)", text):
            if "Loader=_StrictSafeLoader" not in match.group(1):
                offenders.append(f"{path.relative_to(REPO)}: {match.group(0)}")
        for match in re.finditer(r"yaml\.dump\(([^)]*)\)", text):
            if "Dumper=_ReadableDumper" not in match.group(1):
                offenders.append(f"{path.relative_to(REPO)}: {match.group(0)}")
    assert offenders == []
    import yaml

    from agent.common import safe_yaml as scratchpad

    assert issubclass(scratchpad._StrictSafeLoader, (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert issubclass(scratchpad._ReadableDumper, (yaml.SafeDumper, getattr(yaml, "CSafeDumper", yaml.SafeDumper)))
