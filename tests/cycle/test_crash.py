"""Before a cycle (agent/cycle/crash.py): the leftovers of a killed process are swept only when
one was killed, and a sweep that fails never stops the cycle."""

from __future__ import annotations

import datetime as dt

from agent.cycle.crash import Sweep, clean_after_crash, unfinished_cycle
from agent.store.cycles import new_cycle_id
from agent.store.home import Home
from agent.store.lock import Held
from tests.helpers import store_home

STALE = ".notes.txt.31337.deadbeef.tmp"  # named like atomic_write's temporary files
MOMENT = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def test_unfinished_cycle_is_the_newest_with_a_before_and_no_after(home):
    h = store_home(home)
    assert unfinished_cycle(h) is None  # no cycle yet
    first = new_cycle_id(h, MOMENT)
    h.snapshot(first, "before").write_text("{}\n")
    assert unfinished_cycle(h) == first
    h.snapshot(first, "after").write_text("{}\n")
    assert unfinished_cycle(h) is None
    new_cycle_id(h, MOMENT)  # an idle cycle: no snapshot pair
    assert unfinished_cycle(h) is None


def test_the_workspace_is_swept_before_a_cycle_only_when_the_last_cycle_was_killed(home):
    h = store_home(home)
    workspace = home / "workspace"
    workspace.mkdir()
    stale = workspace / ".notes.txt.31337.deadbeef.tmp"
    stale.write_text("x")
    assert clean_after_crash(h, workspace) == [] and stale.exists()  # no cycle yet
    for _ in range(2):
        cycle_id = new_cycle_id(h, MOMENT)
        (h.scratchpad / f"{cycle_id}_before.yaml").write_text("{}\n")
        (h.scratchpad / f"{cycle_id}_after.yaml").write_text("{}\n")
    assert clean_after_crash(h, workspace) == [] and stale.exists()  # every cycle finished: not walked
    (h.scratchpad / f"{new_cycle_id(h, MOMENT)}_before.yaml").write_text("{}\n")  # killed: no after snapshot
    assert clean_after_crash(h, workspace) == [stale] and not stale.exists()


def test_a_killed_lock_holder_owes_a_sweep_even_when_every_cycle_finished(home):
    h = store_home(home)
    workspace = home / "workspace"
    workspace.mkdir()
    (workspace / STALE).write_text("x")
    (h.scratchpad / ".active.yaml.31337.deadbeef.tmp").write_text("half")
    held = Held(owed=True)
    swept = clean_after_crash(h, workspace, held)
    assert sorted(p.name for p in swept) == [".active.yaml.31337.deadbeef.tmp", STALE]
    assert held.cleared and swept.killed is None and swept.note == ""
    assert sorted(p.name for p in h.scratchpad.iterdir()) == []  # only the temporaries went
    not_owed = Held(owed=False)
    assert clean_after_crash(h, workspace, not_owed) == [] and not not_owed.cleared


def test_a_sweep_note_is_empty_or_the_problem():
    swept = Sweep()
    assert swept.note == ""
    swept.problem = "after-crash sweep did not reach workspace/deep"
    assert swept.note == "; after-crash sweep did not reach workspace/deep"


def test_a_failing_sweep_is_logged_and_never_fails_the_cycle(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    import agent.cycle.crash as crash_module  # its helpers fail; the sweep itself is real

    monkeypatch.setattr(crash_module, "remove_stale_temporaries", broken)
    monkeypatch.setattr(crash_module, "unfinished_cycle", lambda home: "20261124_000000_01")  # a killed cycle
    swept = clean_after_crash(Home.at(tmp_path), tmp_path)
    assert swept == [] and "after-crash sweep failed, the cycle goes on: RecursionError" in swept.note
