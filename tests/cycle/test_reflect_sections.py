"""Reflect with sections (seed 000's second phase), through real cycles: after done, max_iterations
or the time budget, never after an approval wait, a stall, a spent budget or a failure; its one tool
is update_scratchpad over the writable sections and notes, under the rules of every update (the
per-cycle REMOVE bound included). Without sections, reflect is what it always was."""

from __future__ import annotations

import json

import pytest

from agent.config import load_settings
from agent.cycle.run import run_cycle as run_in_process
from agent.models.base import Completion, ModelTimeout, Request, Usage
from agent.store.home import Home
from tests.cli.helpers import done, echo, run_cycle
from tests.helpers import read_active, run_openai
from tests.memory.homes import archived_sections, known, newest_transcript, notes, texts, update, with_sections
from tests.models.openai_server import OpenAIServer, Reply

TASK = {"current_task": "learn", "pending_actions": []}
FOUR = {**TASK, "known": known("a", "b", "c", "d"), "section_ids": {"known": 4}}


def report_of(result) -> dict:
    return json.loads(result.stdout.splitlines()[-1])


def transcript(home) -> list[dict]:
    return newest_transcript(home)


def test_reflect_after_done_updates_the_sections_and_notes_with_one_call(home):
    with_sections(home, FOUR, reflect=True)
    reflection = update(known="APPEND: e", now="Reflected", notes="CLEAR")
    result = run_cycle(home, [done("learned"), reflection], "--json")
    assert result.exit_code == 0 and report_of(result)["reflect"] == "applied"
    state = read_active(home)
    assert texts(home, "known") == ["b", "c", "d", "e"] and state["now"] == "Reflected" and state["notes"] == ""
    assert [r["id"] for r in archived_sections(home)] == ["known-1"]  # evicted to make room, archived
    call = transcript(home)[-1]
    assert call["purpose"] == "reflect"
    system, user = call["messages"][0]["content"], call["messages"][-1]["content"]
    assert system.startswith("# Reflect\n\nThe cycle's work is over. You are now the observer")
    assert user.startswith("## Memory\n\n### purpose") and "## Scratchpad" in user


def test_reflects_only_tool_takes_the_writable_sections_and_notes(home):
    with_sections(home, FOUR, reflect=True)
    refused = update(goals=["take over"], purpose="mine")
    result = run_cycle(home, [done("learned"), refused], "--json")
    assert result.exit_code == 0
    assert report_of(result)["reflect"].startswith("kept unreflected: ReplyError: unexpected argument 'goals'")
    assert read_active(home)["goals"] == []


def test_reflect_after_max_iterations(home):
    with_sections(home, FOUR, reflect=True, max_iterations=1)
    result = run_cycle(home, [echo("busy"), update(now="Ran out of steps")], "--json")
    assert report_of(result)["stop_reason"] == "max_iterations" and report_of(result)["reflect"] == "applied"
    assert read_active(home)["now"] == "Ran out of steps"


class TimesOut:
    """A model whose first call runs out of the cycle's time; the next one (reflect) answers."""

    name = "times-out"

    def __init__(self, reply: dict):
        self.reply, self.requests = json.dumps(reply), []

    def start(self, log) -> None:
        pass

    def complete(self, request: Request) -> Completion:
        self.requests.append(request)
        if len(self.requests) == 1:
            raise ModelTimeout("the request ran out of the cycle's time budget")
        return Completion(self.reply, Usage(calls=1))


def test_reflect_after_the_time_budget_has_a_share_of_it_more(home):
    with_sections(home, FOUR, reflect=True, time_budget=40)
    model = TimesOut(update(now="Out of time: resume at step 3"))
    report = run_in_process(Home.at(home), load_settings(home), model)
    assert report.stop_reason == "time_budget" and report.reflect == "applied"
    assert read_active(home)["now"] == "Out of time: resume at step 3"
    assert model.requests[-1].purpose == "reflect" and model.requests[-1].timeout >= 10  # a quarter of 40s


@pytest.mark.parametrize(
    "settings, replies, stop_reason",
    [
        ({"approval_required": ["echo"]}, [echo("gated")], "awaiting_approval"),
        ({"stall_cycles": 1, "max_iterations": 1}, [echo("again")], "stalled"),
        ({}, [], "error"),
    ],
    ids=["approval", "stall", "error"],
)
def test_never_reflect_after_an_approval_wait_a_stall_or_a_failure(home, settings, replies, stop_reason):
    with_sections(home, FOUR, reflect=True, **settings)
    result = run_cycle(home, [*replies, update(now="REFLECTED")], "--json")
    report = report_of(result)
    assert report["stop_reason"] == stop_reason and report["reflect"] is None, report
    assert read_active(home)["now"] != "REFLECTED"


def test_never_reflect_after_a_spent_budget(home):
    with_sections(home, FOUR, reflect=True, tool_calling="text", max_retries=1, daily_token_budget=100)
    with OpenAIServer() as server:
        spend = {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
        server.add(Reply.chat(done("ok"), usage=spend), Reply.chat(update(now="first reflect"), usage=spend))
        assert run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"}).exit_code == 0
        server.add(Reply.chat(update(now="REFLECTED")))
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        assert len(server.chat_requests) == 2  # nothing more was sent: not the loop's call, not reflect's
    assert result.exit_code == 10 and report_of(result)["reflect"] is None
    assert read_active(home)["now"] == "first reflect"


def test_the_per_cycle_remove_bound_holds_across_the_loop_and_reflect(home):
    # 4 entries at 0.25: one may leave in this cycle; the loop spends it, so reflect's REMOVE is refused
    with_sections(home, FOUR, reflect=True)
    replies = [update(known="REMOVE: known-1"), done("ok"), update(known="REMOVE: known-2", now="tidied")]
    result = run_cycle(home, replies, "--json")
    reflect = report_of(result)["reflect"]
    assert reflect.startswith("kept unreflected: ReplyError: update_scratchpad refused: section 'known': cannot remove")
    assert texts(home, "known") == ["b", "c", "d"] and read_active(home)["now"] == ""  # all of reflect, or nothing
    assert [r["id"] for r in archived_sections(home)] == ["known-1"]


def test_reflect_with_sections_takes_a_native_call_over_http(home):
    with_sections(home, FOUR, reflect=True, tool_calling="native", max_retries=1, request_timeout=5)
    with OpenAIServer() as server:
        server.add(
            Reply.calls(("done", {"summary": "ok"})), Reply.calls(("update_scratchpad", {"known": "REMOVE: known-4"}))
        )
        result = run_openai(home, server.base_url, env={"OPENAI_API_KEY": "sk-test"})
        reflect_request = server.chat_requests[-1]
    assert result.exit_code == 0, result.output
    assert reflect_request.tools == ["update_scratchpad"]
    offered = reflect_request.body["tools"][0]["function"]["parameters"]["properties"]
    assert set(offered) == {"notes", "now", "known", "unknown", "tell"}  # the read-only purpose left out
    assert texts(home, "known") == ["a", "b", "c"]


def test_without_sections_reflect_is_the_notes_curation_it_always_was(home):
    with_sections(home, {**TASK, "notes": "old"}, sections={}, reflect=True)
    result = run_cycle(home, [done("ok"), {"tool": "curate_notes", "args": {"notes": "Known: it works"}}], "--json")
    assert report_of(result)["reflect"] == "applied" and read_active(home)["notes"] == "Known: it works"
    call = transcript(home)[-1]
    assert call["messages"][0]["content"].startswith("# Reflect\n\nThe cycle's work is done. Now curate the notes")
    assert "## Memory" not in call["messages"][-1]["content"]
    assert notes(home) == ["Known: it works"]


def test_without_sections_the_old_prompts_lowercase_append_still_adds_a_line(home):
    with_sections(home, {**TASK, "notes": "old"}, sections={}, reflect=True)
    result = run_cycle(home, [done("ok"), {"tool": "curate_notes", "args": {"notes": "append: it works"}}], "--json")
    assert report_of(result)["reflect"] == "applied" and notes(home)[-1] == "it works"


def test_without_sections_a_remove_of_the_notes_keeps_them_unreflected(home):
    with_sections(home, {**TASK, "notes": "old"}, sections={}, reflect=True)
    result = run_cycle(home, [done("ok"), {"tool": "curate_notes", "args": {"notes": "REMOVE: old"}}], "--json")
    assert report_of(result)["reflect"].startswith("kept unreflected: ReplyError: curate_notes refused")
    assert "old" in notes(home) and "REMOVE: old" not in read_active(home)["notes"]
