#!/usr/bin/env python3
"""One echo cycle of the embedded model on an idle and on a busy machine, per thread setting.

Each run is a real `python -m agent run --model local` process in a temporary home whose
active.yaml holds one task ("Echo the message: good morning"), rewritten before every run. "busy"
starts one `while 1: pass` process per core for the duration of the runs and stops them after,
whatever happens. The prompt cache lives in a temporary folder: one unmeasured warm-up run fills
it, so the timed runs are warm cycles, as repeated cron cycles are.

    python bench/busy_threads.py                       # threads 2 and 1 (on 2 cores), idle and busy
    python bench/busy_threads.py --variants 2,1,2+OMP_WAIT_POLICY=PASSIVE,default --runs 7

A variant is a thread count (or `default`: local_threads unset, the runtime's own choice),
optionally followed by +NAME=VALUE environment settings for the `agent run` process. A cycle
still running after CYCLE_CAP seconds is stopped and counted as that long. Prints the median,
min and max whole-process seconds of each variant, and the busy/idle ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
CYCLE_CAP = 120.0  # seconds: a cycle still running then is stopped and counted as this long
TASK = {
    "goals": [],
    "current_task": "Echo the message: good morning",
    "pending_actions": [],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def _die_with_parent() -> None:
    """In a busy loop's process: be killed when the bench dies, even by SIGKILL (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@contextlib.contextmanager
def busy_loops(count: int):
    """`count` processes spinning on a core each, for the duration; always stopped."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while 1: pass"], start_new_session=True, preexec_fn=_die_with_parent)
        for _ in range(count)
    ]
    try:
        time.sleep(1.0)  # let the scheduler see them
        yield
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def one_cycle(home: Path, threads: str, extra_env: dict[str, str], cache: Path) -> tuple[float, int, str]:
    (home / "scratchpad").mkdir(parents=True, exist_ok=True)
    (home / "scratchpad" / "active.yaml").write_text(yaml.safe_dump(TASK, sort_keys=False))
    config = {} if threads == "default" else {"local_threads": int(threads)}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL", "AGENT_HOME")}
    env.update(extra_env, AGENT_LOCAL_CACHE=str(cache))
    argv = [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", "local", "--json"]
    started = time.monotonic()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=CYCLE_CAP)
    except subprocess.TimeoutExpired:  # counted at the cap: the median stays meaningful, the row says so
        return CYCLE_CAP, -1, f"cut at {CYCLE_CAP:g}s"
    seconds = time.monotonic() - started
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    return seconds, proc.returncode, last[:200]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def parse_variant(spec: str) -> tuple[str, dict[str, str]]:
    """'2' or '2+OMP_WAIT_POLICY=PASSIVE+NAME=VALUE': (threads, environment)."""
    threads, *settings = spec.split("+")
    return threads, dict(item.split("=", 1) for item in settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--variants",
        default="2,1",
        help="comma-separated: threads (a number, or 'default' for local_threads unset), each "
        "optionally followed by +NAME=VALUE environment settings (default 2,1)",
    )
    parser.add_argument("--runs", type=int, default=5, help="timed runs per variant (default 5)")
    parser.add_argument("--machine", default="idle,busy", help="idle, busy or both (default idle,busy)")
    parser.add_argument("--busy", type=int, default=os.cpu_count() or 1, help="busy processes (default: one per core)")
    args = parser.parse_args(argv)

    def stop_on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, stop_on_term)  # so the busy loops are stopped on the way out
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    machines = [m.strip() for m in args.machine.split(",") if m.strip()]
    root = Path(tempfile.mkdtemp(prefix="bench-threads-"))
    cache = root / "cache"
    home = root / "home"
    one_cycle(home, "1", {}, cache)  # warm-up: fills the prompt cache
    results: dict[tuple[str, str], list[float]] = {(m, v): [] for m in machines for v in variants}
    print(f"{os.cpu_count()} cores, load average {load()} at start", flush=True)
    # Runs are interleaved (run 1 of every variant on every machine state, then run 2, ...), so
    # other work on a shared box weighs on every variant alike.
    for run in range(args.runs):
        for variant in variants:
            threads, extra = parse_variant(variant)
            for machine in machines:
                context = busy_loops(args.busy) if machine == "busy" else contextlib.nullcontext()
                with context:
                    seconds, code, last = one_cycle(home, threads, extra, cache)
                if code != 0:
                    print(f"  run failed (exit {code}): {last}", flush=True)
                results[(machine, variant)].append(seconds)
                print(f"run {run + 1} {machine:4} {variant:40} {seconds:6.2f}s  load {load()}", flush=True)
    print()
    for variant in variants:
        idle, busy = results.get(("idle", variant)), results.get(("busy", variant))
        for machine, times in (("idle", idle), ("busy", busy)):
            if times:
                print(
                    f"{machine} {variant}: median {statistics.median(times):.2f}s, min {min(times):.2f}, "
                    f"max {max(times):.2f}, runs {' '.join(f'{t:.2f}' for t in times)}"
                )
    print()
    print("| threads and environment | idle (median s) | busy (median s) | busy/idle |")
    print("| --- | --- | --- | --- |")
    for variant in variants:
        idle, busy = results.get(("idle", variant)), results.get(("busy", variant))
        idle_m = statistics.median(idle) if idle else None
        busy_m = statistics.median(busy) if busy else None
        ratio = f"{busy_m / idle_m:.1f}x" if idle_m and busy_m else "-"
        print(
            f"| {variant} | {'-' if idle_m is None else f'{idle_m:.2f}'} | "
            f"{'-' if busy_m is None else f'{busy_m:.2f}'} | {ratio} |"
        )
    import shutil

    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
