"""Nothing the model made runs on the host, and no documented host command follows its links:
as root and as an ordinary user, in real cycles.

- An acceptance check runs the model's code (`python3 -m unittest` imports its test_*.py). Where
  no sandbox can start, it is refused with a note, never run quietly on the host; only
  `checks_unsandboxed: true` runs it there, and the cycle log and doctor say so.
- `wake_when` is the operator's and runs on the host: the recipe docs/operations.md gives for a
  file in the inbox must not follow a link the model made to /etc or to the home's own files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.sandbox_support import sandbox_required  # noqa: F401 - a fixture
from tests.users import AgentUser, done, everything_in

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
PLANTED = """\
import os, unittest
here = os.path.dirname(os.path.abspath(__file__))
for target in (os.path.join(here, '..', 'planted-by-the-model'), '/tmp/planted-by-the-model-{tag}'):
    try:
        with open(target, 'w') as out:
            out.write(open(os.path.join(here, '..', 'config.yaml')).read())
    except OSError:
        pass
class T(unittest.TestCase):
    def test_passes(self):
        pass
"""


def _checked_home(user: AgentUser, tag: str, check: str = "python3 -m unittest", **config) -> Path:
    """A home whose task's check runs the workspace's test_planted.py, which (wherever it runs) tries
    to copy the home's config.yaml beside the home and into the host's /tmp."""
    Path(f"/tmp/planted-by-the-model-{tag}").unlink(missing_ok=True)
    home = user.make_home({"shell_policy": "auto", "max_iterations": 3, **config})
    (home / "workspace" / "test_planted.py").write_text(PLANTED.format(tag=tag))
    user.give(home / "workspace" / "test_planted.py")
    added = user.agent("task", "add", "write the tests", "--check", check, "--home", str(home))
    assert added.returncode == 0, added.stderr
    return home


def _no_sandbox(user: AgentUser) -> dict:
    """An environment in which bwrap is not on PATH (python3 is): no sandbox can start."""
    folder = user.folder("no-bwrap")
    (folder / "python3").symlink_to("/usr/bin/python3")
    return {"PATH": str(folder)}


def _planted(home: Path, tag: str) -> list[str]:
    return [str(p) for p in (home / "planted-by-the-model", Path(f"/tmp/planted-by-the-model-{tag}")) if p.exists()]


@pytest.mark.parametrize("check", ["python3 -m unittest", "python3 test_planted.py"], ids=["unittest", "script"])
def test_where_no_sandbox_can_start_a_check_is_refused_not_run_on_the_host(agent_user, tmp_path, check):
    tag = f"{agent_user.name}-{check.split()[-1]}"
    home = _checked_home(agent_user, tag, check)
    result = agent_user.cycle(home, [done("tests written")] * 3, env=_no_sandbox(agent_user))
    assert result.returncode == 3, result.stderr  # the done was refused: the cycle ran out of iterations
    state = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())
    assert state["completed_tasks"] == [] and state["current_task"] == "write the tests"
    assert "was refused: checks run only in the sandbox, which cannot run here" in state["notes"]
    assert "checks_unsandboxed: true" in state["notes"]
    assert _planted(home, tag) == []


@pytest.mark.parametrize("sandbox", ["unavailable", "available"])
def test_checks_unsandboxed_is_the_only_way_a_check_runs_on_the_host_and_it_is_flagged(
    agent_user, tmp_path, sandbox, request
):
    if sandbox == "available":
        request.getfixturevalue("sandbox_required")
    tag = f"{agent_user.name}-opt-in-{sandbox}"
    home = _checked_home(agent_user, tag, checks_unsandboxed=True)
    env = _no_sandbox(agent_user) if sandbox == "unavailable" else {}
    result = agent_user.cycle(home, [done("tests written")], env=env)
    assert result.returncode == 0, result.stderr
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert "WARNING: shell policy:" in log and "checks_unsandboxed is on" in log
    doctor = json.loads(agent_user.agent("doctor", "--home", str(home), "--json", env=env).stdout)
    (check,) = [c for c in doctor if c["check"] == "checks"]
    assert check["warning"] and "checks_unsandboxed is on" in check["detail"]
    # on the host it ran as the operator (who opted in); in the sandbox it could not reach the home
    planted = _planted(home, tag)
    for path in planted:
        Path(path).unlink()
    assert bool(planted) == (sandbox == "unavailable")


def _inbox_recipe() -> list[str]:
    """docs/operations.md's wake_when recipe that looks into the workspace (it may span lines)."""
    recipes = re.findall(r"^wake_when: \[.*?'\]$", OPERATIONS.read_text(), flags=re.M | re.S)
    (found,) = [recipe for recipe in recipes if "workspace/" in recipe]
    return yaml.safe_load(found)["wake_when"]


@pytest.mark.parametrize(
    "link, target",
    [("etc.txt", "/etc"), ("logs.txt", "../../logs"), ("config.txt", "../../config.yaml")],
    ids=["link-to-etc", "link-to-the-homes-logs", "link-to-the-config"],
)
def test_the_documented_wake_when_recipe_never_follows_a_link_the_model_made(agent_user, link, target):
    home = agent_user.make_home({"wake_when": _inbox_recipe(), "idle": "skip"})
    inbox = home / "workspace" / "inbox"
    inbox.mkdir()
    (inbox / "letter.txt").write_text("a real letter\n")
    (inbox / link).symlink_to(target)
    agent_user.give(inbox)
    first = agent_user.cycle(home, [done("read the inbox")])
    assert first.returncode == 0, first.stderr
    wake = [n for n in yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"].splitlines()]
    (note,) = [n for n in wake if n.startswith("[WAKE]")]
    assert "letter.txt" in note and link not in note, note
    for leaked in ("passwd", "hostname", "index.jsonl", "cycle_", "shell_policy"):
        assert leaked not in note, note
    # a link alone is no letter: the next cycle stays idle
    (inbox / "letter.txt").unlink()
    second = agent_user.cycle(home, [done("nothing")])
    assert json.loads(second.stdout)["stop_reason"] == "idle"
    assert b"passwd" not in everything_in(home / "logs")
