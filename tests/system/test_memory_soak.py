"""A thousand cycles of a model that learns a new fact every cycle (and restates a recent one every
seventh), in one process with a clock that moves an hour a cycle: every section stays within its
limit after every cycle, every entry that ever left a section is in the archive once with its text,
and the prompt at cycle 1,000 is no more than 5% larger than at cycle 100."""

from __future__ import annotations

import datetime as dt

import pytest

from agent.config import load_settings
from agent.cycle.run import run_cycle
from agent.memory.section_settle import over_limits
from agent.memory.sections import state_problems
from agent.models.scripted import ScriptedModel
from agent.store.archive import archived
from agent.store.home import Home
from tests.helpers import read_active
from tests.memory.homes import with_sections

pytestmark = pytest.mark.slow

CYCLES = 1000
SECTIONS = {
    "purpose": {"kind": "text", "limit": 200, "read_only": True},
    "known": {"kind": "list", "limit": 30, "entry_chars": 80, "description": "Facts I am sure of."},
}
START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def replies(n: int) -> list[dict]:
    learned = [{"tool": "update_scratchpad", "args": {"known": f"APPEND: fact number {n} is true"}}]
    if n % 7 == 0 and n > 5:
        learned.append({"tool": "update_scratchpad", "args": {"known": f"APPEND: fact number {n - 5} is true"}})
    return [*learned, {"tool": "done", "args": {"summary": f"learned {n}"}}]


def test_a_thousand_cycles_of_learning_keep_every_limit_lose_nothing_and_hold_the_prompt(home):
    with_sections(home, {"purpose": "Learn one fact a cycle"}, sections=SECTIONS, keep_cycles=5)
    settings, where = load_settings(home), Home.at(home)
    specs = settings.section_specs
    texts: dict[str, str] = {}  # every id seen in active.yaml -> its text
    prompt = {}
    for n in range(1, CYCLES + 1):
        model = ScriptedModel.from_replies(replies(n))
        report = run_cycle(where, settings, model, clock=lambda n=n: START + dt.timedelta(hours=n))
        assert report.exit_code == 0, (n, report.error)
        state = read_active(home)
        assert over_limits(state, specs) == [] and state_problems(state, specs) == [], n
        texts.update({e["id"]: e["text"] for e in state["known"]})
        prompt[n] = report.prompt_bytes[0]
    state = read_active(home)
    issued = state["section_ids"]["known"]
    assert CYCLES <= issued < CYCLES + CYCLES // 7  # a restated fact already evicted comes back as a new entry
    left = [r for r in archived(where) if r.get("kind") == "section_entry"]
    held = {e["id"] for e in state["known"]}
    assert len(held) == 30 and len(left) == issued - len(held)  # count: each that left, once
    assert {r["id"] for r in left} | held == {f"known-{i}" for i in range(1, issued + 1)}
    assert all(r["value"]["text"] == texts[r["id"]] for r in left)  # text: as it was when it left
    assert max(e["days"] for e in state["known"]) >= 2  # restated on a later day: strength counted
    assert prompt[1000] / prompt[100] <= 1.05, (prompt[100], prompt[1000])
