"""Naming a saved state on the command line (agent/cli/snapshots.py): 'active', 'latest', 'ID',
'ID:before', 'ID:after', and a clear refusal of anything else, a path included."""

from __future__ import annotations

import pytest
import yaml

from agent.cli.snapshots import latest_saved, resolve_snapshot
from agent.common.outcomes import InvalidScratchpad, UsageError
from agent.store.cycles import add_record
from agent.store.home import Home
from tests.helpers import store_home

IDS = ["20260101_000000_01", "20260101_000100_01", "20260101_000200_01"]


@pytest.fixture
def saved(home) -> Home:
    """Three cycles with snapshot pairs (task 0 -> 1 -> 2 -> 3), then an idle one with none."""
    h = store_home(home)
    for n, cycle_id in enumerate(IDS):
        h.snapshot(cycle_id, "before").write_text(yaml.safe_dump({"current_task": f"task {n}"}))
        h.snapshot(cycle_id, "after").write_text(yaml.safe_dump({"current_task": f"task {n + 1}"}))
    h.active.write_text(yaml.safe_dump({"current_task": "task 3", "notes": "edited since"}))
    return h


def test_an_id_names_its_snapshot_with_the_default_label_or_the_one_given(saved: Home):
    side = resolve_snapshot(saved, IDS[1], "before", IDS)
    assert side.label == f"scratchpad/{IDS[1]}_before.yaml" and side.state["current_task"] == "task 1"
    assert side.text == saved.snapshot(IDS[1], "before").read_text()
    assert resolve_snapshot(saved, f"{IDS[1]}:after", "before", IDS).state["current_task"] == "task 2"


def test_active_names_the_state_now(saved: Home):
    side = resolve_snapshot(saved, "active", "after", IDS)
    assert side.label == "scratchpad/active.yaml" and side.state["notes"] == "edited since"


def test_latest_skips_the_cycles_that_saved_no_snapshots(saved: Home):
    idle = "20260101_000300_01"
    assert latest_saved(saved, [*IDS, idle]) == IDS[-1]
    assert resolve_snapshot(saved, "latest:after", "before", [*IDS, idle]).state["current_task"] == "task 3"


def test_latest_reads_the_cycles_with_files_past_the_newest_few(saved: Home):
    idle = [f"20260101_00{m}00_01" for m in (30, 40, 50, 51)]  # more idle cycles than the newest few
    for cycle_id in [*IDS, *idle]:
        add_record(saved, {"cycle_id": cycle_id})
    assert latest_saved(saved, [*IDS, *idle]) == IDS[-1]
    nothing_saved = Home.at(saved.root / "elsewhere")
    assert latest_saved(nothing_saved, idle) == idle[-1]  # none has snapshots: the newest


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("20250101_000000_01", "no cycle '20250101_000000_01' in "),
        ("../../etc/passwd", "no cycle '../../etc/passwd' in "),
        (f"{IDS[0]}:middle", f"'{IDS[0]}:middle': after the colon put before or after"),
        ("latest:sideways", "'latest:sideways': after the colon put before or after"),
    ],
)
def test_anything_else_is_a_usage_error_naming_it(saved: Home, spec: str, message: str):
    with pytest.raises(UsageError) as refused:
        resolve_snapshot(saved, spec, "before", IDS)
    assert message in str(refused.value)


def test_an_unknown_id_error_names_the_latest_ids(saved: Home):
    with pytest.raises(UsageError, match=f"latest: {', '.join(IDS)}; `agent history` lists them all"):
        resolve_snapshot(saved, "nope", "before", IDS)


def test_a_pruned_cycle_says_its_snapshot_is_missing_and_why(saved: Home):
    saved.snapshot(IDS[0], "after").unlink()
    with pytest.raises(UsageError, match=rf"cycle {IDS[0]} has no after snapshot \(scratchpad/{IDS[0]}_after.yaml"):
        resolve_snapshot(saved, IDS[0], "after", IDS)


def test_no_cycles_and_no_active_state_are_usage_errors(home):
    h = Home.at(home)
    with pytest.raises(UsageError, match="no cycles in .* yet; run `agent run` first"):
        resolve_snapshot(h, "latest", "before", [])
    with pytest.raises(UsageError, match=r"active.yaml does not exist yet \(run a cycle, or agent init\)"):
        resolve_snapshot(h, "active", "after", [])


def test_a_hand_broken_snapshot_is_an_invalid_scratchpad(saved: Home):
    saved.snapshot(IDS[0], "before").write_text("current_task: [broken\n")
    with pytest.raises(InvalidScratchpad, match=f"{IDS[0]}_before.yaml"):
        resolve_snapshot(saved, IDS[0], "before", IDS)
