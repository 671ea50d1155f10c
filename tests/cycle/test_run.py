"""One `agent run`, event by event, with the scripted model: what each file holds afterwards."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from agent.common.outcomes import Busy
from agent.common.tags import Tag
from agent.config import Settings, load_settings
from agent.cycle.prompt import user_prompt
from agent.cycle.run import run_cycle
from agent.models.base import Notice
from agent.models.scripted import ScriptedModel
from agent.state import fresh_state
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.helpers import (
    cycle_records,
    read_yaml,
    run_agent_process,
    run_cli,
    snapshots,
    tree_digest,
    write_active,
    write_script,
)

DEMO = {
    "goals": ["Demonstrate the wake/run/sleep cycle"],
    "current_task": "Run the echo tool with a hello message",
    "pending_actions": ["Write hello.txt", "Signal done"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}

WORKED_EXAMPLE = [
    {"tool": "echo", "args": {"message": "Hello!"}},
    {"tool": "shell", "args": {"command": "date -u"}},
    {"tool": "done", "args": {"summary": "Echoed hello and noted the date"}},
]


def run(home, script, *extra):
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def test_seed_worked_example(home, tmp_path):
    write_active(home, DEMO)
    result = run(home, write_script(tmp_path, WORKED_EXAMPLE))
    assert result.exit_code == 0, result.output

    (before_path,), (after_path,) = snapshots(home, "before"), snapshots(home, "after")
    before, after, active = read_yaml(before_path), read_yaml(after_path), read_yaml(home / "scratchpad/active.yaml")
    assert before == DEMO
    # the task advanced: current -> completed with the summary, next pending -> current
    assert after["completed_tasks"] == [{"task": DEMO["current_task"], "summary": "Echoed hello and noted the date"}]
    assert after["current_task"] == "Write hello.txt" and after["pending_actions"] == ["Signal done"]
    notes = after["notes"].splitlines()
    assert notes[0] == '[TOOL] echo({"message": "Hello!"}) -> Hello!'
    assert notes[1].startswith('[TOOL] shell({"command": "date -u"}) -> ') and "UTC" in notes[1]
    assert notes[2] == "[COMPLETED] Echoed hello and noted the date"
    # last_updated belongs to the sleep step only
    assert after["last_updated"] is None
    assert {k: v for k, v in active.items() if k != "last_updated"} == {
        k: v for k, v in after.items() if k != "last_updated"
    }
    stamped = dt.datetime.fromisoformat(active["last_updated"])
    assert stamped.utcoffset() is not None
    assert abs((dt.datetime.now(dt.timezone.utc) - stamped).total_seconds()) < 120


def test_missing_active_yaml_wakes_with_a_fresh_default_schema(home, tmp_path):
    script = write_script(
        tmp_path,
        [{"tool": "update_scratchpad", "args": {"goals": ["mutated"]}}, {"tool": "done", "args": {"summary": "ok"}}],
    )
    assert run(home, script).exit_code == 0
    assert read_yaml(snapshots(home, "before")[0]) == fresh_state()
    # the default handed out is a fresh copy: the mutation above did not leak into it
    assert fresh_state()["goals"] == []
    (home / "scratchpad/active.yaml").unlink()
    assert run(home, script).exit_code == 0
    assert read_yaml(snapshots(home, "before")[1])["goals"] == []


def test_before_snapshot_is_exactly_the_state_read(home, tmp_path):
    state = dict(
        DEMO,
        notes="earlier\nnotes",
        completed_tasks=["a", {"task": "b", "summary": "s"}],
        last_updated="2026-01-01T00:00:00+00:00",
        operator_extra={"kept": True},
    )
    write_active(home, state)
    run(home, write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}]))
    assert read_yaml(snapshots(home, "before")[0]) == state
    assert read_yaml(home / "scratchpad/active.yaml")["operator_extra"] == {"kept": True}


def test_iteration_cap_stops_with_exit_3_and_keeps_the_work(home, tmp_path):
    write_active(home, DEMO)
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": f"m{i}"}} for i in range(10)])
    result = run(home, script, "--max-iterations", "3", "--json")
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["stop_reason"] == "max_iterations" and report["iterations"] == 3
    active = read_yaml(home / "scratchpad/active.yaml")
    assert active["current_task"] == DEMO["current_task"]
    assert [line.split(" ->")[0] for line in active["notes"].splitlines()[:3]] == [
        f'[TOOL] echo({{"message": "m{i}"}})' for i in range(3)
    ]
    assert "[STOPPED] max_iterations" in active["notes"]


def test_the_last_iteration_prompt_says_it_is_the_last(home, tmp_path):
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": f"m{i}"}} for i in range(2)])
    run(home, script, "--max-iterations", "2")
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert log.count("prompt") >= 2
    assert "LAST iteration" in user_prompt(fresh_state(), 2, 2)
    assert "LAST iteration" not in user_prompt(fresh_state(), 1, 2)


def test_every_model_sees_the_whole_queue_and_its_update_replaces_it(home):
    write_active(
        home, dict(DEMO, current_task="Write banana into fruit.txt", pending_actions=["Echo the words purple elephant"])
    )
    model = ScriptedModel.from_replies(
        [
            {"tool": "update_scratchpad", "args": {"pending_actions": ["Water plants"]}},
            {"tool": "done", "args": {"summary": "wrote banana"}},
        ]
    )
    asked = []
    answer = model.complete
    model.complete = lambda request: asked.append(request) or answer(request)
    run_cycle(Home.at(home), Settings(), model)

    assert "pending_actions:\n- Echo the words purple elephant\n" in asked[0].user
    assert "pending_actions:\n- Water plants\n" in asked[1].user and "purple elephant" not in asked[1].user
    state = read_yaml(home / "scratchpad" / "active.yaml")
    assert state["current_task"] == "Water plants" and state["pending_actions"] == []


def test_a_failed_cycle_saves_the_state_as_read_plus_a_note(home, tmp_path):
    state = dict(DEMO, notes="what the agent knew")
    write_active(home, state)
    script = write_script(
        tmp_path,
        [
            {"tool": "echo", "args": {"message": "lost"}},
            {"tool": "update_scratchpad", "args": {"current_task": "half-applied"}},
        ],
    )
    result = run(home, script, "--json")
    assert result.exit_code == 4
    report = json.loads(result.stdout)
    assert report["stop_reason"] == "error" and "only 2 replies" in report["error"]
    for path in (home / "scratchpad/active.yaml", snapshots(home, "after")[0]):
        saved = read_yaml(path)
        assert saved["current_task"] == DEMO["current_task"]  # half-applied edits dropped
        assert saved["notes"].startswith("what the agent knew\n[CYCLE FAILED]")  # appended, not overwritten
        assert "lost" not in saved["notes"]
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert "cycle failed: the script has only 2 replies" in log
    assert "Traceback" not in log  # a model error is its line; a bug's traceback is kept (below)


def test_a_bug_in_a_cycle_leaves_its_traceback_in_the_cycle_log(home, tmp_path, monkeypatch):
    """What is not a model error is a bug to report: its traceback is in the log (and nowhere else)."""
    from agent.tools import Registry

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(Registry, "called", broken)  # the dispatcher's check of each reply
    write_active(home, DEMO)
    result = run(home, write_script(tmp_path, [{"tool": "echo", "args": {"message": "x"}}]), "--json")
    assert result.exit_code == 4 and "Traceback" not in result.output
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert (
        "cycle failed: a bug in the runner: ZeroDivisionError: a bug" in log
        and "Traceback (most recent call last)" in log
    )


def test_repeated_action_stops_the_cycle(home, tmp_path):
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": "same"}}] * 5)
    result = run(home, script, "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["stop_reason"] == "repeated_action"
    assert json.loads(result.stdout)["iterations"] == 3


def test_unparseable_replies_in_a_row_stop_the_cycle(home, tmp_path):
    script = write_script(tmp_path, ["nonsense", "more nonsense", "{not json", "x"])
    result = run(home, script, "--json")
    assert result.exit_code == 3
    assert json.loads(result.stdout)["stop_reason"] == "parse_errors"
    assert read_yaml(home / "scratchpad/active.yaml")["notes"].count("[PARSE ERROR]") == 3


def test_a_parse_error_does_not_end_the_cycle(home, tmp_path):
    script = write_script(tmp_path, ["hmm", {"tool": "done", "args": {"summary": "recovered"}}])
    result = run(home, script, "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["iterations"] == 2
    notes = read_yaml(home / "scratchpad/active.yaml")["notes"].splitlines()
    assert [Tag.of(line)[0] for line in notes] == [Tag.PARSE_ERROR, Tag.COMPLETED]


BAD_SCRATCHPADS = {
    "bad YAML": ("goals: [unclosed\n", "invalid YAML at line"),
    "YAML tag": (
        "goals: !!python/object/apply:os.system ['echo pwned']\n",
        "YAML tags that build objects are not allowed",
    ),
    "not a mapping": ("- just\n- a list\n", "top level must be a mapping"),
    "wrong field type": ("goals: do everything\n", "field 'goals' must be a list of strings"),
    "wrong nested type": ("pending_actions: [1, 2]\n", "field 'pending_actions[0]' must be a string"),
    "duplicate key": ("notes: a\nnotes: b\n", "duplicate key 'notes'"),
    "empty": ("", "is empty"),
}


@pytest.mark.parametrize("content, message", BAD_SCRATCHPADS.values(), ids=BAD_SCRATCHPADS.keys())
def test_an_unusable_active_yaml_exits_6_and_touches_nothing(home, tmp_path, content, message):
    write_active(home, content)
    (home / "logs").mkdir()
    digest = tree_digest(home)
    result = run(home, write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}]))
    assert result.exit_code == 6
    assert "active.yaml" in result.stderr and message in result.stderr
    assert tree_digest(home) == digest  # no snapshot, no log, no index, same bytes


def test_three_cycles_in_one_second_leave_three_pairs_in_order(home, tmp_path):
    script = write_script(
        tmp_path, [{"tool": "echo", "args": {"message": "x"}}, {"tool": "done", "args": {"summary": "ok"}}]
    )
    moment = dt.datetime(2026, 4, 1, 10, 1, 37, tzinfo=dt.timezone.utc)
    settings = load_settings(home)
    ids = [run_cycle(Home.at(home), settings, ScriptedModel(script), clock=lambda: moment).cycle_id for _ in range(3)]
    assert ids == ["20260401_100137_01", "20260401_100137_02", "20260401_100137_03"]
    assert ids == sorted(ids)
    assert len(snapshots(home, "before")) == len(snapshots(home, "after")) == 3
    assert len(list((home / "logs").glob("cycle_*.log"))) == 3


def test_a_second_run_while_the_lock_is_held_exits_5_and_writes_nothing(home, tmp_path):
    write_active(home, DEMO)
    script = write_script(tmp_path, WORKED_EXAMPLE)
    with home_lock(Home.at(home)):
        digest = tree_digest(home)
        proc = run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}")
        assert proc.returncode == 5, proc.stderr
        assert "holds the lock" in proc.stderr
        assert tree_digest(home) == digest
    assert run_agent_process("run", "--home", str(home), "--model", f"scripted:{script}").returncode == 0


def test_lock_is_reentrant_for_nobody(home):
    with home_lock(Home.at(home)):
        with pytest.raises(Busy):
            with home_lock(Home.at(home)):
                pass


def test_json_report_describes_the_cycle(home, tmp_path):
    write_active(home, DEMO)
    result = run(home, write_script(tmp_path, WORKED_EXAMPLE), "--json")
    report = json.loads(result.stdout)
    assert report["stop_reason"] == "done" and report["exit_code"] == 0 and report["iterations"] == 3
    assert report["task_before"] == DEMO["current_task"] and report["task_after"] == "Write hello.txt"
    assert set(report["usage"]) >= {"prompt_tokens", "completion_tokens", "cached_tokens"}
    cid = report["cycle_id"]
    assert report["files"] == [
        f"scratchpad/{cid}_before.yaml",
        f"scratchpad/{cid}_after.yaml",
        "scratchpad/active.yaml",
    ]
    index = cycle_records(home)
    assert index[-1]["cycle_id"] == cid and index[-1]["stop_reason"] == "done"


def test_python_dash_m_agent_runs_a_cycle(home, tmp_path):
    write_active(home, DEMO)
    proc = run_agent_process(
        "run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, WORKED_EXAMPLE)}"
    )
    assert proc.returncode == 0, proc.stderr
    assert "done after 3 iteration(s)" in proc.stdout


def test_agent_home_environment_variable_selects_the_home(home, tmp_path):
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}])
    result = run_cli("run", "--model", f"scripted:{script}", env={"AGENT_HOME": str(home)})
    assert result.exit_code == 0 and snapshots(home, "after")


def test_the_loop_works_on_a_copy_so_the_before_snapshot_is_untouched(home, tmp_path):
    write_active(home, DEMO)
    run(
        home,
        write_script(
            tmp_path,
            [{"tool": "update_scratchpad", "args": {"goals": ["changed"]}}, {"tool": "done", "args": {"summary": "x"}}],
        ),
    )
    assert read_yaml(snapshots(home, "before")[0])["goals"] == DEMO["goals"]
    assert read_yaml(snapshots(home, "after")[0])["goals"] == ["changed"]


def test_snapshots_are_yaml_that_reloads_equal(home, tmp_path):
    write_active(home, dict(DEMO, notes="multi\nline: notes\n  with: colons"))
    run(home, write_script(tmp_path, WORKED_EXAMPLE))
    (before,), (after,) = snapshots(home, "before"), snapshots(home, "after")
    active = read_yaml(home / "scratchpad/active.yaml")
    assert read_yaml(before)["notes"] == "multi\nline: notes\n  with: colons"  # exactly what was read
    assert read_yaml(after) == dict(active, last_updated=read_yaml(after)["last_updated"])
    assert read_yaml(after)["last_updated"] == read_yaml(before)["last_updated"]  # stamped only in active.yaml


def test_a_secret_in_a_failure_message_is_redacted_everywhere(home, tmp_path, monkeypatch):
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    script = tmp_path / "s.yaml"
    script.write_text("[]\n")  # the first request fails; make its message carry the key
    from agent import models

    original = models.ScriptedModel.complete

    def leaky(self, request):
        raise models.ModelError(f"upstream said: bad key {secret}")

    monkeypatch.setattr(models.ScriptedModel, "complete", leaky)
    result = run(home, script, "--json")
    monkeypatch.setattr(models.ScriptedModel, "complete", original)
    assert result.exit_code == 4
    assert secret not in result.stdout and "[REDACTED]" in result.stdout
    for path in [*(home / "scratchpad").iterdir(), *(home / "logs").iterdir()]:
        assert secret.encode() not in path.read_bytes(), path  # the database's file and its WAL too


@pytest.mark.parametrize(
    "content, message",
    [
        ("goals: []\nlast_updated: 2024-02-30\n", "day is out of range"),
        ("notes: " + "1" * 5000 + "\n", "a value cannot be read"),
    ],
)
def test_a_value_yaml_cannot_build_is_an_invalid_scratchpad_not_a_crash(home, tmp_path, content, message):
    write_active(home, content)
    result = run(home, write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}]))
    assert result.exit_code == 6 and message in result.stderr


def test_an_impossible_date_in_config_is_a_usage_error(home, tmp_path):
    (home / "config.yaml").write_text("model: scripted:x\nstarted: 2024-02-30\n")
    result = run_cli("run", "--home", str(home))
    assert result.exit_code == 2 and "day is out of range" in result.stderr


def test_secrets_in_mapping_keys_are_redacted(home, tmp_path, monkeypatch):
    secret = "sk-supersecret-123456"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    script = write_script(
        tmp_path,
        [
            {"tool": "update_scratchpad", "args": {"completed_tasks": [{secret: "found"}]}},
            {"tool": "done", "args": {"summary": "x"}},
        ],
    )
    assert run(home, script).exit_code == 0
    for path in (home / "scratchpad").iterdir():
        assert secret not in path.read_text()


def test_a_lock_held_only_for_an_instant_does_not_make_a_cycle_skip(home, tmp_path):
    import threading
    import time

    held = threading.Event()

    def brief_probe():  # what `agent status` or `agent doctor` does: take the lock, drop it at once
        with home_lock(Home.at(home)):
            held.set()
            time.sleep(0.03)

    probe = threading.Thread(target=brief_probe)
    probe.start()
    held.wait(5)
    result = run(home, write_script(tmp_path, [{"tool": "done", "args": {"summary": "x"}}]))
    probe.join()
    assert result.exit_code == 0, result.output


class _Preparing(ScriptedModel):
    """A scripted model that says, as the embedded model does on its first run, why it will be slow."""

    def start(self, log):
        super().start(log)
        log(Notice("preparing the model (first run on this machine)"))


def test_a_models_notice_reaches_the_screen_before_its_first_reply_and_the_cycle_log(home):
    write_active(home, DEMO)
    events = []
    model = _Preparing.from_replies([{"tool": "done", "args": {"summary": "ok"}}])

    report = run_cycle(Home.at(home), Settings(), model, lambda event, **data: events.append((event, data)))

    assert [event for event, _ in events] == ["start", "notice", "iteration", "end"]
    assert events[1][1] == {"text": "preparing the model (first run on this machine)"}
    log = (home / "logs" / f"cycle_{report.cycle_id}.log").read_text()
    assert "preparing the model (first run on this machine)" in log
