"""No Python repr reaches a person: every command in the command map, run over a home that has
lived (done, failed, parked, approved, denied, stalled, budget-spent and idle cycles, archived
notes, tasks and a replaced state, memory sections edited, refused and consolidated), plus every line of its cycle logs and the tool results in
its notes, is swept for `None`, dict and list reprs, PyYAML's `<unicode string>`, an object's
default repr and a traceback.

The detector is proved first: planted reprs are caught where a person would see them, so the
sweep cannot pass because it saw nothing.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from agent.cli import COMMANDS
from tests.cli.helpers import done, echo
from tests.helpers import run_cli, write_active, write_script
from tests.models.openai_server import OpenAIServer, Reply, usage

# Each a form Python gives a value when it is printed as it is: the word None, a dict or a list
# of strings ({'a': ..., ['a', 'b'], ['a']), PyYAML's name for a string it parsed,
# an object's default repr, a traceback, and the reprs of types that leak through f-strings.
REPR = re.compile(
    r"\bNone\b"
    r"|\{'[^'\n]*': |\['[^'\n]*'(?:, '|\])"
    r"|<unicode string>"
    r"|<[A-Za-z_][\w.]* object at 0x"
    r"|Traceback \(most recent call last\)"
    r"|\b(?:PosixPath|datetime\.datetime|datetime\.date|dict_keys|dict_values|Decimal|Usage)\("
)

WRITE = {"tool": "write_file", "args": {"path": "report.txt", "content": "the report"}}
SECTIONS = """sections:
  purpose: {kind: text, limit: 200, read_only: true}
  known: {kind: list, limit: 4, entry_chars: 80}
  tell: {kind: list, limit: 3, surface: true}
consolidate_max_loss: 0.5
"""
RECALL = {"tool": "recall", "args": {"query": "rotate nginx logs"}}

# Every command, with the arguments of real uses ({id}: a done cycle; {failed}: a failed one;
# {killed}: one killed before it saved; {tmp}: a fresh folder), those that only read first, so each sees the home as it was left.
# --home HOME is appended (init takes it as DIRECTORY, fleet as HOME).
USES = [
    ["tools"],
    ["tools", "--json"],
    ["diff"],
    ["diff", "{id}", "active"],
    ["diff", "{failed}"],
    ["diff", "--json"],
    ["history"],
    ["history", "--daily"],
    ["history", "--json"],
    ["history", "--daily", "--json"],
    ["history", "--no-idle", "--since", "7d"],
    ["history", "--stop-reason", "error", "--stop-reason", "held"],
    ["history", "--until", "2000-01-02", "--json"],
    ["show"],
    ["show", "--all"],
    ["show", "--json"],
    ["show", "--all", "--json"],
    ["status"],
    ["status", "--json"],
    ["task", "list"],
    ["task", "list", "--json"],
    ["goal", "list"],
    ["goal", "list", "--json"],
    ["approvals"],
    ["approvals", "--all"],
    ["approvals", "--all", "--json"],
    ["logs", "{id}"],
    ["logs", "{failed}"],
    ["logs", "{id}", "--transcript"],
    ["logs", "{id}", "--transcript", "--json"],
    ["doctor"],
    ["doctor", "--json"],
    ["replay", "{id}", "--model", "scripted:{script}"],
    ["replay", "{id}", "--model", "scripted:{script}", "--json"],
    ["replay", "{killed}", "--model", "scripted:{script}"],
    ["diff", "{killed}"],
    ["logs", "{killed}"],
    ["report", "-o", "{tmp}.html"],
    ["report", "-o", "{tmp}.html", "--json"],
    ["datasette-metadata"],
    ["fleet"],
    ["fleet", "--json"],
    ["fleet", "-q"],
    ["fork", "{id}", "{tmp}/forked"],
    ["fork", "{id}", "{tmp}/forked2", "--json"],
    ["init", "{tmp}/new"],
    ["init", "{tmp}/new2", "--json"],
    ["init", "{tmp}/new3", "--template", "nope"],
    ["memory"],
    ["memory", "--json"],
    ["memory", "--at", "{id}"],
    ["memory", "--at", "1990-01-01"],
    ["memory", "--history", "known-1"],
    ["memory", "--history", "known-99", "--json"],
    ["consolidate", "--model", "scripted:{script}"],
    ["consolidate", "--model", "scripted:{script}", "--json"],
    ["memory", "add", "known", "typed by hand"],
    ["memory", "add", "nowhere", "x"],
    ["memory", "drop", "known", "known-99"],
    ["memory", "set", "purpose", "a purpose", "--json"],
    ["prune", "--keep", "100", "--dry-run"],
    ["prune", "--keep", "100", "--json"],
    # then those that change it
    ["task", "add", "typed by hand"],
    ["task", "drop", "9"],
    ["goal", "add", "a goal"],
    ["resume"],
    ["resume", "--json"],
    ["approve", "3"],
    ["approve", "1"],
    ["approve", "3", "--json"],
    ["deny", "4", "--reason", "not now"],
    ["deny", "1"],
    ["deny", "4", "--json"],
    ["run", "--model", "scripted:{script}"],
    ["run", "--model", "scripted:{script}", "--json"],
    ["restore", "{id}:before"],
    ["restore", "{id}", "--json"],
    ["reset", "--json"],
    ["reset", "--template", "nope"],
]


def reprs(text: str) -> list[str]:
    """Each repr in `text`, with a little of the line around it. Printed JSON is read as data: its
    strings are swept, its `null` is JSON's own."""
    try:
        data = json.loads(text)
    except ValueError:
        return [text[max(0, m.start() - 40) : m.end() + 40] for m in REPR.finditer(text)]
    return [found for string in _strings(data) for found in reprs(string)] if not isinstance(data, str) else reprs(data)


def _strings(data) -> list[str]:
    if isinstance(data, dict):
        return [s for key, value in data.items() for s in [str(key), *_strings(value)]]
    if isinstance(data, list):
        return [s for value in data for s in _strings(value)]
    return [data] if isinstance(data, str) else []


@pytest.fixture(scope="module")
def lived_in(tmp_path_factory) -> dict:
    """A home that has seen every kind of outcome, and every command's output over it."""
    root = tmp_path_factory.mktemp("lived")
    home = root / "home"
    outputs: list[tuple[str, object]] = []

    def agent(*args: str, env: dict | None = None):
        result = run_cli(*args, env=env)
        outputs.append((" ".join(args), result))
        return result

    def cycle(replies: list, *flags: str, expect: int | tuple = 0):
        script = write_script(root, replies, name=f"s{len(outputs)}.yaml")
        result = agent("run", "--home", str(home), "--model", f"scripted:{script}", "--json", *flags)
        assert result.exit_code in (expect if isinstance(expect, tuple) else (expect,)), result.output
        return json.loads(result.stdout)["cycle_id"]

    assert agent("init", str(home)).exit_code == 0
    (home / "config.yaml").write_text("approval_required: [write_file]\ncompleted_window: 1\nnotes_budget: 300\n")
    write_active(
        home,
        {
            "goals": ["keep the web servers healthy"],
            "current_task": "rotate nginx logs",
            "pending_actions": ["check the disk", "write the report", "watch the queue", "count sheep"],
        },
    )
    first = cycle([echo("rotating"), done("rotated and compressed four files")])
    cycle([echo("df says 12G free"), done("checked the disk")])  # the first task moves to the archive
    cycle([WRITE], expect=8)  # parked: call 1
    cycle([{"tool": "write_file", "args": {"path": "other.txt", "content": "x"}}], "--force", expect=8)  # call 2
    assert agent("approve", "1", "--home", str(home)).exit_code == 0
    assert agent("deny", "2", "--home", str(home), "--reason", "not in production").exit_code == 0
    cycle([RECALL, done("wrote the report")])  # the approved call runs first; recall finds the archive
    cycle([{"tool": "write_file", "args": {"path": "c.txt", "content": "c"}}], expect=8)  # call 3: pending
    cycle([{"tool": "write_file", "args": {"path": "d.txt", "content": "d"}}], "--force", expect=8)  # call 4
    failed = cycle([], "--force", expect=4)  # the script has no reply: the model fails (--force: parked)
    (home / "config.yaml").write_text("approval_required: [write_file]\nstall_cycles: 2\nmax_iterations: 2\n")
    for _ in range(2):  # stalled (the failed cycle does not count towards it)
        cycle([echo("still watching"), echo("still")], expect=(3, 9))
    assert json.loads(outputs[-1][1].stdout)["stop_reason"] == "stalled"
    cycle([], expect=9)  # held: no model called
    assert json.loads(outputs[-1][1].stdout)["stop_reason"] == "held"
    assert agent("restore", f"{first}:before", "--home", str(home)).exit_code == 0  # a replaced state archived
    recall_all = {"tool": "recall", "args": {"query": "watch the queue count sheep", "limit": 10}}
    cycle([recall_all, done("remembered")])  # recall over the replaced state too
    with OpenAIServer(default=Reply.error(500, "the upstream is down")) as server:
        (home / "config.yaml").write_text("max_retries: 0\n")
        env = {"OPENAI_BASE_URL": server.base_url}
        result = agent("run", "--home", str(home), "--model", "openai:test-model", "--json", env=env)
        assert result.exit_code == 4, result.output  # an ordinary HTTP 500
        server.default = Reply.chat(echo("hi"), usage=usage(900, 200))
        (home / "config.yaml").write_text("daily_token_budget: 500\n")
        result = agent("run", "--home", str(home), "--model", "openai:test-model", env=env)
        assert result.exit_code == 10, result.output
        result = agent("run", "--home", str(home), "--model", "openai:test-model", "--json", env=env)
        assert result.exit_code == 10, result.output
    (home / "config.yaml").write_text("approval_required: [write_file]\n" + SECTIONS)
    assert run_cli("task", "drop", "0", "--home", str(home)).exit_code == 0
    assert agent("task", "add", "learn", "--home", str(home)).exit_code == 0
    learn = [{"tool": "update_scratchpad", "args": {"known": f"APPEND: fact {n}"}} for n in range(1, 5)]
    forged = {"tool": "update_scratchpad", "args": {"known": "CLEAR", "purpose": "mine now"}}
    cycle([*learn, forged, {"tool": "update_scratchpad", "args": {"known": "REMOVE: known-1"}}, done("learned")])
    for reply in (None, {"sections": {"known": {"a": 1}}, "archive": "x"}, {"sections": {"known": [{"id": None}]}}):
        agent(
            "consolidate",
            "--home",
            str(home),
            "--model",
            f"scripted:{write_script(root, [{'tool': 'consolidate', 'args': reply}], name=f'c{len(outputs)}.yaml')}",
        )
    merge = {"sections": {"known": [{"id": "known-2"}, {"text": "facts 3, 4", "cites": ["known-3", "known-4"]}]}}
    script = write_script(root, [{"tool": "consolidate", "args": merge}], name="merge.yaml")
    assert agent("consolidate", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    assert agent("memory", "set", "--home", str(home), "purpose", "Keep the servers healthy").exit_code == 0
    assert agent("memory", "add", "--home", str(home), "tell", "The disk is nearly full").exit_code == 0
    dropped = {"sections": {"known": []}}  # reverted last: an incident fleet -q names
    script = write_script(root, [{"tool": "consolidate", "args": dropped}], name="dropped.yaml")
    assert agent("consolidate", "--home", str(home), "--model", f"scripted:{script}").exit_code == 3
    killed = "20000101_000000_01"  # an old cycle killed after its before snapshot: no record, no log
    shutil.copyfile(home / "scratchpad" / f"{first}_before.yaml", home / "scratchpad" / f"{killed}_before.yaml")
    return {"root": root, "home": home, "first": first, "failed": failed, "killed": killed, "outputs": outputs}


def _run_every_use(lived: dict, copy: Path) -> list[tuple[str, object]]:
    """Every use of every command over a copy of the home: (command line, click's Result)."""
    script = write_script(lived["root"], [echo("again"), done("ok")], name="sweep.yaml")
    seen = []
    for n, use in enumerate(USES):
        tmp = copy.parent / f"use{n}"
        names = {"id": lived["first"], "failed": lived["failed"], "killed": lived["killed"]}
        args = [part.format(**names, script=script, tmp=tmp) for part in use]
        args += [] if use[0] == "init" else [str(copy)] if use[0] == "fleet" else ["--home", str(copy)]
        seen.append((" ".join(use), run_cli(*args)))
    return seen


def _findings(seen: list[tuple[str, object]], home: Path) -> list[str]:
    found = []
    for line, result in seen:
        for stream in (result.stdout, result.stderr):
            found += [f"`agent {line}`: {snippet!r}" for snippet in reprs(stream)]
    for log in sorted((home / "logs").glob("cycle_*.log")):
        for text in log.read_text().splitlines():
            found += [f"{log.name}: {snippet!r}" for snippet in reprs(text)]
    return found


@pytest.fixture
def swept(lived_in, tmp_path) -> tuple[Path, list[tuple[str, object]]]:
    copy = tmp_path / "home"
    shutil.copytree(lived_in["home"], copy, symlinks=True)
    return copy, lived_in["outputs"] + _run_every_use(lived_in, copy)


def test_the_uses_cover_every_command():
    assert {use[0] for use in USES} == set(COMMANDS)


def test_the_detector_knows_each_repr_and_leaves_plain_text_alone():
    for planted in (
        "last_updated: None (unchanged)",
        "current_task: x — [{'task': 'Slow task', 'summary': 'ok'}]",
        "usage {'prompt_tokens': 3}",
        "['a', 'b']",
        'in "<unicode string>", line 220, column 3',
        "<agent.models.base.Usage object at 0x7f00>",
        "Traceback (most recent call last):",
        "files: PosixPath('/srv/x')",
    ):
        assert reprs(planted), planted
    for plain in (
        "last_updated: (never) (unchanged)",
        '[TOOL] echo({"message": "hi"}) -> hi',
        "it's the operator's 'quoted' word",
        "did not find expected ',' or ']'",
        "tokens 3 prompt + 4 completion",
        json.dumps({"error": None, "files": ["a"], "note": "none of it"}),
    ):
        assert not reprs(plain), plain


def test_a_planted_repr_is_caught_where_a_person_sees_it(lived_in, tmp_path):
    """The sweep itself sees what the commands print and what the logs hold: a repr planted in a
    note and in a cycle log is found, named by the command and the file that showed it."""
    copy = tmp_path / "home"
    shutil.copytree(lived_in["home"], copy, symlinks=True)
    state = yaml.safe_load((copy / "scratchpad" / "active.yaml").read_text())
    state["notes"] += "\nplanted {'key': 'value'}"
    (copy / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(state))
    log = sorted((copy / "logs").glob("cycle_*.log"))[0]
    log.write_text(log.read_text() + "12:00:00.000 planted usage {'prompt_tokens': 0}\n")
    found = _findings(_run_every_use(lived_in, copy), copy)
    # (the snippet is shown by repr: with a double quote near it, its single quotes come escaped)
    assert any(f.startswith("`agent show`: ") and "planted {" in f and "key" in f for f in found), found
    assert any(f.startswith("`agent show --json`: ") for f in found), found
    assert any(f.startswith(f"{log.name}: ") and "planted usage" in f for f in found), found


def test_every_command_ran_and_said_something(swept):
    home, seen = swept
    ran = {line.split()[0] for line, _ in seen}
    assert ran >= set(COMMANDS)
    for line, result in seen:
        assert result.stdout or result.stderr, line
        assert result.exit_code in (0, 1, 2, 3, 4, 8, 9, 10), (line, result.exit_code, result.output)


def test_no_command_output_and_no_cycle_log_line_holds_a_python_repr(swept):
    home, seen = swept
    assert _findings(seen, home) == []


def test_recall_shows_a_replaced_state_as_text(home, tmp_path):
    """The issue's case: a state with no current task and completed tasks as mappings, replaced by
    `agent reset`, then found by recall: `current_task: (none)`, the tasks as `task: ...; summary: ...`."""
    write_active(
        home,
        {"current_task": None, "completed_tasks": [{"task": "Slow task", "summary": "took a week"}], "notes": ""},
    )
    assert run_cli("reset", "--home", str(home)).exit_code == 0
    assert run_cli("task", "add", "look back", "--home", str(home)).exit_code == 0
    script = write_script(tmp_path, [{"tool": "recall", "args": {"query": "slow task"}}, done("looked")])
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    notes = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"]
    assert "replaced state: current_task: (none) — " in notes
    assert "completed_tasks: (task: Slow task; summary: took a week)" in notes and not reprs(notes)


def test_a_broken_config_or_state_is_named_without_pyyaml_s_internals(home):
    (home / "config.yaml").write_text("max_iterations: 3\nmodel: [unclosed\n")
    for command in (["status"], ["run"], ["doctor"], ["show"]):
        result = run_cli(*command, "--home", str(home))
        assert not reprs(result.stdout) and not reprs(result.stderr), (command, result.output)
    (home / "config.yaml").write_text("")
    write_active(home, "goals: [unclosed\n")
    for command in (["status"], ["run"], ["show"], ["task", "list"]):
        result = run_cli(*command, "--home", str(home))
        assert result.exit_code in (0, 6), result.output
        assert not reprs(result.stdout) and not reprs(result.stderr), (command, result.output)
