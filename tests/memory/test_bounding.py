"""Bounded memory: notes budget and completed_tasks window spill to the archive, nothing is lost;
the reflect step curates notes or leaves them alone."""

from __future__ import annotations

import json

from agent.memory.builtin import ARCHIVE_MARKER, settle_at_sleep
from agent.state import fresh_state
from agent.store.archive import Left, archived
from agent.store.home import Home
from tests.helpers import read_yaml, run_cli, write_active, write_script


def archive_of(home) -> list[dict]:
    """Every archived record of the home, oldest first."""
    return list(archived(Home.at(home)))


def run(home, script, *extra):
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def state_with(**fields):
    state = fresh_state()
    state.update(fields)
    return state


# ---------------------------------------------------------------------------- pure functions


def test_memory_within_limits_is_left_alone():
    state = state_with(notes="short", completed_tasks=["a"])
    assert settle_at_sleep(state, 4000, 20) == (state, [])


def test_notes_over_budget_keep_the_newest_lines_and_a_marker():
    lines = [f"line {i:03d} " + "x" * 40 for i in range(100)]
    bounded, moved = settle_at_sleep(state_with(notes="\n".join(lines)), 1000, 20)
    kept = bounded["notes"].split("\n")
    assert len(bounded["notes"]) <= 1000
    assert kept[0].startswith(ARCHIVE_MARKER) and f"{len(moved)} older note lines" in kept[0]
    assert kept[1:] == lines[-len(kept) + 1 :]  # the newest, in order
    assert [m.value for m in moved] + kept[1:] == lines  # every line is somewhere


def test_notes_keep_every_newest_line_that_fits_the_budget_less_the_markers_room():
    lines = [f"{i:03d} " + "y" * (i % 37) for i in range(300)]
    bounded, moved = settle_at_sleep(state_with(notes="\n".join(lines)), 1000, 20)
    kept = bounded["notes"].split("\n")[1:]
    room = sum(len(line) + 1 for line in kept)
    assert room <= 1000 - 100 < room + len(lines[len(moved) - 1]) + 1  # one more older line would not fit


def test_completed_window_keeps_the_newest_entries():
    tasks = [f"t{i}" for i in range(25)]
    bounded, moved = settle_at_sleep(state_with(completed_tasks=tasks), 4000, 20)
    assert bounded["completed_tasks"] == tasks[5:]
    assert moved == [Left("completed_task", f"t{i}", "completed_window") for i in range(5)]


def test_unset_limits_mean_unbounded():
    state = state_with(notes="x\n" * 10000, completed_tasks=["t"] * 100)
    assert settle_at_sleep(state, None, None) == (state, [])


# ------------------------------------------------------------------------------ through cycles


def test_notes_budget_spills_to_the_archive_and_nothing_is_lost(home, tmp_path):
    (home / "config.yaml").write_text("notes_budget: 1500\n")
    written = []
    for cycle in range(8):
        messages = [f"cycle{cycle}-msg{i}-" + "y" * 150 for i in range(3)]
        written += messages
        script = write_script(
            tmp_path,
            [
                *({"tool": "echo", "args": {"message": m}} for m in messages),
                {"tool": "done", "args": {"summary": f"cycle {cycle}"}},
            ],
            f"s{cycle}.yaml",
        )
        assert run(home, script).exit_code == 0
    active = read_yaml(home / "scratchpad/active.yaml")
    assert len(active["notes"]) <= 1500
    assert active["notes"].startswith(ARCHIVE_MARKER)
    archive = archive_of(home)
    assert archive and all(r["kind"] == "note" and r["reason"] == "notes_budget" for r in archive)
    assert all(len(r["cycle_id"]) >= 15 for r in archive)
    everything = "\n".join([r["value"] for r in archive] + [active["notes"]])
    for message in written:
        assert message in everything, message


def test_completed_window_keeps_full_history_across_active_and_archive(home, tmp_path):
    (home / "config.yaml").write_text("completed_window: 2\n")
    write_active(home, state_with(current_task="task0", pending_actions=[f"task{i}" for i in range(1, 6)]))
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    for _ in range(5):
        assert run(home, script).exit_code == 0
    active = read_yaml(home / "scratchpad/active.yaml")
    assert [t["task"] for t in active["completed_tasks"]] == ["task3", "task4"]
    archived = [r["value"]["task"] for r in archive_of(home) if r["kind"] == "completed_task"]
    assert archived + ["task3", "task4"] == [f"task{i}" for i in range(5)]


def test_the_after_snapshot_shows_the_bounded_state(home, tmp_path):
    (home / "config.yaml").write_text("notes_budget: 300\n")
    script = write_script(
        tmp_path,
        [
            *({"tool": "echo", "args": {"message": f"m{i}" + "z" * 80}} for i in range(5)),
            {"tool": "done", "args": {"summary": "s"}},
        ],
    )
    result = run(home, script, "--json")
    report = json.loads(result.stdout)
    assert report["archived"] > 0
    after = read_yaml(home / "scratchpad" / f"{report['cycle_id']}_after.yaml")
    assert len(after["notes"]) <= 300


# -------------------------------------------------------------------------------- reflect step


def reflect_script(tmp_path, curate_reply):
    return write_script(
        tmp_path,
        [
            {"tool": "echo", "args": {"message": "raw tool chatter"}},
            {"tool": "done", "args": {"summary": "finished"}},
            *curate_reply,
        ],
    )


def test_reflect_replaces_notes_and_archives_the_old_ones(home, tmp_path):
    write_active(home, state_with(notes="old fact"))
    script = reflect_script(tmp_path, [{"tool": "curate_notes", "args": {"notes": "Known: the task is done"}}])
    result = run(home, script, "--reflect", "--json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["reflect"] == "applied"
    assert read_yaml(home / "scratchpad/active.yaml")["notes"] == "Known: the task is done"
    archived = [r["value"] for r in archive_of(home) if r["reason"] == "reflect"]
    assert archived[0] == "old fact" and any("raw tool chatter" in line for line in archived)


def test_reflect_append_keeps_existing_notes(home, tmp_path):
    script = reflect_script(tmp_path, [{"tool": "curate_notes", "args": {"notes": "APPEND: Next: write the report"}}])
    assert run(home, script, "--reflect").exit_code == 0
    notes = read_yaml(home / "scratchpad/active.yaml")["notes"]
    assert "raw tool chatter" in notes and notes.endswith("Next: write the report")


def test_reflect_enabled_in_config(home, tmp_path):
    (home / "config.yaml").write_text("reflect: true\n")
    script = reflect_script(tmp_path, [{"tool": "curate_notes", "args": {"notes": "CLEAR"}}])
    assert run(home, script).exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml")["notes"] == ""


def test_a_failed_reflect_call_keeps_the_unreflected_state(home, tmp_path):
    script = reflect_script(tmp_path, [])  # the script ends: the reflect call is a model error
    result = run(home, script, "--reflect", "--json")
    assert result.exit_code == 0  # the cycle itself succeeded
    report = json.loads(result.stdout)
    assert report["reflect"].startswith("kept unreflected: ScriptEnded")
    notes = read_yaml(home / "scratchpad/active.yaml")["notes"]
    assert "raw tool chatter" in notes and "[COMPLETED] finished" in notes


def test_an_invalid_reflect_reply_keeps_the_unreflected_state(home, tmp_path):
    for i, reply in enumerate(
        [
            {"tool": "done", "args": {"summary": "again"}},
            {"tool": "curate_notes", "args": {"notes": 42}},
            "not json at all",
        ]
    ):
        sub = home / str(i)
        (sub / "scratchpad").mkdir(parents=True)
        result = run(sub, reflect_script(tmp_path, [reply]), "--reflect", "--json")
        assert json.loads(result.stdout)["reflect"].startswith("kept unreflected")
        assert "raw tool chatter" in read_yaml(sub / "scratchpad/active.yaml")["notes"]
    assert archive_of(home / "0") == []


def test_reflect_only_runs_after_done(home, tmp_path):
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": f"m{i}"}} for i in range(3)])
    result = run(home, script, "--reflect", "--max-iterations", "2", "--json")
    assert result.exit_code == 3 and json.loads(result.stdout)["reflect"] is None


def test_an_interrupt_during_the_reflect_step_fails_the_cycle(home, tmp_path):
    import os
    import signal
    import time

    from agent.config import load_settings
    from agent.cycle.run import run_cycle
    from agent.models.scripted import ScriptedModel
    from agent.store.home import Home

    class InterruptedWhileReflecting(ScriptedModel):
        def complete(self, request):
            if self.position == len(self.replies):  # the extra call after done: the reflect step
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler raises Interrupted here
            return super().complete(request)

    write_active(home, state_with(current_task="t", notes="known"))
    script = reflect_script(tmp_path, [])
    settings = load_settings(home, env={}, reflect=True)
    report = run_cycle(Home.at(home), settings, InterruptedWhileReflecting(script))
    assert report.exit_code == 4 and "SIGTERM" in report.error
    saved = read_yaml(home / "scratchpad/active.yaml")
    assert saved["current_task"] == "t" and saved["notes"].startswith("known\n[CYCLE FAILED]")


def test_null_notes_budget_still_archives_notes_past_the_hard_cap():
    from agent.memory.builtin import HARD_NOTES_CHARS

    lines = [f"{i:06d} " + "n" * 993 for i in range(HARD_NOTES_CHARS // 1000 + 50)]
    bounded, moved = settle_at_sleep(state_with(notes="\n".join(lines)), None, None)
    assert len(bounded["notes"]) <= HARD_NOTES_CHARS
    assert [m.value for m in moved] + bounded["notes"].split("\n")[1:] == lines


def test_null_completed_window_still_archives_the_oldest_tasks_past_the_hard_cap():
    from agent.memory.builtin import HARD_COMPLETED_BYTES

    tasks = [{"task": f"t{i}", "summary": "s" * 10_000} for i in range(HARD_COMPLETED_BYTES // 10_000 + 20)]
    bounded, moved = settle_at_sleep(state_with(completed_tasks=tasks), None, None)
    assert len(json.dumps(bounded["completed_tasks"])) <= HARD_COMPLETED_BYTES
    assert [m.value for m in moved] + bounded["completed_tasks"] == tasks and moved


def test_a_notes_budget_above_the_hard_cap_is_held_to_the_hard_cap():
    from agent.memory.builtin import HARD_NOTES_CHARS

    notes = "\n".join("x" * 999 for _ in range(HARD_NOTES_CHARS // 1000 + 10))
    bounded, _ = settle_at_sleep(state_with(notes=notes), 10 * HARD_NOTES_CHARS, 20)
    assert len(bounded["notes"]) <= HARD_NOTES_CHARS
