#!/usr/bin/env python3
"""What the sandbox costs per shell call: the same commands through the shell tool under the
allowlist and in the sandbox, side by side in one run, and the workspace quota's walk alone.

    python bench/sandbox.py                 # 21 runs of each, workspace of 1,000 and 20,000 files
    python bench/sandbox.py --runs 51

Each shell call is the tool function itself (`agent.tools.shell.shell`), as a cycle calls it: the
policy decision (the remembered probe), bwrap start-up, the cgroups, the command, and, in the
sandbox, the quota walk after it. Prints the median, min and max milliseconds of each, and the
machine's load average, so the numbers are read with the load they ran under.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from agent.config import Settings
from agent.tools import ToolContext
from agent.tools.quota import workspace_usage
from agent.tools.shell import shell


def timed(call, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def show(name: str, ms: list[float]) -> None:
    print(f"{name:48s} median {statistics.median(ms):8.1f} ms   min {min(ms):8.1f}   max {max(ms):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    for files in (1000, 20000):
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            (home / "logs").mkdir()
            workspace = home / "workspace"
            workspace.mkdir()
            for i in range(files):
                sub = workspace / f"d{i // 500}"
                sub.mkdir(exist_ok=True)
                (sub / f"f{i}.txt").write_text("x")
            limit = Settings().workspace_max_files
            allow = ToolContext(home, Settings(shell_policy="allowlist"))
            box = ToolContext(home, Settings(shell_policy="sandbox", workspace_max_files=max(limit, files * 2)))
            shell(box, "true")  # the probe, once, remembered in logs/agent.db
            print(f"-- workspace of {files} files")
            show("allowlist: echo hi", timed(lambda c=allow: shell(c, "echo hi"), args.runs))
            show("sandbox:   echo hi", timed(lambda c=box: shell(c, "echo hi"), args.runs))
            show(
                "sandbox:   echo hi | wc -c > n.txt",
                timed(lambda c=box: shell(c, "echo hi | wc -c > n.txt"), args.runs),
            )
            show("quota walk alone", timed(lambda w=workspace, n=files: workspace_usage(w, n * 2), args.runs))
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
