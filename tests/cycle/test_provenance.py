"""Provenance: each section entry's cycle and route, as the runtime saw it, in logs/agent.db
(agent/store/provenance.py), whatever the model or a hand edit writes into active.yaml."""

from __future__ import annotations

import json

import yaml

from agent.store.home import Home
from agent.store.lock import home_lock
from agent.store.provenance import provenance_of
from tests.cli.helpers import done, run_cycle
from tests.cycle.test_consolidate import call, consolidate
from tests.helpers import cycle_records, read_active, run_cli, write_active
from tests.memory.homes import update, with_sections

SECTIONS = {"known": {"kind": "list", "limit": 10, "entry_chars": 80}, "now": {"kind": "text", "limit": 100}}
TASK = {"current_task": "learn", "pending_actions": []}


def route(home, entry_id: str) -> tuple[str, str] | None:
    found = provenance_of(Home.at(home), "known", entry_id)
    return None if found is None else (found["cycle_id"], found["route"])


def newest_cycle(home) -> str:
    return cycle_records(home)[-1]["cycle_id"]


def test_an_entry_the_model_adds_in_the_loop_records_its_cycle_and_the_model_route(home):
    with_sections(home, TASK, sections=SECTIONS)
    assert run_cycle(home, [update(known="APPEND: The NAS is at 10.0.0.5"), done("ok")]).exit_code == 0
    assert route(home, "known-1") == (newest_cycle(home), "model")


def test_an_entry_reflect_adds_records_the_reflect_route(home):
    with_sections(home, TASK, sections=SECTIONS, reflect=True)
    loop = update(known="APPEND: seen in the loop")
    assert run_cycle(home, [loop, done("ok"), update(known="APPEND: seen on reflection")]).exit_code == 0
    cycle_id = newest_cycle(home)
    assert route(home, "known-1") == (cycle_id, "model") and route(home, "known-2") == (cycle_id, "reflect")


def test_an_operator_command_and_a_queued_edit_record_their_routes(home):
    with_sections(home, TASK, sections=SECTIONS)
    assert run_cli("memory", "add", "known", "typed now", "--home", str(home)).exit_code == 0
    assert route(home, "known-1")[1] == "operator"
    with home_lock(Home.at(home)):  # a cycle runs: the edit waits in the inbox
        assert run_cli("memory", "add", "known", "typed while busy", "--home", str(home)).exit_code == 0
    assert run_cycle(home, [done("ok")]).exit_code == 0
    assert route(home, "known-2") == (newest_cycle(home), "wake")


def test_a_successor_records_the_consolidation_route_and_its_sources(home):
    with_sections(home, TASK, sections=SECTIONS)
    facts = [update(known=f"APPEND: Fact {n}") for n in range(1, 5)]
    run_cycle(home, [*facts, done("ok")])
    assert (
        consolidate(
            home,
            [
                call(
                    {
                        "sections": {
                            "known": [
                                {"text": "Facts 1, 2", "cites": ["known-1", "known-2"]},
                                {"id": "known-3"},
                                {"id": "known-4"},
                            ]
                        }
                    }
                )
            ],
        ).exit_code
        == 0
    )
    found = provenance_of(Home.at(home), "known", "known-5")
    assert found["route"] == "consolidation" and found["merged_from"] == ["known-1", "known-2"]
    assert found["cycle_id"] == newest_cycle(home)


def test_a_hand_edit_of_the_runtime_fields_does_not_change_the_provenance_history_shows(home):
    with_sections(home, TASK, sections=SECTIONS)
    run_cycle(home, [update(known="APPEND: The NAS is at 10.0.0.5"), done("ok")])
    cycle_id = newest_cycle(home)
    state = read_active(home)
    state["known"][0].update(by="operator", added="20200101_000000_01")  # forged by hand
    write_active(home, yaml.safe_dump(state, sort_keys=False))
    history = json.loads(run_cli("memory", "--history", "known-1", "--json", "--home", str(home)).stdout)
    assert history["provenance"] == {"by": "model", "cycle_id": cycle_id, "route": "model"}
    out = run_cli("memory", "--history", "known-1", "--home", str(home)).output
    assert f"provenance: cycle {cycle_id}, by the model route (logs/agent.db)" in out


def test_a_home_without_sections_records_no_provenance(home):
    write_active(home, {"current_task": "learn"})
    assert run_cycle(home, [done("ok")]).exit_code == 0
    from agent.store.db import records

    assert records(Home.at(home)).rows("SELECT count(*) FROM provenance") == [(0,)]
