"""Property-based tests (hypothesis): whatever a model replies, whatever arguments it sends to
update_scratchpad, whatever bytes sit in active.yaml, the runtime never raises and never holds
a state that is not schema-valid and reloadable.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.common.outcomes import InvalidScratchpad
from agent.common.safe_yaml import dump_yaml, load_yaml
from agent.common.tags import Tag
from agent.config import Settings
from agent.cycle.dispatch import dispatch
from agent.scratchpad import read_state_file
from agent.secrets import Secrets
from agent.state import FIELD_SCHEMAS, normalize, problems
from agent.tools import ToolContext, build_registry

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

# ------------------------------------------------------------------------------ strategies

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30))
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
plain_values = st.recursive(  # what a state may hold in an operator's own key: no NaN (NaN != NaN)
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=30)),
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(sorted(FIELD_SCHEMAS)) | st.text(max_size=15)
# Arguments that are often right, sometimes wrong in type, sometimes unknown fields.
good_values = {
    "goals": st.lists(st.text(max_size=20), max_size=3),
    "current_task": st.none() | st.text(max_size=20),
    "pending_actions": st.lists(st.text(max_size=20), max_size=3),
    "completed_tasks": st.lists(
        st.text(max_size=20) | st.dictionaries(st.text(max_size=8), st.none() | st.text(max_size=20), max_size=3),
        max_size=3,
    ),
    "notes": st.text(max_size=60),
    "last_updated": st.text(max_size=20),
}
update_args = st.one_of(
    st.dictionaries(field_names, json_values, max_size=4),
    st.fixed_dictionaries({}, optional={name: strat for name, strat in good_values.items()}),
    json_values,
)
valid_states = st.fixed_dictionaries(
    {name: strat for name, strat in good_values.items() if name != "last_updated"},
    optional={"last_updated": st.none() | st.just("2024-01-01T00:00:00+00:00"), "operator_key": plain_values},
)
# Tools that touch only the (temporary) home; shell and http_get are turned off for fuzzing.
tool_names = st.sampled_from(
    [
        "update_scratchpad",
        "done",
        "echo",
        "read_file",
        "write_file",
        "append_file",
        "list_dir",
        "shell",
        "http_get",
        "no_such_tool",
    ]
) | st.text(max_size=12)


@st.composite
def replies(draw) -> str:
    tool = draw(tool_names)
    args = draw(update_args if tool == "update_scratchpad" else json_values)
    action = {"tool": tool, "args": args} if draw(st.booleans()) else draw(json_values)
    try:
        body = json.dumps(action, ensure_ascii=draw(st.booleans()))
    except ValueError:
        body = str(action)
    form = draw(st.sampled_from(["bare", "fenced", "prose", "truncated", "junk"]))
    if form == "fenced":
        return f"Here you go:\n```json\n{body}\n```\n"
    if form == "prose":
        return f"{draw(st.text(max_size=20))} {body} {draw(st.text(max_size=20))}"
    if form == "truncated":
        return body[: draw(st.integers(0, len(body)))]
    if form == "junk":
        return draw(st.text(max_size=80))
    return body


# -------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    home = tmp_path_factory.mktemp("fuzzhome")
    (home / "notes.txt").write_text("hello\n")
    cfg = Settings(tools_disabled=["shell", "http_get"])
    return build_registry(cfg), ToolContext(home, cfg, Secrets(["supersecretvalue123"]))


def assert_valid_and_reloadable(state: dict) -> None:
    assert problems(state) == []
    text = dump_yaml(state)
    assert load_yaml(text) == state
    json.dumps(state)  # and the prompt/index side can serialise it


# ----------------------------------------------------------------------------------- tests


@FUZZ
@given(state=valid_states, reply=st.one_of(replies(), st.text(), json_values))
def test_dispatch_never_raises_and_state_stays_valid(env, state, reply):
    registry, ctx = env
    state = normalize(state)
    assert problems(state) == []
    frozen = copy.deepcopy(state)
    new, outcome = dispatch(state, reply, registry, ctx)
    assert state == frozen  # the input is never mutated
    assert isinstance(outcome.kind, Tag) and outcome.note
    assert_valid_and_reloadable(new)
    assert new["completed_tasks"][: len(state["completed_tasks"])] == state["completed_tasks"]
    assert new["last_updated"] == state["last_updated"]  # runtime-owned: never set by the model
    if not (outcome.kind is Tag.UPDATE and "notes" in outcome.args):  # the model may set notes outright
        assert new["notes"].startswith(state["notes"])  # otherwise notes only grow


@FUZZ
@given(state=valid_states, args=update_args)
def test_update_scratchpad_with_arbitrary_args(env, state, args):
    registry, ctx = env
    state = normalize(state)
    new, outcome = dispatch(state, json.dumps({"tool": "update_scratchpad", "args": args}), registry, ctx)
    assert_valid_and_reloadable(new)
    assert new["completed_tasks"][: len(state["completed_tasks"])] == state["completed_tasks"]
    assert new["last_updated"] == state["last_updated"]
    if outcome.kind is Tag.UPDATE and isinstance(args, dict):
        for key, value in args.items():
            if key == "completed_tasks":
                assert new[key] == state[key] + value  # extended, never replaced
            elif key == "notes":
                assert new[key].startswith(value)  # then the [UPDATE] line is appended
            else:
                assert new[key] == value


@FUZZ
@given(state=valid_states, replies_list=st.lists(replies(), min_size=1, max_size=6))
def test_a_sequence_of_replies_keeps_every_intermediate_state_valid(env, state, replies_list):
    registry, ctx = env
    state = normalize(state)
    for reply in replies_list:
        new, outcome = dispatch(state, reply, registry, ctx)
        assert_valid_and_reloadable(new)
        assert new["completed_tasks"][: len(state["completed_tasks"])] == state["completed_tasks"]
        state = new
        if outcome.done:
            break


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    data=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(str.encode),
        valid_states.map(lambda s: dump_yaml(s).encode()),
    )
)
def test_read_state_file_accepts_valid_or_refuses_clearly(tmp_path_factory, data):
    """Arbitrary bytes in active.yaml: either a valid state or InvalidScratchpad, nothing else."""
    folder = tmp_path_factory.mktemp("read")
    path = Path(folder) / "active.yaml"
    path.write_bytes(data)
    try:
        state = read_state_file(path, Path(folder))
    except InvalidScratchpad as exc:
        assert str(exc).startswith(str(path))
        return
    assert state is not None
    assert_valid_and_reloadable_lenient(state)


def assert_valid_and_reloadable_lenient(state: dict) -> None:
    """A loaded state may hold operator keys with YAML-only types (dates, sets): YAML round trip only."""
    assert problems(state) == []
    assert load_yaml(dump_yaml(state)) == state or _has_nan(state)


def _has_nan(value) -> bool:
    if isinstance(value, float):
        return value != value
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False
