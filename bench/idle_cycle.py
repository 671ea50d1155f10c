"""Idle cycles: what a cycle with nothing to do costs now (no model called) against what it cost
before (the model asked, and answering `done` to nothing), in whole-process time and disk bytes.

Three cycles, each an `agent run` process on a home whose state has no task and an empty queue,
run alternately in one session (so machine noise hits all alike):

  idle         the default (`idle: skip`): no model is called; one index record is written
  forced       `--force`, the scripted model answering done: every file a cycle writes, no network
  forced-http  `--force` against an OpenAI-compatible stub on 127.0.0.1 (the openai client is
               imported and one request made): what a cron cycle on an endpoint cost before

Printed: the median wall time of each process, the median time inside the cycle (the index
record's `duration_s`: lock taken to record written, without Python's start-up), the median bytes
each cycle added to its home, and the load average before and after (the 2-core machine is
shared; the ratios are the numbers to read).

    python bench/idle_cycle.py --runs 15
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
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.models.openai_server import OpenAIServer, Reply  # noqa: E402

EMPTY = "goals: []\ncurrent_task: null\npending_actions: []\ncompleted_tasks: []\nnotes: ''\nlast_updated: null\n"
DONE = {"tool": "done", "args": {"summary": "nothing to do"}}


def newest_record(home: Path) -> dict:
    """The newest cycle's record, from the home's logs/agent.db."""
    from agent.store.cycles import newest_first
    from agent.store.db import close_all
    from agent.store.home import Home

    try:
        return next(newest_first(Home.at(home)))
    finally:
        close_all()


def home_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def make_home(root: Path, name: str) -> Path:
    home = root / name
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad/active.yaml").write_text(EMPTY)
    return home


def timed_cycle(argv: list[str], home: Path, env: dict) -> tuple[float, float, int]:
    (home / "scratchpad/active.yaml").write_text(EMPTY)  # every cycle starts from nothing to do
    size = home_bytes(home)
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    took = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    inner = newest_record(home)["duration_s"]
    return took, inner, home_bytes(home) - size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    dropped = ("AGENT_MODEL", "AGENT_HOME", "AGENT_IDLE", "OPENAI_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env["PYTHONPATH"] = str(REPO)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(default=Reply.chat(DONE)) as server:
        root = Path(tmp)
        script = root / "script.yaml"
        script.write_text("\n".join(f"- {json.dumps(json.dumps(DONE))}" for _ in range(2)) + "\n")
        run = [sys.executable, "-m", "agent", "run", "-q", "--home"]
        variants = {
            "idle": [*run, str(make_home(root, "idle")), "--model", f"scripted:{script}"],
            "forced": [*run, str(make_home(root, "forced")), "--model", f"scripted:{script}", "--force"],
            "forced-http": [*run, str(make_home(root, "http")), "--model", "openai:test-model", "--force"],
        }
        http_env = dict(env, OPENAI_BASE_URL=server.base_url)
        for name, argv in variants.items():  # warm the OS file cache
            timed_cycle(argv, Path(argv[6]), http_env if name == "forced-http" else env)
        times: dict[str, list[float]] = {name: [] for name in variants}
        inner: dict[str, list[float]] = {name: [] for name in variants}
        sizes: dict[str, list[int]] = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, argv in variants.items():
                took, within, grew = timed_cycle(argv, Path(argv[6]), http_env if name == "forced-http" else env)
                times[name].append(took)
                inner[name].append(within)
                sizes[name].append(grew)
    load_after = os.getloadavg()
    print(
        f"runs: {args.runs} of each, alternating; load average before {load_before[0]:.2f}, "
        f"after {load_after[0]:.2f} ({os.cpu_count()} cores)"
    )
    print("| cycle | process (median) | inside the cycle (median) | bytes written per cycle (median) |")
    print("| --- | --- | --- | --- |")
    base = {k: statistics.median(v["idle"]) for k, v in (("t", times), ("i", inner), ("s", sizes))}
    for name in variants:
        t, i, s = statistics.median(times[name]), statistics.median(inner[name]), statistics.median(sizes[name])
        print(
            f"| {name} | {t * 1000:.0f} ms ({t / base['t']:.2f}x) | {i * 1000:.1f} ms ({i / max(base['i'], 1e-4):.1f}x) "
            f"| {s:,.0f} ({s / max(base['s'], 1):.1f}x) |"
        )


if __name__ == "__main__":
    main()
