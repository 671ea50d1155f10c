"""What `agent status` says of parked calls (agent/cli/waiting.py): how many wait and since when;
a parked call broken by hand is said, never raised."""

from __future__ import annotations

import datetime as dt
import json

from agent.cli.waiting import approvals_status
from agent.gates.approvals import park_call, read_approvals
from agent.store.db import records as database
from tests.helpers import store_home


def rewrite(h, calls: list[dict]) -> None:
    """The parked calls replaced by `calls`, as an operator with sqlite3 (or a bug) might."""
    db = database(h)
    with db.write():
        db.execute("DELETE FROM approval")
        for call in calls:
            db.execute("INSERT INTO approval VALUES (?, 1, ?, ?)", (int(call["id"]), call["status"], json.dumps(call)))


def test_nothing_parked_says_nothing(home):
    data, lines = approvals_status(store_home(home))
    assert data == {"approvals": {"pending": 0, "ids": [], "oldest_parked": None, "oldest_age_s": None}}
    assert lines == []


def test_pending_calls_are_counted_with_the_oldest_age(home):
    h = store_home(home)
    park_call(h, "20260101_000000_01", "shell", {"command": "a"})
    park_call(h, "20260101_000000_01", "shell", {"command": "b"})
    records = read_approvals(h)
    records[0]["parked"] = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=3)).isoformat(timespec="seconds")
    records.append({**records[1], "id": "3", "status": "denied"})
    rewrite(h, records)
    data, lines = approvals_status(h)
    assert data["approvals"]["pending"] == 2 and data["approvals"]["ids"] == ["1", "2"]
    assert data["approvals"]["oldest_parked"] == records[0]["parked"]
    assert 3 * 3600 <= data["approvals"]["oldest_age_s"] < 3 * 3600 + 600
    assert lines == [
        "approvals: 2 call(s) wait for you, the oldest parked 3h ago (ids 1, 2; agent approvals lists them)"
    ]


def test_a_parked_time_that_is_not_one_leaves_the_age_out(home):
    h = store_home(home)
    park_call(h, "20260101_000000_01", "shell", {"command": "a"})
    records = read_approvals(h)
    records[0]["parked"] = "last tuesday"
    rewrite(h, records)
    data, lines = approvals_status(h)
    assert data["approvals"]["oldest_age_s"] is None
    assert lines == ["approvals: 1 call(s) wait for you (ids 1; agent approvals lists them)"]


def test_a_broken_parked_call_is_reported_not_raised(home):
    h = store_home(home)
    db = database(h)
    with db.write():
        db.execute("INSERT INTO approval VALUES (1, 1, 'pending', ?)", ("{not json" + "\x1b[2J" + "x" * 500,))
    data, lines = approvals_status(h)
    assert data["approvals"] is None and "agent.db: parked call 1 is not an approval record" in data["approvals_error"]
    assert len(lines) == 1 and lines[0].startswith("approvals: unknown: ") and len(lines[0]) <= 220
