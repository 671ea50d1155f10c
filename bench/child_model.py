#!/usr/bin/env python3
"""A warm echo cycle on the embedded model, in-process and in a child process, side by side.

The cycle runs the model in a child process (local_worker.py) so that a crash in llama.cpp is a
failed cycle; this measures what that costs against the old in-process path (LocalRuntime used
as the cycle's model directly), in two ways, runs interleaved so load weighs on both alike:

- "whole process": one `run_cycle` per new Python process, as cron runs `agent run` (the
  model file loaded each time, the prompt cache warm: one unmeasured warm-up fills it); wall
  time, and the CPU time of the process and its children (less sensitive to a busy machine);
- "model loaded": cycles in one process after its first, the model already loaded (the cost of
  the pipe alone).

    python bench/child_model.py --runs 7

Each cycle is one task ("Echo the message: good morning") in a temporary home, rewritten before
every run. Prints medians (min, max) per path and the child/in-process ratio, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TASK = {
    "goals": [],
    "current_task": "Echo the message: good morning",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}
PATHS = ("in-process", "child")


def _model(path: str, settings):
    from agent.models.local.model import LocalModel, LocalRuntime, bundled_model_path

    return (LocalRuntime if path == "in-process" else LocalModel)(bundled_model_path(), settings)


def _cycle(home: Path, model, settings) -> tuple[float, int]:
    from agent.cycle.run import run_cycle
    from agent.store.home import Home

    (home / "scratchpad").mkdir(parents=True, exist_ok=True)
    (home / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    started = time.perf_counter()
    report = run_cycle(Home.at(home), settings, model)
    return time.perf_counter() - started, report.exit_code


def one_process(path: str, home: Path) -> int:
    """The child of a "whole process" run: one cycle, then its exit code as JSON."""
    from agent.config import load_settings

    settings = load_settings(home)
    model = _model(path, settings)
    _, code = _cycle(home, model, settings)
    getattr(model, "close", lambda: None)()
    print(json.dumps({"exit": code}))
    return 0


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every reaped descendant: the model's child too
    return usage.ru_utime + usage.ru_stime


def whole_process(path: str, home: Path, cache: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process and its children, exit code) of one cycle's process."""
    env = dict(os.environ, AGENT_LOCAL_CACHE=str(cache))
    cpu, started = _cpu_of_children(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--one", path, str(home)], capture_output=True, text=True, env=env, timeout=300
    )
    seconds, cpu = time.perf_counter() - started, _cpu_of_children() - cpu
    lines = proc.stdout.strip().splitlines()
    return seconds, cpu, json.loads(lines[-1])["exit"] if proc.returncode == 0 and lines else -1


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def summary(times: list[float]) -> str:
    return f"{statistics.median(times):.3f}s ({min(times):.3f}-{max(times):.3f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed cycles per path and way (default 7)")
    parser.add_argument("--one", nargs=2, metavar=("PATH", "HOME"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        return one_process(args.one[0], Path(args.one[1]))

    from agent.config import load_settings

    root = Path(tempfile.mkdtemp(prefix="bench-child-"))
    cache = root / "cache"
    os.environ["AGENT_LOCAL_CACHE"] = str(cache)
    homes = {path: root / path for path in PATHS}
    for path in PATHS:
        homes[path].mkdir()
        whole_process(path, homes[path], cache)  # warm-up: fills the prompt cache
    start_load = load()
    ways = ("whole process", "whole process, CPU", "model loaded")
    times: dict[tuple[str, str], list[float]] = {(way, p): [] for way in ways for p in PATHS}
    failed = []
    for run in range(args.runs):
        for path in PATHS:
            seconds, cpu, code = whole_process(path, homes[path], cache)
            times[("whole process", path)].append(seconds)
            times[("whole process, CPU", path)].append(cpu)
            failed += [f"whole process {path}: exit {code}"] if code not in (0, 3) else []
    settings = load_settings(homes["child"])
    models = {path: _model(path, settings) for path in PATHS}
    for path in PATHS:
        _cycle(homes[path], models[path], settings)  # loads the model: not timed
    for run in range(args.runs):
        for path in PATHS:
            seconds, code = _cycle(homes[path], models[path], settings)
            times[("model loaded", path)].append(seconds)
            failed += [f"model loaded {path}: exit {code}"] if code not in (0, 3) else []
    models["child"].close()
    print(f"{os.cpu_count()} cores; load average {start_load} at start, {load()} at the end; {args.runs} runs each")
    print("| way | in-process (median, min-max) | child (median, min-max) | child / in-process |")
    print("| --- | --- | --- | --- |")
    for way in ways:
        inside, child = times[(way, "in-process")], times[(way, "child")]
        ratio = statistics.median(child) / statistics.median(inside)
        print(f"| {way} | {summary(inside)} | {summary(child)} | {ratio:.2f} |")
    for problem in failed:
        print(f"a cycle did not end in done or a limit: {problem}")
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
