"""Exit codes and stop reasons: one definition each, and how they map."""

from __future__ import annotations

import pytest

from agent.common.outcomes import AgentError, ExitCode, LimitReached, StopReason


@pytest.mark.parametrize(
    "reason, code",
    [
        (StopReason.DONE, ExitCode.DONE),
        (StopReason.ERROR, ExitCode.FAILED),
        (StopReason.AWAITING_APPROVAL, ExitCode.AWAITING_APPROVAL),
        (StopReason.STALLED, ExitCode.STALLED),
        (StopReason.BUDGET_EXHAUSTED, ExitCode.BUDGET_EXHAUSTED),
        (StopReason.MAX_ITERATIONS, ExitCode.STOPPED),
        (StopReason.PARSE_ERRORS, ExitCode.STOPPED),
        (StopReason.TOKEN_BUDGET, ExitCode.STOPPED),
        (StopReason.TIME_BUDGET, ExitCode.STOPPED),
        (StopReason.REPEATED_ACTION, ExitCode.STOPPED),
        (StopReason.CONSOLIDATED, ExitCode.DONE),
        (StopReason.CONSOLIDATION_REVERTED, ExitCode.STOPPED),
    ],
)
def test_every_stop_reason_has_its_exit_code(reason, code):
    assert reason.exit_code is code


def test_the_values_files_and_schedulers_read_are_stable():
    assert [int(c) for c in ExitCode] == [0, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert {r.value for r in StopReason} == {
        "done",
        "max_iterations",
        "parse_errors",
        "token_budget",
        "time_budget",
        "repeated_action",
        "awaiting_approval",
        "stalled",
        "budget_exhausted",
        "held",
        "error",
        "idle",
        "consolidated",
        "consolidation_reverted",
    }


def test_a_limit_carries_its_reason_and_message():
    stop = LimitReached(StopReason.TOKEN_BUDGET, "used 10 tokens")
    assert stop.reason is StopReason.TOKEN_BUDGET and str(stop) == "used 10 tokens"


def test_every_operator_facing_error_has_its_exit_code():
    assert {error.__name__: error.exit_code for error in AgentError.__subclasses__()}.items() >= {
        "UsageError": ExitCode.USAGE,
        "Busy": ExitCode.BUSY,
        "InvalidScratchpad": ExitCode.INVALID_SCRATCHPAD,
        "DiskError": ExitCode.DISK,
    }.items()
    assert AgentError.exit_code is ExitCode.FAILED


def test_a_failure_is_a_failed_cycle_or_a_reverted_consolidation_and_nothing_else():
    from agent.common.outcomes import is_failure

    assert {r for r in StopReason if r.is_failure} == {StopReason.ERROR, StopReason.CONSOLIDATION_REVERTED}
    assert is_failure("consolidation_reverted") and is_failure("error")
    assert not any(is_failure(value) for value in ("done", "stalled", "idle", "consolidated", None, 7, "bogus"))
