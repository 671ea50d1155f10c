"""Wake settles the memory sections, through real cycles (agent/cycle/wake.py `_settle`): keys made,
hand-written entries adopted, counters raised, lowered limits applied with a note; what that moved
out archived at sleep, before the cycle saves; a state the sections cannot use refused before
anything is written."""

from __future__ import annotations

import pytest
import yaml

from agent.common.outcomes import ExitCode
from agent.store.archive import highest_ids
from agent.store.home import Home
from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, read_yaml, snapshots, tree_digest
from tests.memory.homes import SECTIONS, archived_sections, known, notes, with_sections

TASK = {"current_task": "work", "pending_actions": []}


def test_wake_makes_every_sections_key_and_the_before_snapshot_is_the_settled_state(home):
    with_sections(home, {**TASK, "known": ["The NAS is at 10.0.0.5"]})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    before = read_yaml(snapshots(home, "before")[0])
    assert before["purpose"] == "" and before["now"] == "" and before["unknown"] == [] and before["tell"] == []
    adopted = before["known"][0]
    assert (adopted["id"], adopted["by"], adopted["days"]) == ("known-1", "operator", 1)
    assert before["section_ids"] == {"known": 1}
    assert "[MEMORY] known: adopted known-1 as the operator's" in before["notes"]
    assert read_active(home)["known"] == [adopted]


def test_a_lowered_limit_archives_the_weakest_model_entries_at_the_next_wake_with_a_note(home):
    facts = ["a", "b", "c", "d"]
    state = {**TASK, "known": known(*facts), "section_ids": {"known": 4}}
    state["known"][0]["days"] = 3  # the strongest stays
    with_sections(home, state, {**SECTIONS, "known": {**SECTIONS["known"], "limit": 2}})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert [e["id"] for e in read_active(home)["known"]] == ["known-1", "known-4"]
    assert "[MEMORY] known: its limit is 2: archived known-2, known-3, the weakest" in notes(home)
    records = archived_sections(home)
    assert [(r["section"], r["id"], r["reason"], r["value"]["text"]) for r in records] == [
        ("known", "known-2", "limit", "b"),
        ("known", "known-3", "limit", "c"),
    ]
    assert read_yaml(snapshots(home, "before")[0])["known"] == read_active(home)["known"]  # settled before it


def test_the_operators_entries_stay_over_a_lowered_limit(home):
    state = {**TASK, "known": ["mine 1", "mine 2", "mine 3"]}
    with_sections(home, state, {**SECTIONS, "known": {**SECTIONS["known"], "limit": 1}})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert len(read_active(home)["known"]) == 3 and archived_sections(home) == []


def test_a_failed_cycle_saves_the_settled_state_and_archives_what_settling_moved_out(home):
    state = {**TASK, "known": known("a", "b", "c"), "section_ids": {"known": 3}}
    with_sections(home, state, {**SECTIONS, "known": {**SECTIONS["known"], "limit": 2}})
    result = run_cycle(home, [])  # the script ends at once: the model fails
    assert result.exit_code == ExitCode.FAILED
    assert [e["id"] for e in read_active(home)["known"]] == ["known-2", "known-3"]
    assert [r["id"] for r in archived_sections(home)] == ["known-1"]


def test_an_idle_cycle_settles_nothing_and_writes_no_state(home, monkeypatch):
    monkeypatch.delenv("AGENT_IDLE")
    state = {"current_task": None, "known": known("a", "b", "c"), "section_ids": {"known": 3}}
    with_sections(home, state, {**SECTIONS, "known": {**SECTIONS["known"], "limit": 1}})
    before = (home / "scratchpad" / "active.yaml").read_bytes()
    assert run_cycle(home, [], "--json").exit_code == 0
    assert (home / "scratchpad" / "active.yaml").read_bytes() == before and archived_sections(home) == []


def test_ids_are_never_issued_twice_even_when_the_operator_deletes_the_counters(home):
    state = {**TASK, "known": known("a", "b"), "section_ids": {"known": 2}}
    with_sections(home, state)
    remove = {"tool": "update_scratchpad", "args": {"known": "REMOVE: known-2"}}
    assert run_cycle(home, [remove, done("ok")]).exit_code == 0
    assert highest_ids(Home.at(home)) == {"known": 2}
    edited = read_active(home)
    del edited["section_ids"]  # the operator, by hand: known-2 is only in the archive now
    (home / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    append = {"tool": "update_scratchpad", "args": {"known": "APPEND: c"}}
    assert run_cycle(home, [append, done("ok")]).exit_code == 0
    assert [e["id"] for e in read_active(home)["known"]] == ["known-1", "known-3"]


def test_a_section_removed_from_config_is_kept_as_an_operator_key(home):
    state = {**TASK, "known": known("a"), "section_ids": {"known": 1}, "old": known("x")}
    with_sections(home, state, {"known": SECTIONS["known"]})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert read_active(home)["old"] == known("x")


@pytest.mark.parametrize(
    "state, message",
    [
        ({"known": "a text now"}, "section 'known' is a list in config.yaml, but active.yaml holds text under 'known'"),
        ({"now": ["a", "list"]}, "section 'now' is text in config.yaml, but active.yaml holds a list under 'now'"),
        ({"known": {"a": 1}}, "active.yaml already uses 'known' for a mapping"),
    ],
    ids=["list-became-text", "text-became-list", "a-mapping"],
)
def test_a_changed_kind_is_a_usage_error_naming_the_section_and_nothing_is_written(home, state, message):
    with_sections(home, {**TASK, **state})
    home_before = tree_digest(home)
    result = run_cycle(home, [done("never")])
    assert result.exit_code == ExitCode.USAGE
    assert message in result.stderr and "Traceback" not in result.output
    assert tree_digest(home) == {k: v for k, v in tree_digest(home).items() if k in home_before} == home_before


def test_a_hand_broken_section_is_an_invalid_scratchpad_and_nothing_is_written(home):
    with_sections(home, {**TASK, "known": [{"id": "known-1", "text": "a", "by": "nobody"}]})
    home_before = tree_digest(home)
    result = run_cycle(home, [done("never")])
    assert result.exit_code == ExitCode.INVALID_SCRATCHPAD
    assert "known[0] (known-1): runtime field 'by' is missing or wrong" in result.stderr
    assert tree_digest(home) == home_before
