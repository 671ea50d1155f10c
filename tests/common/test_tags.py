"""Note tags: one enum for what a note line says happened and for the dispatcher's outcome kinds."""

from __future__ import annotations

import json

import pytest

from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.gates.approvals import ApprovalGate
from agent.state import fresh_state
from agent.tools import ToolContext, build_registry
from tests.gates.helpers import made

# The strings files keep: note tags in active.yaml and snapshots, action names in the index's `actions` counts.
STABLE = {
    Tag.TOOL: ("[TOOL]", "tool"),
    Tag.UPDATE: ("[UPDATE]", "update"),
    Tag.COMPLETED: ("[COMPLETED]", "done"),
    Tag.PARSE_ERROR: ("[PARSE ERROR]", "parse_error"),
    Tag.UNKNOWN_TOOL: ("[UNKNOWN TOOL]", "unknown_tool"),
    Tag.TOOL_ERROR: ("[TOOL ERROR]", "tool_error"),
    Tag.CHECK_FAILED: ("[CHECK FAILED]", "check_failed"),
    Tag.APPROVAL: ("[APPROVAL]", "parked"),
    Tag.STOPPED: ("[STOPPED]", None),
    Tag.CYCLE_FAILED: ("[CYCLE FAILED]", None),
    Tag.ARCHIVED: ("[ARCHIVED]", None),
    Tag.INBOX: ("[INBOX]", None),
    Tag.WAKE: ("[WAKE]", None),
    Tag.MEMORY: ("[MEMORY]", None),
    Tag.INTERRUPTED: ("[INTERRUPTED]", None),
}


def test_every_tag_keeps_its_note_text_and_action_name():
    assert {tag: (tag.value, tag.action) for tag in Tag} == STABLE


def test_a_line_is_split_back_into_its_tag_and_text():
    assert Tag.of(Tag.PARSE_ERROR.line("not JSON")) == (Tag.PARSE_ERROR, "not JSON")
    assert Tag.of("[not a tag] x") == (None, "[not a tag] x")
    assert Tag.STOPPED.line("") == "[STOPPED]"


@pytest.mark.parametrize(
    "reply, kind",
    [
        ("not json", Tag.PARSE_ERROR),
        ({"tool": "nope", "args": {}}, Tag.UNKNOWN_TOOL),
        ({"tool": "echo", "args": {"message": 5}}, Tag.TOOL_ERROR),
        ({"tool": "echo", "args": {"message": "hi"}}, Tag.TOOL),
        ({"tool": "update_scratchpad", "args": {"notes": "n"}}, Tag.UPDATE),
        ({"tool": "done", "args": {"summary": "ok"}}, Tag.COMPLETED),
        ({"tool": "echo", "args": {"message": "held"}, "gated": True}, Tag.APPROVAL),
    ],
)
def test_an_outcomes_kind_is_the_tag_of_its_note(home, reply, kind):
    gated = isinstance(reply, dict) and reply.pop("gated", False)
    ctx = ToolContext(home, Settings(approval_required=["echo"] if gated else []))
    registry = build_registry(ctx.settings, entry_points=[])
    text = reply if isinstance(reply, str) else json.dumps(reply)
    _, outcome = dispatch(fresh_state(), text, registry, ctx, gates=made(ApprovalGate, home, ctx.settings))
    assert outcome.kind is kind
    assert Tag.of(outcome.note)[0] is kind
    assert outcome.done == (kind is Tag.COMPLETED)
