#!/usr/bin/env python3
"""The agent's peak memory with a hostile MCP server, side by side with a normal call.

Each case is one real `agent run` (a scripted model) on a fresh home whose one MCP server is
tests/tools/hostile_mcp_server.py: a normal call (`small`), a 40 MB result (`big`), a tools/list
of 100,000 tools in one message, one of 40,000 (under the message cap, refused by its count), one of
800 tools with 5 KB schemas (about the heaviest list that is parsed), and 20,000 lines of stdout
noise before each answer. The figure
is the agent process's own peak resident memory (VmHWM from /proc/self/status at exit: rusage
would count the parent's pages copied at the fork), with the cycle's wall time.

    python bench/mcp_memory.py [--rounds 3]

Prints a markdown table for docs/measurements.md and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SERVER = REPO / "tests" / "tools" / "hostile_mcp_server.py"
PEAK = """
import atexit, re, runpy, sys
peak = sys.argv.pop(1)
atexit.register(lambda: open(peak, "w").write(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read())[1]))
runpy.run_module("agent", run_name="__main__")
"""
CASES = {  # name: (server arguments, the tool the model calls)
    "a normal call": (["big", "2"], "small"),
    "a 40 MB result": (["big", "40000000"], "big"),
    "a tools/list of 100,000 tools": (["tools", "100000"], None),
    "a tools/list of 40,000 tools (4 MB: under the message cap)": (["tools", "40000"], None),
    "a tools/list of 800 tools of 5 KB each (4.0 MB: parsed)": (["wide", "800"], None),
    "20,000 noise lines per answer": (["noise", "20000"], "small"),
}


def one_run(folder: Path, how: list[str], tool: str | None) -> tuple[int, float, str]:
    home = folder / "home"
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad" / "active.yaml").write_text("current_task: call the tool\n")  # not an idle cycle
    server = {"command": sys.executable, "args": [str(SERVER), *how]}
    (home / "config.yaml").write_text(json.dumps({"mcp_servers": {"s": server}}))
    replies = ([json.dumps({"tool": f"s__{tool}", "args": {}})] if tool else []) + [
        json.dumps({"tool": "done", "args": {"summary": "x"}})
    ]
    (folder / "script.yaml").write_text(json.dumps(replies))
    peak = folder / "peak"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            str(peak),
            "run",
            "--home",
            str(home),
            "--model",
            f"scripted:{folder / 'script.yaml'}",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    notes = (home / "scratchpad" / "active.yaml").read_text()
    outcome = "TOOL ERROR" if "[TOOL ERROR]" in notes else "ok"
    return int(peak.read_text()), seconds, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    print(f"load before: {os.getloadavg()[0]:.2f}")
    print("| case | peak memory (MB, max of rounds) | seconds (median) | the call |")
    print("| --- | ---: | ---: | --- |")
    for name, (how, tool) in CASES.items():
        runs = []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as folder:
                runs.append(one_run(Path(folder), how, tool))
        peak = max(r[0] for r in runs) / 1024
        seconds = sorted(r[1] for r in runs)[len(runs) // 2]
        print(f"| {name} | {peak:.0f} | {seconds:.1f} | {runs[0][2]} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
