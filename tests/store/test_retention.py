"""Retention: keep rules select old cycles by id order, delete only their snapshots and logs,
never the newest cycle by age alone, and never what the index and archive hold."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.common.outcomes import UsageError
from agent.config import Settings, load_settings
from agent.store import retention
from agent.store.home import Home
from agent.store.ids import CYCLE_FILE_FORMS, cycle_started, cycles_on_disk
from agent.store.ids import cycle_of as ids_cycle_of
from agent.store.retention import VALID_ID, apply_retention, parse_duration, prune_cycles, select_expired
from agent.store.totals import load_totals, scan_disk, totals_path
from tests.helpers import run_cli, tree_digest, write_script

NOW = _dt.datetime(2026, 1, 10, tzinfo=_dt.timezone.utc)


def run(home, script, *extra):
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def ids_on_disk(home: Home) -> list[str]:
    return sorted(p.name[: -len("_before.yaml")] for p in home.scratchpad.glob("*_before.yaml"))


# ------------------------------------------------------------------------------ selecting


def test_select_expired_applies_each_keep_rule_and_removes_only_what_none_keeps():
    ids = ["20260101_000000", "20260105_000000", "20260109_000000", "20260109_000000_02"]
    assert select_expired(ids) == []
    assert select_expired(ids, keep_cycles=2) == ids[:2]
    assert select_expired(ids, keep_cycles=0) == ids
    assert select_expired(ids, keep_days=3, now=NOW) == ids[:2]
    assert select_expired(ids, keep_cycles=3, keep_days=3, now=NOW) == ids[:1]
    assert select_expired(ids, keep_cycles=0, protect=[ids[-1]]) == ids[:-1]


def test_select_expired_keeps_everything_while_there_are_fewer_ids_than_the_limit():
    assert select_expired(["20260101_000000", "20260101_000100"], keep_cycles=3) == []
    assert select_expired(["a1", "a2", "a3", "a4"], keep_cycles=3) == ["a1"]


def test_keep_days_never_removes_the_newest_cycle():
    """A home whose cron stopped for a month, or a clock now running fast, keeps its last cycle."""
    ids = ["20251201_000000_01", "20251202_000000_01", "20251203_000000_01"]
    assert select_expired(ids, keep_days=7, now=NOW) == ids[:2]
    assert select_expired(ids, keep_days=7, now=NOW.replace(year=2030)) == ids[:2]


def test_a_clock_that_ran_fast_does_not_get_the_newest_cycles_pruned(home, start_cycle):
    h = Home.at(home)
    h.ensure_dirs()
    fast = [start_cycle(h, NOW.replace(year=2030)) for _ in range(2)]  # then the clock is corrected
    newest = [start_cycle(h, NOW + _dt.timedelta(minutes=m)) for m in range(2)]
    assert ids_on_disk(h) == fast + newest
    apply_retention(h, Settings(keep_cycles=2), now=NOW)
    assert ids_on_disk(h) == newest
    apply_retention(h, Settings(keep_days=1), now=NOW)
    assert ids_on_disk(h) == newest


@pytest.mark.parametrize(
    "text, seconds", [("90s", 90), ("30m", 1800), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1.5D", 129600)]
)
def test_parse_duration_reads_a_number_and_a_unit(text, seconds):
    assert parse_duration(text) == seconds


# ------------------------------------------------------------------------------- deleting


def test_apply_retention_follows_settings_and_spares_the_protected_cycle(home, start_cycle):
    h = Home.at(home)
    h.ensure_dirs()
    ids = [start_cycle(h, NOW) for _ in range(4)]
    assert apply_retention(h, Settings()) == []
    deleted = apply_retention(h, Settings(keep_cycles=1), protect=[ids[0]])
    assert {p.name for p in deleted} == {f"{i}_{label}.yaml" for i in ids[1:3] for label in ("before", "after")} | {
        f"cycle_{i}.log" for i in ids[1:3]
    }
    assert ids_on_disk(h) == [ids[0], ids[3]]


# --------------------------------------------------------------------------- through cycles


def test_automatic_retention_keeps_the_newest_cycles_and_all_history(home, tmp_path):
    (home / "config.yaml").write_text("keep_cycles: 2\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    ids = [json.loads(run(home, script, "--json").stdout)["cycle_id"] for _ in range(4)]
    left = sorted(p.name for p in (home / "scratchpad").iterdir())
    assert left == sorted([f"{i}_{label}.yaml" for i in ids[-2:] for label in ("before", "after")] + ["active.yaml"])
    assert sorted(p.name for p in (home / "logs").glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids[-2:]]
    index = [json.loads(line)["cycle_id"] for line in (home / "logs/index.jsonl").read_text().splitlines()]
    assert index == ids  # the index still lists every cycle


def test_retention_is_on_by_default_and_can_be_turned_off(home):
    assert load_settings(home, env={}).keep_cycles == 500
    (home / "config.yaml").write_text("keep_cycles: null\n")
    assert load_settings(home, env={}).keep_cycles is None


def test_retention_keeps_everything_while_there_are_fewer_cycles_than_the_limit(home, tmp_path):
    (home / "config.yaml").write_text("keep_cycles: 3\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    for expected in (1, 2, 3, 3):
        assert run(home, script).exit_code == 0
        assert len(list((home / "scratchpad").glob("*_before.yaml"))) == expected


def test_retention_settings_load_and_keep_cycles_0_is_refused(home):
    (home / "config.yaml").write_text("keep_cycles: 5\nkeep_days: 1.5\n")
    settings = load_settings(home)
    assert (settings.keep_cycles, settings.keep_days) == (5, 1.5)
    (home / "config.yaml").write_text("keep_cycles: 0\n")
    with pytest.raises(UsageError, match="keep_cycles"):
        load_settings(home)


# ------------------------------------------------------------------- streamed, in bounded memory


def test_the_id_pattern_accepts_exactly_what_cycle_started_accepts():
    """A listing keeps names with VALID_ID, in C; it must agree with cycle_started on every date
    (month and day lengths, leap years by the 4/100/400 rule, year 0) and every clock field."""
    pattern = re.compile(VALID_ID)
    years = ["0000", "0001", "0004", "0100", "0400", "1900", "2000", "2023", "2024", "2100", "9999"]
    dates = [f"{y}{m:02d}{d:02d}" for y in years for m in range(14) for d in range(33)]
    times = ["000000", "235959", "240000", "236000", "230060", "995959"]
    ids = [f"{date}_{t}" for date in dates for t in ("120000", *times[:2])] + [f"20240229_{t}" for t in times]
    ids += [f"20240229_120000{s}" for s in ("_01", "_00", "_99", "_1", "_001", "_ab", "x")] + ["2024022_120000"]
    for cycle_id in ids:
        assert bool(pattern.fullmatch(cycle_id)) == (cycle_started(cycle_id) is not None), cycle_id


def _lay_out(h: Home, files: list[tuple[str, int]], noise: list[str]) -> None:
    for cycle_id, place in files:
        where, prefix, suffix, _ = CYCLE_FILE_FORMS[place]
        (h.root / where / f"{prefix}{cycle_id}{suffix}").write_text(cycle_id)
    for name in noise:
        (h.scratchpad / name).write_text("x")
        (h.logs / name).write_text("x")


ID_POOL = [f"2026010{d}_0{h}0000{s}" for d in (1, 2) for h in range(4) for s in ("", "_01", "_02")]
NOISE = ["active.yaml", "index.jsonl", "20260230_000000_before.yaml", "cycle_20260101_250000.log", "x_after.yaml"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.sampled_from(ID_POOL), st.integers(0, 3)), unique=True, max_size=40),
    keep_cycles=st.one_of(st.none(), st.integers(0, 12)),
    keep_hours=st.one_of(st.none(), st.integers(0, 60)),
    protect=st.lists(st.sampled_from(ID_POOL), max_size=2),
    in_memory=st.sampled_from([3, 8192]),
)
def test_prune_cycles_removes_exactly_what_select_expired_names_and_nothing_else(
    tmp_path_factory, monkeypatch, files, keep_cycles, keep_hours, protect, in_memory
):
    """The streamed prune (prefix by id order; ids sorted in memory, or in SQLite past a few)
    against the rule spelled out on a list."""
    monkeypatch.setattr(retention, "IN_MEMORY_NAMES", in_memory)
    h = Home.at(tmp_path_factory.mktemp("home"))
    h.ensure_dirs()
    _lay_out(h, files, NOISE)
    keep_days = None if keep_hours is None else keep_hours / 24
    now = _dt.datetime(2026, 1, 2, 12, tzinfo=_dt.timezone.utc)
    expected = select_expired(cycles_on_disk(h), keep_cycles, keep_days, now, protect)
    doomed = sorted(
        (
            f"{CYCLE_FILE_FORMS[p][0]}/{CYCLE_FILE_FORMS[p][1]}{i}{CYCLE_FILE_FORMS[p][2]}"
            for i, p in files
            if i in expected
        ),
        key=lambda name: (expected.index(cycle_id_in(name)), name),
    )
    before = tree_digest(h.root)
    seen_cycles, seen_files = [], []
    found = prune_cycles(
        h,
        keep_cycles,
        keep_days,
        now,
        protect,
        dry_run=True,
        on_cycle=seen_cycles.append,
        on_file=lambda name, size, deleted: seen_files.append((name, deleted)),
    )
    assert tree_digest(h.root) == before  # a dry run deletes nothing
    assert seen_cycles == expected and sorted(seen_files) == sorted((n, False) for n in doomed)
    assert (found.cycles, found.files, found.deleted) == (len(expected), len(doomed), 0)
    assert found.kept == len(cycles_on_disk(h)) - len(expected)
    found = prune_cycles(h, keep_cycles, keep_days, now, protect)
    assert found.deleted == len(doomed)
    after = tree_digest(h.root)
    assert sorted(set(before) - set(after)) == sorted(doomed) and all(after[p] == before[p] for p in after)


def cycle_id_in(shown: str) -> str:
    name = shown.split("/", 1)[1]
    return ids_cycle_of(shown.split("/", 1)[0], name)[0]


def test_prune_cycles_leaves_links_and_folders_named_like_cycle_files(home):
    h = Home.at(home)
    h.ensure_dirs()
    outside = home.parent / "outside.txt"
    outside.write_text("keep me")
    old = "20250101_000000_01"
    (h.scratchpad / f"{old}_before.yaml").symlink_to(outside)  # a link to a file: deleted, not its target
    (h.scratchpad / f"{old}_after.yaml").mkdir()  # a folder: left alone
    h.cycle_log("20250102_000000_01").write_text("log")
    found = prune_cycles(h, keep_cycles=1)
    assert (found.cycles, found.deleted) == (1, 1)
    assert outside.read_text() == "keep me" and not (h.scratchpad / f"{old}_before.yaml").is_symlink()
    assert (h.scratchpad / f"{old}_after.yaml").is_dir() and h.cycle_log("20250102_000000_01").exists()


class Killed(BaseException):
    """What a kill does to a prune: it stops, in whichever thread, and nothing after runs."""


def killed_after(count: int, monkeypatch) -> None:
    """From the `count`+1-th unlink on (in any thread), every unlink stops the prune instead."""
    real, lock, done = os.unlink, threading.Lock(), [0]

    def unlink(*args, **kwargs):
        with lock:
            if done[0] >= count:
                raise Killed
            done[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)


def test_a_prune_killed_midway_is_finished_by_the_next_and_cycles_run_meanwhile(home, tmp_path, monkeypatch):
    """Stopped after a few files (as a killed process would be), the next cycle runs and the next
    prune deletes the rest."""
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    ids = [json.loads(run(home, script, "--json").stdout)["cycle_id"] for _ in range(4)]
    h = Home.at(home)
    h.transcript(ids[0]).write_text("{}\n")
    before_kill = scan_disk(h)
    with monkeypatch.context() as patch:
        killed_after(2, patch)
        with pytest.raises(Killed):
            prune_cycles(h, keep_cycles=1)
    after_kill = scan_disk(h)  # which two files went depends on which folder's thread came first
    assert ids[0] in cycles_on_disk(h)  # in part, but still listed, so the next prune finishes it
    assert run(home, script).exit_code == 0
    assert run_cli("prune", "--keep", "2", "--home", str(home)).exit_code == 0
    assert len(cycles_on_disk(h)) == 2 and ids[3] in cycles_on_disk(h)
    assert not [p for i in ids[:3] for p in (*h.scratchpad.glob(f"{i}_*"), *h.logs.glob(f"cycle_{i}*"))]
    # the killed prune never saved the totals: they count its snapshots until a recount (documented)
    kept, on_disk = load_totals(h).disk, scan_disk(h)
    for kind in ("snapshots", "logs"):
        assert kept[kind][0] - on_disk[kind][0] == before_kill[kind][0] - after_kill[kind][0]
    totals_path(h).unlink()
    assert load_totals(h).disk == on_disk


def test_a_prune_killed_after_any_number_of_files_leaves_every_cycle_in_part_listed(home, monkeypatch):
    """Wherever the two folders' threads are when it stops, a cycle with a file left is still listed
    (its transcript never outlives its log), and what was deleted is the oldest cycles' files."""
    h = Home.at(home)
    h.ensure_dirs()
    ids = [f"20260101_0000{n:02d}_01" for n in range(6)]
    total = 4 * 5  # the five oldest go
    for count in range(total):
        for cycle_id in ids:  # all of them on disk again
            for place, (where, prefix, suffix, _) in enumerate(CYCLE_FILE_FORMS):
                (h.root / where / f"{prefix}{cycle_id}{suffix}").write_text(str(place))
        with monkeypatch.context() as patch:
            killed_after(count, patch)
            with pytest.raises(Killed):
                prune_cycles(h, keep_cycles=1)
        for cycle_id in ids:
            left = [p.name for p in (*h.scratchpad.glob(f"{cycle_id}_*"), *h.logs.glob(f"cycle_{cycle_id}*"))]
            assert not left or cycle_id in cycles_on_disk(h), (count, left)
            assert f"cycle_{cycle_id}.transcript.jsonl" not in left or f"cycle_{cycle_id}.log" in left
    finished = prune_cycles(h, keep_cycles=1)  # the last kill came before the last file: the next prune ends it
    assert finished.deleted == 1 and cycles_on_disk(h) == ids[-1:]
    assert sorted(p.name for p in (*h.scratchpad.iterdir(), *h.logs.iterdir())) == sorted(
        f"{prefix}{ids[-1]}{suffix}" for _, prefix, suffix, _ in CYCLE_FILE_FORMS
    )


def test_ctrl_c_during_a_prune_stops_both_folders_at_their_next_cycle_and_reports_what_went(home, monkeypatch):
    """SIGINT while the threads delete: each stops before its next cycle, the prune waits for them
    (the folders stay open, the lock held) and hears of every file deleted, then the interrupt."""
    import signal

    h = Home.at(home)
    h.ensure_dirs()
    ids = [f"20260101_0000{n:02d}_01" for n in range(6)]
    for cycle_id in ids:
        for where, prefix, suffix, _ in CYCLE_FILE_FORMS:
            (h.root / where / f"{prefix}{cycle_id}{suffix}").write_text("x")
    stops, held = [], threading.Event()
    real_folder, real_unlink = retention._prune_folder, os.unlink

    def recording(*args):
        stops.append(args[-1])
        return real_folder(*args)

    def unlink(name, *, dir_fd=None):
        if name == f"{ids[0]}_before.yaml":  # scratchpad's thread holds here until told to stop
            held.set()
            assert stops[0].wait(60)
        return real_unlink(name, dir_fd=dir_fd)

    monkeypatch.setattr(retention, "_prune_folder", recording)
    monkeypatch.setattr(os, "unlink", unlink)

    def interrupt():
        assert held.wait(60)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    interrupter = threading.Thread(target=interrupt)
    heard = []
    # Python's own SIGINT handler, as `agent prune` has it (a test before may have left another)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            prune_cycles(h, keep_cycles=1, on_file=lambda name, size, deleted: heard.append(name))
        interrupter.join()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not [t for t in threading.enumerate() if t.name.startswith("prune")]
    snapshots = sorted(p.name for p in h.scratchpad.glob("2026*"))
    assert snapshots == sorted(f"{i}_{label}.yaml" for i in ids[1:] for label in ("before", "after"))
    gone = {f"scratchpad/{ids[0]}_before.yaml", f"scratchpad/{ids[0]}_after.yaml"}
    gone |= {
        f"logs/{p}{i}{x}" for i in ids for _, p, x, _ in CYCLE_FILE_FORMS[2:] if not (h.logs / f"{p}{i}{x}").exists()
    }
    assert sorted(heard) == sorted(gone)  # every file deleted was heard of
    listed = set(cycles_on_disk(h))  # the rest still listed, and the first if its log was not reached
    assert set(ids[1:]) <= listed and (ids[0] in listed) == h.cycle_log(ids[0]).exists()


def test_a_prune_that_cannot_delete_reports_what_it_deleted_then_fails(home, monkeypatch):
    """One folder's unlink failing (a read-only file system): the other's deletions are counted, and
    the error reaches the caller."""
    h = Home.at(home)
    h.ensure_dirs()
    ids = [f"20260101_0000{n:02d}_01" for n in range(3)]
    for cycle_id in ids:
        h.snapshot(cycle_id, "before").write_text("s")
        h.cycle_log(cycle_id).write_text("l")
    real = os.unlink

    def unlink(name, *, dir_fd=None):
        if str(name).startswith("cycle_"):
            raise OSError(30, "Read-only file system")
        return real(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    seen = []
    with pytest.raises(OSError, match="Read-only"):
        prune_cycles(h, keep_cycles=1, on_file=lambda name, size, deleted: seen.append((name, deleted)))
    assert seen == [(f"scratchpad/{i}_before.yaml", True) for i in ids[:2]]
    assert [p.name for p in h.logs.glob("cycle_*")] and len(list(h.scratchpad.glob("*_before.yaml"))) == 1


def test_automatic_retention_deletes_at_most_its_batch_per_cycle_oldest_first(home, start_cycle, monkeypatch):
    monkeypatch.setattr(retention, "AUTO_PRUNE_CYCLES", 2)
    h = Home.at(home)
    h.ensure_dirs()
    ids = [start_cycle(h, NOW) for _ in range(6)]
    apply_retention(h, Settings(keep_cycles=1), protect=[ids[-1]])
    assert ids_on_disk(h) == ids[2:]
    apply_retention(h, Settings(keep_cycles=1), protect=[ids[-1]])
    assert ids_on_disk(h) == ids[4:]
    apply_retention(h, Settings(keep_cycles=1), protect=[ids[-1]])
    assert ids_on_disk(h) == ids[5:]


def test_the_id_table_spills_to_a_file_not_memory(home, start_cycle, monkeypatch):
    """With a page cache far smaller than the table, SQLite writes pages out and the answer is the same."""
    monkeypatch.setattr(retention, "CACHE_KIB", 1)
    monkeypatch.setattr(retention, "IN_MEMORY_NAMES", 100)
    h = Home.at(home)
    h.ensure_dirs()
    for n in range(3000):
        h.snapshot(f"20260101_{n // 3600:02d}{n // 60 % 60:02d}{n % 60:02d}_01", "before").write_text("")
    found = prune_cycles(h, keep_cycles=1000, dry_run=True)
    assert (found.cycles, found.kept, found.files) == (2000, 1000, 2000)
