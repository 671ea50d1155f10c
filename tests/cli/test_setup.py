"""`agent init` and `agent reset` (and bin/reset.sh): files made, kept and left alone."""

from __future__ import annotations

import json
import os
import stat
import subprocess

import pytest

from agent.config import Settings, field_docs, load_settings
from agent.memory.inbox import queued_edits
from agent.state import fresh_state
from agent.store.archive import archived
from agent.store.cycles import all_time
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import DONE_REPLIES, json_out, run_cycle
from tests.helpers import (
    REPO,
    cycle_records,
    read_yaml,
    run_agent_process,
    run_cli,
    snapshots,
    transcript,
    tree_digest,
    write_active,
    write_script,
)

# ----------------------------------------------------------------------------------------- init


def test_init_creates_a_private_home_that_runs_a_cycle(tmp_path):
    target = tmp_path / "new" / "home"
    data = json_out(run_cli("init", str(target), "--json"))
    assert data["created"] == ["rules.md", "config.yaml", "scratchpad/active.yaml"] and data["kept"] == []
    assert (target / "rules.md").read_text().startswith("# Rules")
    assert read_yaml(target / "scratchpad/active.yaml") == fresh_state()
    for folder in ("scratchpad", "logs"):
        assert stat.S_IMODE((target / folder).stat().st_mode) == 0o700
    assert run_cycle(target, DONE_REPLIES).exit_code == 0


def test_init_writes_a_commented_config_that_loads_as_the_defaults_even_uncommented(tmp_path):
    target = tmp_path / "h"
    assert run_cli("init", str(target)).exit_code == 0
    config = (target / "config.yaml").read_text()
    assert config.startswith("# Settings")
    assert all(line.startswith("#") or not line.strip() for line in config.splitlines())
    assert load_settings(target, env={}) == Settings()
    names = {name for name, _, _ in field_docs()}
    for name, doc, _ in field_docs():
        assert f"# {doc}" in config and f"# {name}:" in config
    uncommented = "\n".join(
        line[2:]
        for line in config.splitlines()
        if line.startswith("# ") and ":" in line.split()[1] and line[2:3].islower() and line[2:].split(":")[0] in names
    )
    (target / "config.yaml").write_text(uncommented)
    assert load_settings(target, env={}) == Settings()


def test_init_keeps_existing_files_and_says_so(home):
    (home / "rules.md").write_text("my rules\n")
    data = json_out(run_cli("init", str(home), "--json"))
    assert data["kept"] == ["rules.md"] and (home / "rules.md").read_text() == "my rules\n"
    assert run_cli("init", str(home)).stdout.startswith(f"home ready at {home}: created nothing; kept existing")


def test_init_with_a_bad_template_exits_2_and_creates_nothing(tmp_path):
    result = run_cli("init", str(tmp_path / "h"), "--template", "nope")
    assert result.exit_code == 2 and "no template named 'nope'" in result.stderr
    assert not (tmp_path / "h").exists()


# ---------------------------------------------------------------------------------------- reset


def test_reset_writes_the_default_template(home):
    write_active(home, {"goals": ["old"], "notes": "old notes"})
    result = run_cli("reset", "--home", str(home))
    assert result.exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml") == fresh_state()


def test_reset_names_the_queued_tasks_it_moved_to_the_archive(home):
    write_active(home, {"current_task": "Write the report", "pending_actions": ["Book the room"]})
    result = run_cli("reset", "--home", str(home))
    assert result.exit_code == 0
    assert "archived with it: the reset dropped 2 queued tasks: Write the report; Book the room" in result.output
    rows = [r for r in archived(Home.at(home)) if r["kind"] == "queued_task"]
    assert [r["value"] for r in rows] == ["Write the report", "Book the room"]
    assert json_out(run_cli("reset", "--home", str(home), "--json"))["dropped_tasks"] == []  # nothing queued now


def test_reset_with_a_packaged_template(home):
    assert run_cli("reset", "--home", str(home), "--template", "demo").exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml")["current_task"] == "Run the echo tool with a hello message"


def test_reset_prefers_the_homes_own_template(home):
    (home / "templates").mkdir()
    (home / "templates/mine.yaml").write_text("current_task: my own task\n")
    assert run_cli("reset", "--home", str(home), "--template", "mine").exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml")["current_task"] == "my own task"


def test_reset_clean_removes_snapshots_logs_transcripts_and_records_but_not_what_was_spent(home):
    (home / "config.yaml").write_text("prices: {'scripted:x': {input: 1, output: 1}}\n")
    assert run_cycle(home, DONE_REPLIES).exit_code == 0
    h = Home.at(home)
    spent = all_time(h)
    assert snapshots(home, "before") and spent["cycles"] == 1
    result = run_cli("reset", "--home", str(home), "--clean", "--yes")
    assert result.exit_code == 0 and "removed 3 snapshot/log file(s) and 1 cycle record(s)" in result.stdout
    assert sorted(p.name for p in (home / "scratchpad").iterdir()) == ["active.yaml"]
    assert sorted(p.name for p in (home / "logs").iterdir()) == ["agent.db"]
    assert cycle_records(home) == [] and transcript(home) == []
    assert all_time(h) == spent  # budgets and counters still count what was spent
    [replaced] = archived(h)  # the replaced state, kept
    assert replaced["kind"] == "replaced_state"


def test_reset_unknown_template_exits_2_and_changes_nothing(home):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "nope")
    assert result.exit_code == 2 and "no template named 'nope'" in result.stderr
    assert tree_digest(home) == digest


def test_an_unknown_template_lists_only_templates_the_homes_own_among_them(home):
    (home / "templates").mkdir()
    (home / "templates" / "mine.yaml").write_text("current_task: mine\n")
    (home / "templates" / "mine.config.yaml").write_text("max_iterations: 3\n")
    result = run_cli("reset", "--home", str(home), "--template", "nope")
    assert result.exit_code == 2
    assert (
        f"no template named 'nope' (templates: default, demo, mine, recursive; a home's own go in {home}/templates)"
        in (result.stderr)
    )


@pytest.mark.parametrize("command", ["reset", "init"])
def test_the_worked_examples_file_is_not_a_template(home, command):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    args = ("reset", "--home", str(home)) if command == "reset" else ("init", str(home / "new"))
    result = run_cli(*args, "--template", "examples")
    assert result.exit_code == 2 and "no template named 'examples' (templates: default, demo, recursive;" in (
        result.stderr
    )
    assert tree_digest(home) == digest and not (home / "new").exists()


def test_reset_from_an_invalid_template_exits_6_and_changes_nothing(home):
    (home / "templates").mkdir()
    (home / "templates/broken.yaml").write_text("goals: 5\n")
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "broken")
    assert result.exit_code == 6 and "broken.yaml" in result.stderr and "'goals'" in result.stderr
    assert tree_digest(home) == digest


def test_reset_refuses_while_a_cycle_holds_the_lock(home):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    with home_lock(Home.at(home)):
        proc = run_agent_process("reset", "--home", str(home), "--clean", "--yes")
    assert proc.returncode == 5 and "holds the lock" in proc.stderr
    assert tree_digest(home) == digest


def test_bin_reset_sh_resets_the_home_in_agent_home(home):
    write_active(home, {"notes": "old"})
    env = dict(os.environ, AGENT_HOME=str(home))
    proc = subprocess.run([str(REPO / "bin/reset.sh"), "--template", "demo"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert read_yaml(home / "scratchpad/active.yaml")["goals"] == ["Demonstrate the wake/run/sleep cycle"]


def test_bin_reset_sh_passes_the_busy_exit_code_through(home):
    env = dict(os.environ, AGENT_HOME=str(home))
    with home_lock(Home.at(home)):
        proc = subprocess.run([str(REPO / "bin/reset.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 5


# ------------------------------------------------------------------ reset loses nothing the operator typed

TYPED = {
    "goal": "Keep the hand-typed goal",
    "task": "Second hand-typed task",
    "check": "test -f typed-check.txt",
    "queued task": "Queued while a cycle ran",
    "queued goal": "A goal queued mid-cycle",
}


def _typed_home(home):
    assert run_cli("init", str(home)).exit_code == 0
    for args in (
        ["goal", "add", TYPED["goal"]],
        ["task", "add", "First task"],
        ["task", "add", TYPED["task"]],
        ["task", "add", "Checked task", "--check", TYPED["check"]],
    ):
        assert run_cli(*args[:2], "--home", str(home), *args[2:]).exit_code == 0
    with home_lock(Home.at(home)):  # a cycle runs: these wait in the inbox
        assert run_cli("task", "add", "--home", str(home), TYPED["queued task"]).exit_code == 0
        assert run_cli("goal", "add", "--home", str(home), TYPED["queued goal"]).exit_code == 0
    return home


def test_reset_archives_the_replaced_state_and_every_dropped_edit_so_nothing_typed_is_lost(home):
    _typed_home(home)
    before = {path: path.read_bytes() for path in home.rglob("*") if path.is_file()}
    assert all(any(text.encode() in data for data in before.values()) for text in TYPED.values())

    result = run_cli("reset", "--home", str(home))

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "archived the replaced state to logs/agent.db (task: First task)" in lines
    assert f"archived the dropped queued edit to logs/agent.db: task add '{TYPED['queued task']}'" in lines
    assert f"archived the dropped queued edit to logs/agent.db: goal add '{TYPED['queued goal']}'" in lines
    records = list(archived(Home.at(home)))
    after = json.dumps(records) + (home / "scratchpad/active.yaml").read_text()
    for what, text in TYPED.items():
        assert text in after, f"the {what} the operator typed was lost"
    assert [r["kind"] for r in records] == ["replaced_state", *["queued_task"] * 3, "dropped_edit", "dropped_edit"]
    assert records[0]["value"]["pending_actions"] == [TYPED["task"], "Checked task"]
    assert read_yaml(home / "scratchpad/active.yaml") == fresh_state()
    assert queued_edits(Home.at(home)) == []


def test_reset_archives_an_unreadable_state_as_its_text(home):
    write_active(home, "current_task: [unclosed\nnotes: the operator's words\n")
    result = run_cli("reset", "--home", str(home), "--json")
    assert result.exit_code == 0, result.output
    [record] = archived(Home.at(home))
    assert record["kind"] == "replaced_state" and "the operator's words" in record["value"]
    assert "could not be used" in record["reason"]


def test_bin_reset_sh_archives_what_it_replaces(home):
    write_active(home, {"current_task": "typed by hand"})
    env = dict(os.environ, AGENT_HOME=str(home))
    proc = subprocess.run([str(REPO / "bin/reset.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "archived the replaced state to logs/agent.db (task: typed by hand)" in proc.stdout
    assert "typed by hand" in json.dumps(list(archived(Home.at(home))))


def test_reset_clean_without_a_terminal_needs_yes_and_changes_nothing(home):
    assert run_cycle(home, DONE_REPLIES).exit_code == 0
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--clean")
    assert result.exit_code == 2 and "add --yes" in result.stderr
    assert tree_digest(home) == digest


def _reset_on_a_terminal(home, answer: bytes) -> tuple[int, str]:
    """`agent reset --clean` with its stdin and stdout on a pseudo-terminal, answering `answer`."""
    import pty
    import sys

    pid, fd = pty.fork()
    if pid == 0:  # the child: a real process whose terminal is the pty
        os.execve(
            sys.executable,
            [sys.executable, "-m", "agent", "reset", "--home", str(home), "--clean"],
            dict(os.environ, PYTHONPATH=str(REPO)),
        )
    seen = b""
    while b"[y/N]" not in seen:
        seen += os.read(fd, 1024)
    os.write(fd, answer + b"\n")
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), seen.decode(errors="replace")


def test_reset_clean_on_a_terminal_asks_and_a_no_changes_nothing(home):
    assert run_cycle(home, DONE_REPLIES).exit_code == 0
    digest = tree_digest(home)
    code, output = _reset_on_a_terminal(home, b"n")
    assert code == 2 and "not confirmed" in output and "delete every snapshot" in output
    assert tree_digest(home) == digest


def test_reset_clean_on_a_terminal_deletes_after_a_yes(home):
    assert run_cycle(home, DONE_REPLIES).exit_code == 0
    code, output = _reset_on_a_terminal(home, b"y")
    assert code == 0 and "removed 3 snapshot/log file(s) and 1 cycle record(s)" in output
    assert not snapshots(home, "before")


# ------------------------------------------------------------------------------- templates' config part


def test_init_from_the_recursive_template_writes_its_sections_into_config_yaml(tmp_path):
    target = tmp_path / "h"
    data = json_out(run_cli("init", str(target), "--template", "recursive", "--json"))
    assert "config.yaml" in data["created"]
    settings = load_settings(target, env={})
    assert [s.name for s in settings.section_specs] == [
        "purpose",
        "boundaries",
        "path",
        "scratch",
        "confidence",
        "known",
        "believed",
        "unknown",
        "tell",
    ]
    assert settings.reflect is True
    config = (target / "config.yaml").read_text()
    assert config.startswith("# Settings") and "# From the `recursive` template" in config
    assert "# sections:" not in config and "# reflect:" not in config  # the template's own, not listed twice
    assert "# max_iterations: 10" in config  # every other setting, commented as usual
    state = read_yaml(target / "scratchpad/active.yaml")
    assert state["known"] == [] and state["purpose"] == ""


def test_reset_refuses_a_template_whose_sections_the_home_lacks_and_changes_nothing(home):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "recursive")
    assert result.exit_code == 2
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "template 'recursive' needs sections that" in line and "config.yaml does not define" in line
    assert "purpose, boundaries, path, scratch, confidence, known, believed, unknown, tell;" in line
    assert "add them (config.yaml is never rewritten): {sections: {purpose: {kind: text, limit: 600," in line
    assert tree_digest(home) == digest


def test_reset_from_a_template_whose_sections_the_home_has_never_rewrites_config_yaml(tmp_path):
    target = tmp_path / "h"
    assert run_cli("init", str(target), "--template", "recursive").exit_code == 0
    config = target / "config.yaml"
    config.write_text(config.read_text().replace("limit: 20", "limit: 25"))  # the operator's own tuning
    before = config.read_bytes()
    write_active(target, {"notes": "old"})
    assert run_cli("reset", "--home", str(target), "--template", "recursive").exit_code == 0
    assert config.read_bytes() == before
    assert read_yaml(target / "scratchpad/active.yaml")["tell"] == []
    assert run_cli("reset", "--home", str(target)).exit_code == 0  # a template without sections: fine
    assert config.read_bytes() == before


def test_reset_refuses_a_template_section_of_another_kind(home):
    (home / "config.yaml").write_text("sections: {known: {kind: text, limit: 500}}\n")
    (home / "templates").mkdir()
    (home / "templates/facts.yaml").write_text("known: []\n")
    (home / "templates/facts.config.yaml").write_text("sections: {known: {kind: list, limit: 20}}\n")
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "facts")
    assert result.exit_code == 2 and "needs sections" in result.stderr and ": known;" in result.stderr
    assert tree_digest(home) == digest


def test_a_template_with_a_bad_config_part_exits_2_naming_it_and_changes_nothing(home):
    (home / "templates").mkdir()
    (home / "templates/mine.yaml").write_text("notes: ''\n")
    part = home / "templates/mine.config.yaml"
    write_active(home, {"notes": "keep me"})
    digest_files = {}
    for text, message in (
        ("sections: {known: {kind: list, limit: 0}}\n", "setting 'sections.known.limit' must be between 1 and 1000"),
        ("sections: {notes: {kind: text, limit: 9}}\n", "'notes' is already a key of active.yaml"),
        ("nonsense_key: 1\n", "unknown key 'nonsense_key'"),
        ("- a list\n", "must be a mapping of settings"),
    ):
        part.write_text(text)
        digest_files = tree_digest(home)
        result = run_cli("reset", "--home", str(home), "--template", "mine")
        assert result.exit_code == 2, result.output
        assert str(part) in result.stderr and message in result.stderr
        assert tree_digest(home) == digest_files
        made = run_cli("init", str(home.parent / "new"), "--template", "mine")
        assert made.exit_code == 2 and not (home.parent / "new").exists()


def test_init_into_a_home_whose_config_lacks_the_templates_sections_exits_2_and_creates_nothing(home):
    (home / "config.yaml").write_text("max_iterations: 5\n")
    result = run_cli("init", str(home), "--template", "recursive")
    assert result.exit_code == 2 and "template 'recursive' needs sections" in result.stderr
    assert sorted(p.name for p in home.iterdir()) == ["config.yaml", "scratchpad"]
    assert not any((home / "scratchpad").iterdir())


def test_a_config_part_is_not_a_template_of_its_own():
    from agent.cli.setup import packaged_templates

    assert "recursive" in packaged_templates() and "recursive.config" not in packaged_templates()
    result = run_cli("init", "somewhere", "--template", "recursive.config")
    assert result.exit_code == 2 and "template name 'recursive.config' is not a plain name" in result.stderr


def test_the_recursive_templates_memory_when_full_fits_its_stated_size():
    """Its comment says: full, the prompt shows about 15,000 characters of it."""
    from agent.cli.setup import read_template
    from agent.config import settings_from
    from agent.memory.section_block import render

    specs = settings_from(read_template(REPO, "recursive").settings).section_specs
    state = dict(fresh_state())
    for spec in specs:
        if spec.is_list:
            state[spec.name] = [
                {"id": f"{spec.name}-{n}", "text": "x" * spec.entry_chars, "by": "model", "added": "a", "days": 12}
                for n in range(100, 100 + spec.limit)
            ]
        else:
            state[spec.name] = "y" * spec.limit
    assert 14_000 < len(render(state, specs)) < 15_500


# ------------------------------------------------------------------------- init's next steps


def _steps(output: str) -> list[list[str]]:
    """The commands init (or fork) says to run next, as argv lists without the leading `agent`."""
    import shlex

    steps = [line.split(": ", 1)[1] for line in output.splitlines() if line.startswith(("next: ", "then: "))]
    return [shlex.split(step, comments=True)[1:] for step in steps]


def test_inits_next_steps_are_commands_that_work_and_reach_a_cycle_that_calls_the_model(tmp_path, monkeypatch):
    monkeypatch.delenv("AGENT_IDLE")  # as an operator has it: a cycle with nothing queued calls no model
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "noted the time"}}])
    env = {"AGENT_MODEL": f"scripted:{script}"}
    result = run_cli("init", "fresh", env=env)
    steps = _steps(result.stdout)
    assert steps == [["task", "add", "--home", "fresh", "Run date -u and note the time"], ["run", "--home", "fresh"]]
    for step in steps:
        assert run_cli(*step, env=env).exit_code == 0
    record = cycle_records(tmp_path / "fresh")[-1]
    assert record["stop_reason"] == "done" and record["iterations"] == 1  # the model was called: not idle


def test_a_template_with_a_task_needs_only_the_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    result = run_cli("init", "demo", "--template", "demo", "--json", env={"AGENT_MODEL": f"scripted:{script}"})
    assert json.loads(result.stdout)["next"] == ["agent run --home demo"]


def test_with_no_model_anywhere_the_hint_names_one_and_works_once_an_endpoint_is_there(tmp_path, monkeypatch):
    import agent.models.local.model
    from tests.models.openai_server import OpenAIServer, Reply

    monkeypatch.setattr(agent.models.local.model, "bundled_model_path", lambda: None)
    monkeypatch.chdir(tmp_path)
    result = run_cli("init", "my agent", "--template", "demo")
    last = result.stdout.splitlines()[-1]
    assert last.startswith("next: agent run --home 'my agent' --model openai:gpt-4o-mini   # with OPENAI_API_KEY set")
    assert "the embedded one is not installed" in last
    with OpenAIServer(default=Reply.chat({"tool": "done", "args": {"summary": "ok"}})) as server:
        assert run_cli(*_steps(result.stdout)[-1], env={"OPENAI_BASE_URL": server.base_url}).exit_code == 0


def test_a_configured_model_that_cannot_be_used_yet_points_at_doctor(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("init", "keyless", "--template", "demo", env={"AGENT_MODEL": "openai:gpt-4o"})
    assert result.stdout.splitlines()[-1] == (
        "next: agent doctor --home keyless   # the openai provider needs an API key: set the environment variable "
        "OPENAI_API_KEY (a loopback base_url needs none)"
    )
    assert run_cli(*_steps(result.stdout)[-1], env={"AGENT_MODEL": "openai:gpt-4o"}).exit_code == 1  # it says what
