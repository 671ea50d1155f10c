"""Cold start: whole-process time of a 5-iteration scripted cycle against `python -c "import yaml, click"`.

Both commands run alternately in one session (so machine noise hits both alike); the medians
and their ratio are printed. The ratio is the number to read: a cron cycle should cost little
more than starting Python with the two libraries the CLI cannot do without.

    python bench/cold_start.py --runs 21
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


def timed(argv: list[str], env: dict) -> float:
    began = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL", "AGENT_HOME")}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        script = Path(tmp) / "script.yaml"
        replies = [json.dumps({"tool": "echo", "args": {"message": f"step {i}"}}) for i in range(4)]
        replies.append(json.dumps({"tool": "done", "args": {"summary": "five iterations"}}))
        script.write_text("\n".join(f"- {json.dumps(r)}" for r in replies) + "\n")
        cycle = [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}", "-q"]
        baseline = [sys.executable, "-c", "import yaml, click"]
        timed(cycle, env), timed(baseline, env)  # warm the OS file cache
        cycles, bases = [], []
        for _ in range(args.runs):
            cycles.append(timed(cycle, env))
            bases.append(timed(baseline, env))
    c, b = statistics.median(cycles), statistics.median(bases)
    print(f"runs: {args.runs} each, alternating")
    print(f"python -c 'import yaml, click':        median {b * 1000:.1f} ms")
    print(f"agent run (scripted, 5 iterations):    median {c * 1000:.1f} ms")
    print(f"ratio: {c / b:.2f}x")


if __name__ == "__main__":
    main()
