#!/usr/bin/env python3
"""The first cycle a newcomer sees: `agent reset --template demo && agent run`, embedded model.

Each round gives the command a new HOME (so no ~/.cache: no prompt cache, no converted model) and
a new home folder, and times it as one shell command ("first home"); then a second new home
under the same HOME ("second home": what a second agent on the same machine pays). Rounds are
repeated and the medians printed, with the load average before every run. Wall time is the shell
command's; CPU time is the whole process tree's (the shell, both agent processes and the model's
child: user + system from wait4), which the rest of a shared machine's load does not inflate the
way it does wall time. The page cache is not dropped: the model file and Python's modules are
read from memory, as on any machine after the install that wrote them.

    python bench/first_cycle.py --runs 5
    python bench/first_cycle.py --runs 5 --tree before=/tmp/before --tree now=.   # side by side
    python bench/first_cycle.py --split --runs 3     # where a first cycle's time goes, step by step

A tree is a checkout of this repository (`git worktree add --detach DIR COMMIT`), run with this
Python environment (llama-cpp-python and the bundled model are shared); trees alternate within a
round. Each run's first model call (reading the prompt, the reply, saving the prompt cache) comes
from its home's transcript, the cycle's time from its `agent run --json` report. Prints the table
docs/measurements.md shows.

--split runs the demo's first cycle in this process instead, on the runtime the model's child
runs (LocalRuntime), and times each step: the child's interpreter and imports (a separate
process), making the Q8_0 copy, loading the model, and, for each model call, reading the prompt,
decoding the reply (and choosing its tokens under the grammar) and saving the prompt cache. It
does so for this code and for this code with its first-cycle changes turned off ("before": the
wheel's Q4_1 file, one thread for prompts, llama-cpp-python's own sampler chain), alternately.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMAND = "python -m agent reset --template demo >/dev/null && python -m agent run --json"
RUN_CAP = 600.0  # seconds: a run still going then is stopped (and the bench says so)


@dataclass
class Run:
    wall: float
    cpu: float
    load: float
    code: int
    cycle_s: float | None  # the cycle as its report times it (the lock to the end)
    first_call_s: float | None  # the first model call, from the transcript


@dataclass
class Tree:
    label: str
    path: Path
    first: list[Run] = field(default_factory=list)
    second: list[Run] = field(default_factory=list)


def parse_tree(spec: str) -> Tree:
    label, _, path = spec.partition("=")
    if not label or not path:
        raise argparse.ArgumentTypeError(f"--tree wants label=path, got {spec!r}")
    return Tree(label, Path(path).resolve())


def load1() -> float:
    return os.getloadavg()[0]


def environment(tree: Path, fake_home: Path, home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "VIRTUAL_ENV", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | {"HOME": str(fake_home), "AGENT_HOME": str(home), "PYTHONPATH": str(tree), "TERM": "dumb"}


def timed(tree: Path, fake_home: Path, home: Path) -> Run:
    """One `reset && run` in a new home, as one shell command: wall time, the tree's CPU time."""
    home.mkdir(parents=True)
    load = load1()
    started = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", COMMAND],
        cwd=home,
        env=environment(tree, fake_home, home),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=RUN_CAP)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    wall = time.monotonic() - started
    report = _last_json(out)
    return Run(wall, 0.0, load, proc.returncode, report.get("duration_s"), _first_call(home, report))


def _last_json(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return {}


def _first_call(home: Path, report: dict) -> float | None:
    cycle_id = report.get("cycle_id")
    transcript = home / "logs" / f"cycle_{cycle_id}.transcript.jsonl"
    try:
        with open(transcript, encoding="utf-8") as handle:
            return float(json.loads(handle.readline())["elapsed_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def measure(tree: Path, fake_home: Path, home: Path) -> Run:
    """`timed`, with the CPU time of the whole process tree: what RUSAGE_CHILDREN gained (the shell
    is reaped by communicate(), and every process under it was waited for by its parent)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = timed(tree, fake_home, home)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return run


def median(values: list[float | None], digits: int = 1) -> str:
    present = [v for v in values if v is not None]
    return f"{statistics.median(present):.{digits}f}" if present else "-"


def table(trees: list[Tree]) -> str:
    lines = [
        "| code and home | wall s (median) | CPU s, whole tree (median) | first model call s | cycle s | "
        "load at start (min-max) | exit codes |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for tree in trees:
        for which, runs in (("first home (no cache)", tree.first), ("second home (same machine)", tree.second)):
            loads = [r.load for r in runs]
            lines.append(
                f"| {tree.label}, {which} | {median([r.wall for r in runs])} | {median([r.cpu for r in runs])} | "
                f"{median([r.first_call_s for r in runs])} | {median([r.cycle_s for r in runs])} | "
                f"{min(loads):.2f}-{max(loads):.2f} | {' '.join(str(r.code) for r in runs)} |"
            )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ --split

SPLIT_STEPS = [
    ("child", "the model's child: interpreter and imports (llama_cpp, the runtime)"),
    ("convert", "the Q8_0 copy of the weights, made once"),
    ("load", "loading the model"),
    ("prompt_1", "call 1: reading the prompt"),
    ("reply_1", "call 1: decoding the reply"),
    ("choose_1", "call 1: of which choosing tokens under the grammar"),
    ("save", "call 1: saving the prompt cache"),
    ("prompt_2", "call 2: reading the prompt (what changed)"),
    ("reply_2", "call 2: decoding the reply"),
]


def _child_start() -> float:
    started = time.monotonic()
    code = "import agent.models.local.child, llama_cpp"
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    return time.monotonic() - started


def _patched(runtime_module, before: bool, steps: dict[str, float]) -> list:
    """Before: this code's first-cycle changes turned off in this process; now: the copy timed.
    What it replaced, for the caller to put back."""
    from agent.models.local.threads import Threads

    names = ("converted", "install_greedy_grammar_sampler", "thread_count")
    saved = [(name, getattr(runtime_module, name)) for name in names]
    if before:
        runtime_module.converted = lambda *args: None
        runtime_module.install_greedy_grammar_sampler = lambda llm: None
        runtime_module.thread_count = lambda settings: Threads(1, 1, "one thread, as before")
        return saved
    convert = runtime_module.converted

    def timed_convert(*args):
        began = time.monotonic()
        try:
            return convert(*args)
        finally:
            steps["convert"] = time.monotonic() - began

    runtime_module.converted = timed_convert
    return saved


class _Timed:
    """The runtime as a cycle's model, timing each step of each call with llama.cpp's counters."""

    def __init__(self, runtime, steps: dict[str, float]):
        self.runtime, self.steps, self.calls = runtime, steps, 0
        self.name = runtime.name

    def start(self, log) -> None:
        started = time.monotonic()
        self.runtime.start(log)
        self.steps["load+convert"] = time.monotonic() - started
        cache = self.runtime.cache
        if cache is not None:
            save = cache.save

            def timed_save(path):
                began = time.monotonic()
                save(path)
                self.steps["save"] = time.monotonic() - began

            cache.save = timed_save

    def complete(self, request):
        import llama_cpp

        llm = self.runtime.llm
        llama_cpp.llama_perf_context_reset(llm._ctx.ctx)
        sampled = _sampling_clock(llm)
        completion = self.runtime.complete(request)
        perf = llama_cpp.llama_perf_context(llm._ctx.ctx)
        self.calls += 1
        n = self.calls
        self.steps[f"prompt_{n}"] = perf.t_p_eval_ms / 1000
        self.steps[f"reply_{n}"] = perf.t_eval_ms / 1000 + sampled()
        self.steps[f"choose_{n}"] = sampled()
        return completion


def _sampling_clock(llm):
    """Time spent in the sampler from now on (Llama.sample wraps whichever sampler is in use)."""
    spent = [0.0]
    usual = type(llm).sample

    def sample(*args, **kwargs):
        began = time.monotonic()
        try:
            return usual(llm, *args, **kwargs)
        finally:
            spent[0] += time.monotonic() - began

    llm.sample = sample
    return lambda: spent[0]


def split_once(before: bool) -> dict[str, float]:
    """One demo first cycle in this process, each step timed."""
    import agent.models.local.runtime as runtime_module
    from agent.config import load_settings
    from agent.cycle.run import run_cycle
    from agent.models.local.cache import LOCAL_CACHE_ENV
    from agent.store.home import Home

    scratch = Path(tempfile.mkdtemp(prefix="bench-split-"))
    steps = {"child": _child_start()}
    saved = _patched(runtime_module, before, steps)
    try:
        os.environ[LOCAL_CACHE_ENV] = str(scratch / "cache")
        home = scratch / "home"
        for command in (["init", str(home)], ["reset", "--home", str(home), "--template", "demo"]):
            subprocess.run([sys.executable, "-m", "agent", *command], cwd=REPO, check=True, capture_output=True)
        settings = load_settings(home, env={})
        model = _Timed(runtime_module.LocalRuntime(runtime_module.bundled_model_path(), settings), steps)
        run_cycle(Home.at(home), settings, model)
        steps["load"] = steps.pop("load+convert") - steps.get("convert", 0.0)
        return steps
    finally:
        for name, value in saved:
            setattr(runtime_module, name, value)
        shutil.rmtree(scratch, ignore_errors=True)


def split(runs: int) -> None:
    results: dict[str, list[dict[str, float]]] = {"before": [], "now": []}
    loads = []
    for round_ in range(runs):
        for label in ("before", "now") if round_ % 2 == 0 else ("now", "before"):
            loads.append(load1())
            results[label].append(split_once(before=label == "before"))
            print(f"round {round_ + 1} {label}: " + ", ".join(f"{k} {v:.2f}s" for k, v in results[label][-1].items()))
    print()
    print("| step | before: s (median) | now: s (median) |")
    print("| --- | --- | --- |")
    for key, what in SPLIT_STEPS:
        cells = [median([r.get(key) for r in results[label]], 2) for label in ("before", "now")]
        print(f"| {what} | {cells[0]} | {cells[1]} |")
    print()
    print(
        f"{runs} round(s) of each, alternating; 2 threads for prompts only when the load allowed it "
        f"(load average {min(loads):.2f}-{max(loads):.2f} at the runs' starts, {os.cpu_count()} cores)."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--tree", action="append", type=parse_tree, help="label=path (default: now=this checkout)")
    parser.add_argument("--split", action="store_true", help="time each step of the first cycle, in this process")
    args = parser.parse_args(argv)
    if args.split:
        split(args.runs)
        return 0
    trees: list[Tree] = args.tree or [Tree("now", REPO)]
    scratch = Path(tempfile.mkdtemp(prefix="bench-first-cycle-"))
    print(f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start", flush=True)
    try:
        for round_ in range(args.runs):
            for tree in trees if round_ % 2 == 0 else trees[::-1]:
                fake_home = scratch / f"{tree.label}-{round_}" / "user"
                fake_home.mkdir(parents=True)
                for which, runs in (("first", tree.first), ("second", tree.second)):
                    run = measure(tree.path, fake_home, scratch / f"{tree.label}-{round_}" / which)
                    runs.append(run)
                    print(
                        f"round {round_ + 1} {tree.label} {which}: {run.wall:.1f}s wall, {run.cpu:.1f}s CPU, "
                        f"exit {run.code}, load {run.load:.2f}",
                        flush=True,
                    )
                shutil.rmtree(scratch / f"{tree.label}-{round_}", ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(trees))
    print()
    print(
        f"`{COMMAND}` in a new home with a new HOME, then in a second new home; {args.runs} round(s); "
        f"{os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end."
    )
    for tree in trees:
        print(f"- {tree.label}: {tree.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
