"""The sandbox: where the model's commands (and the operator's acceptance checks) run, kept in
the workspace by the kernel rather than by a list of allowed commands.

One bubblewrap sandbox per command line, run by `/bin/sh -c` (the engine and why: docs/reference.md,
"Threat model"). Inside:
- the workspace, mounted at /workspace (read-only for checks, or while its quota's walk cannot
  count it; past its quota it stays writable but nothing may grow: RLIMIT_FSIZE 0 and no shared mapping of a file), is the
  only writable place besides a private /tmp (a tmpfs of at most `sandbox_max_memory`);
- the rest of the file system is /usr (and the /bin, /lib links into it) plus a few files of
  /etc, all read-only: no home, no /root, no host /tmp, no /home, /var, /run, /sys;
- its own user, PID, IPC, UTS, cgroup and network namespaces: no /proc of the agent or of any
  other process, no network unless `sandbox_network: true`;
- an empty environment apart from PATH, HOME=/tmp and LANG; user 65534 with no capabilities
  and no new privileges (bwrap sets PR_SET_NO_NEW_PRIVS), no further user namespaces; outside,
  the agent's own user, or `sandbox_uid` when the agent is root (sandbox_identity.py), with a
  fresh session keyring;
- a seccomp filter: no setuid or setgid file, no key store, no other ABI (sandbox_seccomp.py);
- it dies with the agent (`--die-with-parent`, and the agent's PR_SET_PDEATHSIG on bwrap);
  memory, processes and file size are bounded (sandbox_limits.py), and so are its private /tmp
  and /dev/shm (tmpfs of `sandbox_max_memory` each, charged to its memory cgroup where one exists).

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
from agent.tools.sandbox_identity import child_setup, outer_ids, workspace_slot
from agent.tools.sandbox_limits import CommandCgroup, ResourceLimits, nproc_prefix, set_rlimits
from agent.tools.sandbox_seccomp import SeccompUnavailable, filter_program

if TYPE_CHECKING:  # imported where used: a cycle that runs no command pays for none of them
    import subprocess

WORKSPACE = "/workspace"  # where the workspace is inside the sandbox
INSIDE_UID = 65534  # the sandbox's user inside its user namespace (outside: sandbox_identity.py)
PATH = "/usr/local/bin:/usr/bin:/bin"
PROBE_TIMEOUT = 60.0
# The sandbox runs this much nicer than the agent, so the quota's watch (quota.py) keeps its share
# of a busy machine's CPU against the command's writers.
SANDBOX_NICE = 10
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
PASSWD = f"agent:x:{INSIDE_UID}:{INSIDE_UID}:agent:/tmp:/bin/sh\n"
GROUP = f"agent:x:{INSIDE_UID}:\n"
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


@dataclass(frozen=True)
class Fds:
    """The descriptors bwrap reads: its /etc/passwd and /etc/group, the seccomp filter, the workspace."""

    passwd: int
    group: int
    seccomp: int
    workspace: int


def bwrap_args(settings: Settings, *, writable: bool, env: dict[str, str], fds: Fds) -> list[str]:
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
        str(INSIDE_UID),
        "--gid",
        str(INSIDE_UID),
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
    args += ["--ro-bind-data", str(fds.passwd), "/etc/passwd", "--ro-bind-data", str(fds.group), "/etc/group"]
    # /proc/sys read-only: bwrap covers /proc/sys only when the folder itself is writable.
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys"]
    for name in ("sysrq-trigger", "irq", "bus", "fs"):
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    size = str(settings.sandbox_max_memory)
    args += [
        "--dev",
        "/dev",
        "--perms",
        "1777",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
    ]
    args += ["--bind-fd" if writable else "--ro-bind-fd", str(fds.workspace), WORKSPACE, "--chdir", WORKSPACE]
    args += ["--remount-ro", "/", "--clearenv", "--seccomp", str(fds.seccomp)]
    for name, value in {"PATH": PATH, "HOME": "/tmp", "LANG": "C.UTF-8", **env}.items():
        args += ["--setenv", name, value]
    return args


# Past the quota, set by the sandbox's first shell (after bwrap has written its own files): no write
# may add a byte (RLIMIT_FSIZE 0), and such a write fails with EFBIG ("File too large") instead of
# killing the writer (SIGXFSZ ignored, which stays ignored across exec). Deleting and truncating work.
NO_GROWTH_PREFIX = "ulimit -f 0 || exit 126\ntrap '' XFSZ\n"


class Sandbox:
    """One command line's sandbox: `start` it, read the process as any other, then `close`.

    The same small interface serves the shell tool and acceptance checks (an "environment" in
    mini-swe-agent's sense); `writable=False` mounts the workspace read-only; `grow=False` keeps it
    writable but lets no write add a byte (a workspace past its quota): RLIMIT_FSIZE 0, and no shared
    mapping of a file (sandbox_seccomp.py).
    """

    def __init__(
        self,
        workspace: Path,
        settings: Settings,
        *,
        writable: bool = True,
        grow: bool = True,
        env: dict[str, str] | None = None,
    ):
        self.workspace, self.settings, self.writable, self.env = workspace, settings, writable, dict(env or {})
        self.limits = resource_limits(settings)
        self.grow = grow
        self.cgroup = CommandCgroup()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self, command: str) -> subprocess.Popen:
        """Start `/bin/sh -c command` in the sandbox, output (stdout and stderr) on a pipe."""
        bwrap = bwrap_path()
        if bwrap is None:
            raise SandboxUnavailable("bubblewrap (bwrap) is not installed; see docs/operations.md")
        try:
            program = filter_program(self.grow)  # past the quota: no shared mapping of a file
        except SeccompUnavailable as exc:
            raise SandboxUnavailable(str(exc)) from None
        ids = outer_ids(self.settings.sandbox_uid)
        opened: list[int] = []

        def keep(fd: int) -> int:
            opened.append(fd)
            return fd

        try:
            fds = Fds(
                keep(_data_pipe(PASSWD.encode())),
                keep(_data_pipe(GROUP.encode())),
                keep(_data_pipe(program)),
                keep(workspace_slot(self.workspace, ids)),
            )
            options = bwrap_args(self.settings, writable=self.writable, env=self.env, fds=fds)
            # The options go through a pipe (--args), so the sandbox's /proc/1/cmdline does not show
            # the host's paths.
            options_fd = keep(_data_pipe("".join(f"{option}\0" for option in options).encode()))
            self.cgroup = CommandCgroup.create(self.limits)
            return self._popen(
                bwrap, options_fd, command, tuple(opened), child_setup(self.workspace, fds.workspace, ids)
            )
        except OSError as exc:
            self.close()
            raise SandboxUnavailable(f"cannot start bwrap: {exc.strerror or exc}") from None
        finally:
            for fd in opened:
                os.close(fd)

    def _popen(self, bwrap: str, options_fd: int, command: str, fds: tuple[int, ...], setup) -> subprocess.Popen:
        import subprocess

        cgroup, limits, on_death = self.cgroup, self.limits, die_with_parent(os.getpid())

        def preexec() -> None:  # in the child: a failure is told on its output, never run unbounded
            try:
                cgroup.join()
                os.nice(SANDBOX_NICE)  # inherited by every process inside; undoing it needs CAP_SYS_NICE
                set_rlimits(limits, cgroup.bounds_memory)
                setup()
                on_death()  # last: a change of user clears the parent-death signal
            except BaseException as exc:  # noqa: BLE001
                os.write(1, f"the sandbox could not be set up: {exc}\n".encode())
                os._exit(126)

        script = f'{nproc_prefix(limits)}\n{"" if self.grow else NO_GROWTH_PREFIX}exec /bin/sh -c "$1"'
        return subprocess.Popen(
            [bwrap, "--args", str(options_fd), "--", "/bin/sh", "-c", script, "sh", command],
            cwd="/",
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            pass_fds=fds,
            preexec_fn=preexec,
        )

    def close(self) -> None:
        self.cgroup.remove()


def _data_pipe(data: bytes) -> int:
    """A pipe's read end already holding `data` (small: it fits the pipe's buffer)."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    os.close(write_end)
    return read_end


# ------------------------------------------------------------------------------ probe and memory


@dataclass(frozen=True)
class Probe:
    works: bool
    why: str
    probed: str = ""


# What the probe runs: the file it makes must be owned outside by the sandbox's outer user, and the
# setuid bit must be refused (the seccomp filter is in force).
PROBE_COMMAND = "echo sandbox-ok; id -u; touch probe && chmod u+s probe 2>/dev/null && echo setuid-allowed; true"
PROBE_CHECKS = 2  # bumped whenever the probe checks more: a remembered answer to fewer checks is not believed


def probe(settings: Settings) -> Probe:
    """Run one real command in a sandbox around an empty folder: does it start, see only what it
    should, leave only unprivileged files of the right owner, and are its process limits enforceable?"""
    import tempfile

    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    ids = outer_ids(settings.sandbox_uid)
    owner = ids[0] if ids else os.geteuid()
    with tempfile.TemporaryDirectory(prefix="agent-sandbox-probe.") as folder, Sandbox(Path(folder), settings) as box:
        try:
            if ids is not None:
                os.chown(folder, *ids)
            try:
                failed = _run_probe(box, now)
            finally:  # the folder back to this user: cleaning it up then needs no capability but ownership
                os.chown(folder, os.geteuid(), os.getegid())
            made = failed or Path(folder, "probe").stat()
        except OSError as exc:
            return Probe(False, f"the probe's folder could not be used: {exc.strerror or exc}", now)
    if isinstance(made, Probe):
        return made
    if made.st_uid != owner:
        return Probe(False, f"a file the sandbox made belongs to user {made.st_uid}, not {owner}", now)
    bounds = "a pids cgroup" if box.cgroup.bounds_processes else "RLIMIT_NPROC"
    as_user = f"user {owner}" + (" (sandbox_uid)" if ids else "")
    return Probe(True, f"bubblewrap works here (as {as_user}; processes bounded by {bounds})", now)


def _run_probe(box: Sandbox, now: str) -> Probe | None:
    """PROBE_COMMAND in `box`: None when it said what it should, else the failed Probe."""
    import subprocess

    try:
        proc = box.start(PROBE_COMMAND)
    except SandboxUnavailable as exc:
        return Probe(False, str(exc), now)
    try:
        output, _ = proc.communicate(timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        return Probe(False, f"bwrap did not answer in {PROBE_TIMEOUT:g}s", now)
    text = output.decode(errors="replace").strip()
    if proc.returncode != 0 or text.split() != ["sandbox-ok", str(INSIDE_UID)]:
        first = " ".join(text.split())[:300] or f"exit {proc.returncode}"
        return Probe(False, f"bwrap cannot make the sandbox here: {first}", now)
    return None


def _identity(settings: Settings) -> dict:
    """What a remembered probe was made for: the same bwrap, users, kernel and checks give the same answer."""
    path = bwrap_path()
    try:
        mtime = os.stat(path).st_mtime_ns if path else None
    except OSError:
        mtime = None
    return {
        "bwrap": path,
        "bwrap_mtime": mtime,
        "euid": os.geteuid(),
        "kernel": os.uname().release,
        "checks": PROBE_CHECKS,
        "outer_uid": (outer_ids(settings.sandbox_uid) or (os.geteuid(),))[0],
    }


_probed: dict[str, Probe] = {}  # this process's probes, by identity


def remembered_probe(home: Path, settings: Settings, *, remember: bool = True) -> Probe:
    """The probe remembered in logs/agent.db for this bwrap, user and kernel, or a new one
    (written there when `remember`; a home that cannot be written to just probes again)."""
    identity = _identity(settings)
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


CHECKS_UNSANDBOXED_WARNING = (
    "checks_unsandboxed is on: where no sandbox can start, acceptance checks run on the host as the operator, "
    "and may run the model's code"
)


def policy_line(home: Path, settings: Settings, *, remember: bool = True) -> str:
    """One line for the cycle log and `agent status`: the policy in force and why (and the
    checks_unsandboxed opt-in, whenever it is set)."""
    found = policy_in_force(home, settings, remember=remember)
    line = f"shell policy: {found.policy} ({found.why})"
    if settings.checks_unsandboxed:
        line = f"{line}; {CHECKS_UNSANDBOXED_WARNING}"
    return f"{'WARNING: ' if found.warning or settings.checks_unsandboxed else ''}{line}"


def policy_summary(home: Path, settings: Settings) -> dict:
    """The policy in force as data (`agent status --json`); reads the remembered probe, writes nothing."""
    found = policy_in_force(home, settings, remember=False)
    return {"policy": found.policy, "why": found.why, "warning": found.warning}


def checks_sandbox_problem(home: Path, settings: Settings, *, remember: bool = True) -> str | None:
    """Why acceptance checks cannot run in the sandbox here, or None when they can: it must work
    (the remembered probe), and the workspace must not be the whole home. The shell policy does
    not matter: a check may run the model's code, whatever the model's shell may do."""
    if workspace_is_home(home, settings):
        return WHOLE_HOME
    found = remembered_probe(home, settings, remember=remember)
    return None if found.works else found.why
