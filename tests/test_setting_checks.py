"""Setting checks: the one checker of a field's constraints, and the shapes of prices and MCP servers."""

from __future__ import annotations

import pytest

from agent.common.outcomes import UsageError
from agent.setting_checks import (
    MOST_INTEGER,
    MOST_SECONDS,
    SectionSpec,
    by_stability,
    check_constraints,
    check_mcp_server,
    check_prices,
    edit_schemas,
    section_specs,
)


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


# ------------------------------------------------------------------------------------ sections

TAKEN = {"notes": "a field of the scratchpad", "checks": "the acceptance checks of queued tasks"}


def test_a_section_spec_takes_its_defaults_and_keeps_config_order():
    specs = section_specs(
        {
            "known": {"kind": "list", "limit": 30, "description": "Facts I am sure of."},
            "purpose": {"kind": "text", "limit": 600, "read_only": True},
        },
        TAKEN,
    )
    assert specs == (
        SectionSpec("known", "list", 30, "Facts I am sure of.", entry_chars=500),
        SectionSpec("purpose", "text", 600, read_only=True),
    )
    assert [s.name for s in by_stability(specs)] == ["purpose", "known"]


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"Known": {}}, "setting 'sections': section name 'Known' must be 1 to 32 lowercase letters"),
        ({"a" * 33: {}}, "setting 'sections': section name 'aaaa"),
        ({"1st": {}}, "section name '1st' must be"),
        ({"known-facts": {}}, "section name 'known-facts' must be"),
        (
            {"notes": {"kind": "text", "limit": 5}},
            "setting 'sections': 'notes' is already a key of active.yaml (a field",
        ),
        ({"checks": {"kind": "list", "limit": 5}}, "'checks' is already a key of active.yaml (the acceptance checks"),
        ({"k": "text"}, "setting 'sections.k' must be a mapping of kind, limit, entry_chars"),
        ({"k": {"kind": "list", "limit": 3, "limt": 3}}, "setting 'sections.k': unknown key 'limt' (keys: kind, limit"),
        ({"k": {"limit": 3}}, "setting 'sections.k.kind' is missing: text or list"),
        ({"k": {"kind": "lst", "limit": 3}}, "setting 'sections.k.kind' must be one of text, list, got 'lst'"),
        ({"k": {"kind": "list"}}, "setting 'sections.k.limit' is missing: the most entries it holds"),
        ({"k": {"kind": "text"}}, "setting 'sections.k.limit' is missing: the most characters it holds"),
        ({"k": {"kind": "list", "limit": 0}}, "setting 'sections.k.limit' must be between 1 and 1000 entries, got 0"),
        (
            {"k": {"kind": "list", "limit": 2.5}},
            "setting 'sections.k.limit' must be a whole number of entries, got the number",
        ),
        (
            {"k": {"kind": "list", "limit": True}},
            "setting 'sections.k.limit' must be a whole number of entries, got true",
        ),
        ({"k": {"kind": "text", "limit": 100_001}}, "'sections.k.limit' must be between 1 and 100000 characters"),
        (
            {"k": {"kind": "text", "limit": 9, "entry_chars": 5}},
            "setting 'sections.k.entry_chars' is for list sections",
        ),
        ({"k": {"kind": "list", "limit": 9, "entry_chars": 0}}, "'sections.k.entry_chars' must be between 1 and 10000"),
        (
            {"k": {"kind": "list", "limit": 9, "when_full": "drop"}},
            "'sections.k.when_full' must be one of archive, refuse",
        ),
        (
            {"k": {"kind": "list", "limit": 9, "read_only": "yes"}},
            "'sections.k.read_only' must be true or false, got the text",
        ),
        (
            {"k": {"kind": "list", "limit": 9, "surface": 1}},
            "'sections.k.surface' must be true or false, got the number 1",
        ),
        (
            {"k": {"kind": "list", "limit": 9, "description": "a\nb"}},
            "'sections.k.description' must be one line of text",
        ),
        ({"k": {"kind": "list", "limit": 9, "description": "x" * 501}}, "'sections.k.description' is 501 characters"),
        ({f"s{n}": {"kind": "text", "limit": 1} for n in range(33)}, "defines 33 sections; at most 32"),
        (
            {"a": {"kind": "list", "limit": 1000, "entry_chars": 10_000}},
            "setting 'sections' could hold 10,100,000 characters in all",
        ),
    ],
)
def test_a_wrong_section_is_refused_naming_it_and_its_key(sections, message):
    with pytest.raises(UsageError) as caught:
        section_specs(sections, TAKEN)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_sections_edit_schema_says_its_rules_and_read_only_ones_are_not_offered():
    specs = section_specs(
        {
            "known": {"kind": "list", "limit": 30, "entry_chars": 200, "description": "Facts."},
            "purpose": {"kind": "text", "limit": 600, "read_only": True},
            "now": {"kind": "text", "limit": 300},
        },
        TAKEN,
    )
    schemas = edit_schemas(specs)
    assert list(schemas) == ["now", "known"]  # the most stable first; read-only left out
    assert schemas["known"]["type"] == "string"
    assert schemas["known"]["description"].startswith("Facts. List of at most 30 entries, each one line of at most 200")
    assert '"REMOVE: <id>"' in schemas["known"]["description"]
    assert '"CLEAR" empties it' in schemas["now"]["description"]
