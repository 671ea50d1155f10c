"""The scratchpad state: fresh defaults, validation, normalising, size caps and invariants."""

from __future__ import annotations

import datetime as _dt

from agent.state import (
    FIELDS,
    MAX_FIELD_BYTES,
    field_problem,
    field_size_problem,
    fresh_state,
    invariant_problems,
    normalize,
    parse_time,
    problems,
)
from tests.helpers import run_cli, tree_digest, write_active, write_script


def test_a_fresh_state_is_valid_and_never_shared():
    one, two = fresh_state(), fresh_state()
    assert problems(one) == []
    assert set(one) == set(FIELDS)
    one["goals"].append("g")
    assert two["goals"] == []


def test_problems_name_every_bad_field_and_non_string_keys():
    state = fresh_state() | {"goals": "one", "notes": 5, "extra": {3: "x"}}
    found = problems(state)
    assert "field 'goals' must be a list of strings, got the text \"one\"" in found
    assert "field 'notes' must be a string, got the number 5" in found
    assert any("key 3 in 'extra' is not a string but a number" in p for p in found)
    assert problems(["a"]) == ["top level must be a mapping of fields, got a list of 1 item"]


def test_normalize_fills_missing_fields_keeps_the_operators_keys_and_writes_times_as_text():
    when = _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
    state = normalize({"goals": None, "mine": [1], "last_updated": when})
    assert state["goals"] == [] and state["mine"] == [1] and state["notes"] == ""
    assert state["last_updated"] == "2026-01-01T00:00:00+00:00"
    assert problems(state) == []


def test_a_completed_task_may_be_text_or_a_mapping_of_text():
    assert field_problem("completed_tasks", ["a", {"task": "b", "summary": None}]) is None
    assert field_problem("completed_tasks", [{"task": 1}]) is not None


def test_one_field_over_the_size_cap_is_refused_by_size():
    assert field_size_problem("notes", "x" * MAX_FIELD_BYTES) is not None  # JSON quotes count
    assert field_size_problem("notes", "x" * (MAX_FIELD_BYTES - 2)) is None
    assert "over the 65,536-byte limit" in field_size_problem("goals", ["é" * MAX_FIELD_BYTES])


def test_invariants_keep_completed_tasks_a_prefix_and_runtime_fields_unchanged():
    before = fresh_state() | {"completed_tasks": ["a"], "last_updated": "t0"}
    assert invariant_problems(before, before | {"completed_tasks": ["a", "b"]}) == []
    assert invariant_problems(before, before | {"completed_tasks": ["b"]}) == [
        "completed_tasks read at the start are no longer a prefix of completed_tasks"
    ]
    assert invariant_problems(before, before | {"last_updated": "t1"}) == [
        "runtime-owned field 'last_updated' was changed during the cycle"
    ]
    assert invariant_problems(before, before | {"goals": 3})[0].startswith("field 'goals'")


def test_parse_time_reads_iso_stamps_as_utc_and_refuses_the_rest():
    assert parse_time("2026-01-01T00:00:00") == _dt.datetime(2026, 1, 1, tzinfo=_dt.timezone.utc)
    assert parse_time("2026-01-01T02:00:00+02:00").utcoffset() == _dt.timedelta(hours=2)
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_every_runtime_key_of_active_yaml_is_taken_from_section_names():
    import agent.memory.inbox as inbox
    import agent.memory.task_checks as checks
    from agent.state import FIELDS, SECTION_IDS_KEY, taken_keys

    assert {checks.CHECKS_KEY, inbox.APPLIED_KEY, SECTION_IDS_KEY, *FIELDS} <= set(taken_keys())


def test_a_key_that_is_not_text_is_named_as_the_yaml_wrote_it_and_its_kind_in_words(home, tmp_path):
    """`true` and `null` as YAML wrote them, `a boolean` not Python's `bool`; exit 6, nothing written."""
    write_active(home, "goals: []\ntrue: yes\nextra: {~: x}\n")
    before = tree_digest(home)
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 6
    assert result.stderr == (
        f"agent: error: {home / 'scratchpad' / 'active.yaml'}: "
        "key true is not a string but a boolean; quote it in the YAML ('true': ...); "
        "key null in 'extra' is not a string but null; quote it in the YAML ('null': ...)\n"
    )
    assert tree_digest(home) == before
