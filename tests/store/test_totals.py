"""Running totals (logs/totals.json): the same numbers as adding up the whole index, caught up with
what was appended since, recounted when missing, corrupt or stale, and never a traceback."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path

import pytest

from agent.gates.budgets import bucket_spending, daily_totals
from agent.store.files import append_jsonl
from agent.store.home import Home, read_index
from agent.store.totals import load_totals, save_totals, scan_disk, totals_path, update_totals

PRICES = {"openai:a": {"input": 1.5, "output": 6.0}, "openai:b": {"input": 0.15, "output": 0.6}}


def _month(back: int) -> tuple[int, int]:
    """(year, month) of the UTC month `back` months before this one."""
    today = dt.datetime.now(dt.timezone.utc)
    index = today.year * 12 + today.month - 1 - back
    return index // 12, index % 12 + 1


def _records(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for i in range(n):
        (year, month), day, hour = _month(rng.choice([0, 1, 2])), rng.randint(1, 28), rng.randint(0, 23)
        model = rng.choice(["openai:a", "openai:b", "openai:unpriced", 5, None])
        usage = rng.choice(
            [
                None,
                "odd",
                {
                    "prompt_tokens": rng.randint(0, 5000),
                    "completion_tokens": rng.randint(0, 500),
                    "total_tokens": rng.randint(0, 5500),
                },
            ]
        )
        cost = rng.choice([None, round(rng.random() / 100, 8), "x", True])
        started = rng.choice(
            [
                f"{year}-{month:02d}-{day:02d}T{hour:02d}:00:00+00:00",
                f"{year}-{month:02d}-{day:02d}T{hour:02d}:30:00+05:00",
                "garbage",
                None,
            ]
        )
        records.append(
            {
                "cycle_id": f"{year}{month:02d}{day:02d}_{i:06d}_01",
                "started": started,
                "model": model,
                "usage": usage,
                "cost": cost,
            }
        )
    return records


def _whole_file_days(home: Home) -> dict[str, dict]:
    return {d["day"]: d for d in daily_totals(read_index(home), PRICES)}


def _assert_equal_to_the_whole_file(home: Home) -> None:
    totals = load_totals(home)
    assert totals.records == len(read_index(home))
    days = _whole_file_days(home)
    for day, bucket in totals.days.items():
        mine = bucket_spending(bucket, PRICES)
        theirs = days[day]
        assert (mine["cycles"], mine["tokens"], mine["unpriced_cycles"]) == (
            theirs["cycles"],
            theirs["tokens"],
            theirs["unpriced_cycles"],
        )
        assert mine["cost"] == pytest.approx(theirs["cost"], abs=1e-6)
    for month, bucket in totals.months.items():
        in_month = [d for d in days.values() if d["day"][:7] == month]
        mine = bucket_spending(bucket, PRICES)
        assert mine["cycles"] == sum(d["cycles"] for d in in_month)
        assert mine["tokens"] == sum(d["tokens"] for d in in_month)
        assert mine["cost"] == pytest.approx(sum(d["cost"] for d in in_month), abs=1e-6)
    kept = {f"{y}-{m:02d}" for y, m in (_month(0), _month(1))}  # last month and this one, not the one before
    assert set(totals.months) == kept & {d[:7] for d in days} and len(kept & {d[:7] for d in days}) == 2
    assert set(totals.days) == {d for d in days if d[:7] in kept}


@pytest.fixture
def h(home: Path) -> Home:
    made = Home.at(home)
    made.ensure_dirs()
    return made


def test_totals_equal_the_whole_index_added_up(h):
    append_jsonl(h.index, _records(600))
    _assert_equal_to_the_whole_file(h)


def test_saved_totals_catch_up_with_records_appended_since(h):
    records = _records(400)
    append_jsonl(h.index, records[:250])
    update_totals(h)
    append_jsonl(h.index, records[250:])
    assert not load_totals(h).recounted  # caught up from the saved file, not recounted
    _assert_equal_to_the_whole_file(h)


def test_a_torn_last_line_counts_once_the_next_record_completes_it(h):
    append_jsonl(h.index, _records(20))
    with open(h.index, "ab") as handle:
        handle.write(b'{"cycle_id": "20261101_000000_01", "usa')  # killed mid-append
    update_totals(h)
    assert load_totals(h).records == 20
    append_jsonl(h.index, _records(5, seed=3))
    assert load_totals(h).records == 25 == len(read_index(h))
    _assert_equal_to_the_whole_file(h)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{not json",
        b"[]",
        b'{"version": 1}',
        b'{"version": 99}',
        b'{"version": 1, "index_bytes": "x", "fingerprint": "", "records": 0, '
        b'"days": {}, "months": {}, "disk": {"snapshots": [0, 0], "logs": [0, 0]}}',
        b'{"version": 1, "index_bytes": 0, "fingerprint": "", "records": 0, "days": '
        b'{"2026-11-01": {"cycles": "many"}}, "months": {}, "disk": {}}',
        "\u00e9t\u00e9 \udcff".encode("utf-8", "surrogatepass"),
        b"\x00" * 40,
    ],
)
def test_a_missing_or_corrupt_totals_file_is_recounted(h, content):
    append_jsonl(h.index, _records(120))
    totals_path(h).write_bytes(content)
    assert load_totals(h).recounted
    _assert_equal_to_the_whole_file(h)
    totals_path(h).unlink()
    assert load_totals(h).recounted
    _assert_equal_to_the_whole_file(h)


def test_an_index_replaced_or_cut_is_recounted(h):
    append_jsonl(h.index, _records(100))
    update_totals(h)
    h.index.write_text("".join(json.dumps(r) + "\n" for r in _records(150, seed=99)))  # replaced: another start
    assert load_totals(h).recounted
    _assert_equal_to_the_whole_file(h)
    update_totals(h)
    h.index.write_text("".join(json.dumps(r) + "\n" for r in _records(150, seed=99)[:10]))  # cut
    assert load_totals(h).recounted and load_totals(h).records == 10
    h.index.unlink()
    assert load_totals(h).records == 0


def test_disk_use_is_counted_then_kept_up_to_date(h):
    for i in range(3):
        for label in ("before", "after"):
            h.snapshot(f"20261101_00000{i}_01", label).write_text("x" * 10)
        h.cycle_log(f"20261101_00000{i}_01").write_text("y" * 5)
    h.transcript("20261101_000000_01").write_text("not counted")
    (h.scratchpad / "active.yaml").write_text("not counted")
    assert scan_disk(h) == {"snapshots": [6, 60], "logs": [3, 15]}
    update_totals(h)
    new = [h.snapshot("20261101_000009_01", "before"), h.cycle_log("20261101_000009_01")]
    for path in new:
        path.write_text("z" * 7)
    gone = h.snapshot("20261101_000000_01", "before")
    gone.unlink()
    update_totals(h, added=new, removed=[(gone, 10)])
    saved = load_totals(h)
    assert not saved.recounted and saved.disk == scan_disk(h) == {"snapshots": [6, 57], "logs": [4, 22]}


def test_readers_catch_up_in_memory_and_never_write(h):
    append_jsonl(h.index, _records(50))
    save_totals(h, load_totals(h))
    before = totals_path(h).read_bytes()
    append_jsonl(h.index, _records(10, seed=1))
    _assert_equal_to_the_whole_file(h)  # readers catch up in memory and never write
    assert totals_path(h).read_bytes() == before


def test_a_record_dated_far_ahead_never_pushes_this_month_out(h):
    append_jsonl(h.index, _records(50))
    append_jsonl(
        h.index,
        [
            {
                "cycle_id": f"2099{m:02d}01_000000_01",
                "started": f"2099-{m:02d}-01T00:00:00+00:00",
                "usage": {"total_tokens": 1},
            }
            for m in range(1, 13)
        ],
    )
    this_month = "%d-%02d" % _month(0)
    totals = load_totals(h)
    assert this_month in totals.months and len(totals.months) <= 6
    assert bucket_spending(totals.months[this_month], PRICES)["cycles"] == sum(
        d["cycles"] for d in _whole_file_days(h).values() if d["day"][:7] == this_month
    )
