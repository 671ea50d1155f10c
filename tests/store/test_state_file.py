"""Scratchpad files: what is read is validated, and what is written can always be read back."""

from __future__ import annotations

from agent import schema
from agent.store.home import Home
from agent.store.state_file import load_state, write_state


def test_a_written_state_reads_back_equal(home):
    h = Home.at(home)
    h.ensure_dirs()
    state = dict(schema.fresh_state(), goals=["ship"], notes="multi\nline: notes\n  with: colons")
    write_state(h.active, state)
    assert load_state(h) == state


def test_a_home_without_active_yaml_wakes_to_a_fresh_state(home):
    assert load_state(Home.at(home)) == schema.fresh_state()
