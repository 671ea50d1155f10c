"""The cycle index: one row per cycle id given, its record once it ends, and what the records add
up to, as queries of logs/agent.db (its schema: migrations.py).

A cycle's row is made when its id is chosen and gets its record, and the bytes of the files it
left, when it ends: a row without a record is a cycle running now or one that was killed. Reading
the newest records walks the primary key backwards, as far as the caller goes; what the records
spent per UTC day and model and the files on disk are tables the database keeps itself (triggers),
so every answer costs the same after a million cycles as after ten.
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterator

from agent.common.cycle_ids import SECOND_LENGTH, cycle_started, following_cycle_id
from agent.common.outcomes import InvalidScratchpad
from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import count_files as count_files_of
from agent.store.rows import file_sizes, insert_record, loaded


def newest_cycle(home: Home) -> str | None:
    """The newest cycle id given in this home (recorded or not); None when there was none."""
    rows = records(home, create=False).stream("SELECT id FROM cycle ORDER BY id DESC", batch=8)
    return next((cycle_id for (cycle_id,) in rows if cycle_started(cycle_id)), None)


def new_cycle_id(home: Home, now: _dt.datetime) -> str:
    """The id for a cycle of `home` starting at `now`, after every cycle id given before, and its row
    in the database, taken in one transaction: two processes can never choose the same id."""
    db = records(home)
    with db.write():
        newest = newest_cycle(home)
        bare = newest and db.one("SELECT id FROM cycle WHERE id = ?", (newest[:SECOND_LENGTH],))
        try:
            cycle_id = following_cycle_id(now, [newest, *(bare or ())] if newest else [])
        except OverflowError:
            raise InvalidScratchpad(
                f"{home.root}: the newest cycle id, {newest}, is at the end of the calendar (year 9999): "
                "no id can follow it"
            ) from None
        db.execute("INSERT INTO cycle (id) VALUES (?)", (cycle_id,))
    return cycle_id


def add_record(home: Home, record: dict) -> None:
    """A cycle's record, written once it ended, with the bytes of the files it left on disk."""
    db = records(home)
    with db.write():
        insert_record(db, record, file_sizes(home, record["cycle_id"]))


def count_files(home: Home, cycle_id: str) -> None:
    """Count the files a cycle left on disk without writing its record (it was killed)."""
    db = records(home)
    with db.write():
        count_files_of(db, home, cycle_id)


def newest_first(home: Home, before: str | None = None) -> Iterator[dict]:
    """Every cycle's record (or those whose ids sort before `before`), newest first, read only as far
    as the caller goes."""
    older = "" if before is None else " AND id < ?"
    rows = records(home, create=False).stream(
        f"SELECT record FROM cycle WHERE record IS NOT NULL{older} ORDER BY id DESC",
        () if before is None else (before,),
    )
    return (record for (text,) in rows if (record := loaded(text)) is not None)


def newest_cycles(home: Home) -> Iterator[tuple[str, dict | None]]:
    """(id, record) of every cycle with a record or with files on disk, newest first: a cycle without
    a record (None) is running now, or was killed (its snapshots tell the rest)."""
    rows = records(home, create=False).stream("SELECT id, record, files FROM cycle ORDER BY id DESC")
    return ((cycle_id, loaded(text)) for cycle_id, text, files in rows if text is not None or files)


def cycles_since(home: Home, first_id: str) -> list[tuple[str, dict | None]]:
    """`newest_cycles`' (id, record) of the cycles whose ids sort at or after `first_id`, oldest
    first: a range of the primary key, so it reads only those (`agent report`'s window)."""
    rows = records(home, create=False).stream(
        "SELECT id, record, files FROM cycle WHERE id >= ? ORDER BY id", (first_id,)
    )
    return [(cycle_id, loaded(text)) for cycle_id, text, files in rows if text is not None or files]


def with_files_newest_first(home: Home) -> Iterator[str]:
    """The ids of the cycles with files on disk, newest first, read only as far as the caller goes."""
    rows = records(home, create=False).stream("SELECT id FROM cycle WHERE files ORDER BY id DESC", batch=16)
    return (cycle_id for (cycle_id,) in rows)


def newest_working_record(home: Home) -> dict | None:
    """The newest record of a cycle that was not idle or held (one that could change the state);
    the filter runs inside SQLite, walking the primary key backwards."""
    found = records(home, create=False).one(
        "SELECT record FROM cycle WHERE record IS NOT NULL AND json_valid(record) "
        "AND json_extract(record, '$.stop_reason') NOT IN ('idle', 'held') ORDER BY id DESC LIMIT 1"
    )
    return loaded(found[0]) if found else None


def oldest_with_files(home: Home) -> str | None:
    """The oldest cycle whose snapshots or log are still on disk (retention prunes the older ones)."""
    found = records(home, create=False).one("SELECT id FROM cycle WHERE files ORDER BY id LIMIT 1")
    return found[0] if found else None


def record_of(home: Home, cycle_id: str) -> tuple[bool, dict | None]:
    """(whether the id was ever given, its record or None)."""
    found = records(home, create=False).one("SELECT record FROM cycle WHERE id = ?", (cycle_id,))
    return found is not None, loaded(found[0]) if found else None


def unrecorded(home: Home) -> list[str]:
    """The cycles with files on disk and no record (killed, or running now), oldest first."""
    rows = records(home, create=False).rows("SELECT id FROM cycle WHERE record IS NULL AND files ORDER BY id")
    return [cycle_id for (cycle_id,) in rows]


_SUMS = "sum(cycles), sum(tokens), sum(cost), sum(uncosted_cycles), sum(uncosted_prompt), sum(uncosted_completion)"


def _buckets(rows: list[tuple]) -> dict[str, dict]:
    """Per day: {cycles, tokens, cost (recorded), uncosted: {model: [cycles with tokens, prompt, completion]}}."""
    days: dict[str, dict] = {}
    for day, model, cycles, tokens, cost, uncosted, prompt, completion in rows:
        bucket = days.setdefault(day, {"cycles": 0, "tokens": 0, "cost": 0.0, "uncosted": {}})
        bucket["cycles"] += cycles
        bucket["tokens"] += tokens
        bucket["cost"] = round(bucket["cost"] + cost, 8)
        if uncosted or prompt or completion:
            bucket["uncosted"][model] = [uncosted, prompt, completion]
    return days


def spent(home: Home, first_day: str, last_day: str, model: str | None = None) -> dict:
    """What the records of UTC days `first_day` to `last_day` ('YYYY-MM-DD') spent (of one `model`'s)."""
    rows = records(home, create=False).rows(
        f"SELECT '', model, {_SUMS} FROM spend WHERE day BETWEEN ? AND ? AND (? IS NULL OR model = ?) GROUP BY model",
        (first_day, last_day, model, model),
    )
    return _buckets(rows).get("", {"cycles": 0, "tokens": 0, "cost": 0.0, "uncosted": {}})


def days(home: Home, limit: int = 0) -> list[tuple[str, dict]]:
    """(day, what its records spent) for the newest `limit` UTC days with records (0: all), newest first."""
    db = records(home, create=False)
    found = db.rows("SELECT DISTINCT day FROM spend WHERE day != '' ORDER BY day DESC LIMIT ?", (limit or -1,))
    if not found:
        return []
    rows = db.rows(
        f"SELECT day, model, {_SUMS} FROM spend WHERE day BETWEEN ? AND ? GROUP BY day, model",
        (found[-1][0], found[0][0]),
    )
    buckets = _buckets(rows)
    return [(day, buckets[day]) for (day,) in found]


def spent_by_day(home: Home, first_day: str, last_day: str) -> tuple[dict[str, dict], dict[str, dict[str, dict]]]:
    """What the records of UTC days `first_day` to `last_day` spent, ({day: bucket}, {model ('' when
    not recorded): {day: bucket}}): `days`' buckets for a range, whole and per model."""
    rows = records(home, create=False).rows(
        f"SELECT day, model, {_SUMS} FROM spend WHERE day BETWEEN ? AND ? GROUP BY day, model", (first_day, last_day)
    )
    models: dict[str, list[tuple]] = {}
    for row in rows:
        models.setdefault(row[1], []).append(row)
    return _buckets(rows), {model: _buckets(mine) for model, mine in models.items()}


def all_time(home: Home) -> dict:
    """What every record ever written adds up to: cycles, tokens, recorded cost. Only ever grows."""
    cycles, tokens, cost = records(home, create=False).one(
        "SELECT coalesce(sum(cycles), 0), coalesce(sum(tokens), 0), coalesce(sum(cost), 0) FROM spend"
    )
    return {"cycles": cycles, "tokens": tokens, "cost": round(cost, 8)}


def by_stop_reason(home: Home) -> dict[str, int]:
    """{stop reason: how many records ever written ended with it}. Only ever grows."""
    return dict(records(home, create=False).rows("SELECT stop_reason, cycles FROM outcome"))


def disk(home: Home) -> dict[str, list[int]]:
    """{"snapshots": [files, bytes], "logs": [files, bytes]}: the cycles' files on disk, as counted
    when each cycle's record was written and each prune ran."""
    rows = records(home, create=False).rows("SELECT kind, files, bytes FROM disk")
    return {kind: [max(0, files), max(0, size)] for kind, files, size in rows}


def forget_history(home: Home) -> int:
    """Delete every cycle's record and transcript (`agent reset --clean`); how many cycles were
    forgotten. The newest id stays (new ids still sort after it), and so does what the records spent
    (budgets and counters count it)."""
    db = records(home)
    with db.write():
        forgotten = db.execute("DELETE FROM cycle WHERE id != (SELECT max(id) FROM cycle)").rowcount
        forgotten += db.execute(
            "UPDATE cycle SET record = NULL, format = NULL, files = 0, snapshot_files = 0, snapshot_bytes = 0, "
            "log_files = 0, log_bytes = 0 WHERE record IS NOT NULL OR files"
        ).rowcount
        db.execute("DELETE FROM transcript")
    return forgotten
