"""History bench: does anything a cycle or a command does grow with the number of cycles ever run?

Makes real cycles first (the real runner, a scripted model, budgets set, a small completed_window
and notes_budget so the archive fills), then fabricates homes of N cycles from their records, in
the files the release before logs/agent.db kept (logs/index.jsonl, archive.jsonl, cycles.json, a
transcript file per cycle): every record, archive item, snapshot pair, cycle log and transcript is
a real one, replicated with a fresh id, 15 minutes apart (a `*/15` cron line), the newest ending
now. The first command on each home upgrades it into logs/agent.db (the `upgrade (once)` row),
and everything after runs on the database. Snapshot files, logs and transcripts are written for
the newest `--files` cycles only (default 100,000: all of them up to 100k; at 1M the records and
archive have every cycle and the disk the newest 100k), as if retention had long ago removed the
rest; the output says how many each home has. Transcripts are written as one short record unless
`--transcripts` (a real transcript's size is printed).

Then, for every size side by side (one command at every size before the next repetition, so machine
load falls on all sizes alike), each measured as a separate process whose time and peak memory
(`ru_maxrss` of that child alone, read by a fresh wrapper process) are taken:

  cycle      `agent run` with the scripted model, daily and monthly token budgets set, keep_cycles: null
  status     `agent status`
  history    `agent history --limit 20`
  diff       `agent diff` (the latest cycle)
  show-all   `agent show --all` (the whole archive, to /dev/null), once
  recall     a recall search, once
  daily      `agent history --daily` (the newest 20 days)
  prune      `agent prune --keep K` deleting up to 10,000 expired cycles (snapshot pair, log, transcript), once,
             after an `os.sync()` (what a prune deletes is old: written back long ago, not minutes ago)
  floor      just before each prune, the same number of files with the same contents, made and synced
             the same way in a folder beside the home, unlinked by a bare loop: what the kernel alone
             takes to delete them on this filesystem, the floor under any prune

plus the one-off upgrade (the first command on a home an older release wrote: `agent status`), and
disk bytes per cycle. Medians of `--repeats` runs.

    python bench/history.py                                  # 1k, 10k, 100k
    python bench/history.py --sizes 1000,10000,100000,1000000 --repeats 5
    python bench/history.py --sizes 1000,100000 --code /path/to/another/checkout   # the same, other code
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from agent.after.transcript import read_transcript  # noqa: E402
from agent.config import load_settings  # noqa: E402
from agent.cycle.run import run_cycle  # noqa: E402
from agent.models import ScriptedModel  # noqa: E402
from agent.store.archive import archived  # noqa: E402
from agent.store.cycles import newest_first  # noqa: E402
from agent.store.home import Home  # noqa: E402

TEMPLATE_CYCLES = 12
CONFIG = (
    "keep_cycles: null\ncompleted_window: 3\nnotes_budget: 600\n"
    "daily_token_budget: 100000000\nmonthly_token_budget: 1000000000\n"
)
WRAPPER = """
import resource, subprocess, sys, time
began = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
took = time.perf_counter() - began
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(done.returncode, took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)
sys.stderr.write(done.stderr.decode(errors="replace")[-400:])
"""
FLOOR = """
import os, sys
for folder in ("scratchpad", "logs"):
    fd = os.open(os.path.join(sys.argv[1], folder), os.O_RDONLY | os.O_DIRECTORY)
    for name in sorted(os.listdir(fd)):
        os.unlink(name, dir_fd=fd)
"""
RECALL = (
    "import sys; from agent.store.home import Home; from agent.store.archive import search; "
    "print(len(search(Home.at(sys.argv[1]), 'observation cycle lorem', 5)))"
)
SHORT_TRANSCRIPT = json.dumps({"call": 1, "cut": "fabricated"}).encode() + b"\n"


def script(folder: Path, n: int) -> Path:
    """An echo with a ~300-character message, then done: a cycle that notes, finishes a task and archives."""
    replies = [
        {"tool": "echo", "args": {"message": f"cycle {n} observation: " + "lorem ipsum " * 24}},
        {"tool": "done", "args": {"summary": f"finished cycle {n}"}},
    ]
    path = folder / f"script{n}.yaml"
    path.write_text(yaml.safe_dump([json.dumps(r) for r in replies]))
    return path


def make_templates(folder: Path) -> dict:
    """Real cycles: their index records, archive records and files, by cycle."""
    root = folder / "template"
    root.mkdir()
    (root / "config.yaml").write_text(CONFIG)
    (root / "scratchpad").mkdir()
    tasks = [f"task {i}: look at the logs and note what changed" for i in range(TEMPLATE_CYCLES + 60)]
    (root / "scratchpad" / "active.yaml").write_text(
        yaml.safe_dump({"goals": ["keep the service healthy"], "current_task": tasks[0], "pending_actions": tasks[1:]})
    )
    home, settings = Home.at(root), load_settings(root, env={})
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    for n in range(TEMPLATE_CYCLES):
        moment = start + dt.timedelta(minutes=15 * n)
        report = run_cycle(home, settings, ScriptedModel(script(folder, n)), clock=lambda m=moment: m)
        assert report.exit_code == 0, report
    records = list(newest_first(home))[::-1]
    archive = list(archived(home))
    cycles = []
    for record in records:
        cid = record["cycle_id"]
        files = {
            kind: path.read_bytes()
            for kind, path in (
                ("before", home.snapshot(cid, "before")),
                ("after", home.snapshot(cid, "after")),
                ("log", home.cycle_log(cid)),
            )
            if path.exists()
        }
        lines = [json.dumps(r, ensure_ascii=False) + "\n" for _, r in read_transcript(home, cid)]
        files["transcript"] = "".join(lines).encode()
        cycles.append({"record": record, "archive": [a for a in archive if a.get("cycle_id") == cid], "files": files})
    return {"root": root, "cycles": cycles}


def fabricate(templates: dict, root: Path, size: int, with_files: int, full_transcripts: bool) -> dict:
    """A home of `size` cycles, 15 minutes apart, the newest 15 minutes ago; files for the newest `with_files`."""
    began = time.perf_counter()
    skipped = shutil.ignore_patterns("*_before.yaml", "*_after.yaml", "cycle_*", "agent.db*")
    shutil.copytree(templates["root"], root, ignore=skipped)
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    first = now - dt.timedelta(minutes=15 * size)
    home = Home.at(root)
    cycles = templates["cycles"]
    newest = None
    with open(home.logs / "index.jsonl", "w") as index, open(home.logs / "archive.jsonl", "w") as archive:
        for i in range(size):
            moment = first + dt.timedelta(minutes=15 * i)
            cid = moment.strftime("%Y%m%d_%H%M%S") + "_01"
            stamp = moment.isoformat(timespec="seconds")
            template = cycles[i % len(cycles)]
            index.write(json.dumps(dict(template["record"], cycle_id=cid, started=stamp), ensure_ascii=False) + "\n")
            for item in template["archive"]:
                archive.write(json.dumps(dict(item, cycle_id=cid, archived_at=stamp), ensure_ascii=False) + "\n")
            if i >= size - with_files:
                files = template["files"]
                for label in ("before", "after"):
                    home.snapshot(cid, label).write_bytes(files[label])
                home.cycle_log(cid).write_bytes(files.get("log", b""))
                transcript = home.logs / f"cycle_{cid}.transcript.jsonl"  # short unless asked: disk is shared
                transcript.write_bytes(files["transcript"] if full_transcripts else SHORT_TRANSCRIPT)
            newest = cid
    (home.logs / "cycles.json").write_text(json.dumps({"newest": newest, "unrecorded": []}))
    made = time.perf_counter() - began
    index_bytes, archive_bytes = (
        (home.logs / "index.jsonl").stat().st_size,
        (home.logs / "archive.jsonl").stat().st_size,
    )
    file_bytes = sum(
        e.stat().st_size
        for folder in (home.scratchpad, home.logs)
        for e in os.scandir(folder)
        if (e.name.startswith("cycle_") and e.name.endswith(".log")) or e.name.endswith(("_before.yaml", "_after.yaml"))
    )
    return {
        "root": root,
        "size": size,
        "files_for": min(size, with_files),
        "made_s": made,
        "index_bytes": index_bytes,
        "archive_bytes": archive_bytes,
        "file_bytes": file_bytes,
    }


def floor_files(templates: dict, folder: Path, count: int, full_transcripts: bool) -> Path:
    """`count` cycles' files as `fabricate` writes them, in `folder`/scratchpad and `folder`/logs."""
    home = Home.at(folder)
    home.scratchpad.mkdir(parents=True)
    home.logs.mkdir()
    cycles = templates["cycles"]
    for i in range(count):
        cid, files = f"{i:08d}_000000_01", cycles[i % len(cycles)]["files"]
        for label in ("before", "after"):
            home.snapshot(cid, label).write_bytes(files[label])
        home.cycle_log(cid).write_bytes(files.get("log", b""))
    return folder


def measure(code: Path, argv: list[str]) -> tuple[float, float, float]:
    """(seconds, peak MB, CPU seconds) of one process running argv."""
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
    env["PYTHONPATH"] = str(code)
    out = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, env=env)
    code_, took, cpu, rss = out.stdout.split()
    if code_ not in ("0", "3"):
        raise SystemExit(f"{argv} exited {code_}: {out.stderr}")
    return float(took), int(rss) / 1024, float(cpu)


def filesystem(folder: Path) -> str:
    """The type and mount options of the filesystem `folder` is on (from /proc/self/mounts), or '?'."""
    try:
        mounts = [line.split() for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return "?"
    path, best = str(folder.resolve()), None
    for fields in mounts:
        point = fields[1].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and (best is None or len(point) >= len(best[1])):
            best = fields
    return "?" if best is None else f"{best[2]} on {best[0]}, mounted {best[3]}"


def agent(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--files", type=int, default=100_000, help="cycles with files on disk, at most")
    parser.add_argument("--transcripts", action="store_true", help="write fabricated transcripts in full")
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout whose agent is measured")
    parser.add_argument("--keep", type=Path, help="fabricate here and keep the homes (default: a temporary folder)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = args.keep or Path(tempfile.mkdtemp(prefix="history-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"# history bench: sizes {sizes}, {args.repeats} repeats, code {args.code}, {os.cpu_count()} cores, "
        f"load average before {os.getloadavg()}, homes in {folder} ({filesystem(folder)})"
    )
    try:
        templates = make_templates(folder)
        homes = [fabricate(templates, folder / f"home-{size}", size, args.files, args.transcripts) for size in sizes]
        transcript = statistics.median(len(c["files"].get("transcript", b"")) for c in templates["cycles"])
        print(
            f"a real cycle's transcript: {transcript:,.0f} bytes "
            + (
                "(written in full)"
                if args.transcripts
                else "(written as one short record: --transcripts writes them in full)"
            )
        )
        results: dict[str, dict[int, list[tuple[float, float, float]]]] = {}

        def record(name: str, size: int, value: tuple[float, float, float]) -> None:
            results.setdefault(name, {}).setdefault(size, []).append(value)

        for made in homes:  # the one-off upgrade: the first command on a home an older release wrote
            record(
                "upgrade (once, by `status`)",
                made["size"],
                measure(args.code, agent("status", "--home", str(made["root"]))),
            )
            made["db_bytes"] = (made["root"] / "logs" / "agent.db").stat().st_size
        scripts = [script(folder, 1000 + n) for n in range(args.repeats)]
        for rep in range(args.repeats):
            for made in homes:
                root = str(made["root"])
                record(
                    "cycle (budgets set)",
                    made["size"],
                    measure(args.code, agent("run", "--home", root, "--model", f"scripted:{scripts[rep]}", "-q")),
                )
                record("status", made["size"], measure(args.code, agent("status", "--home", root)))
                record(
                    "history --limit 20",
                    made["size"],
                    measure(args.code, agent("history", "--home", root, "--limit", "20")),
                )
                record("diff", made["size"], measure(args.code, agent("diff", "--home", root)))
                record("history --daily", made["size"], measure(args.code, agent("history", "--home", root, "--daily")))
        for made in homes:
            root = str(made["root"])
            record("show --all", made["size"], measure(args.code, agent("show", "--all", "--home", root)))
            record("recall", made["size"], measure(args.code, [sys.executable, "-c", RECALL, root]))
            on_disk = made["files_for"] + args.repeats
            keep = max(on_disk - 10_000, on_disk // 2)  # 10,000 expired cycles where there are that many
            made["pruned"] = on_disk - keep
            floor = floor_files(templates, folder / f"floor-{made['size']}", made["pruned"], args.transcripts)
            # The files a prune deletes are old, long written back; the fabricated ones are minutes old
            # and the kernel may still be writing them, and an unlink then waits for that: sync first
            os.sync()
            record(
                "bare unlink of as many files (floor)",
                made["size"],
                measure(args.code, [sys.executable, "-c", FLOOR, str(floor)]),
            )
            shutil.rmtree(floor)
            os.sync()
            record(
                "prune --dry-run (plan only)",
                made["size"],
                measure(args.code, agent("prune", "--keep", str(keep), "--dry-run", "--home", root)),
            )
            record(
                "prune (10,000 expired, or half)",
                made["size"],
                measure(args.code, agent("prune", "--keep", str(keep), "--home", root)),
            )
        report(homes, results, args)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def report(homes: list[dict], results: dict, args) -> None:
    sizes = [h["size"] for h in homes]
    print(f"load average after: {os.getloadavg()}\n")
    print("each cell: median wall time (median CPU time, user + system), peak resident memory\n")
    print("| | " + " | ".join(f"{s:,} cycles" for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    print("| snapshot pairs + logs on disk | " + " | ".join(f"{h['files_for']:,}" for h in homes) + " |")
    print(
        "| disk bytes per cycle (the older release's index + archive) | "
        + " | ".join(f"{(h['index_bytes'] + h['archive_bytes']) / h['size']:,.0f}" for h in homes)
        + " |"
    )
    print(
        "| disk bytes per cycle (logs/agent.db after the upgrade"
        + (", transcripts in full) | " if args.transcripts else ", short transcripts) | ")
        + " | ".join(f"{h.get('db_bytes', 0) / h['size']:,.0f}" for h in homes)
        + " |"
    )
    print(
        "| disk bytes per cycle (its snapshot pair and log) | "
        + " | ".join(f"{h['file_bytes'] / max(1, h['files_for']):,.0f}" for h in homes)
        + " |"
    )
    for name, by_size in results.items():
        cells = []
        for size in sizes:
            runs = by_size.get(size, [])
            seconds, cpu = statistics.median(r[0] for r in runs), statistics.median(r[2] for r in runs)
            peak = max(r[1] for r in runs)
            cells.append(f"{seconds:.2f} s ({cpu:.2f} s CPU), {peak:.0f} MB")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nprune deleted: " + ", ".join(f"{h['size']:,}: {h.get('pruned', 0):,} cycles" for h in homes))
    first, *_ = sizes
    for name in ("cycle (budgets set)", "status", "history --limit 20", "diff"):
        base = statistics.median(r[0] for r in results[name][first])
        ratios = [
            f"{s:,}/{first:,} = {statistics.median(r[0] for r in results[name][s]) / base:.2f}x" for s in sizes[1:]
        ]
        print(f"{name}: " + ", ".join(ratios))


if __name__ == "__main__":
    main()
