#!/usr/bin/env python3
"""The figures of the sections' 1,000-cycle soak (tests/system/test_memory_soak.py), printed.

The test holds the limits and the archive and asserts; this runs the same cycles (its replies,
its sections, its clock an hour a cycle, in one process) and prints what docs/measurements.md
quotes: the first request's prompt bytes at cycles 10, 100 and 1,000, the entries archived and
how many of them are in the archive once with their text, the ids issued, and the wall time.

    python bench/memory_soak.py               # 1,000 cycles
    python bench/memory_soak.py --cycles 200  # a shorter run
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def soak(root: Path, cycles: int) -> dict:
    from agent.config import load_settings
    from agent.cycle.run import run_cycle
    from agent.models.scripted import ScriptedModel
    from agent.store.archive import archived
    from agent.store.db import close_all
    from agent.store.home import Home
    from tests.helpers import read_active
    from tests.memory.homes import with_sections
    from tests.system.test_memory_soak import SECTIONS, START, replies

    home = root / "home"
    (home / "scratchpad").mkdir(parents=True)
    with_sections(home, {"purpose": "Learn one fact a cycle"}, sections=SECTIONS, keep_cycles=5)
    settings, where = load_settings(home), Home.at(home)
    texts: dict[str, str] = {}
    prompt: dict[int, int] = {}
    began = time.perf_counter()
    for n in range(1, cycles + 1):
        model = ScriptedModel.from_replies(replies(n))
        report = run_cycle(where, settings, model, clock=lambda n=n: START + dt.timedelta(hours=n))
        if report.exit_code != 0:
            raise SystemExit(f"cycle {n} failed: {report.error}")
        texts.update({e["id"]: e["text"] for e in read_active(home)["known"]})
        prompt[n] = report.prompt_bytes[0]
    wall = time.perf_counter() - began
    state = read_active(home)
    left = [r for r in archived(where) if r.get("kind") == "section_entry"]
    seen = Counter(r["id"] for r in left)
    once_with_text = sum(1 for r in left if seen[r["id"]] == 1 and r["value"]["text"] == texts.get(r["id"]))
    close_all()
    return {
        "prompt": prompt,
        "archived": len(left),
        "once_with_text": once_with_text,
        "issued": state["section_ids"]["known"],
        "held": len(state["known"]),
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=1000)
    args = parser.parse_args(argv)
    for var in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(var, None)  # the environment the test runs in (tests/conftest.py)
    os.environ["AGENT_IDLE"] = "run"  # a home with no task still runs its cycle, as in the test
    with tempfile.TemporaryDirectory(prefix="soak-") as root:
        out = soak(Path(root), args.cycles)
    prompt, last = out["prompt"], args.cycles
    for n in (10, 100, last):
        if n in prompt:
            print(f"first request's prompt at cycle {n}: {prompt[n]} bytes")
    if 100 in prompt:
        print(f"cycle {last} / cycle 100: {prompt[last] / prompt[100]:.3f}x")
    print(f"ids issued {out['issued']}, held {out['held']}, archived {out['archived']}")
    print(f"archived once with their text: {out['once_with_text']}")
    print(f"wall: {out['wall_s']:.1f} s for {last} cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
