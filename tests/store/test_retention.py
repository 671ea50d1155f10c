"""Retention: keep rules select old cycles by id order, delete only their snapshots, logs and
transcripts, never the newest cycle by age alone, and never a record or what the records spent."""

from __future__ import annotations

import datetime as _dt
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cli.maintain import parse_duration
from agent.common.cycle_ids import cycle_started
from agent.common.outcomes import UsageError
from agent.config import Settings, load_settings
from agent.store import retention
from agent.store.cycles import add_record, all_time, disk, newest_first, spent
from agent.store.db import records
from agent.store.home import Home
from agent.store.retention import CYCLE_FILES, apply_retention, prune_cycles
from tests.helpers import run_cli, tree_digest, write_script

NOW = _dt.datetime(2026, 1, 10, tzinfo=_dt.timezone.utc)


def run(home, script, *extra):
    return run_cli("run", "--home", str(home), "--model", f"scripted:{script}", *extra)


def ids_on_disk(home: Home) -> list[str]:
    return sorted(p.name[: -len("_before.yaml")] for p in home.scratchpad.glob("*_before.yaml"))


def marked(home: Home) -> list[str]:
    """The cycles the database says have files on disk."""
    return [i for (i,) in records(home).rows("SELECT id FROM cycle WHERE files ORDER BY id")]


# ------------------------------------------------------------------------------ selecting


def select_expired(ids, keep_cycles=None, keep_days=None, now=None, protect=()) -> list[str]:
    """The rule, spelled out on a list (oldest first): what no keep rule keeps. The prune must agree."""
    ids = sorted(set(ids))
    if keep_cycles is None and keep_days is None:
        return []
    now = now or _dt.datetime.now(_dt.timezone.utc)
    kept = set(protect)
    if keep_cycles is not None:
        kept |= set(ids[max(0, len(ids) - keep_cycles) :]) if keep_cycles > 0 else set()
    if keep_days is not None:
        cutoff = now - _dt.timedelta(days=keep_days)
        kept |= {i for i in ids if (cycle_started(i) or now) >= cutoff} | set(ids[-1:])
    return [i for i in ids if i not in kept]


def expired(home, ids: list[str], **rules) -> list[str]:
    """The cycles a dry-run prune of a home whose cycles with files are `ids` names, oldest first."""
    h = Home.at(home)
    if not h.database.exists():
        h.ensure_dirs()
        for cycle_id in ids:  # an older release's files: the database, made now, finds them
            h.snapshot(cycle_id, "before").write_text("{}")
    seen: list[str] = []
    prune_cycles(h, dry_run=True, on_cycle=seen.append, **rules)
    return seen


def test_each_keep_rule_keeps_its_cycles_and_only_what_none_keeps_goes(home):
    ids = ["20260101_000000", "20260105_000000", "20260109_000000", "20260109_000000_02"]
    assert expired(home, ids) == []
    assert expired(home, ids, keep_cycles=2) == ids[:2]
    assert expired(home, ids, keep_cycles=0) == ids
    assert expired(home, ids, keep_days=3, now=NOW) == ids[:2]
    assert expired(home, ids, keep_cycles=3, keep_days=3, now=NOW) == ids[:1]
    assert expired(home, ids, keep_cycles=0, protect=[ids[-1]]) == ids[:-1]
    assert expired(home, ids, keep_cycles=5) == []  # fewer cycles than the rule keeps


def test_keep_days_never_removes_the_newest_cycle(home):
    """A home whose cron stopped for a month, or a clock now running fast, keeps its last cycle."""
    ids = ["20251201_000000_01", "20251202_000000_01", "20251203_000000_01"]
    assert expired(home, ids, keep_days=7, now=NOW) == ids[:2]
    assert expired(home, ids, keep_days=7, now=NOW.replace(year=2030)) == ids[:2]
    assert expired(home, ids, keep_days=1e9, now=NOW) == []  # "older than" beyond the calendar: nothing is


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
    assert apply_retention(h, Settings(keep_cycles=None)) is None
    pruned = apply_retention(h, Settings(keep_cycles=1), protect=[ids[0]])
    assert (pruned.cycles, pruned.deleted, pruned.kept) == (2, 6, 2)
    assert ids_on_disk(h) == [ids[0], ids[3]] and marked(h) == [ids[0], ids[3]]


# --------------------------------------------------------------------------- through cycles


def test_automatic_retention_keeps_the_newest_cycles_and_all_history(home, tmp_path):
    (home / "config.yaml").write_text("keep_cycles: 2\n")
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    ids = [json.loads(run(home, script, "--json").stdout)["cycle_id"] for _ in range(4)]
    left = sorted(p.name for p in (home / "scratchpad").iterdir())
    assert left == sorted([f"{i}_{label}.yaml" for i in ids[-2:] for label in ("before", "after")] + ["active.yaml"])
    assert sorted(p.name for p in (home / "logs").glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids[-2:]]
    assert [r["cycle_id"] for r in newest_first(Home.at(home))] == ids[::-1]  # every cycle's record stays


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


# ------------------------------------------------------------------- against the rule, on disk


def _lay_out(h: Home, files: list[tuple[str, int]], noise: list[str]) -> None:
    """Files an older release left (the upgrade lists them into the database when it is made)."""
    for cycle_id, place in files:
        where, prefix, suffix = CYCLE_FILES[place]
        (h.root / where / f"{prefix}{cycle_id}{suffix}").write_text(cycle_id)
    for name in noise:
        (h.scratchpad / name).write_text("x")
        (h.logs / name).write_text("x")


ID_POOL = [f"2026010{d}_0{h}0000{s}" for d in (1, 2) for h in range(4) for s in ("", "_01", "_02")]
NOISE = ["active.yaml", "notes.txt", "20260230_000000_before.yaml", "cycle_20260101_250000.log", "x_after.yaml"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    files=st.lists(st.tuples(st.sampled_from(ID_POOL), st.integers(0, 2)), unique=True, max_size=40),
    keep_cycles=st.one_of(st.none(), st.integers(0, 12)),
    keep_hours=st.one_of(st.none(), st.integers(0, 60)),
    protect=st.lists(st.sampled_from(ID_POOL), max_size=2),
)
def test_prune_cycles_removes_exactly_what_select_expired_names_and_nothing_else(
    tmp_path_factory, files, keep_cycles, keep_hours, protect
):
    """The prune (the oldest rows with files, by id) against the rule spelled out on a list."""
    h = Home.at(tmp_path_factory.mktemp("home"))
    h.ensure_dirs()
    _lay_out(h, files, NOISE)
    on_disk = sorted({i for i, _ in files})
    assert marked(h) == on_disk  # the database was made, and its upgrade found every cycle on disk
    keep_days = None if keep_hours is None else keep_hours / 24
    now = _dt.datetime(2026, 1, 2, 12, tzinfo=_dt.timezone.utc)
    expected = select_expired(on_disk, keep_cycles, keep_days, now, protect)
    doomed = sorted(
        (f"{CYCLE_FILES[p][0]}/{CYCLE_FILES[p][1]}{i}{CYCLE_FILES[p][2]}" for i, p in files if i in expected),
        key=lambda name: (expected.index(next(i for i in expected if i in name)), name),
    )
    close_and_digest = tree_digest(h.root)
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
    assert {k: v for k, v in tree_digest(h.root).items() if "agent.db" not in k} == {
        k: v for k, v in close_and_digest.items() if "agent.db" not in k
    }  # a dry run deletes nothing
    assert seen_cycles == expected and sorted(seen_files) == sorted((n, False) for n in doomed)
    assert (found.cycles, found.files, found.deleted, found.kept) == (
        len(expected),
        len(doomed),
        0,
        len(on_disk) - len(expected),
    )
    before = tree_digest(h.root)
    found = prune_cycles(h, keep_cycles, keep_days, now, protect)
    assert found.deleted == len(doomed) and marked(h) == [i for i in on_disk if i not in expected]
    after = tree_digest(h.root)
    gone = sorted(p for p in set(before) - set(after) if "agent.db" not in p)
    assert gone == sorted(doomed) and all(after[p] == before[p] for p in after if "agent.db" not in p)


def test_prune_cycles_leaves_folders_named_like_cycle_files_and_deletes_links_not_their_targets(home):
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


# --------------------------------------------------------------------- what a prune keeps


def _recorded(h: Home, start_cycle, count: int) -> list[str]:
    """`count` cycles with files, a record each (1,000 tokens at a cost of 0.5) and a transcript."""
    ids = []
    for n in range(count):
        cycle_id = start_cycle(h, NOW + _dt.timedelta(minutes=n))
        usage = {"prompt_tokens": 900, "completion_tokens": 100, "total_tokens": 1000}
        add_record(h, {"cycle_id": cycle_id, "started": NOW.isoformat(), "model": "m", "usage": usage, "cost": 0.5})
        db = records(h)
        with db.write():
            db.execute("INSERT INTO transcript (format, cycle_id, record) VALUES (1, ?, ?)", (cycle_id, "x" * 20_000))
        ids.append(cycle_id)
    return ids


def test_a_prune_deletes_transcripts_and_gives_their_space_back_but_never_lowers_what_was_spent(home, start_cycle):
    """Budgets and counters (all_time) read what the records spent: a prune must never lower them."""
    h = Home.at(home)
    h.ensure_dirs()
    ids = _recorded(h, start_cycle, 30)
    db = records(h)
    spent_before, all_before = spent(h, "2026-01-10", "2026-01-10"), all_time(h)
    pages_before = db.one("PRAGMA page_count")[0]
    found = prune_cycles(h, keep_cycles=5)
    assert (found.cycles, found.transcripts) == (25, 25)
    assert [c for (c,) in db.rows("SELECT DISTINCT cycle_id FROM transcript ORDER BY cycle_id")] == ids[-5:]
    assert db.one("PRAGMA page_count")[0] < pages_before - 25 * 4  # the freed pages went back (incremental vacuum)
    assert spent(h, "2026-01-10", "2026-01-10") == spent_before and all_time(h) == all_before
    assert all_before == {"cycles": 30, "tokens": 30_000, "cost": 15.0}
    assert [r["cycle_id"] for r in newest_first(h)] == ids[::-1]  # history still lists every cycle
    assert disk(h)["snapshots"][0] == 10 and disk(h)["logs"][0] == 5  # what is left on disk


class Killed(BaseException):
    """What a kill does to a prune: it stops, and nothing after runs."""


def killed_after(count: int, monkeypatch) -> None:
    """From the `count`+1-th unlink on, every unlink stops the prune instead."""
    real, done = os.unlink, [0]

    def unlink(*args, **kwargs):
        if done[0] >= count:
            raise Killed
        done[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)


def test_a_prune_killed_after_any_number_of_files_leaves_every_cycle_in_part_marked(home, start_cycle, monkeypatch):
    """Wherever it stops, a cycle with a file left is still marked as having files (so the next
    prune finishes it) and what was deleted is the oldest cycles' files; the next prune ends it."""
    h = Home.at(home)
    h.ensure_dirs()
    ids = _recorded(h, start_cycle, 6)
    for count in range(3 * 5):  # the five oldest go
        for cycle_id in ids:  # all of them on disk again
            for where, prefix, suffix in CYCLE_FILES:
                (h.root / where / f"{prefix}{cycle_id}{suffix}").write_text("x")
        with monkeypatch.context() as patch:
            killed_after(count, patch)
            with pytest.raises(Killed):
                prune_cycles(h, keep_cycles=1)
        for cycle_id in ids:
            left = [p.name for p in (*h.scratchpad.glob(f"{cycle_id}_*"), *h.logs.glob(f"cycle_{cycle_id}*"))]
            assert not left or cycle_id in marked(h), (count, left)
    finished = prune_cycles(h, keep_cycles=1)  # the last kill came before the last file: the next prune ends it
    assert finished.deleted == 1 and marked(h) == ids[-1:]
    assert sorted(p.name for p in (*h.scratchpad.iterdir(), *h.logs.glob("cycle_*"))) == sorted(
        f"{prefix}{ids[-1]}{suffix}" for _, prefix, suffix in CYCLE_FILES
    )


def test_a_prune_interrupted_midway_is_finished_by_the_next_and_cycles_run_meanwhile(home, tmp_path, monkeypatch):
    script = write_script(tmp_path, [{"tool": "done", "args": {"summary": "ok"}}])
    ids = [json.loads(run(home, script, "--json").stdout)["cycle_id"] for _ in range(4)]
    h = Home.at(home)
    with monkeypatch.context() as patch:
        killed_after(2, patch)
        with pytest.raises(Killed):
            prune_cycles(h, keep_cycles=1)
    assert ids[0] in marked(h)  # in part, but still marked, so the next prune finishes it
    assert run(home, script).exit_code == 0
    assert run_cli("prune", "--keep", "2", "--home", str(home)).exit_code == 0
    assert len(marked(h)) == 2 and ids[3] in marked(h)
    assert not [p for i in ids[:3] for p in (*h.scratchpad.glob(f"{i}_*"), *h.logs.glob(f"cycle_{i}*"))]
    assert disk(h)["snapshots"][0] == 4 and disk(h)["logs"][0] == 2


def test_a_prune_that_cannot_delete_reports_what_it_deleted_then_fails(home, start_cycle, monkeypatch):
    """An unlink failing (a read-only file system): what went before is heard of, the error reaches
    the caller, and the cycle it stopped in stays marked."""
    h = Home.at(home)
    h.ensure_dirs()
    ids = [start_cycle(h, NOW) for _ in range(3)]
    real = os.unlink

    def unlink(name, *, dir_fd=None):
        if str(name).startswith("cycle_"):
            raise OSError(30, "Read-only file system")
        return real(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    seen = []
    with pytest.raises(OSError, match="Read-only"):
        prune_cycles(h, keep_cycles=1, on_file=lambda name, size, deleted: seen.append((name, deleted)))
    assert seen == [(f"scratchpad/{ids[0]}_{label}.yaml", True) for label in ("before", "after")]
    assert marked(h) == ids


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
