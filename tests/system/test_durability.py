"""Durability: kill -9 at any moment, SIGTERM/SIGINT, overlapping runs, broken invariants, and a
full or read-only disk. Each test would fail if the protection it names were removed.

Real `python -m agent` processes are used wherever the protection is about processes (kills,
signals, the lock); in-process runs (CliRunner) where a fault is injected by monkeypatching the
operating-system call that fails (ENOSPC, EROFS) or a buggy dispatcher path (invariants).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

import agent.cycle.dispatch
from agent.common.outcomes import ExitCode
from agent.common.tags import Tag
from agent.cycle.crash import unfinished_cycle
from agent.scratchpad import read_state_file
from agent.store.db import Database, records
from agent.store.home import Home
from agent.store.lock import is_locked
from tests.helpers import cycle_records, make_home, run_cli, tree_digest, wait_for, write_script

ALLOW = "shell_allowlist: [sleep, mkdir, rmdir]\n"  # the commands these tests' scripts run (LockHolder adds cat)

# One cycle's work: set a task and a queue, set goals, finish. Deterministic given the state read.
WORK = [
    {"tool": "update_scratchpad", "args": {"current_task": "write report", "pending_actions": ["review", "ship"]}},
    {"tool": "update_scratchpad", "args": {"goals": ["survive kill -9"]}},
    {"tool": "done", "args": {"summary": "report written"}},
]


# ---------------------------------------------------------------------------------- helpers


def agent_env(extra: dict | None = None) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY", "AGENT_TEST_KILL_AT")
    }
    env.update(extra or {})
    return env


def spawn(*args: str, extra_env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agent", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=agent_env(extra_env),
    )


def run_proc(*args: str, extra_env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent", *args],
        capture_output=True,
        text=True,
        env=agent_env(extra_env),
        timeout=timeout,
    )


KILLED_NOTE = re.compile(r"^\[CYCLE FAILED\] cycle \S+ was killed before it saved .*\n?", re.MULTILINE)


def core(state: dict) -> dict:
    """A state without the runtime's timestamp and the note a cycle starts with when the one before
    it was killed (the only things two identical cycles differ in)."""
    out = {k: v for k, v in state.items() if k != "last_updated"}
    if isinstance(out.get("notes"), str):
        out["notes"] = KILLED_NOTE.sub("", out["notes"])
    return out


def without_interrupted(state: dict) -> dict:
    """The state without its [INTERRUPTED] note lines: the one thing a cycle adds to the state it
    read before its before snapshot, when a kill cut a call with side effects (agent/cycle/journal.py)."""
    lines = [line for line in state["notes"].split("\n") if not line.startswith(Tag.INTERRUPTED.value)]
    return dict(state, notes="\n".join(lines))


def active_state(home: Path) -> dict:
    state = read_state_file(home / "scratchpad" / "active.yaml", home)
    assert state is not None
    return state


def leftovers(home: Path) -> list[Path]:
    return sorted(p for folder in ("scratchpad", "logs") for p in (home / folder).glob(".*.tmp"))


def assert_every_file_whole(home: Path) -> None:
    """Every snapshot and active.yaml parses as a valid scratchpad; the database passes SQLite's own
    integrity check (read by a process of its own, as the next command would find it)."""
    for path in sorted((home / "scratchpad").glob("*.yaml")):
        assert read_state_file(path, home) is not None, path
    if (home / "logs" / "agent.db").exists():
        check = (
            "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])"
        )
        found = subprocess.run(
            [sys.executable, "-c", check, str(home / "logs" / "agent.db")], capture_output=True, text=True
        )
        assert found.stdout.strip() == "ok", found.stdout + found.stderr


def journal_rows(home: Path) -> list[str]:
    """The journal of calls, as stored: what decides the note a cycle after a kill starts with."""
    if not (home / "logs" / "agent.db").exists():
        return []
    return [text for (text,) in records(Home.at(home)).rows("SELECT record FROM call ORDER BY seq")]


class Expected:
    """What one uninterrupted cycle of `script` makes of a given active.yaml, computed by running
    that cycle in-process in a scratch home (cached by the state's content). With `home`, its
    journal of calls goes along: a cycle after a kill mid-call notes that call (agent/cycle/journal.py).
    `after_a_kill`: the cycle before it was killed before saving (the cycle then starts with a note
    saying so)."""

    def __init__(self, folder: Path, script: Path, config: str):
        self.folder, self.script, self.config = folder, script, config
        self.cache: dict[str, dict] = {}
        self.lock = threading.Lock()
        self.count = 0

    def after(self, state: dict, home: Path | None = None, after_a_kill: bool = False) -> dict:
        calls = journal_rows(home) if home is not None else []
        whole = {k: v for k, v in state.items() if k != "last_updated"}  # its notes as they are: they are bounded
        key = hashlib.sha256(json.dumps([whole, after_a_kill, calls], sort_keys=True).encode()).hexdigest()
        with self.lock:
            if key not in self.cache:
                self.count += 1
                scratch = self.folder / f"expected-{self.count}"
                scratch.mkdir()
                (scratch / "config.yaml").write_text(self.config)
                (scratch / "scratchpad").mkdir()
                (scratch / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(state, sort_keys=False))
                if (
                    after_a_kill
                ):  # a before snapshot, no after; the id as long as a real one: notes_budget counts characters
                    (scratch / "scratchpad" / "20000101_000000_01_before.yaml").write_text(yaml.safe_dump(state))
                if calls:  # the same journal (the database made now finds the snapshot above a killed cycle's)
                    db = records(Home.at(scratch))
                    with db.write():
                        for text in calls:
                            found = json.loads(text)
                            db.execute(
                                "INSERT INTO call (format, call, event, record) VALUES (1, ?, ?, ?)",
                                (found["call"], found["event"], text),
                            )
                result = run_cli("run", "--home", str(scratch), "--model", f"scripted:{self.script}", "-q")
                assert result.exit_code == 0, result.output
                self.cache[key] = core(active_state(scratch))
                shutil.rmtree(scratch)
            return self.cache[key]


# ------------------------------------------------------------------------ 1. crash safety


@pytest.mark.slow  # many real processes
def test_kill_at_every_write_step_loses_nothing(tmp_path: Path):
    """AGENT_TEST_KILL_AT=k SIGKILLs `agent run` at its k-th write step (lock taken, each temporary
    file created / written / synced / renamed / folder synced, each index append). For every k:
    active.yaml is whole-old or whole-new, every snapshot parses, and the next run proceeds
    (no stale lock) and clears the leftover temporary files."""
    base = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_cli("run", "--home", str(base), "--model", f"scripted:{script}", "-q").exit_code == 0
    old_bytes = (base / "scratchpad" / "active.yaml").read_bytes()
    old = active_state(base)
    expected = Expected(tmp_path, script, (base / "config.yaml").read_text())
    new_core = expected.after(old)
    assert new_core != core(old)

    steps, k = [], 0
    while True:
        k += 1
        assert k < 60, "more kill points than expected: is the AGENT_TEST_KILL_AT counter broken?"
        home = tmp_path / f"kill-{k}"
        shutil.copytree(base, home, symlinks=True)
        killed = run_proc(
            "run", "--home", str(home), "--model", f"scripted:{script}", "-q", extra_env={"AGENT_TEST_KILL_AT": str(k)}
        )
        if killed.returncode == 0:
            break  # k is past the last write step: the cycle ran to the end
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        step = re.search(r"AGENT_TEST_KILL_AT: killed at (.*)", killed.stderr).group(1)
        steps.append(step)

        active_bytes = (home / "scratchpad" / "active.yaml").read_bytes()
        now = active_state(home)
        if active_bytes != old_bytes:  # whole-new, never a mix
            assert core(now) == new_core, step
        assert_every_file_whole(home)
        for before in (home / "scratchpad").glob("*_before.yaml"):
            if before.stat().st_mtime_ns > (base / "scratchpad" / "active.yaml").stat().st_mtime_ns:
                assert read_state_file(before, home) == old, step  # the snapshot is exactly what was read

        after_a_kill = unfinished_cycle(Home.at(home)) is not None
        want = expected.after(now, home, after_a_kill)  # from the journal as the next run finds it
        nxt = run_proc("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
        assert nxt.returncode == 0, f"after a kill at {step}: {nxt.stderr}"
        assert core(active_state(home)) == want, step
        assert leftovers(home) == [], step
        assert not is_locked(Home.at(home))
        shutil.rmtree(home)

    joined = "\n".join(steps)
    for must in (
        "lock taken",
        "_before.yaml: temporary file created",
        "_before.yaml: temporary file written",
        "_after.yaml: renamed",
        "active.yaml: temporary file created",
        "active.yaml: temporary file written",
        "active.yaml: temporary file synced",
        "active.yaml: renamed",
        "active.yaml: folder synced",
        "agent.db: before commit",
        "agent.db: committed",
    ):
        assert must in joined, f"no kill at '{must}' (saw: {steps})"
    assert len(steps) >= 15


def test_kill_at_every_write_step_of_reset(tmp_path: Path):
    base = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_cli("run", "--home", str(base), "--model", f"scripted:{script}", "-q").exit_code == 0
    old_bytes = (base / "scratchpad" / "active.yaml").read_bytes()
    template = (Path(__file__).resolve().parents[2] / "agent" / "templates" / "default.yaml").read_text()
    k, kills = 0, 0
    while True:
        k += 1
        assert k < 20
        home = tmp_path / f"reset-{k}"
        shutil.copytree(base, home)
        killed = run_proc("reset", "--home", str(home), extra_env={"AGENT_TEST_KILL_AT": str(k)})
        if killed.returncode == 0:
            break
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        kills += 1
        now = (home / "scratchpad" / "active.yaml").read_bytes()
        assert now == old_bytes or yaml.safe_load(now) == yaml.safe_load(template)
        assert_every_file_whole(home)
        again = run_proc("reset", "--home", str(home))
        assert again.returncode == 0, again.stderr
        assert leftovers(home) == []
        shutil.rmtree(home)
    assert kills >= 5


def _calibrate(tmp_path: Path, script: Path) -> tuple[float, float, str]:
    """How long a whole run takes here and now (spawn to exit), how long its cycle (lock taken to
    saved), medians of three; and the config the homes use. Kills are spread over those spans."""
    calib = make_home(tmp_path, ALLOW, "calibrate")
    spans = []
    for _ in range(3):
        started = time.monotonic()
        assert run_proc("run", "--home", str(calib), "--model", f"scripted:{script}", "-q").returncode == 0
        spans.append(time.monotonic() - started)
    inner = sorted(r["duration_s"] for r in cycle_records(calib))[1]
    return sorted(spans)[1], inner, (calib / "config.yaml").read_text()


def _kill_at_a_random_moment(proc, rng: random.Random, home: Path, logs: set, span: float, inner: float) -> None:
    """SIGKILL `proc` (an `agent run` started when `home` held `logs`) at a random moment: 30% of the
    time anywhere in its whole span, else inside the cycle proper (once its log exists)."""
    if rng.random() < 0.3:  # anywhere from interpreter start-up to the end
        time.sleep(rng.uniform(0, 1.1 * span))
    else:  # inside the cycle proper: once its log exists, somewhere in its writes
        deadline = time.monotonic() + 10
        while (
            not set((home / "logs").glob("cycle_*.log")) - logs and proc.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 1.2 * inner))
    proc.kill()
    proc.communicate(timeout=30)


def _a_normal_run_proceeds(home: Path, now: dict, expected: Expected, script: Path) -> None:
    """After kills, a normal run ends the state the journal implies and clears every leftover."""
    after_a_kill = unfinished_cycle(Home.at(home)) is not None
    want = expected.after(now, home, after_a_kill)  # from the journal as the next run finds it
    nxt = run_proc("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
    assert nxt.returncode == 0, nxt.stderr
    assert core(active_state(home)) == want
    assert leftovers(home) == []
    assert not is_locked(Home.at(home))


@pytest.mark.slow  # many real processes
def test_random_sigkills_during_real_cycles(tmp_path: Path):
    """100 `agent run` processes SIGKILLed at random moments (two homes in parallel, each a chain
    of cycles). After every kill: active.yaml is exactly the state before that cycle or the state
    after it, every snapshot is whole, a before snapshot holds exactly the state read; every few
    kills a normal run must proceed and clear temporary files."""
    kills_per_home, homes = 50, 2
    script = write_script(tmp_path, [WORK[0], {"tool": "shell", "args": {"command": "sleep 0.01"}}, *WORK[1:]])
    seed = int(os.environ.get("DURABILITY_SEED", random.randrange(1 << 30)))
    print(f"DURABILITY_SEED={seed}")

    span, inner, config = _calibrate(tmp_path, script)
    expected = Expected(tmp_path, script, config)
    stats = {"old": 0, "new": 0, "mid-cycle": 0, "completed": 0}
    stats_lock = threading.Lock()

    def chain(n: int) -> None:
        rng = random.Random(seed + n)
        home = make_home(tmp_path, ALLOW, f"chain-{n}")
        for i in range(kills_per_home):
            old_bytes = (home / "scratchpad" / "active.yaml").read_bytes()
            old = active_state(home)
            new_core = expected.after(old, home, unfinished_cycle(Home.at(home)) is not None)
            befores = set((home / "scratchpad").glob("*_before.yaml"))
            logs = set((home / "logs").glob("cycle_*.log"))
            proc = spawn("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
            _kill_at_a_random_moment(proc, rng, home, logs, span, inner)
            now_bytes = (home / "scratchpad" / "active.yaml").read_bytes()
            now = active_state(home)
            outcome = "old" if now_bytes == old_bytes else "new"
            if outcome == "new":
                assert core(now) == new_core, f"kill {i} of home {n}: neither the old nor the new state"
            assert_every_file_whole(home)
            new_befores = set((home / "scratchpad").glob("*_before.yaml")) - befores
            for before in new_befores:  # what was read, plus the note on a call a kill cut (agent/cycle/journal.py)
                assert without_interrupted(read_state_file(before, home)) == without_interrupted(old)
            with stats_lock:
                stats[outcome] += 1
                if proc.returncode == 0:
                    stats["completed"] += 1
                elif new_befores and outcome == "old":
                    stats["mid-cycle"] += 1
            if i % 5 == 4:
                _a_normal_run_proceeds(home, now, expected, script)

    with ThreadPoolExecutor(homes) as pool:
        for future in [pool.submit(chain, n) for n in range(homes)]:
            future.result()
    print(f"kills: {kills_per_home * homes}, span {span:.3f}s, cycle {inner:.3f}s, outcomes {stats}")
    assert stats["old"] + stats["new"] == kills_per_home * homes
    # the timing really reached inside cycles, not only interpreter start-up
    assert stats["mid-cycle"] + (stats["new"] - stats["completed"]) >= 5, stats


# ----------------------------------------------------------------------------- 2. signals


def _log_text(home: Path) -> str:
    return "".join(p.read_text() for p in (home / "logs").glob("cycle_*.log"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"])
def test_signal_during_a_cycle_fails_it_cleanly(tmp_path: Path, sig):
    home = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, [WORK[0], {"tool": "shell", "args": {"command": "sleep 37"}}, WORK[2]])
    (home / "scratchpad" / "active.yaml").write_text("goals: [stay]\nnotes: known before\ncompleted_tasks: [old]\n")
    read = active_state(home)
    proc = spawn("run", "--home", str(home), "--model", f"scripted:{script}")
    wait_for(lambda: "sleep 37" in _log_text(home), what="the shell tool to start")
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert time.monotonic() - started < 10, "the cycle waited for the tool instead of stopping"

    assert proc.returncode == ExitCode.FAILED, (out, err)
    assert "Traceback" not in out + err
    assert f"interrupted by {sig.name}" in out
    saved = active_state(home)
    failure_note = saved["notes"].split("\n")[-1]
    assert failure_note.startswith("[CYCLE FAILED]") and f": interrupted by {sig.name} (see" in failure_note
    # the state as read plus exactly one note: the update the loop made before the signal is dropped
    assert core(saved) == dict(core(read), notes=read["notes"] + "\n" + failure_note)
    after = sorted((home / "scratchpad").glob("*_after.yaml"))
    assert len(after) == 1 and read_state_file(after[0], home) == core(saved) | {"last_updated": read["last_updated"]}
    assert leftovers(home) == []
    assert not is_locked(Home.at(home))
    assert f"cycle failed: interrupted by {sig.name}" in _log_text(home)
    assert not _processes_running(b"sleep\x0037\x00", home), "the tool's command outlived the cycle"
    nxt = run_proc("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, WORK, 'w.yaml')}", "-q")
    assert nxt.returncode == 0, nxt.stderr


def _processes_running(cmdline: bytes, cwd: Path) -> list[int]:
    """Pids running `cmdline` in `cwd` (the shell tool runs commands in the home; matching the
    folder keeps another test run on the same machine from being counted)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == cmdline and (entry / "cwd").resolve() == cwd.resolve():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


SIGNAL_WHILE_WRITING_BEFORE = """
import os, signal, sys
import agent.cycle.sleep as cycle
real = cycle.write_state
def write_state(path, state):
    if path.name.endswith("_before.yaml"):
        os.kill(os.getpid(), signal.SIG{sig})  # arrives while step 4 writes the before snapshot
    return real(path, state)
cycle.write_state = write_state
from agent.cli import entry
sys.argv = ["agent", *sys.argv[1:]]
entry()
"""


@pytest.mark.parametrize("sig", ["TERM", "INT"])
def test_signal_before_the_loop_starts_is_a_failed_cycle_not_a_crash(tmp_path: Path, sig):
    """A signal that lands between taking the lock and the loop (while writing the before
    snapshot) is held until the snapshot is whole, then fails the cycle: exit 4, state as read
    plus a note. (Without the handler installed at lock time, SIGTERM would kill the process
    outright and SIGINT would end it with a KeyboardInterrupt traceback.)"""
    home = make_home(tmp_path, ALLOW)
    (home / "scratchpad" / "active.yaml").write_text("goals: [stay]\nnotes: known before\n")
    read = active_state(home)
    script = write_script(tmp_path, WORK)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            SIGNAL_WHILE_WRITING_BEFORE.replace("{sig}", sig),
            "run",
            "--home",
            str(home),
            "--model",
            f"scripted:{script}",
        ],
        capture_output=True,
        text=True,
        env=agent_env(),
        timeout=60,
    )
    assert proc.returncode == ExitCode.FAILED, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    saved = active_state(home)
    assert core(saved) == dict(core(read), notes=saved["notes"])
    assert saved["notes"].startswith("known before\n[CYCLE FAILED]") and f"SIG{sig}" in saved["notes"]
    assert saved["notes"].count("\n") == 1
    assert_every_file_whole(home)
    assert leftovers(home) == [] and not is_locked(Home.at(home))


# --------------------------------------------------------------------- 3. overlapping runs


class LockHolder:
    """A real cycle that holds the home's lock until the test releases it: its shell tool runs
    `cat` on a FIFO in the home, which blocks until `release()` writes to it. No fixed sleep, so
    a busy machine cannot make the holder let go before the test is done with the others."""

    def __init__(self, tmp_path: Path, home: Path):
        self.fifo = home / "workspace" / "release.fifo"  # the shell runs in the workspace
        os.mkfifo(self.fifo)
        config = home / "config.yaml"
        config.write_text(config.read_text().replace("[sleep,", "[cat, sleep,") + "shell_timeout: 600\n")
        script = write_script(
            tmp_path, [WORK[0], {"tool": "shell", "args": {"command": "cat release.fifo"}}, *WORK[1:]], "long.yaml"
        )
        self.proc = spawn("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
        wait_for(lambda: "cat release.fifo" in _log_text(home), what="the holder to reach its shell tool")
        # the command's process-group record is written once it started: only then is the home still
        wait_for(lambda: list((home / "logs" / ".running").glob("*.json")), what="the holder's command to start")

    def release(self) -> None:
        """Let the holder's tool finish (waits, bounded, for `cat` to open the FIFO)."""
        fd = wait_for(lambda: _open_for_writing(self.fifo), timeout=60, what="the holder's cat to open the FIFO")
        os.write(fd, b"released\n")
        os.close(fd)


def _open_for_writing(fifo: Path) -> int | None:
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # no reader yet
            return None
        raise


@pytest.mark.slow  # many real processes
def test_while_a_cycle_runs_every_other_run_and_reset_exits_busy_without_reading_or_writing(tmp_path: Path):
    """One cycle holds the lock (blocked in a tool until the test releases it); 19 more `run` and `reset` processes start
    at once. Each exits 5 with the busy message. To prove they did not even *read*, active.yaml
    is replaced by garbage while the holder waits: a process that read it would exit 6 instead.
    Not one file changes while they run; afterwards the holder saves its cycle normally."""
    home = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    read = active_state(home)
    holding = LockHolder(tmp_path, home)
    holder = holding.proc
    (home / "scratchpad" / "active.yaml").write_bytes(b"\x00garbage: [\n")  # the holder already read it
    frozen = tree_digest(home)

    others = [
        spawn("run", "--home", str(home), "--model", f"scripted:{script}")
        if i % 3
        else spawn("reset", "--home", str(home))
        for i in range(19)
    ]
    results = [(p.args[3], *p.communicate(timeout=60), p.returncode) for p in others]
    assert tree_digest(home) == frozen  # nothing read-then-written, no snapshot, no log, no reset
    assert holder.poll() is None, "the holder should still be running"
    for command, out, err, code in results:
        assert code == ExitCode.BUSY, (command, out, err)
        assert "another agent process holds the lock on" in err
        assert "invalid" not in err.lower()

    holding.release()
    holder.communicate(timeout=60)
    assert holder.returncode == 0
    assert core(active_state(home))["completed_tasks"] == read["completed_tasks"] + [
        {"task": "write report", "summary": "report written"}
    ]
    assert len(list((home / "scratchpad").glob("*_before.yaml"))) == 2


@pytest.mark.slow  # many real processes
def test_twenty_overlapping_runs_and_resets_serialise_and_lose_no_update(tmp_path: Path):
    """20 processes (14 run, 6 reset, each reset from its own template) start at once on one home.
    Every process exits 0 (it held the lock) or 5 (busy). Mutual exclusion is checked in-band: each
    cycle's first tool makes a directory and its last removes it, so an overlapping cycle would
    record a failed mkdir. No update is lost: ordered by cycle id, each cycle read exactly what the
    previous cycle saved or what a successful reset wrote."""
    home = make_home(tmp_path, ALLOW)
    (home / "templates").mkdir()
    for r in range(6):
        (home / "templates" / f"r{r}.yaml").write_text(f"goals: [reset-{r}]\nnotes: ''\n")
    script = write_script(
        tmp_path,
        [
            {"tool": "shell", "args": {"command": "mkdir held"}},
            WORK[0],
            {"tool": "shell", "args": {"command": "sleep 0.05"}},
            {"tool": "shell", "args": {"command": "rmdir held"}},
            WORK[2],
        ],
    )
    start = [
        spawn("reset", "--home", str(home), "--template", f"r{i // 3}", "--json")
        if i % 3 == 0 and i < 18
        else spawn("run", "--home", str(home), "--model", f"scripted:{script}", "--json")
        for i in range(20)
    ]
    done = [(p.args[3], *p.communicate(timeout=120), p.returncode) for p in start]
    assert len([d for d in done if d[0] == "reset"]) == 6
    codes = [d[3] for d in done]
    assert set(codes) <= {0, 5}, done
    assert 0 in codes
    for command, out, err, code in done:
        if code == 5:
            assert "another agent process holds the lock" in err and out == ""
    runs_ok = [d for d in done if d[0] == "run" and d[3] == 0]
    resets_ok = {json.loads(d[1])["template"] for d in done if d[0] == "reset" and d[3] == 0}
    reset_states = [read_state_file(Path(t), Path(t).parent) for t in resets_ok]

    by_id = lambda p: p.name.rsplit("_", 1)[0]  # noqa: E731 - "X_before" sorts after "X_02_before" by name
    befores = sorted((home / "scratchpad").glob("*_before.yaml"), key=by_id)
    afters = sorted((home / "scratchpad").glob("*_after.yaml"), key=by_id)
    assert [by_id(b) for b in befores] == [by_id(a) for a in afters]
    assert len(befores) == len(runs_ok) == len(cycle_records(home))
    previous = None
    for before, after in zip(befores, afters):
        b, a = read_state_file(before, home), read_state_file(after, home)
        assert "[exit status" not in a["notes"], "two cycles overlapped (mkdir held failed)"
        assert a["completed_tasks"][-1] == {"task": "write report", "summary": "report written"}
        candidates = [core(s) for s in reset_states] + (
            [previous]
            if previous is not None
            else [
                core(
                    read_state_file(Path(__file__).resolve().parents[2] / "agent" / "templates" / "default.yaml", home)
                )
            ]
        )
        assert core(b) in candidates, "a cycle read a state nobody saved: an update was lost"
        previous = core(a)
    final = core(active_state(home))
    assert final == previous or final in [core(s) for s in reset_states]
    assert not (home / "held").exists()
    assert not is_locked(Home.at(home))


def test_wait_queues_runs_and_resets_instead_of_exiting_busy(tmp_path: Path):
    """With --wait, callers queue: 6 runs started at once while a cycle holds the lock all
    finish, one at a time, and every one's completed task is kept (no lost update). A reset
    with --wait waits too; without --wait it exits 5; with a too-short wait it exits 5 saying so."""
    home = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, WORK)
    holding = LockHolder(tmp_path, home)
    holder = holding.proc
    quick = run_proc("reset", "--home", str(home))
    assert quick.returncode == ExitCode.BUSY
    short = run_proc("reset", "--home", str(home), "--wait", "0.2")
    assert short.returncode == ExitCode.BUSY and "after waiting 0.2s" in short.stderr
    queued = [
        spawn("run", "--home", str(home), "--model", f"scripted:{script}", "--wait", "60", "-q") for _ in range(6)
    ]
    holding.release()
    for proc in queued:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    holder.communicate(timeout=60)
    assert holder.returncode == 0
    done = active_state(home)["completed_tasks"]
    assert done == [{"task": "write report", "summary": "report written"}] * 7
    waited_reset = spawn("reset", "--home", str(home), "--wait", "30")
    assert waited_reset.wait(timeout=60) == 0
    assert active_state(home)["completed_tasks"] == []


# ---------------------------------------------------------------------------- 5. invariants


def _buggy(change):
    """A dispatcher whose update_scratchpad applies the update and then `change`s the state:
    a stand-in for any bug in a model/tool path that corrupts what the cycle would save."""
    real = agent.cycle.dispatch.apply_update

    def apply_update(state, args, *rest):
        new, refusal = real(state, args, *rest)
        if refusal is None:
            new = change(new)
        return new, refusal

    return apply_update


@pytest.mark.parametrize(
    "change, why",
    [
        (lambda s: dict(s, completed_tasks=s["completed_tasks"][1:]), "no longer a prefix"),
        (lambda s: dict(s, completed_tasks=list(reversed(s["completed_tasks"]))), "no longer a prefix"),
        (
            lambda s: dict(
                s,
                completed_tasks=[
                    dict(t, summary="rewritten") if isinstance(t, dict) else t + "!" for t in s["completed_tasks"]
                ],
            ),
            "no longer a prefix",
        ),
        (lambda s: dict(s, goals="not a list"), "field 'goals' must be a list of strings"),
        (lambda s: dict(s, current_task=42), "field 'current_task' must be a string or null"),
        (lambda s: dict(s, completed_tasks=s["completed_tasks"] + [5]), "field 'completed_tasks[2]' must be"),
        (
            lambda s: {k: v for k, v in s.items() if k != "pending_actions"} | {"pending_actions": {"x": 1}},
            "field 'pending_actions' must be a list",
        ),
        (lambda s: dict(s, last_updated="2099-01-01T00:00:00+00:00"), "runtime-owned field 'last_updated'"),
    ],
    ids=[
        "shrunk",
        "reordered",
        "rewritten",
        "goals-type",
        "task-type",
        "done-item-type",
        "pending-type",
        "last-updated",
    ],
)
def test_broken_invariant_drops_the_cycle_changes(tmp_path: Path, monkeypatch, change, why):
    home = make_home(tmp_path, ALLOW)
    (home / "scratchpad" / "active.yaml").write_text(
        "goals: [g]\ncurrent_task: t\ncompleted_tasks: [first, {task: second, summary: s}]\n"
        "notes: before\nlast_updated: '2024-01-01T00:00:00+00:00'\n"
    )
    read = active_state(home)
    monkeypatch.setattr(agent.cycle.dispatch, "apply_update", _buggy(change))
    # one buggy update, then the iteration cap ends the loop: the invariants see the bad state
    script = write_script(tmp_path, [WORK[1]])
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--max-iterations", "1")
    assert result.exit_code == ExitCode.FAILED, result.output
    assert "breaks a rule, so it was not saved" in result.stdout and why in result.stdout
    saved = active_state(home)
    note = saved["notes"].split("\n")[-1]
    assert note.startswith("[CYCLE FAILED]") and "breaks a rule, so it was not saved" in note and why in note
    assert core(saved) == dict(core(read), notes="before\n" + note)
    assert saved["last_updated"] != "2099-01-01T00:00:00+00:00"
    after = sorted((home / "scratchpad").glob("*_after.yaml"))[-1]
    assert read_state_file(after, home) == dict(read, notes=saved["notes"])


# ------------------------------------------------------------------------ 8. disk problems


def _fail_writes(monkeypatch, err: int, matches) -> list[str]:
    """Make every open-for-writing of a path that `matches` fail with `err`, in this process.
    (The lock, atomic writes' temporary files, the cycle log and the index all open with
    os.open, so this is where a full or read-only file system first says no.)"""
    real_open = os.open
    refused: list[str] = []

    def fake_open(path, flags, *args, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and matches(os.fspath(path)):
            refused.append(os.fspath(path))
            raise OSError(err, os.strerror(err), os.fspath(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", fake_open)
    return refused


def _lived_in(tmp_path: Path) -> tuple[Path, Path, bytes]:
    home = make_home(tmp_path, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
    return home, script, (home / "scratchpad" / "active.yaml").read_bytes()


def _fail_database_writes(monkeypatch, matches) -> list[str]:
    """Make every statement of logs/agent.db that `matches` fail as SQLite fails on a full disk
    (SQLITE_FULL), in this process: the error goes the way a real one does, from there on."""
    refused: list[str] = []
    real = Database.execute

    def execute(self, sql, args=()):
        if matches(sql):
            refused.append(sql)
            with self.errors():
                full = sqlite3.OperationalError("database or disk is full")
                full.sqlite_errorcode = 13  # SQLITE_FULL
                raise full
        return real(self, sql, args)

    monkeypatch.setattr(Database, "execute", execute)
    return refused


@pytest.mark.parametrize(
    "where", ["_before.yaml", "_after.yaml", "active.yaml", "cycle_", "agent.db: the id", "agent.db: the record"]
)
def test_full_disk_mid_cycle_is_exit_7_and_keeps_active(tmp_path: Path, monkeypatch, where):
    """ENOSPC (simulated in-process) at each file a cycle writes: one clear message, exit 7, the
    previous active.yaml intact (when only the record failed, after it was saved, it is put back),
    no temporary files, and the lock released."""
    home, script, old = _lived_in(tmp_path)
    if where.startswith("agent.db"):
        statement = "INSERT INTO cycle (id) VALUES" if where.endswith("id") else "INSERT INTO cycle (id, format, record"
        refused = _fail_database_writes(monkeypatch, lambda sql: sql.startswith(statement))
    else:
        refused = _fail_writes(monkeypatch, errno.ENOSPC, lambda p: where in Path(p).name)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    monkeypatch.undo()
    assert refused, "the simulated failure never triggered"
    assert result.exit_code == ExitCode.DISK, result.output
    assert "agent: error: could not write" in result.stderr and "(the disk is full)" in result.stderr
    assert "Traceback" not in result.output
    assert (home / "scratchpad" / "active.yaml").read_bytes() == old
    assert_every_file_whole(home)
    assert leftovers(home) == []
    assert not is_locked(Home.at(home))
    again = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
    assert again.exit_code == 0


def test_a_record_the_database_refuses_is_exit_7_and_the_previous_active_yaml_is_put_back(tmp_path: Path, monkeypatch):
    """The cycle works and saves; then the database refuses its record as SQLite refuses a write on a
    read-only disk (tests/store/faults.py: SQLite's own result code, through the same error path),
    and the active.yaml it replaced is put back, so exit 7 means what the docs say; its result stays
    in its after snapshot, the records are as they were, and nothing is left over."""
    import agent.after.aftercare
    from tests.store.faults import read_only

    home, script, old = _lived_in(tmp_path)
    recorded = cycle_records(home)
    real = agent.after.aftercare.add_record

    def refused(at: Home, record: dict) -> None:
        read_only(at)  # only now: the cycle took its id and saved before this
        real(at, record)

    monkeypatch.setattr(agent.after.aftercare, "add_record", refused)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
    monkeypatch.undo()
    assert result.exit_code == ExitCode.DISK, result.output
    [line] = result.stderr.splitlines()  # one line for cron mail
    assert line.startswith(f"agent: error: could not write {home / 'logs' / 'agent.db'}: Read-only file system")
    assert "active.yaml is as it was before cycle" in line and "_after.yaml, with no record in logs/agent.db" in line
    assert (home / "scratchpad" / "active.yaml").read_bytes() == old and cycle_records(home) == recorded
    cycle_id = re.search(r"before cycle (\S+) ", line).group(1)
    assert read_state_file(home / "scratchpad" / f"{cycle_id}_after.yaml", home) is not None  # the result, kept
    assert leftovers(home) == [] and not is_locked(Home.at(home))
    again = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q")
    assert again.exit_code == 0, again.output  # the home carries on from the state it had


def test_full_disk_while_writing_the_temporary_file(tmp_path: Path, monkeypatch):
    """ENOSPC from fsync (delayed allocation: the data did not fit) leaves the old file and
    removes the partial temporary file."""
    home, script, old = _lived_in(tmp_path)
    real_fsync = os.fsync

    def fsync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    monkeypatch.undo()
    assert result.exit_code == ExitCode.DISK
    assert "No space left on device (the disk is full)" in result.stderr
    assert (home / "scratchpad" / "active.yaml").read_bytes() == old
    assert leftovers(home) == [] and not is_locked(Home.at(home))


@pytest.mark.parametrize("command", ["run", "reset"])
def test_read_only_home_is_exit_7_and_changes_nothing(tmp_path: Path, monkeypatch, command):
    """A read-only home (EROFS simulated in-process for every write below the home: the tests run
    as root, and chmod does not stop root). Exit 7 with a clear message; every file unchanged."""
    home, script, old = _lived_in(tmp_path)
    frozen = tree_digest(home)
    _fail_writes(monkeypatch, errno.EROFS, lambda p: p.startswith(str(home)))
    args = (
        ["run", "--home", str(home), "--model", f"scripted:{script}"]
        if command == "run"
        else ["reset", "--home", str(home)]
    )
    result = run_cli(*args)
    monkeypatch.undo()
    assert result.exit_code == ExitCode.DISK, result.output
    assert "Read-only file system (the file system is read-only)" in result.stderr
    assert tree_digest(home) == frozen


# A real full disk and a real read-only file system, when this machine lets the tests mount a
# tiny tmpfs (root with CAP_SYS_ADMIN, as in CI containers); skipped otherwise.


@pytest.fixture
def tiny_fs(tmp_path: Path):
    mount = tmp_path / "fs"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_real_full_disk(tiny_fs: Path, tmp_path: Path):
    home = make_home(tiny_fs, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_proc("run", "--home", str(home), "--model", f"scripted:{script}", "-q").returncode == 0
    old = (home / "scratchpad" / "active.yaml").read_bytes()
    filler = tiny_fs / "filler"
    with open(filler, "wb", buffering=0) as handle:  # fill the file system to the last block
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    result = run_proc("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.returncode == ExitCode.DISK, result.stdout + result.stderr
    assert "No space left on device (the disk is full)" in result.stderr and "Traceback" not in result.stderr
    assert (home / "scratchpad" / "active.yaml").read_bytes() == old
    assert leftovers(home) == []
    filler.unlink()
    assert run_proc("run", "--home", str(home), "--model", f"scripted:{script}", "-q").returncode == 0


def test_real_read_only_file_system(tiny_fs: Path, tmp_path: Path):
    home = make_home(tiny_fs, ALLOW)
    script = write_script(tmp_path, WORK)
    assert run_proc("run", "--home", str(home), "--model", f"scripted:{script}", "-q").returncode == 0
    frozen = tree_digest(home)
    assert subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)]).returncode == 0
    for args in (["run", "--home", str(home), "--model", f"scripted:{script}"], ["reset", "--home", str(home)]):
        result = run_proc(*args)
        assert result.returncode == ExitCode.DISK, result.stdout + result.stderr
        assert "Read-only file system" in result.stderr and "Traceback" not in result.stderr
    assert tree_digest(home) == frozen
