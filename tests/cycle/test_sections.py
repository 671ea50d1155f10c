"""update_scratchpad over the operator's sections, through real cycles: the scripted model, and the
real openai client against the OpenAI-compatible test server on 127.0.0.1 on both the text path and
native tool calls. Each rule of an edit (exact prefixes, read-only refused by name, when_full,
the operator's entries, repetition, runtime-owned fields, the per-cycle REMOVE bound) is shown in
active.yaml, the archive and the note the model reads."""

from __future__ import annotations

import json

import pytest

from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, read_yaml, run_openai, snapshots
from tests.memory.homes import archived_sections, entry, known, newest_transcript, notes, texts, update, with_sections
from tests.models.openai_server import OpenAIServer, Reply

TASK = {"current_task": "learn", "pending_actions": []}
FAST = {"max_retries": 1, "request_timeout": 5}


def last_update_note(home) -> str:
    return [n for n in notes(home) if n.startswith(("[UPDATE]", "[TOOL ERROR] update_scratchpad"))][-1]


# ---------------------------------------------------------------------------------- list edits


def test_append_adds_an_entry_whose_fields_the_runtime_writes(home):
    with_sections(home, TASK)
    assert run_cycle(home, [update(known="APPEND: The NAS is at 10.0.0.5"), done("ok")]).exit_code == 0
    (added,) = read_active(home)["known"]
    cycle = snapshots(home, "before")[0].name[: -len("_before.yaml")]
    assert added == {
        "id": "known-1",
        "text": "The NAS is at 10.0.0.5",
        "by": "model",
        "added": cycle,
        "days": 1,
        "last_day": f"{cycle[:4]}-{cycle[4:6]}-{cycle[6:8]}",
    }
    assert "[UPDATE] known: added known-1 (1/4)" in notes(home)


def test_remove_archives_the_entry_with_its_section_and_id(home):
    with_sections(home, {**TASK, "known": known("a", "b", "c", "d"), "section_ids": {"known": 4}})
    assert run_cycle(home, [update(known="REMOVE: known-2"), done("ok")]).exit_code == 0
    assert texts(home, "known") == ["a", "c", "d"]
    (record,) = archived_sections(home)
    assert (record["section"], record["id"], record["reason"], record["value"]["text"]) == (
        "known",
        "known-2",
        "remove",
        "b",
    )
    assert "[UPDATE] known: removed known-2 (3/4)" in notes(home)


@pytest.mark.parametrize("value", ["append: x", "APPEND x", " APPEND: x", "remove: known-1", "Append: x", "CLEAR", "x"])
def test_a_list_takes_only_the_exact_prefixes(home, value):
    with_sections(home, {**TASK, "known": known("a"), "section_ids": {"known": 1}})
    assert run_cycle(home, [update(known=value), done("ok")]).exit_code == 0
    assert texts(home, "known") == ["a"] and archived_sections(home) == []
    assert last_update_note(home).startswith("[TOOL ERROR] update_scratchpad refused: section 'known' is a list")


def test_a_text_section_appends_replaces_and_clears_archiving_what_it_held(home):
    with_sections(home, TASK)
    replies = [
        update(now="draft"),
        update(now="APPEND: step two"),
        update(now="Checking the disk"),
        update(now="CLEAR"),
    ]
    assert run_cycle(home, [*replies, done("ok")]).exit_code == 0
    assert read_active(home)["now"] == ""
    assert [(r["reason"], r["value"]) for r in archived_sections(home)] == [
        ("replace", "draft\nstep two"),
        ("clear", "Checking the disk"),
    ]
    assert all(r["kind"] == "section_text" and "id" not in r for r in archived_sections(home))


def test_a_text_prefix_is_exact_so_another_spelling_replaces(home):
    with_sections(home, {**TASK, "now": "old"})
    assert run_cycle(home, [update(now="append: new"), done("ok")]).exit_code == 0
    assert read_active(home)["now"] == "append: new"


def test_when_full_archive_evicts_the_weakest_model_entry(home):
    state = {**TASK, "known": known("a", "b", "c", "d"), "section_ids": {"known": 4}}
    state["known"][0]["days"] = 2
    with_sections(home, state, consolidate_max_loss=0.5)
    assert run_cycle(home, [update(known="APPEND: e"), done("ok")]).exit_code == 0
    assert texts(home, "known") == ["a", "c", "d", "e"]
    assert [(r["id"], r["reason"]) for r in archived_sections(home)] == [("known-2", "evict")]


def test_when_full_refuse_is_a_tool_error_showing_the_fill(home):
    state = {**TASK, "unknown": [entry("unknown-1", "x"), entry("unknown-2", "y")], "section_ids": {"unknown": 2}}
    with_sections(home, state)
    assert run_cycle(home, [update(unknown="APPEND: z"), done("ok")]).exit_code == 0
    assert [e["text"] for e in read_active(home)["unknown"]] == ["x", "y"]
    assert last_update_note(home) == (
        "[TOOL ERROR] update_scratchpad refused: section 'unknown' is full (2/2): remove an entry with "
        "'REMOVE: <id>' first"
    )


def test_the_operators_entries_are_never_evicted(home):
    with_sections(home, {**TASK, "known": ["mine 1", "mine 2", "mine 3", "mine 4"]})
    assert (
        run_cycle(home, [update(known="APPEND: the model's"), update(known="REMOVE: known-1"), done("ok")]).exit_code
        == 0
    )
    assert texts(home, "known") == ["mine 1", "mine 2", "mine 3", "mine 4"] and archived_sections(home) == []
    refusals = [n for n in notes(home) if n.startswith("[TOOL ERROR]")]
    assert "only the operator's entries are left; the operator's entries are never evicted" in refusals[0]
    assert "entry known-1 of 'known' is the operator's: only `agent memory drop` removes it" in refusals[1]


def test_restating_an_entry_on_a_new_day_counts_the_day_and_adds_nothing(home):
    state = {**TASK, "known": known("The NAS is at 10.0.0.5"), "section_ids": {"known": 1}}
    state["known"][0]["last_day"] = "2020-01-01"  # stated long ago
    with_sections(home, state)
    again = update(known="APPEND: the nas   is at 10.0.0.5")  # case and spacing aside
    assert run_cycle(home, [again, again, done("ok")]).exit_code == 0
    (fact,) = read_active(home)["known"]
    assert fact["days"] == 2 and fact["text"] == "The NAS is at 10.0.0.5" and fact["last_day"] > "2020-01-01"
    said = [n for n in notes(home) if n.startswith("[UPDATE]")]
    assert said == [
        "[UPDATE] known: restated known-1 (now 2 days)",
        "[UPDATE] known: restated known-1 (already counted today)",
    ]


def test_the_model_never_sets_a_runtime_owned_field(home):
    with_sections(home, {**TASK, "known": known("a"), "section_ids": {"known": 1}})
    forged = [
        update(known={"id": "known-9", "text": "x", "days": 99}),
        update(section_ids={"known": 0}),
        update(known="APPEND: ok", last_updated="2020-01-01"),
    ]
    assert run_cycle(home, [*forged, done("ok")]).exit_code == 0
    state = read_active(home)
    assert state["known"] == known("a") and state["section_ids"] == {"known": 1}
    errors = [n for n in notes(home) if n.startswith("[TOOL ERROR]")]
    assert len(errors) == 3, errors


def test_one_refused_section_refuses_the_whole_call(home):
    with_sections(home, TASK)
    assert run_cycle(home, [update(now="doing", known="APPEND: x", purpose="mine now"), done("ok")]).exit_code == 0
    state = read_active(home)
    assert state["now"] == "" and state["known"] == []


# ------------------------------------------------------------------------- read-only, by name


READ_ONLY_REFUSAL = (
    "[TOOL ERROR] update_scratchpad refused: section 'purpose' is read-only: only the operator writes it "
    "(agent memory set)"
)


def test_a_read_only_section_is_refused_by_name_on_the_scripted_text_path(home):
    with_sections(home, {**TASK, "purpose": "Keep the NAS alive"})
    assert run_cycle(home, [update(purpose="Mine blocks"), done("ok")]).exit_code == 0
    assert read_active(home)["purpose"] == "Keep the NAS alive"
    assert READ_ONLY_REFUSAL in notes(home)


@pytest.mark.parametrize("path", ["text", "native"])
def test_a_read_only_section_is_refused_by_name_over_http_though_the_schema_leaves_it_out(home, path):
    with_sections(home, {**TASK, "purpose": "Keep the NAS alive"}, tool_calling=path, **FAST)
    call = ("update_scratchpad", {"purpose": "Mine blocks"})
    with OpenAIServer() as server:
        if path == "native":
            server.add(Reply.calls(call), Reply.calls(("done", {"summary": "ok"})))
        else:
            server.add(Reply.chat({"tool": call[0], "args": call[1]}), Reply.chat(done("ok")))
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        first = server.chat_requests[0].body
    assert result.exit_code == 0, result.output
    assert read_active(home)["purpose"] == "Keep the NAS alive" and READ_ONLY_REFUSAL in notes(home)
    offered = json.dumps(first.get("tools") or first.get("response_format") or first["messages"])
    assert '"now"' in offered and '"known"' in offered
    assert '"purpose": {' not in offered  # in the prompt's text, never among the arguments offered


@pytest.mark.parametrize("path", ["text", "native"])
def test_list_and_text_edits_over_http(home, path):
    with_sections(home, {**TASK, "known": known("a"), "section_ids": {"known": 1}}, tool_calling=path, **FAST)
    calls = [
        ("update_scratchpad", {"known": "APPEND: b", "now": "testing"}),
        ("update_scratchpad", {"known": "REMOVE: known-1"}),
    ]
    with OpenAIServer() as server:
        if path == "native":
            server.add(Reply.calls(*calls), Reply.calls(("done", {"summary": "ok"})))
        else:
            server.add(*[Reply.chat({"tool": n, "args": a}) for n, a in calls], Reply.chat(done("ok")))
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"})
    assert result.exit_code == 0, result.output
    assert texts(home, "known") == ["b"] and read_active(home)["now"] == "testing"
    assert [r["id"] for r in archived_sections(home)] == ["known-1"]


# ------------------------------------------------------------------- the per-cycle REMOVE bound


def test_at_most_a_share_of_a_lists_entries_leave_in_one_cycle(home):
    # 4 entries, consolidate_max_loss 0.25: one may leave this cycle; a second REMOVE is refused
    with_sections(home, {**TASK, "known": known("a", "b", "c", "d"), "section_ids": {"known": 4}})
    removes = [update(known="REMOVE: known-1"), update(known="REMOVE: known-2"), update(known="APPEND: e")]
    assert run_cycle(home, [*removes, update(known="REMOVE: known-5"), done("ok")]).exit_code == 0
    assert texts(home, "known") == ["b", "c", "d"]  # e came and went: an entry of this cycle costs nothing
    assert [r["id"] for r in archived_sections(home)] == ["known-1", "known-5"]
    refused = [n for n in notes(home) if n.startswith("[TOOL ERROR]")]
    assert refused == [
        "[TOOL ERROR] update_scratchpad refused: section 'known': cannot remove known-2: 1 of the 4 entries it "
        "began this cycle with have left already, and at most 1 may leave in one cycle (consolidate_max_loss 0.25)"
    ]
    assert run_cycle(home, [update(known="REMOVE: known-2"), done("ok")]).exit_code == 0  # a new cycle, a new share
    assert texts(home, "known") == ["c", "d"]


# -------------------------------------------------------------------------------- the prompt


def user_messages(home) -> list[str]:
    """The user message of every request the home's newest cycle sent (from its transcript)."""
    lines = newest_transcript(home)
    return [[m for m in line["messages"] if m["role"] == "user"][-1]["content"] for line in lines]


MEMORY_STATE = {
    **TASK,
    "purpose": "Keep the NAS alive",
    "known": [entry("known-1", "The NAS is at 10.0.0.5", days=3), entry("known-2", "Backups at 02:00", by="operator")],
    "section_ids": {"known": 2},
}


def test_the_prompt_shows_each_section_with_its_fill_most_stable_first(home):
    with_sections(home, MEMORY_STATE)
    assert run_cycle(home, [update(known="APPEND: The VPN uses WireGuard"), done("ok")]).exit_code == 0
    first, second = user_messages(home)
    assert first.startswith(
        "## Memory\n\n"
        "### purpose (18/200 characters, read-only)\nWhat this agent is for.\n  Keep the NAS alive\n\n"
        "### now (0/120 characters)\nWhat I am doing.\n(empty)\n\n"
        "### known (2/4)\nFacts I am sure of.\n"
        "- [known-1, 3 days] The NAS is at 10.0.0.5\n- [known-2, 1 day, operator] Backups at 02:00\n\n"
    )
    assert "### known (3/4)" in second and "- [known-3, 1 day] The VPN uses WireGuard" in second
    for message in (first, second):  # shown once: never again in the scratchpad's YAML
        scratchpad = message.partition("## Scratchpad")[2]
        assert "10.0.0.5" not in scratchpad and "section_ids" not in scratchpad and "purpose" not in scratchpad
    stable = first.index("### known")  # what a prompt cache keeps: everything before the first change
    assert second[:stable] == first[:stable]


@pytest.mark.parametrize("path", ["text", "native"])
def test_the_fill_reaches_the_endpoint_over_http(home, path):
    with_sections(home, MEMORY_STATE, tool_calling=path, **FAST)
    with OpenAIServer() as server:
        server.add(Reply.calls(("done", {"summary": "ok"})) if path == "native" else Reply.chat(done("ok")))
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        sent = server.chat_requests[0].body["messages"][-1]["content"]
    assert result.exit_code == 0, result.output
    assert "### purpose (18/200 characters, read-only)" in sent and "### known (2/4)" in sent
    assert "- [known-1, 3 days] The NAS is at 10.0.0.5" in sent


def test_a_home_without_sections_sends_the_same_prompt_as_before(home):
    from agent.config import Settings
    from agent.cycle.prompt import user_prompt

    state = {**TASK, "goals": ["g"], "notes": "n", "completed_tasks": [], "last_updated": None}
    with_sections(home, state, sections={})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    (sent,) = user_messages(home)
    assert sent.startswith("## Scratchpad\n\n") and "## Memory" not in sent
    assert sent == user_prompt(read_yaml(snapshots(home, "before")[0]), 1, Settings().max_iterations)


def test_sections_too_large_for_one_prompt_are_shown_clipped_and_the_cycle_runs(home):
    big = {"kind": "list", "limit": 20, "entry_chars": 2000}
    state = {
        **TASK,
        "known": [entry(f"known-{n}", f"{n} " + "x" * 1990) for n in range(1, 21)],
        "section_ids": {"known": 20},
    }
    with_sections(home, state, sections={"known": big}, prompt_max_bytes=12000)
    assert run_cycle(home, [done("ok")]).exit_code == 0
    (sent,) = user_messages(home)
    assert len(sent.encode()) < 12000 and "### known (20/20)" in sent and "characters clipped" in sent
    assert sent.rstrip().endswith("Now: Call the tool that does the task.")
    assert read_active(home)["known"] == state["known"]  # only what the model is shown is clipped
