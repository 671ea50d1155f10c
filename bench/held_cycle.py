"""Held cycles: what a cron tick costs on a home whose task has stalled, now (held: no model is
called until something changes) against before (every tick asked the model again and stalled again).

Two homes, each stalled once before the timing (stall_cycles 1), then ticked alternately in one
session, each tick an `agent run -q` process (so machine noise hits both alike):

  held         the default: the tick is held (exit 9), one cycle record, no model call
  asked        `--force` against an OpenAI-compatible stub on 127.0.0.1 whose reply never finishes
               the task: the model is asked and the cycle stalls again (exit 9), as every tick did before

Printed: the median wall time of each process, the median time inside the cycle (the
record's `duration_s`), the median bytes each tick added to its home (logs/agent.db and its WAL as
files: whole pages, so a record that fits a page already there adds 0), the bytes of the tick's
record, the tokens each tick sent
(the stub's usage, 4 bytes a token), and the load average before and after (the 2-core machine is
shared; the ratios are the numbers to read).

    python bench/held_cycle.py --runs 15
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
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

STATE = "current_task: fix the flaky build\npending_actions: [deploy]\n"
CONFIG = "stall_cycles: 1\nmax_iterations: 1\ntool_calling: text\nresponse_format: text\nmax_retries: 0\n"
ECHO = {"tool": "echo", "args": {"message": "still looking"}}


def home_bytes(home: Path) -> int:
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())


def make_home(root: Path, name: str) -> Path:
    home = root / name
    (home / "scratchpad").mkdir(parents=True)
    (home / "scratchpad/active.yaml").write_text(STATE)
    (home / "config.yaml").write_text(CONFIG)
    return home


def records(home: Path) -> list[dict]:
    """The home's cycle records, oldest first, read from logs/agent.db read-only."""
    with contextlib.closing(sqlite3.connect(f"file:{home / 'logs/agent.db'}?mode=ro", uri=True)) as db:
        rows = db.execute("SELECT record FROM cycle WHERE record IS NOT NULL ORDER BY id").fetchall()
    return [json.loads(text) for (text,) in rows]


def last_record(home: Path) -> dict:
    return records(home)[-1]


def timed_tick(argv: list[str], home: Path, env: dict, server: OpenAIServer) -> tuple[float, float, int, int, int]:
    size, asked = home_bytes(home), len(server.chat_requests)
    began = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    took = time.perf_counter() - began
    if done.returncode != 9:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}, not 9: {done.stderr}")
    record = last_record(home)
    tokens = sum(
        r.body.get("usage", {}).get("total_tokens", 0) if isinstance(r.body, dict) else 0
        for r in server.chat_requests[asked:]
    )
    tokens = tokens or record["usage"]["total_tokens"]
    return took, record["duration_s"], home_bytes(home) - size, len(json.dumps(record).encode()), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    dropped = ("AGENT_MODEL", "AGENT_HOME", "AGENT_IDLE", "OPENAI_API_KEY")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, OpenAIServer(default=Reply.chat(ECHO)) as server:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in dropped}
        env.update(PYTHONPATH=str(REPO), OPENAI_BASE_URL=server.base_url)
        run = [sys.executable, "-m", "agent", "run", "-q", "--model", "openai:test-model", "--home"]
        variants = {
            "held": [*run, str(make_home(root, "held"))],
            "asked": [*run, str(make_home(root, "asked")), "--force"],
        }
        for argv in variants.values():  # the stall, and a warm OS file cache
            timed_tick([*run, argv[len(run)], "--force"], Path(argv[len(run)]), env, server)
        assert last_record(Path(variants["held"][len(run)]))["stop_reason"] == "stalled"
        results: dict[str, list[tuple]] = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, argv in variants.items():
                results[name].append(timed_tick(argv, Path(argv[len(run)]), env, server))
        held_reasons = {r["stop_reason"] for r in records(root / "held")}
    load_after = os.getloadavg()
    print(
        f"runs: {args.runs} of each, alternating; load average before {load_before[0]:.2f}, "
        f"after {load_after[0]:.2f} ({os.cpu_count()} cores); the held home's stop reasons: {sorted(held_reasons)}"
    )
    print(
        "| tick after a stall | process (median) | inside the cycle (median) | home growth (median) | its record "
        "| tokens sent |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    base = [statistics.median(column) for column in zip(*results["held"])]
    for name, rows in results.items():
        t, i, s, r, tokens = (statistics.median(column) for column in zip(*rows))
        print(
            f"| {name} | {t * 1000:.0f} ms ({t / base[0]:.2f}x) | {i * 1000:.1f} ms ({i / max(base[1], 1e-4):.1f}x) "
            f"| {s:,.0f} bytes | {r:,.0f} bytes | {tokens:,.0f} |"
        )


if __name__ == "__main__":
    main()
