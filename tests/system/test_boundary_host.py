"""Nothing the model made runs on the host, and no documented host command follows its links:
as root and as an ordinary user, in real cycles.

- An acceptance check runs the model's code (`python3 -m unittest` imports its test_*.py). Where
  no sandbox can start, it is refused with a note, never run quietly on the host; only
  `checks_unsandboxed: true` runs it there, and the cycle log and doctor say so.
- `wake_when` is the operator's and runs on the host: the recipe docs/operations.md gives for a
  file in the inbox must not follow a link the model made to /etc or to the home's own files.
- `agent replay` copies the workspace: the copy takes no more disk than the workspace does (the
  model's sparse files stay sparse), so a workspace within its quota cannot fill the disk.
- The command docs/operations.md gives for looking at a git repository the model made runs none
  of the programs the model's `.git/config`, hooks or attributes name, at a terminal.
"""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
from pathlib import Path

import pytest
import yaml

from tests.sandbox_support import sandbox_required  # noqa: F401 - a fixture
from tests.users import AgentUser, done, everything_in, notes_of, shell

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
    for leaked in ("passwd", "hostname", "agent.db", "cycle_", "shell_policy"):
        assert leaked not in note, note
    # a link alone is no letter: the next cycle stays idle
    (inbox / "letter.txt").unlink()
    second = agent_user.cycle(home, [done("nothing")])
    assert json.loads(second.stdout)["stop_reason"] == "idle"
    assert b"passwd" not in everything_in(home / "logs")


def _disk_use(folder: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*"))


@pytest.mark.parametrize(
    "making",
    [
        "for i in 1 2 3 4 5; do truncate -s 40M sparse$i; done",  # long files with nothing in them
        "for i in 1 2 3 4 5; do echo data | dd of=holes$i bs=1 seek=39M status=none; done",  # data past a hole
    ],
    ids=["truncated", "written-past-a-hole"],
)
def test_replays_copy_of_the_workspace_takes_no_more_disk_than_the_workspace(
    agent_user, request, making, tmp_path_factory
):
    """The model may make files 40 MB long that take no disk, far within a 10 MB quota, which counts
    blocks. Replay's copy wrote every zero: 200 MB here, and with 20,000 files of the default
    256 MiB a copy of 5 TB that fills the disk of whoever runs `agent replay`."""
    request.getfixturevalue("sandbox_required")
    quota = {"shell_policy": "sandbox", "workspace_max_bytes": 10_000_000, "sandbox_max_file_bytes": 50_000_000}
    home = agent_user.make_home({**quota, "notes_budget": None})
    assert agent_user.cycle(home, [shell(making + " && echo made"), done()]).returncode == 0
    assert notes_of(home)[0].endswith("-> made"), notes_of(home)
    workspace = home / "workspace"
    assert _disk_use(workspace) < quota["workspace_max_bytes"]
    script = agent_user.script(home, [done("again")])
    replayed = agent_user.agent(
        "replay", "latest", "--home", str(home), "--model", f"scripted:{script}", "--keep", "--json"
    )
    assert replayed.returncode == 0, replayed.stderr
    copy = Path(json.loads(replayed.stdout)["scratch_home"]) / "workspace"
    try:
        files = sorted(p.name for p in workspace.iterdir())
        assert sorted(p.name for p in copy.iterdir()) == files
        for name in files:
            assert (copy / name).read_bytes() == (workspace / name).read_bytes()
        assert _disk_use(copy) <= _disk_use(workspace) + 64 * 1024, (_disk_use(copy), _disk_use(workspace))
    finally:
        shutil.rmtree(copy.parent)


def _git_review_recipe() -> str:
    """docs/operations.md's command for looking at a git repository the model made (a line of a sh block)."""
    blocks = re.findall(r"^```sh\n(.*?)^```", OPERATIONS.read_text(), flags=re.M | re.S)
    (line,) = [line for block in blocks for line in block.splitlines() if "git" in line and "workspace/repo" in line]
    return line


GIT_TRAPS = {  # what the model sets up in its repository: each names a program git would run on the host
    "pager": "git config core.pager 'touch {mark}; cat'",
    "fsmonitor": "git config core.fsmonitor 'touch {mark}; false'",
    "hook": "printf '#!/bin/sh\\ntouch {mark}\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout",
    "filter": "echo 'a.txt filter=trap' > .gitattributes && git add .gitattributes && git commit -qm attributes "
    "&& git config filter.trap.smudge 'touch {mark}; cat'",
}


@pytest.mark.parametrize("trap", sorted(GIT_TRAPS))
def test_the_documented_way_to_look_at_the_models_git_repository_runs_none_of_its_programs(agent_user, request, trap):
    """As root (git's safe.directory was the documented way past its ownership check) or as the
    agent's user (whose own repository git trusts), `git log` in the workspace ran the model's
    core.pager at a terminal; other settings run other programs. The recipe clones first."""
    request.getfixturevalue("sandbox_required")
    home = agent_user.make_home({"shell_policy": "sandbox", "notes_budget": None})
    mark = home.parent / f"trapped-by-{trap}"
    repo = (
        "git init -q repo && cd repo && git config user.email m@example.com && git config user.name m && "
        "echo hi > a.txt && git add a.txt && git commit -qm first && "
        + GIT_TRAPS[trap].format(mark=mark)
        + " && echo ready"
    )
    assert agent_user.cycle(home, [shell(repo), done()]).returncode == 0
    assert notes_of(home)[0].endswith("-> ready"), notes_of(home)
    review = agent_user.folder("review")
    controller, terminal = pty.openpty()  # at a terminal, as an operator types it: git starts its pager
    try:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(review), "PAGER": "cat", "TMPDIR": str(review)}
        proc = agent_user.popen(
            ["sh", "-c", _git_review_recipe()], env, cwd=home, stdin=terminal, stdout=terminal, stderr=terminal
        )
        os.close(terminal)
        shown = b""
        while chunk := _read_terminal(controller):
            shown += chunk
        assert proc.wait(timeout=60) == 0, shown
    finally:
        os.close(controller)
    assert b"first" in shown, shown  # the log was shown
    assert not mark.exists()


def _read_terminal(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: every program holding the terminal has ended
        return b""
