"""The loop: step() is query + execute until Done, Parked or a limit; the next request carries the
previous Outcome; one Step event per action reaches every subscriber."""

from __future__ import annotations

from pathlib import Path

from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.cycle.events import Events, Step
from agent.cycle.run import run_cycle
from agent.models import Request
from agent.models.scripted import ScriptedModel
from agent.store.home import Home
from tests.cli.helpers import done, echo
from tests.helpers import run_cli, write_active


class Recorder:
    """A scripted model that keeps every request it was sent."""

    guided = False

    def __init__(self, replies: list):
        self.model = ScriptedModel.from_replies(replies)
        self.name = self.model.name
        self.requests: list[Request] = []

    def start(self, log) -> None:
        self.model.start(log)

    def complete(self, request: Request):
        self.requests.append(request)
        return self.model.complete(request)


def cycle(home: Path, replies: list, reporter=None, **settings):
    model = Recorder(replies)
    report = run_cycle(Home(home), Settings(**{"idle": "run", **settings}), model, reporter)
    return report, model.requests


def test_each_request_carries_the_outcome_of_the_action_before_it(home):
    write_active(home, {"current_task": "Echo hi twice", "notes": "an older note"})
    report, requests = cycle(home, [echo("hi"), "not json", done("echoed")])
    assert report.stop_reason == "done" and report.iterations == 3
    assert requests[0].previous is None and "Last result: none yet" in requests[0].user
    first, second = requests[1].previous, requests[2].previous
    assert first.kind is Tag.TOOL and first.tool == "echo" and first.result == "hi"
    assert f"Last result: {first.note}" in requests[1].user
    assert second.kind is Tag.PARSE_ERROR
    assert requests[2].user.splitlines()[-1].startswith("Now: The last action failed")


def test_the_previous_outcome_is_redacted_like_everything_the_model_is_shown(home, monkeypatch):
    secret = "sk-" + "s3cr3t" * 6
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    write_active(home, {"current_task": "t"})
    _, requests = cycle(home, [echo(secret), {"tool": secret, "args": {}}, done("ok")])
    for request in requests[1:]:
        assert secret not in repr(request.previous) and secret not in request.user


def test_after_a_failed_check_the_next_request_says_the_check_failed(home):
    assert (
        run_cli("task", "add", "say hello", "--check", "grep -qx hello hello.txt", "--home", str(home)).exit_code == 0
    )
    write = {"tool": "write_file", "args": {"path": "hello.txt", "content": "hello\n"}}
    report, requests = cycle(home, [done("said hello"), write, done("really said hello")])
    assert report.stop_reason == "done"
    assert requests[1].previous.kind is Tag.CHECK_FAILED
    last_line = requests[1].user.splitlines()[-1]
    assert last_line == "Now: The task's check failed: fix what it reports, then call done again."


def test_one_step_event_per_action_feeds_the_counts_the_log_and_the_progress(home):
    write_active(home, {"current_task": "t"})
    seen = []
    report, _ = cycle(home, [echo("a"), "oops", done("ok")], reporter=lambda event, **data: seen.append((event, data)))
    steps = [data for event, data in seen if event == "iteration"]
    assert [(d["n"], d["outcome"].kind) for d in steps] == [(1, Tag.TOOL), (2, Tag.PARSE_ERROR), (3, Tag.COMPLETED)]
    assert report.actions == {"tool": 1, "parse_error": 1, "done": 1}
    log = (home / "logs" / f"cycle_{report.cycle_id}.log").read_text()
    assert "iteration 2: [PARSE ERROR]" in log and "iteration 3: [COMPLETED] ok" in log


def test_a_limit_ends_the_loop_with_its_stop_reason_and_a_stopped_note(home):
    write_active(home, {"current_task": "t"})
    report, requests = cycle(home, [echo("a"), echo("b")], max_iterations=2)
    assert report.stop_reason == "max_iterations" and len(requests) == 2
    notes = (home / "scratchpad" / "active.yaml").read_text()
    assert "[STOPPED] max_iterations: reached the cap of 2 iterations" in notes


def test_events_reach_every_subscriber_in_the_order_they_subscribed():
    events, heard = Events(), []
    events.subscribe(lambda step: heard.append(("first", step.n)))
    events.subscribe(lambda step: heard.append(("second", step.n)))
    outcome = Outcome(Tag.TOOL, "[TOOL] echo() -> x", "echo", {}, "x")
    events.emit(Step(1, outcome))
    events.emit(Step(2, outcome))
    assert heard == [("first", 1), ("second", 1), ("first", 2), ("second", 2)]
