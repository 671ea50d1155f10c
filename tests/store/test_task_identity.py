"""A task's identity: the runtime's, from the records; what the model writes in a cycle never
changes it, an operator's edit between cycles or an accepted done does."""

from __future__ import annotations

from agent.store.task_identity import at_end, at_wake, identity_of, issued, newest_identified, of_task, text_identity


def record(task_id: str | None, before: str | None, after: str | None, **more) -> dict:
    fields = {"task_id": task_id, "task_id_before": task_id} if task_id else {}
    return {"stop_reason": "max_iterations", "task_before": before, "task_after": after, **fields, **more}


def test_the_text_a_cycle_left_is_the_same_task_at_the_next_wake_however_the_model_worded_it():
    previous = record("c1", "fix the backup job", "Fix the backup job (attempt 3)")
    assert at_wake(previous, "Fix the backup job (attempt 3)", "c2") == "c1"


def test_other_text_at_wake_is_the_operator_s_change_and_a_new_task():
    previous = record("c1", "fix the backup job", "fix the backup job")
    assert at_wake(previous, "fix the backup job, on the new host", "c2") == issued("c2") == "c2"


def test_no_current_task_is_an_identity_too():
    assert at_wake(record("c1+done", None, None), None, "c2") == "c1+done"


def test_the_first_wake_issues_an_identity():
    assert at_wake(None, "t", "c1") == "c1"


def test_a_task_that_crosses_the_upgrade_unchanged_keeps_the_identity_its_text_gives():
    older = record(None, "t", "t")  # an earlier release's record: no identity
    assert at_wake(older, "t", "c2") == identity_of(older) == text_identity("t") != text_identity("u")
    assert at_wake(older, "edited by the operator", "c2") == "c2"


def test_only_an_accepted_done_changes_the_identity_within_a_cycle():
    assert at_end("c1", False, "c2") == "c1"
    assert at_end("c1", True, "c2") == "c2+done"


def test_the_newest_record_with_an_identity_is_found_past_one_without():
    records = [{"stop_reason": "consolidated", "task_after": "t"}, record("c1", "t", "t")]
    assert newest_identified(records)["task_id"] == "c1"
    assert newest_identified([{"source": "files", "task_id": "x"}]) is None  # a cycle without a record


def test_records_of_an_earlier_release_are_of_the_task_by_the_text_it_had_at_the_upgrade():
    records = [record("c3", "renamed", "renamed again"), record("c3", "t", "renamed"), record(None, "t", "t")]
    records += [record(None, "other", "other")]
    assert [same for _, same in of_task(records, "c3", "renamed again")] == [True, True, True, False]


def test_a_state_reset_or_restored_since_the_newest_record_is_a_new_task_whatever_its_text():
    previous = record("c1", "t", "t", replaced=3)
    assert at_wake(previous, "t", "c2", replaced=3) == "c1"
    assert at_wake(previous, "t", "c2", replaced=4) == "c2"
