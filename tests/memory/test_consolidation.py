"""Consolidation: a rewrite of list sections accepted only under the citation invariant (pure level).

Every hostile reply here must come back Reverted, with the violation named and the state it was
given untouched to the byte (the command that runs it, in a later step, then leaves active.yaml as it was)."""

from __future__ import annotations

import copy
import json
import tracemalloc

import pytest

from agent.common.safe_yaml import dump_yaml
from agent.memory.builtin import Change, Stamp
from agent.memory.consolidation import (
    MOST_VIOLATIONS,
    Reverted,
    check_consolidation,
    consolidatable,
    consolidate_tool,
    parse_consolidation,
    reply_cap,
)
from agent.memory.section_edits import apply_edits, operator_edit
from agent.memory.section_settle import settle
from agent.memory.sections import specs_by_name
from agent.setting_checks import section_specs
from agent.state import SECTION_IDS_KEY, fresh_state, taken_keys
from agent.store.archive import Left

DAY1 = Stamp("20260116_101500_01", "2026-01-16")
DAY2 = Stamp("20260117_090000_01", "2026-01-17")
RUN = Stamp("20260120_030000_01", "2026-01-20")

SPECS = section_specs(
    {
        "purpose": {"kind": "text", "limit": 100, "read_only": True},
        "rules": {"kind": "list", "limit": 5, "read_only": True},
        "now": {"kind": "text", "limit": 100},
        "known": {"kind": "list", "limit": 12, "entry_chars": 80},
        "unknown": {"kind": "list", "limit": 5},
    },
    taken_keys(),
)
BY_NAME = specs_by_name(SPECS)
TEXTS = [
    "Operator: never reboot the NAS by day",  # known-1, the operator's
    "The NAS is at 10.0.0.5",  # known-2, stated on 2 days
    "Backups run at 02:00",  # known-3
    "Backups take about an hour",  # known-4
    "The printer is on floor 2",  # known-5
    "The VPN uses WireGuard",  # known-6
    "Mail goes out through smtp.example.org",  # known-7
    "The disk was 80% full on Monday",  # known-8
]


def memory() -> dict:
    state = settle(fresh_state(), SPECS, DAY1).state
    state = operator_edit(state, BY_NAME["known"], "add", TEXTS[0], DAY1).state
    for text in TEXTS[1:]:
        state = apply_edits(state, SPECS, {"known": f"APPEND: {text}"}, start=state, max_loss=1, stamp=DAY1).state
    state = apply_edits(state, SPECS, {"known": f"APPEND: {TEXTS[1]}"}, start=state, max_loss=1, stamp=DAY2).state
    for text in ("Who owns the printer", "The VPN's address"):
        state = apply_edits(state, SPECS, {"unknown": f"APPEND: {text}"}, start=state, max_loss=1, stamp=DAY1).state
    state = operator_edit(state, BY_NAME["rules"], "add", "Ask before deleting", DAY1).state
    return state


STATE = memory()


def kept(*ids: str) -> list[dict]:
    return [{"id": i} for i in ids]


def good_reply() -> dict:
    return {
        "sections": {
            "known": [
                *kept("known-1", "known-2"),
                {"text": "Backups run at 02:00 and take an hour", "cites": ["known-3", "known-4"]},
                *kept("known-5", "known-6", "known-8"),
            ]
        },
        "archive": ["known-7"],
    }


def consolidate(args, state: dict = STATE, max_loss: float = 0.25):
    return check_consolidation(state, SPECS, args, max_loss=max_loss, stamp=RUN)


def reverted_with(args, expected: str, state: dict = STATE, max_loss: float = 0.25) -> Reverted:
    """The reply is reverted with a violation containing `expected`, and the state is untouched."""
    before = dump_yaml(state)
    result = consolidate(args, state, max_loss)
    assert isinstance(result, Reverted), result
    assert any(expected in v for v in result.violations), result.violations
    assert dump_yaml(state) == before
    return result


# ---------------------------------------------------------------------------------- accepted


def test_an_honest_consolidation_merges_archives_and_keeps_the_rest():
    result = consolidate(good_reply())
    assert isinstance(result, Change), result
    known = result.state["known"]
    assert [e["id"] for e in known] == ["known-1", "known-2", "known-9", "known-5", "known-6", "known-8"]
    assert known[2] == {
        "id": "known-9",
        "text": "Backups run at 02:00 and take an hour",
        "by": "model",
        "added": RUN.cycle,
        "days": 1,
        "last_day": "2026-01-16",
        "merged_from": ["known-3", "known-4"],
    }
    assert known[:2] == STATE["known"][:2]  # kept as they were, strength and all
    assert result.state[SECTION_IDS_KEY]["known"] == 9
    by_id = {e["id"]: e for e in STATE["known"]}
    assert result.leaving == (
        Left.from_section("known", by_id["known-3"], "consolidate", "known-9"),
        Left.from_section("known", by_id["known-4"], "consolidate", "known-9"),
        Left.from_section("known", by_id["known-7"], "consolidate"),
    )
    assert result.leaving[0].record()["replaced_by"] == "known-9"
    assert result.notes == ("known: 8 -> 6 entries (2 into successors, 1 archived)",)
    for name in ("purpose", "rules", "now", "unknown", "goals", "notes"):
        assert result.state[name] == STATE[name]  # a section it does not name, and every field, unchanged


def test_a_successor_earns_nothing_its_weakest_source_lacked():
    reply = {
        "sections": {
            "known": [
                {"text": "The NAS is at 10.0.0.5; backups at 02:00", "cites": ["known-2", "known-3"]},
                *kept("known-1", "known-4", "known-5", "known-6", "known-7", "known-8"),
            ]
        }
    }
    result = consolidate(reply)
    successor = result.state["known"][0]
    assert (successor["days"], successor["last_day"], successor["by"]) == (1, "2026-01-16", "model")


def test_a_reply_that_names_nothing_changes_nothing():
    result = consolidate({"sections": {}})
    assert isinstance(result, Change) and result.state == STATE and result.leaving == ()


def test_rewording_one_entry_into_a_shorter_successor_is_accepted():
    reply = {
        "sections": {
            "unknown": [{"text": "Printer owner?", "cites": ["unknown-1"]}, {"id": "unknown-2"}],
        }
    }
    result = consolidate(reply)
    assert isinstance(result, Change)
    assert result.state["unknown"][0]["merged_from"] == ["unknown-1"]


# ------------------------------------------------------------------------ hostile replies (a)


def test_a_dropped_id_is_reverted():
    reply = good_reply()
    reply["sections"]["known"].pop()  # known-8 nowhere
    reverted_with(reply, '(a) known: known-8 is in no place: keep it ({"id": "known-8"}), cite it')


def test_an_id_both_kept_and_cited_is_reverted():
    reply = good_reply()
    reply["sections"]["known"].append({"id": "known-3"})
    reverted_with(reply, "(a) known: known-3 is in 2 places (cited by known[2], kept); it must be in exactly one")


def test_an_id_kept_twice_or_archived_twice_is_reverted():
    reply = good_reply()
    reply["archive"] = ["known-7", "known-7"]
    reverted_with(reply, "known-7 is in 2 places (archived, archived)")


def test_a_citation_of_an_id_that_never_existed_is_reverted():
    reply = good_reply()
    reply["sections"]["known"][2]["cites"].append("known-99")
    reverted_with(reply, "(a) known[2] cites known-99, which 'known' never held")


def test_a_citation_of_another_sections_id_is_reverted():
    reply = good_reply()
    reply["sections"]["known"][2]["cites"].append("unknown-1")
    reverted_with(reply, "(a) known[2] cites unknown-1, an entry of 'unknown', not of 'known'")


def test_archiving_from_a_section_the_reply_does_not_rewrite_is_reverted():
    reply = good_reply()
    reply["archive"].append("unknown-2")
    reverted_with(reply, "(a) archive names unknown-2 of 'unknown', a section the reply does not rewrite")
    reply["archive"] = ["known-7", "rules-1"]
    reverted_with(reply, "(a) archive names rules-1 of 'rules', a section the reply does not rewrite")


def test_archiving_an_id_no_section_held_is_reverted():
    reply = good_reply()
    reply["archive"].append("known-0")
    reverted_with(reply, "(a) archive names known-0, which no section held")


# ------------------------------------------------------------------------ hostile replies (b)


def test_one_successor_citing_everything_breaks_the_shrink_bound():
    reply = {"sections": {"unknown": [{"text": "Open questions", "cites": ["unknown-1", "unknown-2"]}]}}
    reverted_with(reply, "(b) unknown: 1 entries after, fewer than the 2 that must stay of 2")
    everything = {
        "sections": {"known": [{"text": "Many facts", "cites": [f"known-{n}" for n in range(2, 9)]}, *kept("known-1")]}
    }
    reverted_with(everything, "(b) known: 2 entries after, fewer than the 6 that must stay of 8")


def test_archiving_more_than_the_share_is_reverted():
    reply = {
        "sections": {"known": kept("known-1", "known-2", "known-3", "known-4", "known-5")},
        "archive": ["known-6", "known-7", "known-8"],
    }
    reverted_with(reply, "(b) known: 5 entries after, fewer than the 6 that must stay of 8")


# ------------------------------------------------------------------------ hostile replies (c)


def test_a_successor_with_no_citation_is_reverted():
    reply = good_reply()
    reply["sections"]["known"].append({"text": "A brand new fact", "cites": []})
    reverted_with(reply, "(c) known[6] cites nothing: consolidation merges what is there, it adds no facts")


def test_a_successor_longer_than_its_sources_is_reverted():
    reply = good_reply()
    reply["sections"]["known"][2]["text"] = "Backups run at 02:00 and take an hour and also the CEO's password is x"
    reverted_with(reply, "(c) known[2] is 70 characters, longer than its sources together (46)")


def test_a_successor_over_entry_chars_is_reverted():
    reply = {
        "sections": {
            "known": [{"text": "y" * 81, "cites": [f"known-{n}" for n in range(3, 9)]}, *kept("known-1", "known-2")]
        }
    }
    reverted_with(reply, "(c) known[0] is 81 characters, over entry_chars (80)")


@pytest.mark.parametrize("text", ["two\nlines", "", "   ", 7, None])
def test_a_successor_whose_text_is_not_one_line_is_reverted(text):
    reply = good_reply()
    reply["sections"]["known"][2]["text"] = text
    reverted_with(reply, "(c) known[2]: a successor's text must be one line of text")


def test_a_successor_that_repeats_a_kept_entry_is_reverted():
    # known-2 (2 days) "merged" into a copy of known-3: the NAS's address is gone from the section, the
    # check's ids all add up, and "Backups run at 02:00" stands twice, once with 2 days it never earned.
    reply = {
        "sections": {
            "known": [
                *kept("known-1", "known-3", "known-4", "known-5", "known-6", "known-7", "known-8"),
                {"text": "backups  run at 02:00", "cites": ["known-2"]},
            ]
        }
    }
    reverted_with(reply, "(c) known[7] says what known[1] says (case and spacing aside)")
    reply["sections"]["known"].insert(0, reply["sections"]["known"].pop())  # the successor first
    reverted_with(reply, "(c) known[2] says what known[0] says (case and spacing aside)")


@pytest.mark.parametrize("char", ["\u200b", "\u034f", "\ufe0f", "\u115f", "\u3164", "\u2800", "\u00a0"])
def test_a_successor_that_repeats_a_kept_entry_but_for_an_invisible_character_is_reverted(char):
    # known-2's fact laundered away: its successor reads exactly as known-3 does
    reply = {
        "sections": {
            "known": [
                *kept("known-1", "known-3", "known-4", "known-5", "known-6", "known-7", "known-8"),
                {
                    "text": f"Backups{char} run at 02:00{char}",
                    "cites": ["known-2"],
                },
            ]
        }
    }
    reverted_with(reply, "(c) known[7] says what known[1] says")


def test_a_successor_that_reads_as_nothing_is_reverted():
    reply = good_reply()
    reply["sections"]["known"][2]["text"] = "\u200b\u2800\u3164"
    reverted_with(reply, "(c) known[2]: a successor's text must be one line of text")


def test_two_successors_saying_the_same_are_reverted():
    reply = good_reply()
    reply["sections"]["known"] = [e for e in reply["sections"]["known"] if e.get("id") != "known-8"]
    reply["sections"]["known"].append({"text": "The printer is on floor 2", "cites": ["known-8"]})
    reply["sections"]["known"][3] = {"text": "The printer is on floor 2", "cites": ["known-5"]}
    reverted_with(reply, "(c) known[5] says what known[3] says (case and spacing aside)")


# ------------------------------------------------------------------------ hostile replies (d)


def test_a_protected_entry_archived_bare_is_reverted():
    reply = good_reply()
    reply["sections"]["known"] = [e for e in reply["sections"]["known"] if e.get("id") != "known-2"]
    reply["archive"] = ["known-2"]
    reverted_with(
        reply, "(d) known: known-2 was stated on 2 days: keep it or cite it from a successor; it is never archived bare"
    )


def test_an_operator_entry_is_never_archived_nor_merged():
    reply = good_reply()
    reply["sections"]["known"] = reply["sections"]["known"][1:]
    reply["archive"] = ["known-7", "known-1"]
    reverted_with(reply, "(d) known: known-1 is the operator's: keep it as it is; it is never merged or archived")
    merged = good_reply()
    merged["sections"]["known"] = merged["sections"]["known"][1:]
    merged["sections"]["known"][1]["cites"].append("known-1")
    merged["sections"]["known"][1]["text"] = "Backups: 02:00, an hour; no reboots by day"
    reverted_with(merged, "(d) known: known-1 is the operator's")


def test_a_protected_entry_may_be_merged():
    reply = {
        "sections": {
            "known": [
                {"text": "The NAS (10.0.0.5) backs up at 02:00", "cites": ["known-2", "known-3"]},
                *kept("known-1", "known-4", "known-5", "known-6", "known-7", "known-8"),
            ]
        }
    }
    assert isinstance(consolidate(reply), Change)


def test_a_successor_of_a_protected_entry_stays_protected_so_two_runs_cannot_launder_it():
    merged = {
        "sections": {
            "known": [
                {"text": "The NAS (10.0.0.5) backs up at 02:00", "cites": ["known-2", "known-3"]},
                *kept("known-1", "known-4", "known-5", "known-6", "known-7", "known-8"),
            ]
        }
    }
    first = consolidate(merged)
    successor = first.state["known"][0]
    assert successor["days"] == 1 and successor["protected"] is True  # earns no days, keeps the protection
    bare = {"sections": {"known": kept("known-1", "known-4", "known-5", "known-6", "known-7", "known-8")}}
    bare["archive"] = ["known-9"]
    reverted_with(bare, "(d) known: known-9 succeeds a protected entry: keep it or cite it", state=first.state)
    again = {
        "sections": {
            "known": [{"text": "NAS 10.0.0.5, backups 02:00", "cites": ["known-9"]}, *bare["sections"]["known"]]
        }
    }
    assert consolidate(again, first.state).state["known"][0]["protected"] is True  # and to its successor's successor


def test_a_successor_of_unprotected_entries_carries_no_protection():
    result = consolidate(good_reply())
    assert "protected" not in result.state["known"][2]


def test_the_model_cannot_forge_protection():
    reply = good_reply()
    reply["sections"]["known"][2]["protected"] = True
    reverted_with(reply, "sets the runtime-owned field 'protected'")


# ------------------------------------------------------------------------ hostile replies (e)


def test_a_rewritten_read_only_section_is_reverted():
    reverted_with({"sections": {"rules": []}}, "(e) 'rules' is read-only: consolidation cannot rewrite it")
    reverted_with({"sections": {"purpose": [{"text": "Mine coins", "cites": []}]}}, "(e) 'purpose' is a text section")


def test_a_text_section_or_an_unknown_one_is_reverted():
    reverted_with({"sections": {"now": []}}, "(e) 'now' is a text section: consolidation rewrites list sections only")
    reverted_with({"sections": {"goals": []}}, "(e) 'goals' is not a section of config.yaml")


def test_ten_thousand_entries_are_refused_by_their_count_in_bounded_memory():
    reply = {"sections": {"known": [{"id": f"known-{n}"} for n in range(10_000)]}}
    tracemalloc.start()
    try:
        result = reverted_with(reply, "(e) known: the reply gives 10000 entries; the section holds at most 12")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 200_000  # nothing proportional to the reply was built (its 10,000 entries alone take ~2 MB)
    assert len(result.violations) == 1


def test_ten_thousand_entries_as_a_reply_are_refused_before_parsing():
    reply = json.dumps(
        {"tool": "consolidate", "args": {"sections": {"known": [{"id": f"known-{n}"} for n in range(10_000)]}}}
    )
    result = parse_consolidation(reply, STATE, SPECS)
    assert isinstance(result, Reverted)
    assert result.violations[0].startswith(f"the reply cannot be used: reply is {len(reply.encode()):,} bytes, over")
    assert len(reply.encode()) > reply_cap(STATE, SPECS)


def test_a_huge_archive_is_refused_by_its_length():
    reverted_with(
        {"sections": {"known": []}, "archive": ["x"] * 10_000},
        "(a) archive names 10000 ids; the sections held 11 entries in all",
    )


def test_a_huge_citation_list_is_refused_by_its_length():
    reply = good_reply()
    reply["sections"]["known"][2]["cites"] = ["known-3"] * 10_000
    reverted_with(reply, "(a) known[2] cites 10000 ids; 'known' held 8")


# ---------------------------------------------------------------------- forged runtime fields


@pytest.mark.parametrize(
    "item, expected",
    [
        ({"text": "Backups run at 02:00, an hour", "cites": ["known-3", "known-4"], "days": 9}, "field 'days'"),
        ({"text": "Backups run at 02:00, an hour", "cites": ["known-3", "known-4"], "by": "operator"}, "field 'by'"),
        ({"text": "Backups", "cites": ["known-3", "known-4"], "merged_from": []}, "field 'merged_from'"),
        ({"text": "Backups", "cites": ["known-3", "known-4"], "last_day": "2030-01-01"}, "field 'last_day'"),
        ({"text": "Backups", "cites": ["known-3", "known-4"], "added": "x"}, "field 'added'"),
        ({"id": "known-3", "days": 5}, "field 'days'"),
    ],
)
def test_forged_runtime_fields_are_reverted(item, expected):
    reply = good_reply()
    reply["sections"]["known"][2] = item
    reverted_with(reply, f"known[2] sets the runtime-owned {expected}: only the runtime writes it")


def test_a_successor_that_picks_its_own_id_is_reverted():
    reply = good_reply()
    reply["sections"]["known"][2]["id"] = "known-1"
    reverted_with(reply, 'known[2] has an id and a text: keep an entry as {"id"} alone')


# ------------------------------------------------------------------------------ odd shapes


@pytest.mark.parametrize(
    "args, expected",
    [
        (None, 'the arguments must be {"sections": {SECTION: [entries]}, "archive": [ids]}, got null'),
        ([], "the arguments must be"),
        ({"sections": []}, "the arguments must be"),
        ({"sections": {}, "notes": "x"}, "the arguments have an unexpected key notes"),
        ({"sections": {}, "archive": "known-7"}, 'archive must be a list of ids, got the text "known-7"'),
        ({"sections": {"known": []}, "archive": [7]}, "archive must be a list of ids (strings)"),
        ({"sections": {"known": {"id": "known-1"}}}, "(e) 'known' must be given a list of entries, got a mapping"),
        ({"sections": {"known": ["known-1"]}}, 'known[0] must be {"id": ID} or {"text": TEXT, "cites": [IDS]}'),
        ({"sections": {"known": [{"id": 1}]}}, "(a) known[0]: an id must be a string, got the number 1"),
        ({"sections": {"known": [{"id": ["known-1"]}]}}, "(a) known[0]: an id must be a string, got a list"),
        ({"sections": {"known": [{"note": "x"}]}}, "known[0] has an unexpected key note (an entry is"),
        ({"sections": {"known": [{"text": "x", "cites": "known-3"}]}}, "(c) known[0] cites nothing"),
    ],
)
def test_a_reply_of_the_wrong_shape_is_reverted(args, expected):
    reverted_with(args, expected)


def test_a_reply_breaking_every_rule_gets_a_bounded_answer():
    reply = {"sections": {"known": []}, "archive": []}
    wide = copy.deepcopy(STATE)
    wide["known"] = [
        {"id": f"known-{n}", "text": "x", "by": "model", "added": "a", "days": 1, "last_day": "2026-01-01"}
        for n in range(1, 101)
    ]
    many = section_specs({"known": {"kind": "list", "limit": 100}}, taken_keys())
    result = check_consolidation(wide, many, reply, max_loss=0.25, stamp=RUN)
    assert isinstance(result, Reverted)
    assert len(result.violations) == MOST_VIOLATIONS + 1
    assert result.violations[-1] == f"... and {100 + 1 - MOST_VIOLATIONS} more"


def test_an_id_in_a_thousand_places_gets_a_violation_of_one_short_line():
    # Each of 1,000 successors cites known-1 (and its own id): the violation must not list 1,000 places.
    wide = copy.deepcopy(STATE)
    wide["known"] = [
        {"id": f"known-{n}", "text": f"fact {n}", "by": "model", "added": "a", "days": 1, "last_day": "2026-01-01"}
        for n in range(1, 1001)
    ]
    many = section_specs({"known": {"kind": "list", "limit": 1000, "entry_chars": 300}}, taken_keys())
    items = [{"text": f"f {n}", "cites": ["known-1", f"known-{n}"]} for n in range(2, 1001)]
    result = check_consolidation(wide, many, {"sections": {"known": items}}, max_loss=0.25, stamp=RUN)
    assert isinstance(result, Reverted)
    assert result.violations[0].startswith(
        "(a) known: known-1 is in 999 places (cited by known[0], cited by known[1], "
    )
    assert max(len(v) for v in result.violations) < 300


def test_a_cut_loss_fraction_of_zero_allows_rewording_but_no_shrink():
    reply = {"sections": {"unknown": [{"text": "Printer owner?", "cites": ["unknown-1"]}, {"id": "unknown-2"}]}}
    assert isinstance(consolidate(reply, max_loss=0), Change)
    archive = {"sections": {"unknown": [{"id": "unknown-2"}]}, "archive": ["unknown-1"]}
    reverted_with(archive, "(b) unknown: 1 entries after, fewer than the 2 that must stay of 2", max_loss=0)


# ------------------------------------------------------------------------------ the offered tool


def test_the_tool_offers_only_the_writable_list_sections_and_accepts_an_honest_reply():
    assert [s.name for s in consolidatable(SPECS)] == ["known", "unknown"]
    tool = consolidate_tool(SPECS)
    assert list(tool.args_schema["properties"]["sections"]["properties"]) == ["known", "unknown"]
    assert tool.check_args(good_reply()) is None
    assert "unexpected key 'rules'" in tool.check_args({"sections": {"rules": []}})


def test_parse_consolidation_reads_the_call_or_says_why_not():
    text = json.dumps({"tool": "consolidate", "args": good_reply()})
    assert parse_consolidation(text, STATE, SPECS) == good_reply()
    other = parse_consolidation(json.dumps({"tool": "done", "args": {}}), STATE, SPECS)
    assert other == Reverted(("the reply calls done, not consolidate",))
    assert parse_consolidation("no json here", STATE, SPECS).violations[0].startswith("the reply cannot be used:")


def test_a_reply_of_the_largest_honest_size_fits_the_cap():
    full = copy.deepcopy(STATE)
    spec = BY_NAME["known"]
    full["known"] = [
        {"id": f"known-{n}", "text": "é" * 80, "by": "model", "added": "a", "days": 1, "last_day": "2026-01-01"}
        for n in range(1, 13)
    ]
    reply = {
        "tool": "consolidate",
        "args": {
            "sections": {
                "known": [{"text": "\u00e9" * 79 + chr(0x4E00 + n), "cites": [f"known-{n}"]} for n in range(1, 13)]
            }
        },
    }
    text = json.dumps(reply, indent=2)  # escaped: six bytes a character
    assert len(text.encode()) <= reply_cap(full, SPECS)
    assert isinstance(check_consolidation(full, SPECS, reply["args"], max_loss=0.25, stamp=RUN), Change)
    assert spec.entry_chars == 80


def test_a_long_or_odd_id_is_shown_clipped_in_the_violation():
    reply = good_reply()
    reply["sections"]["known"][2]["cites"].append("k" * 10_000)
    result = reverted_with(reply, '(a) known[2] cites the text "kkkk')
    assert max(len(v) for v in result.violations) < 300
    reverted_with(
        {"sections": {"known": []}, "archive": ["a\nforged line"]}, 'archive names the text "a\\nforged line"'
    )
    reverted_with({"sections": {"x" * 500: []}}, '(e) the text "xxxx')


# ------------------------------------------------- merges that lose nothing (b), lineage (f)

NAS = ["The NAS is at 10.0.0.5", "The NAS address is 10.0.0.5", "the NAS is at 10.0.0.5 (static)"]
OTHERS = ["Backups run at 02:00", "The VPN uses WireGuard", "The printer is on floor 2", "Mail uses smtp"]
FACTS = [
    f"Fact {word} holds" for word in "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
]


def listed(*texts: str) -> dict:
    """A state whose `known` list holds `texts` as the model's entries known-1..., each of one day."""
    state = settle(fresh_state(), SPECS, DAY1).state
    for text in texts:
        state = apply_edits(state, SPECS, {"known": f"APPEND: {text}"}, start=state, max_loss=1, stamp=DAY1).state
    return state


def merged(state: dict, text: str, cites: list[str]) -> dict:
    """`known` with `cites` merged into one successor of `text`, the rest kept in order."""
    rest = [{"id": e["id"]} for e in state["known"] if e["id"] not in cites]
    return {"sections": {"known": [*rest, {"text": text, "cites": cites}]}}


def test_three_near_duplicates_of_five_merged_into_one_are_applied():
    state = listed(*NAS, *OTHERS[:2])
    result = consolidate(
        merged(state, "The NAS address is at 10.0.0.5 (static)", ["known-1", "known-2", "known-3"]), state
    )
    assert isinstance(result, Change), result
    assert [e["text"] for e in result.state["known"]] == [*OTHERS[:2], "The NAS address is at 10.0.0.5 (static)"]
    assert result.state["known"][-1]["merged_from"] == ["known-1", "known-2", "known-3"]
    assert [item.replaced_by for item in result.leaving] == ["known-6"] * 3


def test_a_merge_of_near_duplicates_that_drops_a_word_costs_what_any_merge_costs():
    state = listed(*NAS, *OTHERS[:2])
    reverted_with(
        merged(state, "The NAS is at 10.0.0.5", ["known-1", "known-2", "known-3"]), "(b) known: 3 entries after", state
    )


def test_a_merge_of_different_facts_keeping_every_word_costs_what_any_merge_costs():
    state = listed(*OTHERS, "The disk is full")
    text = "Backups run at 02:00 The VPN uses WireGuard printer is on floor 2"
    reverted_with(merged(state, text, ["known-1", "known-2", "known-3"]), "(b) known: 3 entries after", state)


def test_one_successor_citing_a_whole_section_is_reverted():
    state = listed(*NAS, *OTHERS[:2])
    reverted_with(
        merged(state, " ".join([*NAS, *OTHERS[:2]])[:80], [f"known-{n}" for n in range(1, 6)]),
        "(f) known[0] would stand for 5",
        state,
    )


def test_one_successor_citing_a_whole_section_of_near_duplicates_is_reverted():
    state = listed(
        "The NAS is at 10.0.0.5", "The NAS is at 10.0.0.5 now", "The NAS is still at 10.0.0.5", "NAS at 10.0.0.5"
    )
    reverted_with(
        merged(state, "The NAS is still at 10.0.0.5 now", [f"known-{n}" for n in range(1, 5)]),
        "(f) known[0] would stand for 4",
        state,
    )


def test_ten_entries_into_four_successors_citing_three_each_is_reverted():
    # each merge keeps every word of three near-identical sources ("Fact alpha holds", ...): each costs
    # one entry, so three such merges are still more than a run may take of ten
    state = listed(*FACTS[:10])
    words = [fact.split()[1] for fact in FACTS[:10]]
    reply = {
        "sections": {
            "known": [
                *[
                    {
                        "text": f"Fact {', '.join(words[n : n + 3])} holds",
                        "cites": [f"known-{n + k + 1}" for k in range(3)],
                    }
                    for n in (0, 3, 6)
                ],
                {"text": FACTS[9], "cites": ["known-10"]},
            ]
        }
    }
    reverted_with(reply, "(b) known: 4 entries after, fewer than the 5 that must stay of 10", state)


def test_five_to_three_to_one_over_two_nights_is_reverted_the_second_night():
    state = listed(*NAS, *OTHERS[:2])
    first = consolidate(
        merged(state, "The NAS address is at 10.0.0.5 (static)", ["known-1", "known-2", "known-3"]), state
    )
    assert isinstance(first, Change)
    night2 = first.state
    reverted_with(
        merged(night2, "The NAS is 10.0.0.5; backups at 02:00; VPN WireGuard", ["known-4", "known-5", "known-6"]),
        "(f) known[0] would stand for 5",
        night2,
    )
    reverted_with(
        merged(night2, "The NAS address is at 10.0.0.5 (static); Backups run at 02:00", ["known-4", "known-6"]),
        "(f) known[1] would stand for 4",
        night2,
    )


def test_a_chain_of_merges_never_ends_with_one_line_standing_for_a_dozen_facts():
    # night after night, the newest successor merged with one more fact: each merge alone is within (b)
    state, words, newest = listed(*FACTS), [fact.split()[1] for fact in FACTS], "known-1"
    for night in range(1, 12):
        reply = merged(state, f"Fact {', '.join(words[: night + 1])} holds", [newest, f"known-{night + 1}"])
        result = consolidate(reply, state)
        if isinstance(result, Reverted):
            break
        state, newest = result.state, result.state["known"][-1]["id"]
    assert night == 3  # the third merge would make one line stand for 4 facts
    assert any("would stand for 4 original entries" in v for v in result.violations), result.violations
    assert state["known"][-1]["stands_for"] == 3 and state["known"][-1]["merged_from"] == ["known-13", "known-3"]


def test_what_an_entry_stands_for_cannot_be_forged():
    state = listed(*NAS, *OTHERS[:2])
    reply = merged(state, "The NAS is at 10.0.0.5", ["known-1", "known-2"])
    reply["sections"]["known"][-1]["stands_for"] = 1
    reverted_with(reply, "sets the runtime-owned field 'stands_for'", state)
