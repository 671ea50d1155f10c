"""`agent consolidate` through real cycles: an honest rewrite accepted (exit 0, what left archived with
its successor's id, before the state is saved), every hostile reply reverted with active.yaml the
same to the byte (exit 3, the reason in the record and the cycle log), idle with nothing to
consolidate, the lock, the budgets, a failing model, and both paths of the OpenAI-compatible
test server. The replies reuse the pure tests' variants (tests/memory/test_consolidation.py)."""

from __future__ import annotations

import copy
import json

import pytest

from agent.common.outcomes import ExitCode
from agent.store.archive import highest_ids
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.helpers import cycle_records, read_active, read_yaml, run_cli, snapshots, transcript, write_script
from tests.memory.homes import archived_sections, with_sections
from tests.memory.test_consolidation import NAS, OTHERS, STATE, good_reply, kept, listed, merged
from tests.models.openai_server import OpenAIServer, Reply

CONFIG = {
    "purpose": {"kind": "text", "limit": 100, "read_only": True},
    "rules": {"kind": "list", "limit": 5, "read_only": True},
    "now": {"kind": "text", "limit": 100},
    "known": {"kind": "list", "limit": 12, "entry_chars": 80},
    "unknown": {"kind": "list", "limit": 5},
}


def consolidation_home(home, **settings):
    with_sections(home, copy.deepcopy(STATE), sections=CONFIG, **settings)
    return home


def call(args) -> dict:
    return {"tool": "consolidate", "args": args}


def consolidate(home, replies: list, *flags: str):
    script = write_script(home.parent, replies, name=f"consolidate_{len(list(home.parent.glob('consolidate_*')))}.yaml")
    return run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}", "--json", *flags)


def report_of(result) -> dict:
    return json.loads(result.stdout.splitlines()[-1])


def index(home) -> list[dict]:
    return cycle_records(home)


# ------------------------------------------------------------------------------------ accepted


def test_an_honest_consolidation_is_saved_after_what_left_is_archived(home):
    consolidation_home(home)
    result = consolidate(home, [call(good_reply())])
    assert result.exit_code == 0, result.output
    report = report_of(result)
    assert report["stop_reason"] == "consolidated" and report["archived"] == 3 and report["iterations"] == 1
    known = read_active(home)["known"]
    assert [e["id"] for e in known] == ["known-1", "known-2", "known-9", "known-5", "known-6", "known-8"]
    assert known[2]["merged_from"] == ["known-3", "known-4"] and known[2]["by"] == "model"
    assert [(r["id"], r["reason"], r.get("replaced_by")) for r in archived_sections(home)] == [
        ("known-3", "consolidate", "known-9"),
        ("known-4", "consolidate", "known-9"),
        ("known-7", "consolidate", None),
    ]
    state = read_active(home)
    for key in ("purpose", "rules", "now", "unknown", "goals", "notes", "current_task"):
        assert state[key] == STATE[key]  # nothing else changes
    before, after = snapshots(home, "before"), snapshots(home, "after")
    assert len(before) == len(after) == 1 and read_yaml(after[0])["known"] == known
    assert index(home)[-1]["stop_reason"] == "consolidated"
    log = (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()
    assert "consolidated: known: 8 -> 6 entries (2 into successors, 1 archived)" in log


def test_three_near_duplicates_of_five_are_merged_into_one_and_what_it_stands_for_is_shown(home):
    with_sections(home, listed(*NAS, *OTHERS[:2]), sections=CONFIG)
    text = "The NAS address is at 10.0.0.5 (static)"
    result = consolidate(home, [call(merged(read_active(home), text, ["known-1", "known-2", "known-3"]))])
    assert result.exit_code == 0, result.output
    assert [e["text"] for e in read_active(home)["known"]] == [*OTHERS[:2], text]
    assert [(r["id"], r.get("replaced_by")) for r in archived_sections(home)] == [
        ("known-1", "known-6"),
        ("known-2", "known-6"),
        ("known-3", "known-6"),
    ]
    assert consolidate(home, [call({"sections": {}})]).exit_code == 0
    user = transcript(home)[-1]["messages"][-1]["content"]
    assert f"- known-6 [1 day(s), stands for 3] {text}" in user
    assert "A new entry stands for at most 3 original entries." in user


def test_the_request_offers_one_tool_and_shows_each_entrys_strength(home):
    consolidation_home(home)
    assert consolidate(home, [call(good_reply())]).exit_code == 0
    (line,) = transcript(home)
    assert line["purpose"] == "consolidate"
    system, user = line["messages"][0]["content"], line["messages"][-1]["content"]
    assert system.startswith("# Consolidate") and "(a) Every id the section held ends in exactly one place" in system
    assert "## known (8 entries; keep at least 6; at most 12)" in user
    assert "- known-1 [1 day(s), operator] Operator: never reboot the NAS by day" in user
    assert "- known-2 [2 day(s), protected] The NAS is at 10.0.0.5" in user
    assert "## rules" not in user  # read-only: not offered


# ---------------------------------------------------------------------------- hostile replies


def _with(change) -> dict:
    reply = good_reply()
    change(reply)
    return call(reply)


def _drop_protected(reply):
    reply["sections"]["known"] = [e for e in reply["sections"]["known"] if e.get("id") != "known-2"]
    reply["archive"] = ["known-7", "known-2"]


HOSTILE = {
    "a dropped id": (_with(lambda r: r["sections"]["known"].pop()), "(a) known: known-8 is in no place"),
    "an id both kept and cited": (
        _with(lambda r: r["sections"]["known"].append({"id": "known-3"})),
        "known-3 is in 2 places",
    ),
    "a citation of an id that never existed": (
        _with(lambda r: r["sections"]["known"][2]["cites"].append("known-99")),
        "cites known-99, which 'known' never held",
    ),
    "a citation of another section's id": (
        _with(lambda r: r["sections"]["known"][2]["cites"].append("unknown-1")),
        "cites unknown-1, an entry of 'unknown', not of 'known'",
    ),
    "a successor with no citation": (
        _with(lambda r: r["sections"]["known"].append({"text": "A brand new fact", "cites": []})),
        "cites nothing: consolidation merges what is there, it adds no facts",
    ),
    "a successor longer than its sources": (
        _with(
            lambda r: r["sections"]["known"][2].update(
                text="Backups run at 02:00 and take an hour; the root password is x"
            )
        ),
        "longer than its sources together (46)",
    ),
    "one successor citing everything": (
        call(
            {
                "sections": {
                    "known": [{"text": "Many facts", "cites": [f"known-{n}" for n in range(2, 9)]}, *kept("known-1")]
                }
            }
        ),
        "(b) known: 2 entries after, fewer than the 6 that must stay of 8",
    ),
    "a protected entry archived bare": (_with(_drop_protected), "(d) known: known-2 was stated on 2 days"),
    "the operator's entry merged": (
        _with(lambda r: (r["sections"]["known"].pop(0), r["sections"]["known"][1]["cites"].append("known-1"))),
        "(d) known: known-1 is the operator's",
    ),
    "a rewritten read-only section": (call({"sections": {"rules": []}}), "(e) 'rules' is read-only"),
    "a text section rewritten": (call({"sections": {"now": []}}), "(e) 'now' is a text section"),
    "ten thousand entries": (
        call({"sections": {"known": [{"id": f"known-{n}"} for n in range(10_000)]}}),
        "the reply cannot be used: reply is",
    ),
    "runtime fields forged": (
        _with(lambda r: r["sections"]["known"][2].update(days=9, by="operator")),
        "sets the runtime-owned field 'by'",
    ),
    "a successor repeating a kept entry": (
        _with(lambda r: r["sections"]["known"][2].update(text="the nas is at 10.0.0.5")),
        "says what known[1] says",
    ),
    "another tool": ({"tool": "done", "args": {"summary": "tidy"}}, "the reply calls done, not consolidate"),
    "not JSON": ("I merged a few entries for you.", "the reply cannot be used"),
}


@pytest.mark.parametrize("reply, violation", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_reply_is_reverted_and_active_yaml_stays_the_same_to_the_byte(home, reply, violation):
    consolidation_home(home)
    active = home / "scratchpad" / "active.yaml"
    before = active.read_bytes()
    result = consolidate(home, [reply])
    assert result.exit_code == ExitCode.STOPPED, result.output
    report = report_of(result)
    assert report["stop_reason"] == "consolidation_reverted"
    assert active.read_bytes() == before
    assert archived_sections(home) == [] and highest_ids(Home.at(home)) == {}
    assert any(violation in v for v in report["violations"]), report["violations"]
    assert index(home)[-1]["violations"] == report["violations"]
    log = (home / "logs" / f"cycle_{report['cycle_id']}.log").read_text()
    assert any(violation in line for line in log.splitlines() if " reverted: " in line)
    assert read_yaml(snapshots(home, "after")[0]) == read_yaml(snapshots(home, "before")[0])  # diff: nothing


def test_the_plain_output_names_the_violations_in_escaped_lines(home):
    consolidation_home(home)
    script = write_script(home.parent, [call({"sections": {"known\x1b[2J": []}})])
    result = run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 3 and "consolidation_reverted (exit 3)" in result.stdout
    assert "\x1b" not in result.stdout and "is not a section of config.yaml" in result.stdout


# ------------------------------------------------------------------------- idle, lock, budget


def test_with_no_list_entries_it_is_idle_and_calls_no_model(home):
    with_sections(home, {"current_task": "x"}, sections={"now": CONFIG["now"], "known": CONFIG["known"]})
    active = (home / "scratchpad" / "active.yaml").read_bytes()
    result = consolidate(home, [])  # a model with no replies: calling it would fail
    assert result.exit_code == 0 and report_of(result)["stop_reason"] == "idle"
    assert "nothing to consolidate" in report_of(result)["idle"]
    assert snapshots(home, "before") == [] and (home / "scratchpad" / "active.yaml").read_bytes() == active


def test_a_home_without_sections_is_idle_too(home):
    with_sections(home, {"current_task": "x"}, sections={})
    assert report_of(consolidate(home, []))["stop_reason"] == "idle"


def test_a_cycle_holding_the_lock_makes_it_busy_and_wait_queues_it(home):
    consolidation_home(home)
    active = (home / "scratchpad" / "active.yaml").read_bytes()
    with home_lock(Home.at(home)):
        result = consolidate(home, [call(good_reply())])
    assert result.exit_code == ExitCode.BUSY and (home / "scratchpad" / "active.yaml").read_bytes() == active
    assert consolidate(home, [call(good_reply())], "--wait", "5").exit_code == 0


def test_a_failing_model_leaves_active_yaml_as_it_was(home):
    consolidation_home(home)
    active = (home / "scratchpad" / "active.yaml").read_bytes()
    result = consolidate(home, [])  # the script ends at once
    assert result.exit_code == ExitCode.FAILED and report_of(result)["stop_reason"] == "error"
    assert (home / "scratchpad" / "active.yaml").read_bytes() == active and archived_sections(home) == []


def test_a_spent_budget_sends_nothing(home):
    consolidation_home(home, daily_token_budget=100, tool_calling="text", max_retries=1)
    with OpenAIServer() as server:
        spend = {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
        server.add(Reply.chat(call(good_reply()), usage=spend))
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        first = run_cli("consolidate", "--home", str(home), "--model", "openai:test-model", env=env)
        second = run_cli("consolidate", "--home", str(home), "--model", "openai:test-model", "--json", env=env)
        assert len(server.chat_requests) == 1
    assert first.exit_code == 0 and second.exit_code == ExitCode.BUDGET_EXHAUSTED
    assert report_of(second)["stop_reason"] == "budget_exhausted"


# ------------------------------------------------------------------------- over real HTTP


@pytest.mark.parametrize("path", ["text", "native"])
def test_consolidation_over_http(home, path):
    consolidation_home(home, tool_calling=path, max_retries=1, request_timeout=5)
    with OpenAIServer() as server:
        reply = Reply.calls(("consolidate", good_reply())) if path == "native" else Reply.chat(call(good_reply()))
        server.add(reply)
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test"}
        result = run_cli("consolidate", "--home", str(home), "--model", "openai:test-model", env=env)
        sent = server.chat_requests[0].body
    assert result.exit_code == 0, result.output
    assert [e["id"] for e in read_active(home)["known"]][2] == "known-9"
    assert sent["max_tokens"] >= 512  # room for the whole section, at least max_output_tokens
    if path == "native":
        assert [t["function"]["name"] for t in sent["tools"]] == ["consolidate"]


# ----------------------------------------------------------------------- failures and stalls


def test_a_reverted_consolidation_counts_as_a_failure_and_never_toward_a_stall(home):
    from tests.after.test_metrics import samples
    from tests.cli.helpers import echo, run_cycle

    state = {**copy.deepcopy(STATE), "current_task": "work"}
    with_sections(home, state, sections=CONFIG, metrics_file="agent.prom", stall_cycles=2, max_iterations=1)

    def failures() -> float:
        return samples((home / "agent.prom").read_text())[("agent_consecutive_failures", ())]

    assert run_cycle(home, [echo("busy")]).exit_code == 3  # the task ended without done: 1 of 2
    assert consolidate(home, [call({"sections": {"rules": []}})]).exit_code == 3
    assert failures() == 1
    assert consolidate(home, [call({"sections": {"rules": []}})]).exit_code == 3
    assert failures() == 2
    second = run_cycle(home, [echo("busy")])  # 2 of 2: the consolidations between neither counted nor ended it
    assert second.exit_code == ExitCode.STALLED
    assert consolidate(home, [call(good_reply())]).exit_code == 0 and failures() == 0


def test_quiet_prints_one_line_for_a_revert_and_nothing_when_accepted(home):
    consolidation_home(home)
    script = write_script(home.parent, [call({"sections": {"rules": []}})], name="q1.yaml")
    result = run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}", "--quiet")
    assert result.exit_code == 3
    assert result.stdout.splitlines() == [
        "agent consolidate: consolidation_reverted (exit 3): (e) 'rules' is read-only: consolidation cannot rewrite it"
    ]
    script = write_script(home.parent, [call(good_reply())], name="q2.yaml")
    result = run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}", "--quiet")
    assert result.exit_code == 0 and result.stdout == ""
