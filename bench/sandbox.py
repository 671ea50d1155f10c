#!/usr/bin/env python3
"""What the sandbox costs per shell call, with 100 and with 20,000 files in the workspace side by
side, and how far 60 parallel writers get past the quota before they are stopped.

    python bench/sandbox.py                 # 21 calls of each, 5 runs of the writers
    python bench/sandbox.py --runs 51 --writer-runs 10

Each shell call is the tool function itself (`agent.tools.shell.shell`), as a cycle calls it: the
policy decision (the remembered probe), the quota's count (a walk started as the last command
ended, which the call waits for), bwrap start-up, the cgroups, the command. Between two calls the
bench waits GAP seconds, standing in for the model writing its next reply (a real request takes
longer), which is when the count runs. Prints the median, min and max milliseconds of each, the
ratio of the medians, the walk alone, and the machine's load average.

The writers: 60 processes each writing 1 MB files in a loop, with workspace_max_bytes 10 MiB;
the command is killed once the workspace's filesystem grew past the room left (quota.py), and
what the workspace holds then is printed, as MB and as a multiple of the quota.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from agent.config import Settings
from agent.tools import ToolContext, ToolError
from agent.tools.quota import workspace_usage
from agent.tools.shell import shell
from agent.tools.workspace import ensure_workspace

GAP = 0.5  # seconds between two calls: the model's turn
QUOTA = 10 * 1024**2
WRITERS = "for i in $(seq 60); do (n=0; while :; do n=$((n+1)); head -c 1000000 /dev/zero > w$i.$n || exit; done) & done; wait"


def show(name: str, ms: list[float]) -> float:
    median = statistics.median(ms)
    print(f"{name:52s} median {median:8.1f} ms   min {min(ms):8.1f}   max {max(ms):8.1f}")
    return median


def home_with(files: int, folder: Path) -> Path:
    home = folder / f"home-{files}"
    (home / "logs").mkdir(parents=True)
    workspace = ensure_workspace(home, Settings())
    for i in range(files):
        sub = workspace / f"d{i // 500}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_text("x")
    ensure_workspace(home, Settings())  # as root: the folder is the sandbox's (its files are read-only to it)
    return home


def calls(ctx: ToolContext, command: str, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        time.sleep(GAP)  # the model's turn: the count started by the last call runs meanwhile
        started = time.perf_counter()
        shell(ctx, command)
        out.append((time.perf_counter() - started) * 1000)
    return out


def side_by_side(runs: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        homes = {files: home_with(files, Path(folder)) for files in (100, 20000)}
        settings = Settings(shell_policy="sandbox", workspace_max_files=50000)
        medians = {}
        for command in ("echo hi", "echo hi | wc -c > n.txt"):
            for files, home in homes.items():
                ctx = ToolContext(home, settings)
                shell(ctx, "true")  # the probe, once, remembered in logs/agent.db
                medians[files] = show(f"sandbox, {files:>5} files: {command}", calls(ctx, command, runs))
            print(f"{'':52s} ratio 20,000 / 100 files: {medians[20000] / medians[100]:.2f}")
        for files, home in homes.items():
            walks = []
            for _ in range(runs):
                started = time.perf_counter()
                workspace_usage(home / "workspace", 50000)
                walks.append((time.perf_counter() - started) * 1000)
            show(f"the quota's walk alone, {files:>5} files (off the call's path)", walks)


def writers(runs: int) -> None:
    print(f"-- 60 parallel writers, workspace_max_bytes {QUOTA // 1024**2} MiB")
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            (home / "logs").mkdir()
            settings = Settings(
                shell_policy="sandbox", workspace_max_bytes=QUOTA, sandbox_max_processes=400, shell_timeout=60
            )
            ensure_workspace(home, settings)
            started = time.perf_counter()
            try:
                shell(ToolContext(home, settings), WRITERS)
                stopped = "not stopped"
            except ToolError as exc:
                stopped = "stopped" if "killed" in str(exc) else str(exc)[:80]
            held = workspace_usage(home / "workspace", 100_000).bytes
            print(
                f"{stopped} after {time.perf_counter() - started:.2f}s: the workspace holds {held / 1e6:.0f} MB, "
                f"{held / QUOTA:.1f}x the quota (overshoot {(held - QUOTA) / 1e6:.0f} MB)"
            )
            shutil.rmtree(home / "workspace", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--writer-runs", type=int, default=5)
    args = parser.parse_args()
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores; euid {os.geteuid()}"
    )
    side_by_side(args.runs)
    writers(args.writer_runs)
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
