#!/usr/bin/env python3
"""Does the memory help? A multi-cycle task set where facts arrive through the inbox, among
unrelated tasks, and later tasks need them.

Each arm runs the same days in a fresh home, one task a day: queued with `agent task add` (the
inbox's path), then one cycle exactly as `agent run` runs it (settings, model, cycle, in this
process). A fact arrives as a task ("Remember this for later: ..."); an unrelated task writes a
file; a recall task asks for a fact days later ("Write the NAS's IP address into nas.txt") and is
right when the file holds it. The arms:

    notes      a home without sections: msa's fields (notes, completed tasks) are all it keeps
    recursive  the `recursive` template: its config part (sections, reflect) and first state
    oracle     a scripted model that always does the right thing: the upper bound (no memory needed)
    none       the notes arm with its state wiped before each cycle: the lower bound (no memory)

    python bench/memory.py                                 # the embedded model, every arm
    python bench/memory.py --model openai:NAME             # any endpoint (OPENAI_BASE_URL, OPENAI_API_KEY)
    python bench/memory.py --arms notes,recursive --json out.json

It prints, per arm, the recall tasks answered right, the unrelated tasks done right, and the
prompt per cycle: the tokens the model reported (median and last day; all calls of a cycle,
reflect included) and the bytes sent (the first request of each cycle). The oracle's scripted
model reports no tokens: its bytes are the measure. The table is markdown, for docs/measurements.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FACTS = {
    "nas": ("The NAS's IP address is 10.0.0.5", "10.0.0.5"),
    "owner": ("The printer belongs to Dana", "Dana"),
    "port": ("The backup server listens on port 8443", "8443"),
}


@dataclass(frozen=True)
class Day:
    kind: str  # fact | chore | recall
    task: str
    file: str | None = None  # the file a chore or recall writes
    answer: str | None = None  # what that file must hold


def fact(key: str) -> Day:
    return Day("fact", f"Remember this for later: {FACTS[key][0]}.")


def chore(file: str, word: str) -> Day:
    return Day("chore", f"Write the word {word} into the file {file}.", file, word)


def recall(key: str, file: str, asked: str) -> Day:
    return Day("recall", f"Write {asked} into the file {file}.", file, FACTS[key][1])


DAYS = [
    fact("nas"),
    chore("hello.txt", "hello"),
    fact("owner"),
    chore("fruit.txt", "apple"),
    recall("nas", "nas.txt", "the NAS's IP address"),
    fact("port"),
    chore("color.txt", "blue"),
    chore("animal.txt", "otter"),
    recall("owner", "owner.txt", "the name of the person the printer belongs to"),
    chore("metal.txt", "iron"),
    chore("tree.txt", "oak"),
    recall("port", "port.txt", "the port the backup server listens on"),
    chore("river.txt", "nile"),
    recall("nas", "nas2.txt", "the NAS's IP address"),
]


@dataclass
class ArmResult:
    arm: str
    recalled: int = 0
    recalls: int = 0
    chores: int = 0
    chore_days: int = 0
    prompt_tokens: list[int] = field(default_factory=list)
    prompt_bytes: list[int] = field(default_factory=list)
    archived: int = 0
    stops: list[str] = field(default_factory=list)


class Oracle:
    """The upper bound: writes each file with the right answer, then done (it needs no memory)."""

    name = "scripted:oracle"

    def __init__(self, day: Day):
        self.day = day

    def start(self, log) -> None:
        self.calls = 0

    def complete(self, request):
        from agent.models.base import Completion, Usage

        self.calls += 1
        if self.day.file and self.calls == 1:
            reply = {"tool": "write_file", "args": {"path": self.day.file, "content": self.day.answer}}
        else:
            reply = {"tool": "done", "args": {"summary": "done"}}
        return Completion(json.dumps(reply), Usage(calls=1))


def run_cli(*args: str):
    """An `agent` command in this process, as the CLI runs it."""
    from click.testing import CliRunner

    from agent.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def make_home(arm: str, root: Path) -> Path:
    home = root / arm
    template = ["--template", "recursive"] if arm == "recursive" else []
    result = run_cli("init", str(home), *template)
    assert result.exit_code == 0, result.output
    if arm == "recursive":  # who the agent is: the operator's, read-only
        run_cli(
            "memory", "set", "--home", str(home), "purpose", "Do the tasks given, remembering facts for later ones."
        )
    return home


def run_day(arm: str, home: Path, day: Day, model_spec: str | None, env: dict) -> tuple[dict, list[int]]:
    from agent.config import load_settings
    from agent.cycle.run import run_cycle
    from agent.models import resolve_model
    from agent.store.home import Home

    if arm == "none":  # the lower bound: nothing carries over from one day to the next
        (home / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": None}))
    result = run_cli("task", "add", "--home", str(home), day.task)
    assert result.exit_code == 0, result.output
    settings = load_settings(home, env=env, model=model_spec)
    model = Oracle(day) if arm == "oracle" else resolve_model(settings, home, env=env)
    report = run_cycle(Home.at(home), settings, model)
    return report.as_dict(), report.prompt_bytes


def run_arm(arm: str, root: Path, model_spec: str | None, env: dict) -> ArmResult:
    home = make_home(arm, root)
    result = ArmResult(arm)
    for day in DAYS:
        report, prompt_bytes = run_day(arm, home, day, model_spec, env)
        result.stops.append(report["stop_reason"])
        result.prompt_tokens.append(report["usage"]["prompt_tokens"])
        result.prompt_bytes.append(prompt_bytes[0] if prompt_bytes else 0)
        result.archived += report["archived"]
        written = home / "workspace" / day.file if day.file else None
        right = written is not None and written.is_file() and day.answer in written.read_text(errors="replace")
        if day.kind == "recall":
            result.recalls += 1
            result.recalled += right
        elif day.kind == "chore":
            result.chore_days += 1
            result.chores += right
        said = "" if day.kind == "fact" else f"right={right}"
        print(f"  {arm} {report['cycle_id']} {day.kind:<6} {report['stop_reason']:<16} {said}", flush=True)
    return result


def table(results: list[ArmResult], model: str) -> str:
    lines = [
        f"| arm ({model}) | recalled right | chores right | prompt tokens/cycle, median | last day | "
        "prompt bytes/cycle, median | last day | archived |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        tokens = any(r.prompt_tokens)
        lines.append(
            f"| {r.arm} | {r.recalled}/{r.recalls} | {r.chores}/{r.chore_days} | "
            f"{statistics.median(r.prompt_tokens) if tokens else '-'} | {r.prompt_tokens[-1] if tokens else '-'} | "
            f"{statistics.median(r.prompt_bytes):.0f} | {r.prompt_bytes[-1]} | {r.archived} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="PROVIDER[:NAME] (default: the embedded model)")
    parser.add_argument("--arms", default="oracle,notes,recursive,none", help="comma-separated, in the order run")
    parser.add_argument("--json", dest="json_path", help="also write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the homes (printed) for reading afterwards")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k.startswith(("OPENAI_", "AGENT_IDLE"))}
    root = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    results = []
    for arm in args.arms.split(","):
        print(f"{arm}:", flush=True)
        results.append(run_arm(arm, root, args.model, env))
    print()
    print(table(results, args.model or "local"))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps([r.__dict__ for r in results], indent=2))
    if args.keep:
        print(f"homes kept in {root}")
    else:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
