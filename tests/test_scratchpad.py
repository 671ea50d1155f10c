"""Scratchpad files: what is read is validated, and what is written can always be read back."""

from __future__ import annotations

import pytest

from agent.common.outcomes import InvalidScratchpad
from agent.common.safe_yaml import dump_yaml
from agent.scratchpad import (
    MAX_SCRATCHPAD_BYTES,
    StateTooLarge,
    load_state,
    read_state_file,
    state_size_problem,
    write_state,
)
from agent.state import fresh_state
from agent.store.home import Home


def state_of_size(size: int) -> dict:
    """A valid state whose YAML is exactly `size` bytes."""
    state = dict(fresh_state(), notes="")
    overhead = len(dump_yaml(dict(state, notes="x")).encode()) - 1
    return dict(state, notes="x" * (size - overhead))


def test_a_written_state_reads_back_equal(home):
    h = Home.at(home)
    h.ensure_dirs()
    state = dict(fresh_state(), goals=["ship"], notes="multi\nline: notes\n  with: colons")
    write_state(h.active, state)
    assert load_state(h) == state


def test_a_home_without_active_yaml_wakes_to_a_fresh_state(home):
    assert load_state(Home.at(home)) == fresh_state()


def test_the_size_a_state_may_be_written_at_is_exactly_the_size_it_may_be_read_at(home):
    h = Home.at(home)
    h.ensure_dirs()
    largest = state_of_size(MAX_SCRATCHPAD_BYTES)
    assert state_size_problem(largest) is None
    write_state(h.active, largest)
    assert read_state_file(h.active, h.root) == largest
    too_big = state_of_size(MAX_SCRATCHPAD_BYTES + 1)
    assert state_size_problem(too_big) == (
        f"the scratchpad would be {MAX_SCRATCHPAD_BYTES + 1:,} bytes, over the {MAX_SCRATCHPAD_BYTES:,}-byte limit"
    )


def test_a_state_too_big_to_read_back_is_not_written(home):
    """One reply of 5 MB of goals must not brick the home: it is refused before writing."""
    h = Home.at(home)
    h.ensure_dirs()
    write_state(h.active, fresh_state())
    before = h.active.read_bytes()
    huge = dict(fresh_state(), goals=["g" * 1000] * 5000)
    assert "over the 4,194,304-byte limit" in state_size_problem(huge)
    with pytest.raises(StateTooLarge, match=r"active.yaml: not written: the scratchpad would be [\d,]+ bytes"):
        write_state(h.active, huge)
    assert h.active.read_bytes() == before
    assert sorted(p.name for p in h.scratchpad.iterdir()) == ["active.yaml"]
    assert issubclass(StateTooLarge, InvalidScratchpad)
