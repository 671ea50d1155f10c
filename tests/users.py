"""The agent run as root and as an ordinary user, for the tests of what crosses the sandbox's boundary.

A test that takes the `agent_user` fixture runs once as each: `root` (this process's user, which
must be root) and `ordinary` (a system user the session creates when it runs as root, or this
process's own user when it does not). Either may be missing on a machine (no root, no useradd):
the test then skips, and fails when the environment variable CI is set, as every test that needs
a system tool does.

An ordinary user cannot run the test venv's interpreter (it may live under /root, mode 0700), so
its agent runs on the system's /usr/bin/python3 with PYTHONPATH set to a world-readable copy of
the package and of the distributions it needs (hard links where the filesystem allows them).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
ORDINARY = "agent-boundary"  # the ordinary user these tests make when they run as root (kept: made once per machine)
SYSTEM_PYTHON = "/usr/bin/python3"
DISTRIBUTIONS = ("scratchpad-agent", "mcp")  # and everything they need
# Runs argv[2:] as its child and writes the child's peak memory (KiB) to argv[1]; exits as it did.
LAUNCHER = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as report:
    report.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass
class AgentUser:
    """One user the agent runs as: its ids, interpreter and environment, and a folder of its own."""

    name: str  # "root" or "ordinary"
    uid: int
    gid: int
    python: str
    base: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def switches(self) -> bool:
        return self.uid != os.geteuid()

    def folder(self, name: str) -> Path:
        """A new folder of this user's (for a home, a script)."""
        path = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=self.base))
        path.chmod(0o755)
        self.give(path)
        return path

    def give(self, *paths: Path) -> None:
        """Make `paths` (and what is below them) this user's."""
        for path in paths:
            if not self.switches:
                continue
            for found in [path, *path.rglob("*")] if path.is_dir() else [path]:
                os.chown(found, self.uid, self.gid, follow_symlinks=False)

    def command(self, *args: str) -> list[str]:
        return [self.python, "-m", "agent", *args]

    def popen(self, argv: list[str], env: dict | None = None, **kw) -> subprocess.Popen:
        """Start `argv` as this user, with its environment plus `env`."""
        ids = {"user": self.uid, "group": self.gid, "extra_groups": []} if self.switches else {}
        kw.setdefault("cwd", self.base)
        return subprocess.Popen(argv, env={**self.env, **(env or {})}, **ids, **kw)

    def run(self, argv: list[str], env: dict | None = None, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        with self.popen(argv, env, text=True, **kw) as proc:
            out, err = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def agent(
        self, *args: str, env: dict | None = None, timeout: float = 300, wrap: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        """`agent ARGS` as this user (run by the command `wrap`, when given: `prlimit ... --`)."""
        return self.run([*wrap, *self.command(*args)], env, timeout)

    def measured(self, *args: str, env: dict | None = None, wrap: tuple[str, ...] = ()) -> tuple[int, int, str]:
        """(exit code, the most memory it ever held in KiB, its output): `agent ARGS` as this user.
        A small launcher starts it and reads its rusage: a child forked straight from this (large)
        test process would count the test's pages as its own peak."""
        report = self.folder("measured") / "maxrss"
        argv = [self.python, "-c", LAUNCHER, str(report), *wrap, *self.command(*args)]
        with tempfile.TemporaryFile() as output:
            proc = self.popen(argv, env, stdout=output, stderr=subprocess.STDOUT)
            proc.wait()
            output.seek(0)
            return proc.returncode, int(report.read_text()), output.read().decode(errors="replace")

    def script(self, home: Path, replies: list) -> Path:
        """A scripted model's replies, beside `home`."""
        count = len(list(home.parent.glob("replies_*.yaml")))
        script = home.parent / f"replies_{count}.yaml"
        script.write_text(yaml.safe_dump([r if isinstance(r, str) else json.dumps(r) for r in replies]))
        self.give(script)
        return script

    def cycle(
        self, home: Path, replies: list, *args: str, env: dict | None = None, wrap: tuple[str, ...] = ()
    ) -> subprocess.CompletedProcess:
        """One `agent run --json` of `home` on a scripted model answering `replies`, as this user."""
        script = self.script(home, replies)
        return self.agent(
            "run", "--home", str(home), "--model", f"scripted:{script}", "--json", *args, env=env, wrap=wrap
        )

    def make_home(self, config: dict, name: str = "home") -> Path:
        """A home made by `agent init` run as this user, its config.yaml then `config`."""
        home = self.folder(name) / "home"
        made = self.agent("init", str(home))
        assert made.returncode == 0, made.stderr
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        self.give(home / "config.yaml")
        return home


def _base_env(home_dir: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "CI")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return {**env, "HOME": str(home_dir), "AGENT_IDLE": "run"}


def _distributions() -> dict[str, importlib.metadata.Distribution]:
    """The distributions DISTRIBUTIONS need, by the requirements each declares (extras left out)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(DISTRIBUTIONS)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            found[key] = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [re.match(r"[A-Za-z0-9_.-]+", r).group() for r in found[key].requires or [] if "extra ==" not in r]
    return found


def _place(source: Path, target: Path) -> None:
    """`source` at `target`, readable by everyone: a hard link when it already is and the filesystem
    allows one (instant, and the source's mode is never changed), else a copy."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.stat().st_mode & 0o004:
        with contextlib.suppress(OSError):
            os.link(source, target)
            return
    shutil.copyfile(source, target)
    target.chmod(0o755 if os.access(source, os.X_OK) else 0o644)


def python_tree(folder: Path) -> Path:
    """A world-readable site folder holding the agent package and every distribution it needs."""
    site = folder / "site"
    for dist in _distributions().values():
        for name in dist.files or []:
            source = Path(dist.locate_file(name))
            if source.is_file() and ".." not in Path(name).parts and "__pycache__" not in Path(name).parts:
                _place(source, site / name)
    for source in (REPO / "agent").rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            _place(source, site / source.relative_to(REPO))
    for path in [site, *site.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755)
    return site


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI must run this test, but {why}", pytrace=False)
    pytest.skip(why)


def _ordinary_account() -> pwd.struct_passwd:
    """The ordinary user, made when missing (as root)."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(ORDINARY)
    made = subprocess.run(
        [
            "useradd",
            "--system",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            ORDINARY,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    with contextlib.suppress(KeyError):  # made, or made meanwhile by another session
        return pwd.getpwnam(ORDINARY)
    _unavailable(f"cannot create the user {ORDINARY}: {made.stderr.strip() or made.returncode}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def _users(tmp_path_factory):
    """{"root": AgentUser or why not, "ordinary": AgentUser or why not}, made once per session."""
    made: dict[str, AgentUser | str] = {}
    cleanup: list[Path] = []
    if os.geteuid() != 0:
        base = tmp_path_factory.mktemp("ordinary")
        env = {**_base_env(base), "PYTHONPATH": str(REPO)}
        made["ordinary"] = AgentUser("ordinary", os.getuid(), os.getgid(), sys.executable, base, env)
        made["root"] = "the tests do not run as root"
    else:
        root_base = tmp_path_factory.mktemp("root")
        env = {**_base_env(root_base), "PYTHONPATH": str(REPO)}  # this checkout's agent, as the tests import it
        made["root"] = AgentUser("root", 0, 0, sys.executable, root_base, env)
        made["ordinary"] = _make_ordinary(cleanup)
    yield made
    for folder in cleanup:
        shutil.rmtree(folder, ignore_errors=True)


def _make_ordinary(cleanup: list[Path]) -> AgentUser | str:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is missing: the ordinary user's agent runs on it"
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
    )
    if version.stdout.strip() != str(sys.version_info[:2]):
        return f"{SYSTEM_PYTHON} is Python {version.stdout.strip()}, the tests' is {sys.version_info[:2]}"
    account = _ordinary_account()
    folder = Path(tempfile.mkdtemp(prefix="agent-boundary."))
    cleanup.append(folder)
    folder.chmod(0o755)
    site = python_tree(folder)
    base = folder / "homes"
    base.mkdir(mode=0o755)
    os.chown(base, account.pw_uid, account.pw_gid)
    env = {**_base_env(base), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    return AgentUser("ordinary", account.pw_uid, account.pw_gid, SYSTEM_PYTHON, base, env)


@pytest.fixture(params=["root", "ordinary"])
def agent_user(request, _users) -> AgentUser:
    """The agent run as root, then as an ordinary user (module docstring)."""
    found = _users[request.param]
    if isinstance(found, str):
        _unavailable(found)
    return found


def shell(command: str) -> dict:
    return {"tool": "shell", "args": {"command": command}}


def done(summary: str = "done") -> dict:
    return {"tool": "done", "args": {"summary": summary}}


def notes_of(home: Path) -> list[str]:
    return yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"].splitlines()


def everything_in(folder: Path) -> bytes:
    """Every regular file's bytes below `folder` (never through a link)."""
    return b"\n".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink())
