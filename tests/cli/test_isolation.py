"""`agent fork` and `agent replay` never touch the live home's side effects: a copy's config.yaml
leaves out on_cycle_end, metrics_file, wake_when and mcp_servers (unless asked), says so, and
keeps the operator's other lines and comments as written."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from agent.cli.isolation import SIDE_EFFECT_SETTINGS, without_settings
from agent.config import config_values
from tests.cli.helpers import cycle_ids, done, run_cycle
from tests.helpers import run_cli, write_active, write_script

SOURCE = Path("config.yaml")


def marker_command(path: Path) -> list[str]:
    """A program that appends a line to `path` (what it read on stdin, if anything) and exits 0."""
    code = f"import sys; open({str(path)!r}, 'a').write('ran ' + sys.stdin.read(200).replace(chr(10), ' ') + chr(10))"
    return [sys.executable, "-c", code]


@pytest.fixture
def live(home: Path, tmp_path: Path) -> dict:
    """A live home whose hook, metrics file, wake_when and MCP server each leave a mark outside the
    home when they run, after one real cycle that ran all but the MCP server."""
    outside = tmp_path / "outside"
    outside.mkdir()
    marks = {name: outside / f"{name}.log" for name in ("hook", "wake", "mcp")}
    metrics = outside / "textfile" / "agent.prom"
    metrics.parent.mkdir()
    hook, wake = marker_command(marks["hook"]), marker_command(marks["wake"])
    (home / "config.yaml").write_text(
        "# the live agent: its alerts, its metrics, what wakes it\n"
        "max_iterations: 4\n"
        f"on_cycle_end: {json.dumps(hook)}\n"
        "notify_on: [done, error]\n"
        f"metrics_file: {metrics}\n"
        "wake_when:\n" + "".join(f"  - {json.dumps(arg)}\n" for arg in wake) + "stall_cycles: 7   # kept\n"
    )
    write_active(home, {"current_task": "one", "pending_actions": ["two", "three"]})
    assert run_cycle(home, [done("did one")]).exit_code == 0
    assert marks["hook"].exists() and marks["wake"].exists() and metrics.exists()  # the live home ran them
    # an MCP server that marks the moment it starts (then fails): the fork must never start it
    server = marker_command(marks["mcp"])
    with (home / "config.yaml").open("a") as config:
        config.write(
            f"mcp_servers:\n  notes:\n    command: {json.dumps(server[0])}\n    args: {json.dumps(server[1:])}\n"
        )
    return {"home": home, "marks": [*marks.values(), metrics], "outside": outside}


def digests(paths: list[Path]) -> dict[str, str | None]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths}


def test_a_fork_runs_a_cycle_and_the_live_homes_hook_log_and_metrics_file_stay_byte_identical(live, tmp_path):
    home, marks = live["home"], live["marks"]
    before = digests(marks)
    target = tmp_path / "branch"
    result = run_cli("fork", f"{cycle_ids(home)[0]}:before", str(target), "--home", str(home))
    assert result.exit_code == 0, result.output
    assert (
        "left out of its config.yaml: on_cycle_end, metrics_file, wake_when, mcp_servers (they act beyond the home"
        in result.stdout
    )
    assert run_cycle(target, [done("did one on the branch")]).exit_code == 0
    assert run_cycle(target, [done("did two on the branch")]).exit_code == 0
    assert digests(marks) == before  # the hook log, the wake log, the metrics file: not a byte; no MCP server
    config = (target / "config.yaml").read_text()
    assert config.startswith("# the live agent: its alerts, its metrics, what wakes it\nmax_iterations: 4\n")
    assert "stall_cycles: 7   # kept" in config and "# on_cycle_end: left out by agent fork" in config
    values = config_values(config, SOURCE)
    assert values == {"max_iterations": 4, "notify_on": ["done", "error"], "stall_cycles": 7}


def test_fork_json_names_what_it_left_out_and_keep_side_effects_keeps_all_of_it(live, tmp_path):
    home = live["home"]
    data = json.loads(run_cli("fork", "latest", str(tmp_path / "a"), "--home", str(home), "--json").stdout)
    assert data["left_out"] == list(SIDE_EFFECT_SETTINGS)
    result = run_cli("fork", "latest", str(tmp_path / "b"), "--home", str(home), "--keep-side-effects", "--json")
    assert json.loads(result.stdout)["left_out"] == []
    assert (tmp_path / "b" / "config.yaml").read_text() == (home / "config.yaml").read_text()


def test_a_fork_of_a_home_without_side_effects_says_nothing_of_them(home, tmp_path):
    (home / "config.yaml").write_text("max_iterations: 3\n")
    assert run_cycle(home, [done("ok")]).exit_code == 0
    result = run_cli("fork", "latest", str(tmp_path / "b"), "--home", str(home))
    assert result.exit_code == 0 and "left out" not in result.stdout
    assert (tmp_path / "b" / "config.yaml").read_text() == "max_iterations: 3\n"


def test_a_fork_of_a_home_whose_config_does_not_load_exits_2_and_makes_nothing(home, tmp_path):
    assert run_cycle(home, [done("ok")]).exit_code == 0
    (home / "config.yaml").write_text("on_cycle_end: [x]\nmax_iterations: many\n")
    result = run_cli("fork", "latest", str(tmp_path / "b"), "--home", str(home))
    assert result.exit_code == 2 and not (tmp_path / "b").exists()
    assert result.stderr == (
        f"agent: error: cannot fork: {home}/config.yaml: setting 'max_iterations' must be an integer, got the text \"many\"\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "{max_iterations: 4, on_cycle_end: [notify], metrics_file: m.prom}\n",  # flow style: written anew
        "max_iterations: 4\non_cycle_end:\n- notify\n- --now\nmetrics_file: m.prom\n",  # a list at column 0
        "on_cycle_end: &b [shell]\napproval_required: *b\n",  # an anchor the cut would break
        "'on_cycle_end': [notify]\n\n\nmax_iterations: 4  # four\n",
    ],
)
def test_whatever_the_configs_layout_the_copy_loads_as_exactly_the_other_settings(text):
    values = config_values(text, SOURCE)
    cut, dropped = without_settings(text, SOURCE, SIDE_EFFECT_SETTINGS, "agent fork")
    assert dropped and set(dropped) <= {"on_cycle_end", "metrics_file"}
    assert config_values(cut, SOURCE) == {k: v for k, v in values.items() if k not in dropped}


def test_a_replay_touches_none_of_the_live_homes_side_effects_and_a_kept_copy_holds_none(live):
    home, marks = live["home"], live["marks"]
    before = digests(marks)
    script = write_script(home.parent, [done("replayed")], name="replay.yaml")
    first = cycle_ids(home)[0]
    result = run_cli("replay", first, "--home", str(home), "--model", f"scripted:{script}", "--keep", "--json")
    assert result.exit_code == 0, result.output
    scratch = Path(json.loads(result.stdout)["scratch_home"])
    assert digests(marks) == before
    assert set(config_values((scratch / "config.yaml").read_text(), SOURCE)) == {
        "max_iterations",
        "notify_on",
        "stall_cycles",
    }
    # the kept copy, run later as a home of its own, reaches nothing of the live home's either
    assert run_cycle(scratch, [done("later")]).exit_code == 0
    assert digests(marks) == before
