"""The reflect step's one path (agent/memory/reflect.py): the notes are a text section of the one
edit grammar, the old prompt's spellings of it still read; what reflect offers depends on the home.
Through whole cycles: tests/cycle/test_reflect_sections.py."""

from __future__ import annotations

import pytest

from agent.memory.reflect import NOTES_RULES, SECTIONS_RULES, apply, notes_tool, offer, sections_tool
from agent.memory.section_settle import settle
from agent.memory.specs import Edits
from agent.models.replies import ReplyError
from agent.setting_checks import section_specs
from agent.state import fresh_state, taken_keys
from agent.store.archive import Left
from tests.memory.test_sections import CONFIG, DAY1

SPECS = section_specs(CONFIG, taken_keys())
PLAIN = Edits((), {}, DAY1, 1.0)  # a home without operator sections: the notes alone


def notes(text: str) -> dict:
    return {**fresh_state(), "notes": text}


def with_sections(text: str = "", **sections) -> tuple[dict, Edits]:
    state = settle({**notes(text), **sections}, SPECS, DAY1).state
    return state, Edits(SPECS, state, DAY1, 0.25)


def test_notes_take_append_a_replacement_and_clear():
    state = notes("a\nb")
    assert apply(state, {"notes": "APPEND: c"}, PLAIN)[:2] == (notes("a\nb\nc"), [])
    replaced, moved, _ = apply(state, {"notes": "Known: x"}, PLAIN)
    assert replaced["notes"] == "Known: x" and moved == [
        Left("note", "a", "reflect"),
        Left("note", "b", "reflect"),
    ]
    cleared, moved, _ = apply(state, {"notes": "CLEAR"}, PLAIN)
    assert cleared["notes"] == "" and len(moved) == 2


@pytest.mark.parametrize("value", ["append: c", "Append:c", "  APPEND: c  "])
def test_the_old_prompts_append_is_read_case_aside_for_the_notes(value):
    assert apply(notes("a"), {"notes": value}, PLAIN)[0]["notes"] == "a\nc"


def test_the_old_prompts_clear_is_read_case_aside_for_the_notes():
    assert apply(notes("a"), {"notes": "clear"}, PLAIN)[0]["notes"] == ""


def test_a_sections_text_keeps_its_exact_prefixes():
    state, edits = with_sections()
    assert apply(state, {"now": "append: x"}, edits)[0]["now"] == "append: x"  # a replacement, as the grammar says


@pytest.mark.parametrize("value", ["APPEND: ", "APPEND: \u200b", "\u200b\u2800"])
def test_notes_that_would_read_as_nothing_are_refused(value):
    with pytest.raises(ReplyError, match="curate_notes refused: section 'notes'"):
        apply(notes("a"), {"notes": value}, PLAIN)


def test_remove_is_a_lists_and_is_refused_for_the_notes():
    with pytest.raises(ReplyError, match="'REMOVE: <id>' is for list sections"):
        apply(notes("a"), {"notes": "REMOVE: a"}, PLAIN)


def test_with_sections_the_notes_and_a_list_change_in_one_update():
    state, edits = with_sections("old", known=["k"])
    after, moved, done = apply(state, {"notes": "new", "known": "APPEND: fact"}, edits)
    assert after["notes"] == "new" and [e["text"] for e in after["known"]] == ["k", "fact"]
    assert moved == [Left("note", "old", "reflect")] and any("known: added" in line for line in done)


def test_with_sections_a_refused_section_refuses_the_notes_too():
    state, edits = with_sections("old", known=["k"])
    with pytest.raises(ReplyError, match="update_scratchpad refused: section 'purpose' is read-only"):
        apply(state, {"notes": "new", "purpose": "x"}, edits)


def test_what_leaves_a_section_stays_a_section_item():
    state, edits = with_sections(known=["k"])
    state["known"][0]["by"] = "model"
    _, moved, _ = apply(state, {"known": f"REMOVE: {state['known'][0]['id']}"}, edits)
    assert [item.kind for item in moved] == ["section_entry"] and moved[0].reason == "remove"


def test_without_sections_reflect_offers_curate_notes_over_the_whole_scratchpad():
    call = offer(notes("a"), PLAIN)
    assert call.rules == NOTES_RULES and call.tool.name == "curate_notes"
    assert call.prompt.startswith("## Scratchpad\n\n```yaml\n") and call.prompt.endswith(
        "```\n\nCurate the notes now. Reply with one JSON action.\n"
    )
    assert "## Memory" not in call.prompt and notes_tool().args_schema["required"] == ["notes"]


def test_with_sections_reflect_offers_notes_and_the_writable_sections_only():
    tool = sections_tool(SPECS)
    assert tool.name == "update_scratchpad"
    assert list(tool.args_schema["properties"]) == ["notes", "now", "known", "unknown", "tell"]
    assert tool.check_args({}) is None and tool.check_args({"known": "APPEND: x", "notes": "CLEAR"}) is None
    assert tool.check_args({"purpose": "x"}).startswith("unexpected argument 'purpose'")
    assert "Minimal" in SECTIONS_RULES and "Honest" in SECTIONS_RULES and "Forward-looking" in SECTIONS_RULES


def test_with_sections_the_prompt_shows_the_memory_block_first():
    state, edits = with_sections("old", known=["k"])
    prompt = offer(state, edits).prompt
    assert prompt.startswith("## Memory\n") and "\n\n## Scratchpad\n" in prompt and "section_ids" not in prompt
