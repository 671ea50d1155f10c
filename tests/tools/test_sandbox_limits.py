"""The sandbox's resource limits (agent/tools/sandbox_limits.py), applied by the kernel to real
child processes: rlimits always, cgroups where this process may make them."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from agent.tools.sandbox_limits import (
    CGROUP_PREFIX,
    CommandCgroup,
    ResourceLimits,
    _own_cgroup_folders,
    nproc_prefix,
    set_rlimits,
)

LIMITS = ResourceLimits(memory_bytes=1 << 30, processes=64, file_bytes=1 << 20)


def _child(code: str, preexec, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], preexec_fn=preexec, capture_output=True, text=True, timeout=60, **kw
    )


def test_rlimits_bound_file_size_cores_and_memory_in_the_child(tmp_path: Path):
    code = (
        "import resource, sys\n"
        "print(resource.getrlimit(resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_AS))\n"
        "try:\n"
        "    open('big', 'wb').write(b'x' * (2 << 20))\n"
        "except OSError as exc:\n"
        "    print('refused:', exc.strerror)\n"
    )
    result = _child(code, lambda: set_rlimits(LIMITS, memory_by_cgroup=False), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"(0, 0) ({1 << 30}, {1 << 30})", "refused: File too large"]
    assert (tmp_path / "big").stat().st_size == 1 << 20  # cut at the limit, not one byte more


def test_with_a_memory_cgroup_the_per_process_memory_limit_is_left_alone(tmp_path: Path):
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_AS))"
    result = _child(code, lambda: set_rlimits(LIMITS, memory_by_cgroup=True))
    assert result.stdout.strip() == str(resource.getrlimit(resource.RLIMIT_AS))


def test_the_process_limit_is_set_by_the_shell_or_the_command_fails():
    assert nproc_prefix(LIMITS) == "ulimit -p 64 2>/dev/null || ulimit -u 64 2>/dev/null || exit 126"
    result = subprocess.run(
        ["sh", "-c", f"{nproc_prefix(LIMITS)}; ulimit -u 2>/dev/null || ulimit -p"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout.strip() == "64"


@pytest.fixture
def cgroup():
    if "pids" not in _own_cgroup_folders():
        pytest.skip("no pids cgroup can be made here (RLIMIT_NPROC bounds the sandbox instead)")
    made = CommandCgroup.create(LIMITS)
    if not made.folders:
        pytest.skip("this process may not create a cgroup")
    yield made
    made.remove()


def test_a_command_cgroup_holds_the_limits_and_the_child_that_joins_it(cgroup: CommandCgroup):
    assert cgroup.bounds_processes and all(f.name.startswith(f"{CGROUP_PREFIX}{os.getpid()}.") for f in cgroup.folders)
    pids = next(f for f in cgroup.folders if (f / "pids.max").exists())
    assert (pids / "pids.max").read_text().strip() == "64"
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], preexec_fn=cgroup.join, stdin=subprocess.PIPE
    )
    try:
        assert str(child.pid) in (pids / "cgroup.procs").read_text().split()
    finally:
        child.communicate(b"")
    cgroup.remove()
    assert cgroup.folders == [] and not pids.exists()
    cgroup.remove()  # twice: nothing left to do


def test_what_a_dead_agent_left_in_its_sandbox_cgroup_is_killed_by_the_next_command(tmp_path):
    """An agent killed while bwrap sets up can leave bwrap waiting; its cgroup (named for the
    dead agent's pid) is emptied and removed when any agent next makes a sandbox."""
    folders = _own_cgroup_folders()
    if "pids" not in folders:
        pytest.skip("no pids cgroup can be made here (RLIMIT_NPROC bounds the sandbox instead)")
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = folders["pids"] / f"{CGROUP_PREFIX}{gone.pid}.0"
    try:
        stale.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup here: {exc}")
    left = subprocess.Popen(["sleep", "300"])
    try:
        (stale / "cgroup.procs").write_text(str(left.pid))
        made = CommandCgroup.create(ResourceLimits(1 << 30, 64, 1 << 20))
        made.remove()
        assert left.wait(timeout=30) == -9
    finally:
        left.kill()
        left.wait()
        if stale.exists():
            CommandCgroup.create(ResourceLimits(1 << 30, 64, 1 << 20)).remove()  # now empty: removed
    assert not stale.exists()
