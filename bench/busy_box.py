#!/usr/bin/env python3
"""The small-task bench on a busy box: two checkouts of the runner side by side, same load.

Each tree (a checkout of this repository at some commit: `git worktree add --detach DIR COMMIT`)
runs its OWN bench/local_tasks.py (its own code, prompt and harness) on the same tasks, in the
same Python environment (llama-cpp-python and the bundled model are shared), while the bench
keeps `--busy` processes spinning (`while 1: pass`, one per core by default). Trees alternate,
first one then the other, round after round, so load from anything else on a shared machine
weighs on both alike.

    git worktree add --detach /tmp/before 023b646        # the code before the child process
    python bench/busy_box.py --tree before=/tmp/before --tree now=. --rounds 3

A tree may carry environment settings for its run: `--tree now-2=.:AGENT_LOCAL_THREADS=2`.
Seconds per iteration are each harness's own (the wall time between the runner's iteration
events, in-process; the first iteration of the first task includes loading the model and
evaluating the prompt cold). CPU seconds are the whole process tree's (user + system, from
RUSAGE_CHILDREN), which other load on the machine does not inflate the way it does wall time.
Prints a markdown table for docs/measurements.md and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.busy_threads import busy_loops  # noqa: E402

SMALL_TASKS = "echo,write_file,date,read_fact,list_dir"  # one-step tasks that name their tool (the README's promise)
RUN_CAP = 1800.0  # seconds for one tree's whole bench run


@dataclass
class Tree:
    label: str
    path: Path
    env: dict[str, str] = field(default_factory=dict)
    successes: list[int] = field(default_factory=list)
    tasks: int = 0
    seconds: list[float] = field(default_factory=list)  # every iteration of every round
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)


def parse_tree(spec: str) -> Tree:
    """'label=path[:NAME=VALUE[,NAME=VALUE...]]'."""
    label, _, rest = spec.partition("=")
    path, _, settings = rest.partition(":")
    if not label or not path:
        raise argparse.ArgumentTypeError(f"--tree wants label=path[:NAME=VALUE,...], got {spec!r}")
    env = dict(item.split("=", 1) for item in settings.split(",") if "=" in item)
    return Tree(label, Path(path).resolve(), env)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_tree(tree: Tree, tasks: str, scratch: Path) -> None:
    """One run of the tree's own small-task bench; its results added to the tree's."""
    out = scratch / f"{tree.label}.json"
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL", "AGENT_HOME", "PYTHONPATH")}
    env.update(tree.env)
    argv = [sys.executable, str(tree.path / "bench" / "local_tasks.py"), "--tasks", tasks, "--json", str(out)]
    cpu, started = children_cpu(), time.monotonic()
    proc = subprocess.run(argv, cwd=tree.path, env=env, capture_output=True, text=True, timeout=RUN_CAP)
    tree.walls.append(time.monotonic() - started)
    tree.cpus.append(children_cpu() - cpu)
    if proc.returncode != 0 or not out.is_file():
        raise SystemExit(f"{tree.label}: its bench failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    runs = json.loads(out.read_text())["runs"]
    tree.tasks = len(runs)
    tree.successes.append(sum(run["success"] for task_runs in runs.values() for run in task_runs))
    for name, task_runs in runs.items():
        for run in task_runs:
            tree.seconds += run["iteration_seconds"]
            if not run["success"]:
                tree.failed[name] = tree.failed.get(name, 0) + 1


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(trees: list[Tree], rounds: int) -> str:
    first = trees[0]
    lines = [
        "| tree | success (per round) | s/iteration (median) | ratio | wall s per run | CPU s per run | ratio | failed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tree in trees:
        spi = statistics.median(tree.seconds)
        cpu = statistics.median(tree.cpus)
        failed = ", ".join(f"{name} ({n}/{rounds})" for name, n in tree.failed.items()) or "-"
        lines.append(
            f"| {tree.label} | {' '.join(f'{s}/{tree.tasks}' for s in tree.successes)} | {spi:.2f} | "
            f"{spi / statistics.median(first.seconds):.2f}x | {statistics.median(tree.walls):.1f} | {cpu:.1f} | "
            f"{cpu / statistics.median(first.cpus):.2f}x | {failed} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", type=parse_tree, required=True, help="label=path[:NAME=VALUE,...]")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tree, alternating (default 3)")
    parser.add_argument("--tasks", default=SMALL_TASKS, help=f"as local_tasks.py --tasks (default {SMALL_TASKS})")
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 1, help="spinning processes (default: one per core)"
    )
    args = parser.parse_args(argv)

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop_on_term)  # so the busy loops are stopped on the way out
    trees: list[Tree] = args.tree
    scratch = Path(tempfile.mkdtemp(prefix="bench-busy-box-"))
    load_before = load()
    print(f"{os.cpu_count()} cores, {args.busy} busy loops, load average {load_before} at start", flush=True)
    with busy_loops(args.busy):
        for round_ in range(args.rounds):
            order = trees if round_ % 2 == 0 else trees[::-1]
            for tree in order:
                run_tree(tree, args.tasks, scratch)
                print(
                    f"round {round_ + 1} {tree.label}: {tree.successes[-1]}/{tree.tasks}, "
                    f"{tree.walls[-1]:.1f}s wall, {tree.cpus[-1]:.1f}s CPU, load {load()}",
                    flush=True,
                )
    print()
    print(table(trees, args.rounds))
    print()
    print(
        f"Tasks {args.tasks}; {args.rounds} round(s), trees alternating; {args.busy} busy loops on "
        f"{os.cpu_count()} cores; load average {load_before} before / {load()} after "
        f"(the busy loops included)."
    )
    for tree in trees:
        env = "".join(f" {k}={v}" for k, v in tree.env.items())
        print(f"- {tree.label}: {tree.path}{env}")
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
