"""A home's memory on one path (agent/memory/specs.py `Memory`): the operator's sections are more
specs beside the built-in ones, and without any each step is what msa's fields alone make of it.
The modules a plain cycle never loads: tests/cli/test_run.py."""

from __future__ import annotations

import pytest

from agent.common.outcomes import UsageError
from agent.common.safe_yaml import dump_yaml
from agent.memory.builtin import CURRENT_TASK, GOALS, PENDING_ACTIONS, RULES, builtin_specs
from agent.memory.specs import Memory
from agent.state import FIELD_SCHEMAS, FIELDS, fresh_state
from agent.store.home import Home
from tests.memory.test_sections import DAY1, SPECS


def test_without_operator_sections_every_step_leaves_the_state_byte_for_byte_as_it_was(tmp_path):
    memory, home = Memory(), Home.at(tmp_path)
    state = {**fresh_state(), "goals": ["g"], "current_task": "t", "known": ["an operator key"]}
    text = dump_yaml(state)
    memory.checked(state, "active.yaml")
    assert memory.settled(home, state, DAY1).state is state
    assert memory.edits(state, DAY1).split({"notes": "x", "known": "y"}) == ({"notes": "x", "known": "y"}, {})
    assert memory.edits(state, DAY1).problems(state) == [] and memory.problems(state) == (None, [])
    assert memory.block(state) == "" and memory.surfaced(state) is None
    assert memory.added({}, state, DAY1.cycle, "model") == []
    assert dump_yaml(state) == text and not (tmp_path / "logs").exists()


def test_with_operator_sections_an_update_splits_into_the_fields_and_the_sections():
    fields, sections = Memory(SPECS).edits(fresh_state(), DAY1).split({"goals": ["g"], "known": "APPEND: k"})
    assert fields == {"goals": ["g"]} and sections == {"known": "APPEND: k"}


def test_with_operator_sections_a_section_whose_kind_changed_is_refused_before_anything_is_written():
    with pytest.raises(UsageError, match="section 'known' is a list in config.yaml, but active.yaml holds text"):
        Memory(SPECS).checked({**fresh_state(), "known": "a text"}, "active.yaml")


def test_every_field_but_last_updated_is_a_built_in_section_of_the_kind_its_schema_says():
    specs = (GOALS, CURRENT_TASK, PENDING_ACTIONS, *builtin_specs(100, 5))
    assert sorted(spec.name for spec in specs) == sorted(RULES) == sorted(set(FIELDS) - {"last_updated"})
    for spec in specs:
        types = FIELD_SCHEMAS[spec.name]["type"]
        assert ("array" if spec.is_list else "string") in (types if isinstance(types, list) else [types])
    assert {name for name, rules in RULES.items() if rules.owner == "operator"} == {
        "goals",
        "current_task",
        "pending_actions",
    }
