"""The pieces of `agent diff`, `history`, `show` and `status` (agent/cli/inspect.py) that turn a
record or a home into what a person reads, fed the odd records a hand-edited index holds. The
commands over real homes are in tests/cli/test_diff.py, test_history.py and test_show.py."""

from __future__ import annotations

import datetime as dt

import click
import pytest

from agent.cli.history import KILLED, RUNNING
from agent.cli.inspect import _configured_model, _current_task, _last_cycle, _last_cycle_line, _styled_diff_line
from agent.store.home import Home
from tests.helpers import write_active


def _ago(seconds: float) -> str:
    """A time stamp `seconds` before now (made in the test, not at import: the suite may run long)."""
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)).isoformat()


def test_the_last_cycle_ended_its_duration_after_it_started():
    last = _last_cycle(
        {
            "cycle_id": "c",
            "started": _ago(3630),
            "duration_s": 600,
            "source": "index",
            "stop_reason": "done",
            "exit_code": 0,
            "model": "openai:m",
        }
    )
    assert 3030 <= last["age_s"] < 3060 and 3630 <= last["started_age_s"] < 3660
    assert _last_cycle_line(last) == "c done (exit 0) on openai:m, ended 50m ago"  # 30 s to spare


@pytest.mark.parametrize("duration", [None, "600", True, [1], -0.0])
def test_a_duration_that_is_not_a_number_counts_as_none(duration):
    last = _last_cycle({"cycle_id": "c", "started": _ago(3630), "duration_s": duration, "source": "index"})
    assert 3590 < last["age_s"] < 3700


def test_a_record_without_a_usable_start_has_no_age():
    last = _last_cycle({"cycle_id": "c", "started": "whenever", "source": "index", "stop_reason": None})
    assert last["age_s"] is None and last["started_age_s"] is None
    assert _last_cycle_line(last) == "c ?"


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (RUNNING, ""),
        (KILLED, " (no record: it died before it saved, by a signal it cannot catch)"),
        ("incomplete", " (no record: its record was lost)"),
    ],
)
def test_a_cycle_without_a_record_says_why_and_when_it_started(reason: str, said: str):
    last = _last_cycle({"cycle_id": "c", "started": _ago(3630), "source": "snapshots", "stop_reason": reason})
    assert last["age_s"] is None
    assert _last_cycle_line(last) == f"c {reason}{said}, started 1h ago"


def test_a_model_that_is_not_text_is_left_out():
    last = _last_cycle({"cycle_id": "c", "source": "index", "model": {"name": "x"}, "exit_code": 4})
    assert _last_cycle_line(last) == "c ? (exit 4)"


def test_the_configured_model_or_the_config_problem(tmp_path):
    (tmp_path / "config.yaml").write_text("model: openai:gpt-x\n")
    assert _configured_model(tmp_path) == ("openai:gpt-x", None)
    (tmp_path / "config.yaml").write_text("model: [broken\n")
    model, problem = _configured_model(tmp_path)
    assert model is None and "config.yaml" in problem


def test_the_task_now_or_why_active_yaml_cannot_be_read(home):
    h = Home.at(home)
    assert _current_task(h) == (None, None)
    write_active(home, {"current_task": "now this"})
    assert _current_task(h) == ("now this", None)
    write_active(home, "current_task: [broken\n")
    task, problem = _current_task(h)
    assert task is None and "active.yaml" in problem


@pytest.mark.parametrize(
    ("line", "style"),
    [
        ("+++ after", {"bold": True}),
        ("--- before", {"bold": True}),
        ("@@ -1 +1 @@", {"fg": "cyan"}),
        ("+added", {"fg": "green"}),
        ("-removed", {"fg": "red"}),
    ],
)
def test_diff_lines_are_styled_by_their_first_characters(line: str, style: dict):
    assert _styled_diff_line(line) == click.style(line, **style)
    assert _styled_diff_line(" context") == " context"
