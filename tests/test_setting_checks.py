"""Setting checks: the one checker of a field's constraints, and the shapes of prices and MCP servers."""

from __future__ import annotations

import pytest

from agent.common.outcomes import UsageError
from agent.setting_checks import MOST_INTEGER, MOST_SECONDS, check_constraints, check_mcp_server, check_prices


@pytest.mark.parametrize(
    "rules, value, message",
    [
        ({}, None, None),
        ({"above": 0}, None, None),  # an unset optional setting passes
        ({"above": 0}, 1, None),
        ({"above": 0}, 0, "must be greater than 0, got 0"),
        ({"minimum": 0}, 0, None),
        ({"minimum": 0}, -1, "must be 0 or more, got -1"),
        ({"minimum": 3, "unit": "tokens"}, 2, "must be at least 3 tokens, got 2"),
        ({"minimum": 0, "maximum": 2}, 2, None),
        ({"minimum": 0, "maximum": 2}, -0.5, "must be between 0 and 2, got -0.5"),
        ({"maximum": 10, "unit": "days"}, 11, "must be at most 10 days, got 11"),
        ({"unit": "seconds"}, MOST_SECONDS, None),
        ({"unit": "seconds"}, MOST_SECONDS + 1, "must be at most 86400 seconds (a day), got 86401.0"),
        ({}, MOST_INTEGER, None),
        ({}, MOST_INTEGER + 1, f"must be at most {MOST_INTEGER}, got {MOST_INTEGER + 1}"),
        ({}, float("inf"), "must be a finite number, got inf"),
        ({}, 1e300, None),  # a float has no ceiling of its own
        ({"minimum": 1}, True, None),  # a flag is not a number here
        ({"unit": "seconds", "maximum": 5}, 6, "must be at most 5 seconds, got 6"),  # its own maximum, not a day
        ({}, "text", None),
        ({"choices": ("a", "b")}, "b", None),
        ({"choices": ("a", "b")}, "c", "must be one of a, b, got 'c'"),
    ],
)
def test_check_constraints_reads_the_fields_rules(rules, value, message):
    if message is None:
        check_constraints("x", value, rules)
    else:
        with pytest.raises(UsageError) as caught:
            check_constraints("x", value, rules)
        assert str(caught.value) == f"setting 'x' {message}"


@pytest.mark.parametrize(
    "prices, message",
    [
        ({"m": {"input": 1}}, "setting 'prices.m' must have exactly the keys input and output"),
        ({"m": {"input": 1, "output": float("nan")}}, "setting 'prices.m.output' must be a number of 0 or more"),
    ],
)
def test_a_price_needs_both_numbers(prices, message):
    with pytest.raises(UsageError, match=message):
        check_prices(prices)
    check_prices({"m": {"input": 0, "output": 0.6}})


@pytest.mark.parametrize(
    "name, server, message",
    [
        ("9lives", {"command": "x"}, "server name '9lives' must be up to 32 letters"),
        ("time", {"command": "  "}, "setting 'mcp_servers.time.command' is empty"),
        ("time", {"command": "x", "env": {"A B": "1"}}, "'A B' is not an environment variable name"),
        ("time", {"command": "x", "args": ["a\0b"]}, "holds a NUL byte"),
    ],
)
def test_an_mcp_server_that_cannot_start_is_refused(name, server, message):
    with pytest.raises(UsageError, match=message):
        check_mcp_server(name, server)
