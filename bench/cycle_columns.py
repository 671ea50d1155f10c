"""Cycle columns bench: what the upgrade that adds the cycle table's columns (migration
`*_cycle_columns` in agent/store/migrations.py, and every migration after it) costs on a home of N
cycles, and whether a cron tick that lands during it still runs.

Makes real cycles first (bench/history.py's templates: the real runner, a scripted model), then a
home whose logs/agent.db the previous release wrote (the migrations before this one) holding N of
their records, replicated with fresh ids 15 minutes apart, as bench/history.py's million-cycle home
holds them after its upgrade (its archive and files left out: this migration reads only the cycle
table). Then, each as a separate process: the first command after the upgrade (`agent status`,
which applies the migration), a cycle (`agent run`, scripted) started the moment that command has
begun, as cron's next tick would be, and `agent status` again. The upgrade writes no row: the
database's size before and after says what its indexes added.

    python bench/cycle_columns.py                     # 1,000,000 cycles
    python bench/cycle_columns.py --size 100000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import history  # noqa: E402  bench/history.py: its real template cycles, its measuring wrapper

from agent.store import migrations  # noqa: E402
from agent.store.db import close_all, records  # noqa: E402
from agent.store.home import Home  # noqa: E402
from agent.store.rows import insert_record  # noqa: E402

THIS = next(n for n, step in enumerate(migrations.MIGRATIONS) if step.__name__.endswith("_cycle_columns"))


def previous_release_home(templates: dict, root: Path, size: int) -> Path:
    """A home of `size` records in a database at the migrations before this one."""
    shutil.copytree(
        templates["root"], root, ignore=shutil.ignore_patterns("*_before.yaml", "*_after.yaml", "cycle_*", "agent.db*")
    )
    every = migrations.MIGRATIONS[:]
    migrations.MIGRATIONS[:] = every[:THIS]
    try:
        db = records(Home.at(root))
        first = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(minutes=15 * size)
        cycles = templates["cycles"]
        for start in range(0, size, 50_000):
            with db.write():
                for i in range(start, min(size, start + 50_000)):
                    moment = first + dt.timedelta(minutes=15 * i)
                    record = dict(cycles[i % len(cycles)]["record"], cycle_id=moment.strftime("%Y%m%d_%H%M%S") + "_01")
                    insert_record(db, dict(record, started=moment.isoformat(timespec="seconds")))
        db.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert db.one("PRAGMA user_version")[0] == THIS
        close_all()
    finally:
        migrations.MIGRATIONS[:] = every
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="columns-bench-"))
    print(
        f"# cycle columns bench: {args.size:,} cycles, {os.cpu_count()} cores, load average {os.getloadavg()}, "
        f"in {folder} ({history.filesystem(folder)})"
    )
    try:
        templates = history.make_templates(folder)
        began = time.perf_counter()
        root = previous_release_home(templates, folder / "home", args.size)
        db_file = root / "logs" / "agent.db"
        before = db_file.stat().st_size
        print(f"made in {time.perf_counter() - began:.1f} s: agent.db {before / 1e6:,.0f} MB at migration {THIS}")
        os.sync()
        env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL")}
        env["PYTHONPATH"] = str(BENCH.parent)
        upgrade = subprocess.Popen(
            [sys.executable, "-c", history.WRAPPER, *history.agent("status", "--home", str(root))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        time.sleep(0.3)  # a bench, not a test: the tick lands while the upgrade runs (checked below)
        script = history.script(folder, 9999)
        tick = subprocess.Popen(
            [
                sys.executable,
                "-c",
                history.WRAPPER,
                *history.agent("run", "--home", str(root), "--model", f"scripted:{script}", "-q"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, process in (("upgrade (first command: status)", upgrade), ("cron tick during it (run)", tick)):
            out, err = process.communicate()
            code, took, cpu, rss = out.split()
            print(
                f"{name}: exit {code}, {float(took):.2f} s ({float(cpu):.2f} s CPU), {int(rss) / 1024:.0f} MB {err.strip()[-200:]}"
            )
        took, rss, cpu = history.measure(BENCH.parent, history.agent("status", "--home", str(root)))
        print(f"status after: {took:.2f} s ({cpu:.2f} s CPU), {rss:.0f} MB")
        after = db_file.stat().st_size
        print(f"agent.db after: {after / 1e6:,.0f} MB (+{(after - before) / 1e6:,.1f} MB, the indexes)")
        print(f"load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
