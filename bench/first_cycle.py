#!/usr/bin/env python3
"""The first cycle a newcomer sees: `agent reset --template demo && agent run`, embedded model.

Each round gives the command a new HOME (so no ~/.cache: no prompt cache, no converted model) and
a new home folder, and times it as one shell command ("first home"); then a second new home
under the same HOME ("second home": what a second agent on the same machine pays). Rounds are
repeated and the medians printed, with the load average before every run. Wall time is the shell
command's; CPU time is the whole process tree's (the shell, both agent processes and the model's
child: user + system from wait4), which the rest of a shared machine's load does not inflate the
way it does wall time. The page cache is not dropped: the model file and Python's modules are
read from memory, as on any machine after the install that wrote them.

    python bench/first_cycle.py --runs 5
    python bench/first_cycle.py --runs 5 --tree before=/tmp/before --tree now=.   # side by side

A tree is a checkout of this repository (`git worktree add --detach DIR COMMIT`), run with this
Python environment (llama-cpp-python and the bundled model are shared); trees alternate within a
round. Each run's split comes from its home's transcript (the first model call: reading the
prompt, the reply and saving the prompt cache) and its `agent run --json` report. Prints the
table docs/measurements.md shows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = "python -m agent reset --template demo >/dev/null && python -m agent run --json"
RUN_CAP = 600.0  # seconds: a run still going then is stopped (and the bench says so)


@dataclass
class Run:
    wall: float
    cpu: float
    load: float
    code: int
    cycle_s: float | None  # the cycle as its report times it (the lock to the end)
    first_call_s: float | None  # the first model call, from the transcript


@dataclass
class Tree:
    label: str
    path: Path
    first: list[Run] = field(default_factory=list)
    second: list[Run] = field(default_factory=list)


def parse_tree(spec: str) -> Tree:
    label, _, path = spec.partition("=")
    if not label or not path:
        raise argparse.ArgumentTypeError(f"--tree wants label=path, got {spec!r}")
    return Tree(label, Path(path).resolve())


def load1() -> float:
    return os.getloadavg()[0]


def environment(tree: Path, fake_home: Path, home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | {"HOME": str(fake_home), "AGENT_HOME": str(home), "PYTHONPATH": str(tree), "TERM": "dumb"}


def timed(tree: Path, fake_home: Path, home: Path) -> Run:
    """One `reset && run` in a new home, as one shell command: wall time, the tree's CPU time."""
    home.mkdir(parents=True)
    load = load1()
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", COMMAND],
        cwd=home,
        env=environment(tree, fake_home, home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=RUN_CAP)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    wall = time.monotonic() - started
    report = _last_json(out)
    return Run(wall, 0.0, load, proc.returncode, report.get("duration_s"), _first_call(home, report))


def _last_json(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return {}


def _first_call(home: Path, report: dict) -> float | None:
    cycle_id = report.get("cycle_id")
    transcript = home / "logs" / f"cycle_{cycle_id}.transcript.jsonl"
    try:
        with open(transcript, encoding="utf-8") as handle:
            return float(json.loads(handle.readline())["elapsed_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def measure(tree: Path, fake_home: Path, home: Path) -> Run:
    """`timed`, with the CPU time of the whole process tree: what RUSAGE_CHILDREN gained (the shell
    is reaped by communicate(), and every process under it was waited for by its parent)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = timed(tree, fake_home, home)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run


def median(values: list[float | None]) -> str:
    present = [v for v in values if v is not None]
    return f"{statistics.median(present):.1f}" if present else "-"


def table(trees: list[Tree]) -> str:
    lines = [
        "| tree | home | wall s (median) | CPU s, whole tree (median) | first model call s | cycle s | "
        "load at start (min-max) | exit codes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tree in trees:
        for which, runs in (("first (no cache)", tree.first), ("second (same machine)", tree.second)):
            loads = [r.load for r in runs]
            lines.append(
                f"| {tree.label} | {which} | {median([r.wall for r in runs])} | {median([r.cpu for r in runs])} | "
                f"{median([r.first_call_s for r in runs])} | {median([r.cycle_s for r in runs])} | "
                f"{min(loads):.2f}-{max(loads):.2f} | {' '.join(str(r.code) for r in runs)} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--tree", action="append", type=parse_tree, help="label=path (default: now=this checkout)")
    args = parser.parse_args(argv)
    trees: list[Tree] = args.tree or [Tree("now", REPO)]
    scratch = Path(tempfile.mkdtemp(prefix="bench-first-cycle-"))
    print(f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start", flush=True)
    try:
        for round_ in range(args.runs):
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                fake_home = scratch / f"{tree.label}-{round_}" / "user"
                fake_home.mkdir(parents=True)
                for which, runs in (("first", tree.first), ("second", tree.second)):
                    run = measure(tree.path, fake_home, scratch / f"{tree.label}-{round_}" / which)
                    runs.append(run)
                    print(
                        f"round {round_ + 1} {tree.label} {which}: {run.wall:.1f}s wall, {run.cpu:.1f}s CPU, "
                        f"exit {run.code}, load {run.load:.2f}",
                        flush=True,
                    )
                shutil.rmtree(scratch / f"{tree.label}-{round_}", ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(trees))
    print()
    print(
        f"`{COMMAND}` in a new home with a new HOME, then in a second new home; {args.runs} round(s); "
        f"{os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end."
    )
    for tree in trees:
        print(f"- {tree.label}: {tree.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
