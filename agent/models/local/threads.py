"""How many threads the embedded model gets, and how they wait for each other.

llama.cpp's CPU threads meet at an OpenMP barrier hundreds of times per token. Measured on 2
cores (bench/busy_threads.py, docs/measurements.md "Threads on a shared machine"):

- threads that spin while they wait (libgomp's default) are the fastest on an idle machine and
  collapse on a busy one: when the OS parks one thread, the others spin through their time
  slices at every barrier (an echo cycle went from 2 s to 60-170 s);
- threads that sleep at once (OMP_WAIT_POLICY=PASSIVE) never collapse, but pay a wake-up at
  every barrier: slower than one thread, idle or busy;
- one thread has no barrier to wait at: it only loses the share of the core others take.

A prompt is read in batches of hundreds of tokens: each barrier guards milliseconds of work, so
every core nobody else is running on when the model loads reads it (the first cycle on a machine
reads about 2,000 tokens: 1.7x faster on 2 idle cores than on one). A reply is decoded a token
at a time, microseconds between barriers, and a background job should not take a machine's last
free core, so decoding gets one thread fewer than those cores, and at least one (a 2-core machine
decodes on one thread, idle or busy; an idle 8-core one on seven). Threads spin only briefly
(GOMP_SPINCOUNT) before they sleep, so a machine that gets busy mid-cycle costs seconds, never
minutes. The `local_threads` setting (both counts), and OMP_WAIT_POLICY and GOMP_SPINCOUNT set by
the user, are kept as they are.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import NamedTuple

from agent.config import Settings

# About 10-50 microseconds of spinning before a waiting thread sleeps: long enough to catch a
# partner that is running (idle: 1.7 s per echo cycle, as fast as endless spinning), short
# enough that a parked partner costs little.
SPIN_COUNT = "10000"
LOADAVG = Path("/proc/loadavg")
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2; v1 quotas are not read


def _quota(cpu_max: Path) -> int | None:
    """The cores a cgroup (v2) CPU quota allows, rounded up ("150000 100000": 2); None if unlimited."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def cores(cpu_max: Path = CPU_MAX) -> tuple[int, bool]:
    """(the cores this process may use, whether they are the whole machine's). A container's
    CPU set or quota is part of a machine whose load average says nothing about it."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    quota = _quota(cpu_max)
    usable = min(allowed, quota or allowed)
    return usable, usable == (os.cpu_count() or 1)


def _own_running() -> int:
    """This process's threads that are running or ready to run (the reader is one of them)."""
    own = 0
    for stat in Path("/proc/self/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # the thread ended
            continue
        own += text[text.rindex(")") + 2 :].startswith("R")
    return max(own, 1)


def others_running(samples: int = 5, loadavg: Path = LOADAVG) -> int | None:
    """How many threads of other processes are running or ready to run: the fewest of a few looks
    10 ms apart (one look can catch a process that runs for a moment). None where the kernel does
    not say."""
    seen = []
    for sample in range(samples):
        try:
            running = int(loadavg.read_text().split()[3].split("/")[0])
        except (OSError, ValueError, IndexError):
            return None
        seen.append(max(0, running - _own_running()))
        if sample < samples - 1:
            time.sleep(0.01)
    return min(seen)


class Threads(NamedTuple):
    """The embedded model's threads: decoding a reply token by token, and reading a prompt in batches."""

    decode: int
    batch: int
    why: str


def thread_count(settings: Settings, loadavg: Path = LOADAVG, cpu_max: Path = CPU_MAX) -> Threads:
    """The threads for the embedded model, and why (see the module's docstring)."""
    if settings.local_threads:
        return Threads(settings.local_threads, settings.local_threads, "local_threads")
    total, whole_machine = cores(cpu_max)
    busy = others_running(loadavg=loadavg) if whole_machine else None
    if busy is None:
        why = f"{total} cores" if whole_machine else f"{total} cores of a CPU set or quota"
        return Threads(max(1, total - 1), total, why)
    free = max(1, total - busy)
    return Threads(max(1, free - 1), free, f"{total} cores, {min(busy, total)} busy")


def set_wait_policy() -> str:
    """Have OpenMP threads spin briefly, then sleep, unless the user chose; what is in effect.
    libgomp reads these once, when llama_cpp loads it, so this runs before the import."""
    if "OMP_WAIT_POLICY" not in os.environ:
        os.environ.setdefault("GOMP_SPINCOUNT", SPIN_COUNT)
    chosen = {name: os.environ[name] for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if name in os.environ}
    return ", ".join(f"{name}={value}" for name, value in chosen.items())
