"""The home is never $HOME or /, and every home gets a workspace: made by `agent init` and by
the first cycle of a home that predates it, without moving the files already there."""

from __future__ import annotations

import pytest

from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, run_cli, tree_digest, write_active
from tests.sandbox_support import sandbox_required


def write(path: str, content: str) -> dict:
    return {"tool": "write_file", "args": {"path": path, "content": content}}


COMMANDS_WITH_A_HOME = [
    ("run",),
    ("reset",),
    ("status",),
    ("show",),
    ("diff",),
    ("history",),
    ("tools",),
    ("task", "list"),
    ("goal", "list"),
    ("prune", "--keep", "1"),
    ("doctor",),
]


@pytest.mark.parametrize("command", COMMANDS_WITH_A_HOME)
def test_every_command_refuses_the_users_home_folder_as_its_home(tmp_path, command):
    fake_home = tmp_path / "user"
    (fake_home / ".ssh").mkdir(parents=True)
    before = tree_digest(fake_home)
    result = run_cli(*command, "--home", str(fake_home), env={"HOME": str(fake_home)})
    assert result.exit_code == 2
    assert "refusing to use your home folder ($HOME) as the agent's home" in result.stderr
    assert tree_digest(fake_home) == before and sorted(p.name for p in fake_home.iterdir()) == [".ssh"]


def test_the_current_directory_as_default_home_is_refused_when_it_is_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("status", env={"HOME": str(tmp_path)})
    assert result.exit_code == 2 and "your home folder ($HOME)" in result.stderr


@pytest.mark.parametrize("command", [("status", "--home", "/"), ("run", "--home", "/"), ("init", "/")])
def test_the_root_folder_is_refused_as_a_home(command):
    result = run_cli(*command)
    assert result.exit_code == 2 and "refusing to use the root folder /" in result.stderr


def test_init_refuses_the_users_home_folder_and_creates_nothing(tmp_path):
    result = run_cli("init", str(tmp_path), env={"HOME": str(tmp_path)})
    assert result.exit_code == 2 and "agent init ~/my-agent" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_folder_inside_the_users_home_is_fine(tmp_path):
    assert run_cli("init", str(tmp_path / "my-agent"), env={"HOME": str(tmp_path)}).exit_code == 0


def test_init_creates_the_workspace(tmp_path):
    assert run_cli("init", str(tmp_path / "h")).exit_code == 0
    assert (tmp_path / "h" / "workspace").is_dir()


def test_init_with_a_broken_config_already_there_exits_2_and_creates_nothing(tmp_path):
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "config.yaml").write_text("workspace: /etc\n")
    result = run_cli("init", str(tmp_path / "h"))
    assert result.exit_code == 2 and "setting 'workspace'" in result.stderr
    assert [p.name for p in (tmp_path / "h").iterdir()] == ["config.yaml"]


def test_an_old_home_gets_a_workspace_and_its_files_at_the_root_stay_where_they_are(home):
    """Migration: files a model wrote at the home root before workspaces existed are not moved;
    the model now sees only workspace/ (move them there, or set workspace: ".")."""
    (home / "hello.txt").write_text("hello")
    write_active(home, {"current_task": "read hello.txt"})
    result = run_cycle(
        home,
        [
            {"tool": "read_file", "args": {"path": "hello.txt"}},
            {"tool": "write_file", "args": {"path": "hello.txt", "content": "new"}},
            done("ok"),
        ],
    )
    assert result.exit_code == 0
    assert (home / "hello.txt").read_text() == "hello"
    assert (home / "workspace" / "hello.txt").read_text() == "new"
    (home / "config.yaml").write_text('workspace: "."\n')
    result = run_cycle(home, [{"tool": "read_file", "args": {"path": "hello.txt"}}, done("ok")])
    assert result.exit_code == 0
    assert "[TOOL] read_file" in (home / "scratchpad" / "active.yaml").read_text()


def test_the_demo_task_writes_hello_txt_into_the_workspace(tmp_path):
    target = tmp_path / "demo"
    assert run_cli("init", str(target), "--template", "demo").exit_code == 0
    result = run_cycle(
        target, [{"tool": "write_file", "args": {"path": "hello.txt", "content": "hello"}}, done("wrote it")]
    )
    assert result.exit_code == 0
    assert (target / "workspace" / "hello.txt").read_text() == "hello" and not (target / "hello.txt").exists()


@pytest.mark.usefixtures(sandbox_required.__name__)
def test_the_demos_write_task_is_done_only_when_hello_txt_holds_hello(tmp_path):
    """The README's demo: its second task has an acceptance check, run in the sandbox (the
    workspace mounted read-only), so a done is accepted only when workspace/hello.txt holds hello."""
    target = tmp_path / "demo"
    assert run_cli("init", str(target), "--template", "demo").exit_code == 0
    (target / "config.yaml").write_text("shell_policy: sandbox\nmax_iterations: 2\n")
    assert run_cycle(target, [done("said hello")]).exit_code == 0
    assert read_active(target)["current_task"] == "Write the word hello into hello.txt"
    for replies in (
        [done("wrote it"), done("wrote it, really")],
        [write("hello.txt", "hello world\n"), done("wrote it")],
    ):
        assert run_cycle(target, replies).exit_code == 3  # refused: the task stays
        assert read_active(target)["current_task"] == "Write the word hello into hello.txt"
    notes = read_active(target)["notes"]
    assert "[CHECK FAILED] done refused: the check `grep -qx hello hello.txt` exit" in notes
    assert run_cycle(target, [write("hello.txt", "hello\n"), done("wrote hello")]).exit_code == 0
    state = read_active(target)
    assert state["current_task"] == "Run date -u and note the time" and "checks" not in state
    assert state["completed_tasks"][-1] == {
        "task": "Write the word hello into hello.txt",
        "summary": "wrote hello",
        "check": "passed",
    }


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS_WITH_A_HOME)
def test_a_home_made_with_init_is_accepted_as_a_service_users_home_folder(tmp_path, command):
    service_home = tmp_path / "srv-agent"  # useradd -d /srv/agent: $HOME is the agent home
    assert run_cli("init", str(service_home)).exit_code == 0  # made by the admin, whose $HOME differs
    result = run_cli(*command, "--home", str(service_home), env={"HOME": str(service_home)})
    assert "refusing" not in result.stderr and "home folder" not in result.stderr, result.output


def test_a_service_user_in_its_home_folder_runs_with_the_default_home(tmp_path, monkeypatch):
    assert run_cli("init", str(tmp_path)).exit_code == 0
    monkeypatch.chdir(tmp_path)
    result = run_cycle(tmp_path, [done("ok")])
    assert result.exit_code == 0
    assert run_cli("status", env={"HOME": str(tmp_path)}).exit_code == 0


# Every command that uses a home, with arguments one real use takes; init and reset make homes.
USES_OF_A_HOME = {
    "run": ("run", "--model", "scripted:nowhere.yaml"),
    "tools": ("tools",),
    "diff": ("diff",),
    "history": ("history",),
    "show": ("show",),
    "status": ("status",),
    "task": ("task", "add", "typed in the wrong folder"),
    "goal": ("goal", "add", "a goal"),
    "resume": ("resume",),
    "memory": ("memory", "add", "known", "a fact"),
    "consolidate": ("consolidate", "--model", "scripted:nowhere.yaml"),
    "prune": ("prune", "--keep", "1"),
    "logs": ("logs",),
    "replay": ("replay", "latest", "--model", "scripted:nowhere.yaml"),
    "restore": ("restore", "latest"),
    "fork": ("fork", "latest", "elsewhere"),
    "approvals": ("approvals",),
    "approve": ("approve", "1"),
    "deny": ("deny", "1"),
    "report": ("report",),
    "datasette-metadata": ("datasette-metadata",),
}


def test_the_list_of_commands_that_want_a_home_is_every_command_but_those_that_make_one():
    from agent.cli import COMMANDS

    # fleet reads the homes named as its arguments, and gives one that is not a home a row (tests/cli/test_fleet.py)
    assert set(USES_OF_A_HOME) | {"init", "reset", "doctor", "fleet"} == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(USES_OF_A_HOME))
def test_every_command_refuses_a_folder_that_is_not_a_home_and_makes_nothing_there(tmp_path, name):
    folder = tmp_path / "random"
    folder.mkdir()
    (folder / "notes.txt").write_text("somebody's files")
    before = tree_digest(folder)
    result = run_cli(*USES_OF_A_HOME[name], "--home", str(folder))
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"agent: error: {folder} is not an agent home (it has no scratchpad/ folder): make it one with "
        f"`agent init {folder}`, or name the home with --home or AGENT_HOME\n"
    )
    assert tree_digest(folder) == before and sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert not (tmp_path / "elsewhere").exists()


def test_the_current_directory_is_refused_when_it_is_not_a_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_cli("status")
    assert result.exit_code == 2 and "is not an agent home" in result.stderr and "agent init" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_doctor_names_a_folder_that_is_not_a_home_as_a_failure(tmp_path):
    result = run_cli("doctor", "--home", str(tmp_path))
    assert result.exit_code == 1
    assert f"FAIL home        {tmp_path} is not an agent home (no scratchpad/ folder)" in result.stdout
    assert f"agent init {tmp_path}" in result.stdout and list(tmp_path.iterdir()) == []


def test_a_folder_with_scratchpad_is_a_home_as_a_fresh_clone_of_the_repository_is(tmp_path):
    (tmp_path / "scratchpad").mkdir()
    (tmp_path / "scratchpad" / ".gitkeep").touch()  # what the repository keeps
    assert run_cli("task", "add", "first", "--home", str(tmp_path)).exit_code == 0
    assert run_cli("status", "--home", str(tmp_path)).exit_code == 0


def test_reset_and_init_make_a_home_of_a_plain_folder_and_fork_makes_one_of_its_target(tmp_path, home):
    for command in (("reset", "--home"), ("init",)):
        folder = tmp_path / command[0]
        folder.mkdir()
        assert run_cli(*command, str(folder)).exit_code == 0
        assert (folder / "scratchpad" / "active.yaml").is_file()
    assert run_cycle(home, [done("ok")]).exit_code == 0
    target = tmp_path / "forked"
    target.mkdir()
    assert run_cli("fork", "latest", str(target), "--home", str(home)).exit_code == 0
    assert (target / "scratchpad" / "active.yaml").is_file()
