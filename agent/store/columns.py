"""The cycle table's facts as SQL expressions, by name: the one place a query over the cycles' records
(agent report's buckets, its incidents, its newest cycles) names a field of a record.

A field the cycle table has as a column (migrations.py m004: generated from the record, stored
nowhere) is named by its column; the rest are `json_extract` over the record. `stop_reason` has an
index beside the id (m005), so counting the cycles of a window by stop reason and by hour reads
that index alone, never a record. When a field becomes a column of its own, its expression here
becomes the column's name, and every query follows.
"""

from __future__ import annotations


def field(name: str) -> str:
    """A field of the record (NULL for a row a hand edit left unreadable: json_extract would raise)."""
    return f"iif(json_valid(record), json_extract(record, '$.{name}'), NULL)"


COLUMNS = {
    "stop_reason": "stop_reason",  # generated columns (migrations.py m004)
    "exit_code": "exit_code",
    "held_for": field("held_for"),
    "task_after": field("task_after"),
    "error": "error",
    "error_kind": "error_kind",
    "model": "model",
    "tokens": "tokens",
    "cost": "cost",
}
STOP_REASON = COLUMNS["stop_reason"]
