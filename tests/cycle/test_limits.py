"""Limits: every way a cycle ends without done, asked before each call and told each outcome."""

from __future__ import annotations

import pytest

from agent.common.outcomes import LimitReached, StopReason
from agent.config import Settings
from agent.cycle.limits import SAME_ACTION_WARNING, Limits, action_key
from agent.models.base import ModelTimeout


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _stop(call, *args) -> StopReason:
    with pytest.raises(LimitReached) as caught:
        call(*args)
    return caught.value.reason


def test_the_iteration_cap_stops_the_call_after_the_last():
    limits = Limits(Settings(max_iterations=2))
    limits.before_call()
    limits.before_call()
    assert _stop(limits.before_call) is StopReason.MAX_ITERATIONS


def test_unparseable_replies_in_a_row_stop_and_a_good_one_resets_the_count():
    limits = Limits(Settings(max_parse_errors=2))
    limits.after_reply(None, None, parse_error=True)
    limits.after_reply("echo", {"message": "a"}, parse_error=False)
    limits.after_reply(None, None, parse_error=True)
    limits.before_call()
    limits.after_reply(None, None, parse_error=True)
    assert _stop(limits.before_call) is StopReason.PARSE_ERRORS


def test_the_token_budget_stops_once_spent():
    limits = Limits(Settings(token_budget=100))
    limits.count_tokens(99)
    limits.before_call()
    limits.count_tokens(1)
    assert _stop(limits.before_call) is StopReason.TOKEN_BUDGET


def test_the_time_budget_runs_on_the_given_clock():
    clock = Clock()
    limits = Limits(Settings(time_budget=5.0), clock=clock)
    assert limits.seconds_left() == 5.0
    clock.now += 5.0
    assert limits.out_of_time() and limits.seconds_left() == 0.0
    assert _stop(limits.before_call) is StopReason.TIME_BUDGET
    assert Limits(Settings()).seconds_left() is None


def test_a_model_timeout_is_a_time_budget_stop():
    def slow():
        raise ModelTimeout("cut at the budget's end")

    assert _stop(Limits(Settings()).timed, slow) is StopReason.TIME_BUDGET
    assert Limits(Settings()).timed(lambda x: x + 1, 1) == 2


def test_the_same_action_repeated_stops_and_warns_before_it_does():
    limits = Limits(Settings(repeat_limit=3))
    limits.after_reply("echo", {"message": "a"}, False)
    assert limits.warnings() == []
    limits.after_reply("echo", {"message": "a"}, False)
    assert limits.warnings() == [SAME_ACTION_WARNING]
    assert _stop(limits.after_reply, "echo", {"message": "a"}, False) is StopReason.REPEATED_ACTION


def test_alternating_between_two_actions_stops():
    limits = Limits(Settings(repeat_limit=10))
    a, b = ("echo", {"message": "a"}), ("echo", {"message": "b"})
    for tool, args in (a, b, a):
        limits.after_reply(tool, args, False)
    assert _stop(limits.after_reply, *b, False) is StopReason.REPEATED_ACTION


def test_parse_errors_never_count_as_repeated_actions():
    limits = Limits(Settings(repeat_limit=2, max_parse_errors=10))
    for _ in range(5):
        limits.after_reply(None, None, True)
    assert limits.warnings() == []


def test_an_action_key_is_order_independent_and_none_for_no_action():
    assert action_key("t", {"a": 1, "b": 2}) == action_key("t", {"b": 2, "a": 1})
    assert action_key(None, {}) is None
    assert action_key("t", {"x": object()}) is None
