"""Long-run benchmark: many cycles in one home, each adding about 1 KB of notes.

Runs the real runner (agent.cycle.run.Cycle) in-process with a scripted model, so every second
measured is runner overhead: prompt building, dispatch, four YAML writes with fsync, the archive,
retention. Prints prompt bytes at chosen cycles, file sizes and counts, and overhead per cycle.

The bounded run uses the default settings. The unbounded comparison (notes_budget and
completed_window unset, prompt_max_bytes out of reach, like the design this project grew from) is
run for fewer cycles, because its cost grows with every cycle, and projected linearly to the full
count; the projection is labelled.

    python bench/longrun.py                 # 1000 cycles, unbounded comparison over 100
    python bench/longrun.py --cycles 200 --unbounded-cycles 50
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.config import load_settings  # noqa: E402
from agent.cycle.run import run_cycle  # noqa: E402
from agent.models import ScriptedModel  # noqa: E402
from agent.store.db import records  # noqa: E402
from agent.store.home import Home  # noqa: E402


def script_for(cycle: int, folder: Path) -> Path:
    """Two echo calls with unique ~330-character messages (~1 KB of notes with the note framing), then done."""
    replies = [
        {"tool": "echo", "args": {"message": f"cycle {cycle} observation {i}: " + "lorem ipsum " * 26}}
        for i in range(2)
    ] + [{"tool": "done", "args": {"summary": f"finished cycle {cycle}"}}]
    path = folder / "script.yaml"
    path.write_text(yaml.safe_dump([__import__("json").dumps(r) for r in replies]))
    return path


def run(cycles: int, config: str, checkpoints: list[int]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "home"
        root.mkdir()
        (root / "config.yaml").write_text(config)
        home = Home.at(root)
        settings = load_settings(root, env={})
        start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
        prompts, overheads, notes_growth = {}, [], []
        for n in range(1, cycles + 1):
            script = script_for(n, Path(tmp))
            moment = start + dt.timedelta(minutes=15 * n)  # as if cron ran every 15 minutes
            began = time.perf_counter()
            # force: the home has no task, so an unforced cycle would be idle and call no model
            report = run_cycle(home, settings, ScriptedModel(script), clock=lambda m=moment: m, force=True)
            overheads.append(time.perf_counter() - began)
            assert report.stop_reason == "done", report.as_dict()
            if n in checkpoints:
                prompts[n] = max(report.prompt_bytes)
            if n <= 2:
                notes_growth.append(len(yaml.safe_load(home.active.read_text())["notes"]))
        archive = records(home).rows("SELECT coalesce(sum(length(record)), 0) FROM archive")[0][0]
        return {
            "prompts": prompts,
            "active_bytes": home.active.stat().st_size,
            "archive_bytes": archive,
            "scratchpad_files": sum(1 for _ in home.scratchpad.iterdir()),
            "overhead_blocks": [statistics.median(overheads[i : i + 100]) for i in range(0, len(overheads), 100)],
            "overhead_first": statistics.median(overheads[: min(100, len(overheads))]),
            "overhead_last": statistics.median(overheads[-min(100, len(overheads)) :]),
            "notes_per_cycle": notes_growth[1] - notes_growth[0] if len(notes_growth) == 2 else None,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--unbounded-cycles", type=int, default=100)
    args = parser.parse_args()
    points = [p for p in (10, 100, 1000) if p <= args.cycles] or [args.cycles]
    if args.cycles not in points:
        points.append(args.cycles)

    began = time.perf_counter()
    bounded = run(args.cycles, "", points)
    bounded_secs = time.perf_counter() - began
    upoints = [p for p in (10, args.unbounded_cycles) if p <= args.unbounded_cycles]
    # the original design had no prompt bound either: prompt_max_bytes (default 96 KiB) would clip it
    unbounded_config = "notes_budget: null\ncompleted_window: null\nkeep_cycles: null\nprompt_max_bytes: 1000000000\n"
    unbounded = run(args.unbounded_cycles, unbounded_config, upoints)

    # unbounded prompts grow linearly: project from the two measured points
    (a, pa), (b, pb) = sorted(unbounded["prompts"].items())[:2]
    slope = (pb - pa) / (b - a)

    def projected(n: int) -> str:
        if n in unbounded["prompts"]:
            return f"{unbounded['prompts'][n]:,}"
        return f"~{int(pa + slope * (n - a)):,} (projected)"

    print(f"notes added per cycle: {unbounded['notes_per_cycle']} characters")
    print(f"bounded run: {args.cycles} cycles in {bounded_secs:.1f}s\n")
    print("| measure | bounded (defaults) | unbounded (the original design) |")
    print("| --- | --- | --- |")
    for n in points:
        print(f"| prompt bytes at cycle {n} | {bounded['prompts'][n]:,} | {projected(n)} |")
    first, last = points[0], points[-1]
    print(
        f"| prompt growth, cycle {last} / cycle {first} | {bounded['prompts'][last] / bounded['prompts'][first]:.2f}x | "
        f"~{(pa + slope * (last - a)) / pa:.0f}x |"
    )
    print(
        f"| active.yaml bytes at the end | {bounded['active_bytes']:,} | {unbounded['active_bytes']:,} after "
        f"{args.unbounded_cycles} cycles |"
    )
    print(f"| archive bytes | {bounded['archive_bytes']:,} | 0 |")
    print(
        f"| files in scratchpad/ | {bounded['scratchpad_files']:,} | {unbounded['scratchpad_files']:,} after "
        f"{args.unbounded_cycles} cycles |"
    )
    print(
        f"| runner overhead per cycle, median of first 100 | {bounded['overhead_first'] * 1000:.1f} ms | "
        f"{unbounded['overhead_first'] * 1000:.1f} ms |"
    )
    print(
        f"| runner overhead per cycle, median of last 100 | {bounded['overhead_last'] * 1000:.1f} ms | "
        f"{unbounded['overhead_last'] * 1000:.1f} ms (cycles {max(1, args.unbounded_cycles - 99)}-"
        f"{args.unbounded_cycles}) |"
    )
    blocks = " ".join(f"{b * 1000:.1f}" for b in bounded["overhead_blocks"])
    print(f"\nbounded run, median overhead per block of 100 cycles (ms): {blocks}")
    print(
        "(snapshots accumulate until keep_cycles, default 500, is reached; from then on the number of files"
        " and the work per cycle stay constant)"
    )


if __name__ == "__main__":
    main()
