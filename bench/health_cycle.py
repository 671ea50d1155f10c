"""What the one health computation costs a cycle: the same cycles on this code and on an older
checkout (`--base`), side by side, alternating in one session so machine noise hits all alike.

  idle          a state with nothing to do (`idle: skip`): no model called, one record written
  scripted      `--force`, the scripted model answering done: every file a plain cycle writes
  metrics       the same with `metrics_file` set (this code: the home's health judged for it too)
  scheduled     this code only: `metrics_file` and a `schedule` (cronsim read, the slots counted)

Printed: the median wall time of each `agent run` process and the median time inside the cycle (the
record's `duration_s`: lock taken to record written). Make the base with, e.g.,
`git archive <commit> | tar -x -C /tmp/base`.

    python bench/health_cycle.py --base /tmp/base --runs 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EMPTY = "goals: []\ncurrent_task: null\npending_actions: []\ncompleted_tasks: []\nnotes: ''\nlast_updated: null\n"
DONE = {"tool": "done", "args": {"summary": "nothing to do"}}


def newest_duration(home: Path) -> float:
    """The newest record's duration_s, read with sqlite3 (no import of either code)."""
    import sqlite3

    with sqlite3.connect(home / "logs" / "agent.db") as db:
        (record,) = db.execute("SELECT record FROM cycle WHERE record IS NOT NULL ORDER BY id DESC LIMIT 1").fetchone()
    return json.loads(record)["duration_s"]


def timed(argv: list[str], home: Path, env: dict) -> tuple[float, float]:
    (home / "scratchpad/active.yaml").write_text(EMPTY)
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return took, newest_duration(home)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="a checkout of the code to compare with")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    dropped = ("AGENT_MODEL", "AGENT_HOME", "AGENT_IDLE", "OPENAI_API_KEY", "PYTHONPATH")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != REPO]
    codes = {"base": args.base.resolve(), "this": REPO}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        script = root / "script.yaml"
        script.write_text("\n".join(f"- {json.dumps(json.dumps(DONE))}" for _ in range(2)) + "\n")
        configs = {
            "idle": "",
            "scripted": "",
            "metrics": "metrics_file: agent.prom\n",
            "scheduled": "metrics_file: agent.prom\nschedule: '*/15 * * * *'\nschedule_timezone: Europe/Berlin\n",
        }
        variants = []
        for code in codes:
            for name, config in configs.items():
                if name == "scheduled" and code == "base":
                    continue
                home = root / f"{code}-{name}"
                (home / "scratchpad").mkdir(parents=True)
                (home / "config.yaml").write_text(config)
                argv = [
                    sys.executable,
                    "-m",
                    "agent",
                    "run",
                    "-q",
                    "--home",
                    str(home),
                    "--model",
                    f"scripted:{script}",
                ]
                argv += [] if name == "idle" else ["--force"]
                variants.append(
                    (code, name, argv, home, dict(env, PYTHONPATH=os.pathsep.join([str(codes[code]), *extra])))
                )
        for _, _, argv, home, run_env in variants:  # warm the file cache
            timed(argv, home, run_env)
        results: dict[tuple[str, str], tuple[list[float], list[float]]] = {(c, n): ([], []) for c, n, *_ in variants}
        for _ in range(args.runs):
            for code, name, argv, home, run_env in variants:
                took, inner = timed(argv, home, run_env)
                results[code, name][0].append(took)
                results[code, name][1].append(inner)
    load_after = os.getloadavg()
    print(
        f"runs: {args.runs} of each, alternating; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
    )
    print(f"{'cycle':<10} {'base process':>13} {'this process':>13} {'base inside':>12} {'this inside':>12}")
    for name in configs:
        cells = []
        for column in (0, 1):
            for code in codes:
                found = results.get((code, name))
                cells.append(f"{statistics.median(found[column]) * 1000:.0f} ms" if found else "-")
        print(f"{name:<10} {cells[0]:>13} {cells[1]:>13} {cells[2]:>12} {cells[3]:>12}")


if __name__ == "__main__":
    main()
