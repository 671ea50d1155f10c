#!/usr/bin/env python3
"""A plain cycle's start-up, side by side across trees: one scripted `done` in a home without
sections, as cron's `agent run -q` runs it, whole process.

Each tree (a checkout: `git worktree add --detach DIR COMMIT`) gets a home made by its own `agent
init`, one current task, and its byte-code compiled; one untimed cycle settles the home. Then the
trees run in turn, round by round, the home's `active.yaml` put back before each run: wall time
around the process, CPU time (user + system) and peak resident memory from wait4. Prints the
medians per tree, the ratio to the first tree taken pair by pair (so it holds while the machine's
speed drifts), the load average at the start and the end, and the modules each tree's cycle
imports (`python -X importtime`, less its header line).

    python bench/plain_cycle.py --tree before=/tmp/before42 --tree now=. --runs 21

Every tree runs with this Python environment and `PYTHONPATH` pointed at it, from a temporary
folder (`python -m` puts the working directory first on the path, ahead of `PYTHONPATH`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DONE = '- {"tool": "done", "args": {"summary": "done"}}\n'
STATE = "current_task: Write the report\n"


def env_for(tree: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL", "AGENT_HOME", "OPENAI_BASE_URL")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = str(tree)
    return env


def cycle_argv(home: Path, script: Path, *flags: str) -> list[str]:
    return [sys.executable, *flags, "-m", "agent", "run", "-q", "--home", str(home), "--model", f"scripted:{script}"]


def prepare(name: str, tree: Path, root: Path, script: Path) -> Path:
    home = root / name
    env = env_for(tree)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(tree / "agent")], check=True, stdout=subprocess.DEVNULL
    )
    subprocess.run(
        [sys.executable, "-m", "agent", "init", str(home)], check=True, env=env, cwd=root, stdout=subprocess.DEVNULL
    )
    (home / "scratchpad" / "active.yaml").write_text(STATE)
    subprocess.run(cycle_argv(home, script), check=True, env=env, cwd=root)  # settles the home, not timed
    return home


def timed(argv: list[str], env: dict, cwd: Path) -> tuple[float, float, float, int]:
    """Wall s, CPU s, peak MiB and the exit code of one process."""
    began = time.perf_counter()
    child = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - began
    child.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, child.returncode


def modules(home: Path, script: Path, env: dict, cwd: Path) -> int:
    (home / "scratchpad" / "active.yaml").write_text(STATE)
    out = subprocess.run(cycle_argv(home, script, "-X", "importtime"), env=env, cwd=cwd, capture_output=True, text=True)
    return sum(1 for line in out.stderr.splitlines() if line.startswith("import time:")) - 1


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=DIR, twice or more; the first is the base")
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    trees = {}
    for item in args.tree:
        name, _, path = item.partition("=")
        if not name or not (Path(path) / "agent" / "__init__.py").is_file():
            parser.error(f"--tree {item}: give NAME=DIR, DIR a checkout of this repository")
        trees[name] = Path(path).resolve()
    root = Path(tempfile.mkdtemp(prefix="plain-cycle-"))
    try:
        script = root / "done.yaml"
        script.write_text(DONE)
        homes = {name: prepare(name, tree, root, script) for name, tree in trees.items()}
        runs: dict[str, list[tuple[float, float, float, int]]] = {name: [] for name in trees}
        started = load()
        for _ in range(args.runs):
            for name, tree in trees.items():
                (homes[name] / "scratchpad" / "active.yaml").write_text(STATE)
                runs[name].append(timed(cycle_argv(homes[name], script), env_for(tree), root))
        ended = load()
        report(runs, trees, homes, script, root, started, ended)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def report(runs, trees, homes, script, root, started, ended) -> None:
    base = next(iter(trees))
    print(f"load average (1/5/15 min) {started} at the start, {ended} at the end; {len(runs[base])} rounds")
    print("| tree | wall ms | CPU ms | peak MiB | wall ratio | CPU ratio | exit 0 | modules |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, tree in trees.items():
        mine, theirs = runs[name], runs[base]
        wall_ratio = statistics.median(a[0] / b[0] for a, b in zip(mine, theirs))
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in zip(mine, theirs))
        print(
            f"| {name} | {statistics.median(r[0] for r in mine) * 1000:.0f} | "
            f"{statistics.median(r[1] for r in mine) * 1000:.0f} | {statistics.median(r[2] for r in mine):.1f} | "
            f"{wall_ratio:.2f}x | {cpu_ratio:.2f}x | {sum(r[3] == 0 for r in mine)}/{len(mine)} | "
            f"{modules(homes[name], script, env_for(tree), root)} |"
        )


if __name__ == "__main__":
    sys.exit(main())
