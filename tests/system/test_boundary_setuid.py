"""Nothing made in the sandbox carries privilege outside it, as root and as an ordinary user.

One real sandboxed cycle per user tries every system call that can make a set-user-ID or
set-group-ID file, each called directly by a small C program (tests/system/setid.c, built here
with gcc), and the ordinary tools that would (`chmod 6755`, Python's os.chmod, `tar -xp` of a
setuid member). Each call is then its own test: the call was refused, and the file it would have
made carries no such bit on the host. Then what the workspace is outside: whose its files are,
who can enter it, and the end-of-cycle pass that strips bits that got there another way.
"""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.config import Settings
from tests.sandbox_support import built, sandbox_required  # noqa: F401 - a fixture
from tests.users import AgentUser, done, notes_of, shell

pytestmark = pytest.mark.usefixtures("sandbox_required")

SOURCE = Path(__file__).with_name("setid.c")
CALLS = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "open",
    "open-tmpfile",
    "openat",
    "openat-tmpfile",
    "creat",
    "mknod",
    "mknodat",
    "openat2",
    "io_uring-openat",
    "i386-chmod",
    "x32-chmod",
)
OTHER_ABIS = ("i386-chmod", "x32-chmod")  # the filter kills a process that calls through them
TOOLS = {
    "chmod-6755": "cp /usr/bin/id idg && chmod 6755 idg; ls -l idg",
    "python-os-chmod": "python3 -c \"import os; open('py', 'w').close(); os.chmod('py', 0o4755)\"; ls -l py",
    "tar-extract": "tar -xpf /workspace/setid.tar; ls -l sh-copy",
}
PRIVILEGE = stat.S_ISUID | stat.S_ISGID


@dataclass
class Made:
    home: Path
    exit_code: int
    notes: list[str]


_made: dict[str, Made] = {}


def _setuid_tar(path: Path) -> None:
    member = tarfile.TarInfo("sh-copy")
    member.mode, member.size = 0o6755, 4
    with tarfile.open(path, "w") as tar:
        tar.addfile(member, io.BytesIO(b"#!/\n"))


def made_by(user: AgentUser, tmp_path_factory) -> Made:
    """The cycle of attempts, run once per user."""
    if user.name not in _made:
        home = user.make_home({"shell_policy": "sandbox", "max_iterations": 40, "notes_budget": None})
        workspace = home / "workspace"
        program = built(SOURCE, tmp_path_factory.mktemp("setid"), "-no-pie")
        (workspace / "setid").write_bytes(program.read_bytes())
        (workspace / "setid").chmod(0o755)
        _setuid_tar(workspace / "setid.tar")
        user.give(workspace / "setid", workspace / "setid.tar")
        commands = [f"mkdir c-{call} && cd c-{call} && /workspace/setid {call}" for call in CALLS]
        commands += [f"mkdir t-{name} && cd t-{name} && {{ {command}; }}" for name, command in TOOLS.items()]
        result = user.cycle(home, [shell(c) for c in commands] + [done()])
        _made[user.name] = Made(home, result.returncode, notes_of(home))
    return _made[user.name]


def _privileged(folder: Path) -> list[str]:
    return [str(p) for p in folder.rglob("*") if not p.is_symlink() and p.lstat().st_mode & PRIVILEGE]


@pytest.mark.parametrize("call", CALLS)
def test_no_system_call_makes_a_setuid_or_setgid_file(agent_user, tmp_path_factory, call):
    made = made_by(agent_user, tmp_path_factory)
    assert made.exit_code == 0, made.notes
    (line,) = [n for n in made.notes if f'/workspace/setid {call}"' in n]
    if f"{call}: absent" in line:  # this architecture has no such call (open, chmod... on aarch64)
        return
    if call in OTHER_ABIS:
        assert "Bad system call" in line, line
        assert _privileged(made.home / "workspace" / f"c-{call}") == []
        return
    # ENOSYS: for openat2 the C library falls back to openat; io_uring is not there at all
    refused = "errno 38" if call in ("openat2", "io_uring-openat") else "errno 1"
    assert f"{call}: result -1 {refused} mode" in line, line
    assert _privileged(made.home / "workspace" / f"c-{call}") == []


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_no_tool_leaves_a_setuid_or_setgid_file(agent_user, tmp_path_factory, tool):
    made = made_by(agent_user, tmp_path_factory)
    (line,) = [n for n in made.notes if f"mkdir t-{tool} " in n]
    assert "Operation not permitted" in line or "Cannot change mode" in line, line
    folder = made.home / "workspace" / f"t-{tool}"
    assert any(folder.iterdir()) and _privileged(folder) == []


def test_what_the_sandbox_makes_is_never_roots_and_the_home_is_closed_to_others(agent_user, tmp_path_factory):
    """As root, every file is sandbox_uid's; for either user, the home and the workspace are 0700,
    so another local user (here `nobody`) cannot even list them."""
    made = made_by(agent_user, tmp_path_factory)
    workspace = made.home / "workspace"
    owner = Settings().sandbox_uid if agent_user.name == "root" else agent_user.uid
    owners = {p.lstat().st_uid for p in [workspace, *workspace.rglob("*")] if p.name not in ("setid", "setid.tar")}
    assert owners == {owner}
    assert stat.S_IMODE(made.home.stat().st_mode) == stat.S_IMODE(workspace.stat().st_mode) == 0o700
    other = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ls", str(workspace)],
        capture_output=True,
        text=True,
    )
    assert other.returncode != 0 and "Permission denied" in other.stderr


@pytest.mark.parametrize(
    "planted",
    [
        {"idg": 0o6755, "plain.txt": 0o644},
        {"shared.txt": 0o666, "tools/": 0o2777},
    ],
    ids=["setuid-file", "world-writable-and-setgid-folder"],
)
def test_a_privilege_bit_that_got_there_another_way_is_flagged_by_doctor_and_stripped_at_the_cycle_end(
    agent_user, planted
):
    home = agent_user.make_home({"shell_policy": "sandbox"})
    workspace = home / "workspace"
    for name, mode in planted.items():  # a name ending in / is a folder
        path = workspace / name.rstrip("/")
        path.mkdir() if name.endswith("/") else path.write_text("x")
        agent_user.give(path)
        os.chmod(path, mode)  # after the chown, which would clear the bits
    doctor = json.loads(agent_user.agent("doctor", "--home", str(home), "--json").stdout)
    (check,) = [c for c in doctor if c["check"] == "workspace"]
    carrying = [name.rstrip("/") for name, mode in planted.items() if mode & (PRIVILEGE | stat.S_IWOTH)]
    assert check["warning"] and all(name in check["detail"] for name in carrying), check
    result = agent_user.cycle(home, [shell("true"), done()])
    assert result.returncode == 0, result.stderr
    assert [p for p in workspace.rglob("*") if p.lstat().st_mode & (PRIVILEGE | stat.S_IWOTH)] == []
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    assert f"removed setuid, setgid or world-write bits from {len(carrying)} entries" in log
    doctor = json.loads(agent_user.agent("doctor", "--home", str(home), "--json").stdout)
    assert not next(c for c in doctor if c["check"] == "workspace")["warning"]


def test_sandbox_uid_may_not_be_nobodys(tmp_path):
    from tests.helpers import make_home, run_cli, tree_digest

    home = make_home(tmp_path, {"sandbox_uid": 65534})
    before = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", "scripted:none.yaml")
    assert result.exit_code == 2
    assert "setting 'sandbox_uid' must not be 65534 (nobody's" in result.output
    assert "Traceback" not in result.output and tree_digest(home) == before


def test_a_workspace_made_before_is_the_sandboxs_from_the_cycles_start(agent_user):
    """A workspace whose files are not the sandbox's (made by an older version, or a replay's
    copy, as root) is handed over whole when the cycle starts: the model can change them."""
    home = agent_user.make_home({"shell_policy": "sandbox"})
    workspace = home / "workspace"
    (workspace / "old").mkdir()
    (workspace / "old" / "data.txt").write_text("one\n")
    agent_user.give(workspace / "old")
    os.chown(workspace, agent_user.uid, agent_user.gid)  # as an older version left it: the agent's
    result = agent_user.cycle(home, [shell("echo two >> old/data.txt && cat old/data.txt"), done()])
    assert result.returncode == 0, result.stderr
    assert notes_of(home)[0].endswith("-> one; two")
