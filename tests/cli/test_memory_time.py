"""`agent memory --at WHEN` against the before/after pairs of a scripted history, before and after
a prune, and `agent memory --history ID` against the archive (agent/cli/memory_time.py)."""

from __future__ import annotations

import json

import pytest

from agent.common.cycle_ids import cycle_started
from agent.common.outcomes import ExitCode
from tests.cli.helpers import cycle_ids, done, run_cycle
from tests.cycle.test_consolidate import call, consolidate
from tests.helpers import read_yaml, run_cli, tree_digest
from tests.memory.homes import update, with_sections

SECTIONS = {"known": {"kind": "list", "limit": 30, "entry_chars": 80}, "now": {"kind": "text", "limit": 100}}
CYCLES = 12


def memory(home, *args):
    return run_cli("memory", "--home", str(home), *args)


def memory_json(home, *args) -> dict:
    result = memory(home, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def learned(home, cycles: int = CYCLES):
    """`home` after `cycles` cycles, cycle n adding the fact "Fact n" and setting `now` to "step n"."""
    with_sections(home, {"current_task": "learn", "pending_actions": []}, sections=SECTIONS)
    for n in range(1, cycles + 1):
        reply = update(known=f"APPEND: Fact {n}", now=f"step {n}")
        assert run_cycle(home, [reply, done(f"learned {n}")]).exit_code == 0
        run_cli("task", "add", "learn", "--home", str(home))
    return home


@pytest.fixture
def history_home(home):
    return learned(home)


def known_texts(found: dict) -> list[str]:
    [known] = [s for s in found["sections"] if s["name"] == "known"]
    return [e["text"] for e in known["entries"]]


def test_at_a_cycle_shows_the_memory_its_after_snapshot_holds_over_50_cycles(home):
    history_home = learned(home, 50)
    for cycle_id in cycle_ids(history_home):
        found = memory_json(history_home, "--at", cycle_id)
        snapshot = read_yaml(history_home / "scratchpad" / f"{cycle_id}_after.yaml")
        assert found["cycle_id"] == cycle_id and found["snapshot"] == f"scratchpad/{cycle_id}_after.yaml"
        assert known_texts(found) == [e["text"] for e in snapshot["known"]]
        assert found["notes"] == snapshot["notes"]


def test_at_a_time_shows_the_newest_cycle_started_by_then(history_home):
    ids = cycle_ids(history_home)
    seventh = cycle_started(ids[6]).strftime("%Y-%m-%dT%H:%M:%S")
    found = memory_json(history_home, "--at", seventh)
    same_second = [i for i in ids if i.startswith(ids[6][:15])]
    assert found["cycle_id"] == same_second[-1]  # the ids of one second all started by then
    assert memory_json(history_home, "--at", "0d")["cycle_id"] == ids[-1]


def test_at_prints_the_memory_and_how_far_back_it_reaches(history_home):
    first = cycle_ids(history_home)[0]
    out = memory(history_home, "--at", first).output
    assert f"memory as cycle {first} left it (scratchpad/{first}_after.yaml)" in out
    assert "Fact 1" in out and "Fact 2" not in out and "step 1" in out
    assert out.rstrip().endswith(f"(--at reaches back to cycle {first}, the oldest whose snapshots are kept)")


def test_after_a_prune_at_says_exactly_how_far_back_it_reaches(history_home):
    ids = cycle_ids(history_home)
    assert run_cli("prune", "--keep", "5", "--home", str(history_home)).exit_code == 0
    kept = cycle_ids(history_home)
    assert kept == ids[-5:]
    before = tree_digest(history_home)
    result = memory(history_home, "--at", ids[0])
    assert result.exit_code == ExitCode.USAGE
    assert f"--at reaches back to cycle {kept[0]}, the oldest whose snapshots are kept" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and tree_digest(history_home) == before
    assert memory_json(history_home, "--at", kept[0])["reaches_back_to"] == kept[0]
    assert known_texts(memory_json(history_home, "--at", kept[0])) == [f"Fact {n}" for n in range(1, CYCLES - 3)]


def test_after_a_prune_a_time_before_the_kept_snapshots_is_refused_naming_the_new_limit(history_home):
    assert run_cli("prune", "--keep", "5", "--home", str(history_home)).exit_code == 0
    oldest_kept = cycle_ids(history_home)[0]
    result = memory(history_home, "--at", "1990-01-01")
    assert result.exit_code == ExitCode.USAGE and len(result.stderr.strip().splitlines()) == 1
    assert f"--at reaches back to cycle {oldest_kept}, the oldest whose snapshots are kept" in result.stderr


def test_after_a_prune_every_answer_names_the_new_limit(history_home):
    assert run_cli("prune", "--keep", "5", "--home", str(history_home)).exit_code == 0
    kept = cycle_ids(history_home)
    for cycle_id in kept:
        out = memory(history_home, "--at", cycle_id).output
        assert out.rstrip().endswith(f"(--at reaches back to cycle {kept[0]}, the oldest whose snapshots are kept)")
    assert memory_json(history_home, "--at", "0d")["reaches_back_to"] == kept[0]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--at", "last tuesday"], "'last tuesday' is not a time"),
        (["--at", "1990-01-01"], "no snapshot of a cycle started by 1990-01-01 00:00 UTC"),
        (["--history", "known"], "'known' is not an entry id of a list section"),
        (["--history", "known-99"], "no entry known-99 in active.yaml or the archive"),
        (["--at", "7d", "--history", "known-1"], "--at and --history are two questions"),
    ],
)
def test_a_bad_question_is_one_line_exit_2(history_home, args, message):
    result = memory(history_home, *args)
    assert result.exit_code == ExitCode.USAGE and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_history_of_an_entry_tells_its_life_from_the_archive(history_home):
    script = {"sections": {"known": [{"text": "Facts 1, 2", "cites": ["known-1", "known-2"]}]}}
    script["sections"]["known"] += [{"id": f"known-{n}"} for n in range(3, CYCLES + 1)]
    assert consolidate(history_home, [call(script)]).exit_code == 0
    first = cycle_ids(history_home)[0]
    gone = memory_json(history_home, "--history", "known-1")
    assert gone["in_memory"] is False and gone["text"] == "Fact 1"
    assert gone["events"][0] == {"event": "added", "cycle_id": first, "by": "model"}
    [left] = [e for e in gone["events"] if e["event"] == "left"]
    assert left["reason"] == "consolidate" and left["replaced_by"] == f"known-{CYCLES + 1}"
    successor = memory(history_home, "--history", f"known-{CYCLES + 1}").output
    assert f"known-{CYCLES + 1} (known, in active.yaml): Facts 1, 2" in successor
    assert "merged from known-1, known-2 (stands for 2)" in successor
    out = memory(history_home, "--history", "known-1").output
    assert f"left in {left['cycle_id']}: consolidate, superseded by known-{CYCLES + 1}" in out
