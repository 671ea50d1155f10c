"""The sandbox: where the model's commands (and the operator's acceptance checks) run, kept in
the workspace by the kernel rather than by a list of allowed commands.

One bubblewrap sandbox per command line, run by `/bin/sh -c` (the engine and why: docs/reference.md,
"Threat model"). Inside:
- the workspace, mounted at /workspace (read-only for checks, or once over its quota), is the
  only writable place besides a private /tmp (a tmpfs of at most `sandbox_max_memory`);
- the rest of the file system is /usr (and the /bin, /lib links into it) plus a few files of
  /etc, all read-only: no home, no /root, no host /tmp, no /home, /var, /run, /sys;
- its own user, PID, IPC, UTS, cgroup and network namespaces: no /proc of the agent or of any
  other process, no network unless `sandbox_network: true`;
- an empty environment apart from PATH, HOME=/tmp and LANG; user 65534 with no capabilities
  and no new privileges (bwrap sets PR_SET_NO_NEW_PRIVS), no further user namespaces;
- it dies with the agent (`--die-with-parent`, and the agent's PR_SET_PDEATHSIG on bwrap);
  memory, processes and file size are bounded (sandbox_limits.py).

Whether the sandbox works here is probed once and remembered in logs/agent.db (the `sandbox`
probe, beside the format ladder's `endpoint`); `shell_policy: auto` (the default) uses it when it does
and the allowlist otherwise. `policy_in_force` says which policy is in force and why.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.common.outcomes import AgentError
from agent.config import Settings
from agent.store.db import probe as remembered
from agent.store.db import remember_probe
from agent.store.home import Home
from agent.tools.children import die_with_parent
from agent.tools.sandbox_limits import CommandCgroup, ResourceLimits, nproc_prefix, process_limit_problem, set_rlimits

if TYPE_CHECKING:  # imported where used: a cycle that runs no command pays for none of them
    import subprocess

WORKSPACE = "/workspace"  # where the workspace is inside the sandbox
SANDBOX_UID = 65534
PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_TIMEOUT = 60.0
# Files of /etc a program may need and that hold nothing private (no passwd: one is written).
ETC_FILES = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "ssl/certs",
    "ca-certificates",
    "mime.types",
    "magic",
    "timezone",
)
ETC_NETWORK_FILES = ("resolv.conf", "hosts", "host.conf", "gai.conf", "services", "protocols")
# Top-level links of a merged /usr (/bin -> usr/bin), or folders on older systems.
ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
PASSWD = f"agent:x:{SANDBOX_UID}:{SANDBOX_UID}:agent:/tmp:/bin/sh\n"
GROUP = f"agent:x:{SANDBOX_UID}:\n"
# For acceptance checks: interpreters do not import from the workspace (Python 3.11+: the cwd
# and a script's folder are not put on sys.path), and write no bytecode there.
CHECK_ENV = {"PYTHONSAFEPATH": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}


class SandboxUnavailable(Exception):
    """The sandbox cannot start here; the message says why."""


def bwrap_path() -> str | None:
    """bwrap on PATH, as shutil.which finds it (not imported: every cycle asks, and shutil pulls in bz2 and lzma)."""
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(folder or ".", "bwrap")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def resource_limits(settings: Settings) -> ResourceLimits:
    return ResourceLimits(settings.sandbox_max_memory, settings.sandbox_max_processes, settings.sandbox_max_file_bytes)


def bwrap_args(
    workspace: Path, settings: Settings, *, writable: bool, env: dict[str, str], data_fds: tuple[int, int]
) -> list[str]:
    """bwrap's options for one command (everything before `--`)."""
    args = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--disable-userns",
        "--hostname",
        "sandbox",
    ]
    if not settings.sandbox_network:
        args.append("--unshare-net")
    args += ["--ro-bind", "/usr", "/usr"]
    for name in ROOT_LINKS:
        path = Path("/", name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    etc = ETC_FILES + (ETC_NETWORK_FILES if settings.sandbox_network else ())
    for name in etc:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    args += ["--ro-bind-data", str(data_fds[0]), "/etc/passwd", "--ro-bind-data", str(data_fds[1]), "/etc/group"]
    # /proc/sys read-only: as root the sandbox's user is root outside its namespace, and owns
    # the sysctl files (bwrap covers /proc/sys only when the folder itself is writable).
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    for name in ("sysrq-trigger", "irq", "bus", "fs"):
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    args += ["--dev", "/dev", "--size", str(settings.sandbox_max_memory), "--tmpfs", "/tmp"]
    args += ["--bind" if writable else "--ro-bind", str(workspace), WORKSPACE, "--chdir", WORKSPACE]
    args += ["--remount-ro", "/", "--clearenv"]
    for name, value in {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **env}.items():
        args += ["--setenv", name, value]
    return args


class Sandbox:
    """One command line's sandbox: `start` it, read the process as any other, then `close`.

    The same small interface serves the shell tool and acceptance checks (an "environment" in
    mini-swe-agent's sense); `writable=False` mounts the workspace read-only.
    """

    def __init__(
        self, workspace: Path, settings: Settings, *, writable: bool = True, env: dict[str, str] | None = None
    ):
        self.workspace, self.settings, self.writable, self.env = workspace, settings, writable, dict(env or {})
        self.limits = resource_limits(settings)
        self.cgroup = CommandCgroup()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, command: str) -> subprocess.Popen:
        """Start `/bin/sh -c command` in the sandbox, output (stdout and stderr) on a pipe."""
        import subprocess

        bwrap = bwrap_path()
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed; see docs/operations.md")
        self.cgroup = CommandCgroup.create(self.limits)
        cgroup, limits, parent = self.cgroup, self.limits, os.getpid()
        on_death = die_with_parent(parent)

        def preexec() -> None:  # in the child: a failure is told on its output, never run unbounded
            try:
                on_death()
                cgroup.join()
                set_rlimits(limits, cgroup.bounds_memory)
            except BaseException as exc:  # noqa: BLE001
                os.write(1, f"the sandbox's limits could not be set: {exc!r}\n".encode())
                os._exit(126)

        passwd, group = _data_pipe(PASSWD), _data_pipe(GROUP)
        options = bwrap_args(
            self.workspace, self.settings, writable=self.writable, env=self.env, data_fds=(passwd, group)
        )
        # The options go through a pipe (--args), so the sandbox's /proc/1/cmdline does not show
        # the host's paths.
        options_fd = _data_pipe("".join(f"{option}\0" for option in options))
        script = f'{nproc_prefix(limits)}\nexec /bin/sh -c "$1"'
        argv = [bwrap, "--args", str(options_fd), "--", "/bin/sh", "-c", script, "sh", command]
        try:
            return subprocess.Popen(
                argv,
                cwd="/",
                env={},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=(passwd, group, options_fd),
                preexec_fn=preexec,
            )
        except OSError as exc:
            self.close()
            raise SandboxUnavailable(f"cannot start bwrap: {exc.strerror}") from None
        finally:
            for fd in (passwd, group, options_fd):
                os.close(fd)

    def close(self) -> None:
        self.cgroup.remove()


def _data_pipe(text: str) -> int:
    """A pipe's read end already holding `text` (small: it fits the pipe's buffer)."""
    read_end, write_end = os.pipe()
    os.write(write_end, text.encode())
    os.close(write_end)
    return read_end


# ------------------------------------------------------------------------------ probe and memory


@dataclass(frozen=True)
class Probe:
    works: bool
    why: str
    probed: str = ""


def probe(settings: Settings) -> Probe:
    """Run one real command in a sandbox around an empty folder: does it start, see only what it
    should, and are its process limits enforceable?"""
    import subprocess
    import tempfile

    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="agent-sandbox-probe.") as folder, Sandbox(Path(folder), settings) as box:
        try:
            proc = box.start("echo sandbox-ok; id -u")
        except SandboxUnavailable as exc:
            return Probe(False, str(exc), now)
        try:
            output, _ = proc.communicate(timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return Probe(False, f"bwrap did not answer in {PROBE_TIMEOUT:g}s", now)
        text = output.decode(errors="replace").strip()
        if proc.returncode != 0 or text.split() != ["sandbox-ok", str(SANDBOX_UID)]:
            first = " ".join(text.split())[:300] or f"exit {proc.returncode}"
            return Probe(False, f"bwrap cannot make the sandbox here: {first}", now)
        problem = process_limit_problem(box.cgroup)
    if problem:
        return Probe(False, f"bubblewrap works, but a fork bomb would not be stopped: {problem}", now)
    bounds = "a pids cgroup" if box.cgroup.bounds_processes else "RLIMIT_NPROC"
    return Probe(True, f"bubblewrap works here (processes bounded by {bounds})", now)


def _identity() -> dict:
    """What a remembered probe was made for: the same bwrap, user and kernel give the same answer."""
    path = bwrap_path()
    try:
        mtime = os.stat(path).st_mtime_ns if path else None
    except OSError:
        mtime = None
    return {"bwrap": path, "bwrap_mtime": mtime, "euid": os.geteuid(), "kernel": os.uname().release}


_probed: dict[str, Probe] = {}  # this process's probes, by identity


def remembered_probe(home: Path, settings: Settings, *, remember: bool = True) -> Probe:
    """The probe remembered in logs/agent.db for this bwrap, user and kernel, or a new one
    (written there when `remember`; a home that cannot be written to just probes again)."""
    identity = _identity()
    try:
        noted = remembered(Home(home), "sandbox")
        if noted.get("identity") == identity:
            return Probe(bool(noted["works"]), str(noted["why"]), str(noted.get("probed", "")))
    except (AgentError, KeyError, TypeError, AttributeError):
        pass
    key = json.dumps(identity, sort_keys=True)
    if identity["bwrap"] is None:
        found = Probe(False, "bubblewrap (bwrap) is not installed; see docs/operations.md")
    else:
        found = _probed.get(key) or probe(settings)
    _probed[key] = found
    if remember and Home(home).logs.is_dir():
        try:
            record = {"identity": identity, "works": found.works, "why": found.why, "probed": found.probed}
            remember_probe(Home(home), "sandbox", record)
        except Exception:  # noqa: BLE001 - a read-only home probes again next time
            pass
    return found


@dataclass(frozen=True)
class PolicyInForce:
    policy: str  # sandbox, allowlist, any or off
    why: str
    warning: bool = False


ANY_WARNING = (
    "shell_policy is 'any': the model's commands run with the operator's account, every file, "
    "secret and network it can reach"
)


WHOLE_HOME = (
    "the workspace is the whole home ('.'), which holds the runtime's files and secrets (config.yaml, "
    "scratchpad/, logs/, .env) that a sandbox mounting it would expose"
)


def workspace_is_home(home: Path, settings: Settings) -> bool:
    """`workspace: "."`: the sandbox never mounts the home itself (the file tools' protection rule
    has no counterpart inside a mount), so the shell keeps the allowlist and checks run unsandboxed."""
    return (home / settings.workspace).resolve() == home.resolve()


def policy_in_force(home: Path, settings: Settings, *, remember: bool = True) -> PolicyInForce:
    """Which shell policy a cycle in `home` uses, and why (auto resolved by the remembered probe)."""
    chosen = settings.shell_policy
    if chosen == "any":
        return PolicyInForce("any", ANY_WARNING, warning=True)
    if chosen in ("allowlist", "off"):
        return PolicyInForce(chosen, "set in config")
    if workspace_is_home(home, settings):
        if chosen == "sandbox":
            return PolicyInForce("sandbox", f"set in config, but {WHOLE_HOME}: every command is refused", warning=True)
        return PolicyInForce("allowlist", f"auto: {WHOLE_HOME}; read-only allowlist instead", warning=True)
    found = remembered_probe(home, settings, remember=remember)
    if chosen == "sandbox":
        return PolicyInForce("sandbox", f"set in config; {found.why}", warning=not found.works)
    if found.works:
        return PolicyInForce("sandbox", f"auto: {found.why}")
    return PolicyInForce(
        "allowlist", f"auto: the sandbox is unavailable ({found.why}); read-only allowlist instead", warning=True
    )


def policy_line(home: Path, settings: Settings, *, remember: bool = True) -> str:
    """One line for the cycle log and `agent status`: the policy in force and why."""
    found = policy_in_force(home, settings, remember=remember)
    return f"{'WARNING: ' if found.warning else ''}shell policy: {found.policy} ({found.why})"


def policy_summary(home: Path, settings: Settings) -> dict:
    """The policy in force as data (`agent status --json`); reads the remembered probe, writes nothing."""
    found = policy_in_force(home, settings, remember=False)
    return {"policy": found.policy, "why": found.why, "warning": found.warning}


def sandbox_for_checks(home: Path, settings: Settings) -> bool:
    """Whether acceptance checks run in the sandbox: wherever it works, unless the operator chose
    `any` or the workspace is the whole home."""
    if settings.shell_policy == "any" or workspace_is_home(home, settings):
        return False
    if settings.shell_policy == "sandbox":
        return True
    return remembered_probe(home, settings).works
