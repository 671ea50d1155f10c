"""Report bench: does `agent report` (and `agent fleet`) cost what it draws, not what the window holds?
A home run every half minute has 100,000 cycles inside a 30-day window; one run hourly, 1,000. And
what do Jinja2 and uPlot add to its start-up?

Homes of N cycles are made as the tests make them (tests/histories.py: rows of logs/agent.db written
through the store's writer in one transaction, every stop reason, several models, errors, incidents;
then three real cycles with snapshots and transcripts, whose write_file waits for the operator: a
parked approval). Every home's N cycles lie inside the last `--days` days (spread evenly over them),
and a tenth as many again before the window. One more home holds the largest size of cycles that
all fail (an incident per task, twelve cycles each): the most the incidents and the folded newest
cycles can cost.

Then, for every size side by side (one command at every size before the next repetition, so the
machine's load falls on all sizes alike), each a separate process whose wall time and peak memory
(`ru_maxrss` of that child alone, read by a fresh wrapper process) are taken:

  report     `agent report --home H --days D -o FILE` (the newest 5 cycles in detail, the default)
  report --detail 0    the same page without the newest cycles' detail: the page's size apart from it
  fleet      `agent fleet H`

and, once, what each library adds to the report's start-up, in fresh processes: importing Jinja2,
compiling the page's template, reading and hashing uPlot's files, and the bytes uPlot adds to a page.

    python bench/report.py                              # 1,000 and 100,000 cycles in 30 days, 5 repeats
    python bench/report.py --sizes 1000,100000 --repeats 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.histories import PATTERN, long_home  # noqa: E402

FAILING = "failing"  # the home of the largest size whose cycles all fail

WRAPPER = """
import resource, subprocess, sys, time
began = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
took = time.perf_counter() - began
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(done.returncode, took, usage.ru_maxrss)
sys.stderr.write(done.stderr.decode(errors="replace")[-400:])
"""
STARTUP = {  # name: (what runs first, untimed; what is timed)
    "import jinja2": ("", "import jinja2"),
    "the report's own modules (agent.cli.report, window, page)": (
        "import agent.cli.common",
        "import agent.cli.report, agent.cli.window, agent.cli.page",
    ),
    "jinja2: make the environment and compile the page's template": (
        "import jinja2, agent.cli.page as p",
        "p._environment().get_template('report.html.j2')",
    ),
    "uPlot: read and hash its JS and CSS": (
        "import agent.cli.page as p",
        "p._hashed('script-src', [(p.UPLOT / 'uPlot.iife.min.js').read_text()]); "
        "p._hashed('style-src', [(p.UPLOT / 'uPlot.min.css').read_text()])",
    ),
}


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MiB) of one run of `argv` in a fresh process."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, cwd=REPO)
    code, took, rss = out.stdout.split()
    if code not in ("0", "1"):  # fleet exits 1 for a home that needs a person
        raise SystemExit(f"{argv} exited {code}: {out.stderr}")
    return float(took), int(rss) / 1024


def startup(repeats: int) -> dict[str, float]:
    """Median seconds of each STARTUP snippet in a fresh interpreter, timed inside it."""
    timed = "{}\nimport time; t = time.perf_counter(); {}; print(time.perf_counter() - t)"
    found = {}
    for name, (first, code) in STARTUP.items():
        runs = [
            float(subprocess.check_output([sys.executable, "-c", timed.format(first, code)], cwd=REPO, text=True))
            for _ in range(repeats)
        ]
        found[name] = statistics.median(runs)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="make the homes here and keep them (default: a temporary folder)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="report-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"# report bench: sizes {sizes}, {args.repeats} repeats, --days {args.days}, {os.cpu_count()} cores, "
        f"load average before {os.getloadavg()}"
    )
    try:
        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        inside = dt.timedelta(days=args.days - 1, hours=now.hour, minutes=now.minute)  # the window, less a little
        homes = {}
        for size in [*sizes, FAILING]:
            began = time.perf_counter()
            cycles = sizes[-1] if size == FAILING else size
            every = inside / cycles
            end = now - every * 4
            count = cycles + cycles // 10  # a tenth more before the window
            pattern = ["error"] if size == FAILING else PATTERN
            root = long_home(
                folder / f"home-{size}", count, end, every, pattern=pattern, approval_required=["write_file"]
            ).root
            homes[size] = root
            print(
                f"made {count:,} cycles ({cycles:,} in the window, every {every.total_seconds():.0f} s, {size}) in "
                f"{time.perf_counter() - began:.1f} s"
            )
        results: dict[str, dict[int, list[tuple[float, float]]]] = {}
        for rep in range(args.repeats):
            for size, root in homes.items():
                page = folder / f"report-{size}.html"
                report = ["-m", "agent", "report", "--home", str(root), "--days", str(args.days), "-o", str(page)]
                results.setdefault("report", {}).setdefault(size, []).append(measure([sys.executable, *report]))
                bare = [*report[:-1], str(folder / f"report-{size}-bare.html"), "--detail", "0"]
                results.setdefault("report --detail 0", {}).setdefault(size, []).append(
                    measure([sys.executable, *bare])
                )
                fleet = [sys.executable, "-m", "agent", "fleet", str(root)]
                results.setdefault("fleet", {}).setdefault(size, []).append(measure(fleet))
        pages = {size: (folder / f"report-{size}.html").stat().st_size for size in homes}
        pages.update({(size, 0): (folder / f"report-{size}-bare.html").stat().st_size for size in homes})
        print_results(sizes, results, pages, startup(args.repeats))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def print_results(sizes: list[int], results: dict, pages: dict, started: dict[str, float]) -> None:
    print(f"load average after: {os.getloadavg()}\n")
    print(
        "each cell: median wall time, median peak resident memory; the ratios are the largest size's and the "
        "failing home's to the smallest size's\n"
    )
    columns = [*sizes, FAILING]
    names = [f"{s:,} cycles" if s != FAILING else f"{sizes[-1]:,} failing" for s in columns]
    print("| | " + " | ".join(names) + " | ratio | failing's ratio |")
    print("|---|" + "---|" * (len(columns) + 2))
    for name, by_size in results.items():
        cells, times, rss = [], [], []
        for size in columns:
            runs = by_size[size]
            times.append(statistics.median(t for t, _ in runs))
            rss.append(statistics.median(m for _, m in runs))
            cells.append(f"{times[-1] * 1000:.0f} ms, {rss[-1]:.0f} MiB")
        ratios = [f"{times[k] / times[0]:.2f}x time, {rss[k] / rss[0]:.2f}x memory" for k in (-2, -1)]
        print(f"| {name} | " + " | ".join([*cells, *ratios]) + " |")
    print("| page size | " + " | ".join(f"{pages[s] / 1024:.0f} KiB" for s in columns) + " | | |")
    print("| page size, --detail 0 | " + " | ".join(f"{pages[(s, 0)] / 1024:.0f} KiB" for s in columns) + " | | |")
    print("\nstart-up, median seconds in a fresh interpreter (each line on its own):\n")
    for name, seconds in started.items():
        print(f"- {name}: {seconds * 1000:.1f} ms")
    from agent.cli.page import UPLOT

    added = sum((UPLOT / name).stat().st_size for name in ("uPlot.iife.min.js", "uPlot.min.css"))
    print(f"- uPlot's bytes in every page: {added / 1024:.1f} KiB")


if __name__ == "__main__":
    main()
