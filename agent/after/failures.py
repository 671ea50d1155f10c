"""Failures never evict memory: repeated failure notes of one kind fold into one counted line.

A failed cycle saves the state as read plus one `[CYCLE FAILED]` note. During an outage every
cycle fails the same way, and a note each would push the notes the home lives on past
`notes_budget` into the archive. So the note of a failure of the same kind as the newest cycle
that could change the state (idle and held ones skipped) replaces that cycle's note in place,
counted:

    [CYCLE FAILED] ×20 since Sat 28 Nov 10:00 UTC, refused: cycle 20261128_..: 10.0.0.5:8000 refused the connection ...

The kind is the runtime's (the record's `error_kind`: agent/after/report.py `failure_kind`), never the
error's wording. The count, the start and the exact line written are the runtime's too: each
failed cycle's record keeps them (`failure_streak`), so the next failure reads one record, never
the note's text, and rewrites only a line equal to the one the runtime wrote. A line the model or
a person changed or removed is left alone, and the counted line is appended instead.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING

from agent.common.tags import Tag
from agent.state import add_note, parse_time
from agent.store.cycles import newest_working_record

if TYPE_CHECKING:
    from agent.after.report import CycleReport
    from agent.secrets import Secrets
    from agent.store.home import Home


def note_failure(home: Home, state: dict, report: CycleReport, line: str, secrets: Secrets) -> str:
    """Add the failure note `line` (report.fail's) to `state`, folded with the previous cycle's of
    the same kind; the streak goes in the report's record. The line as it now stands in the state."""
    count, since, previous = _previous_streak(home, report.error_kind)
    count, since = count + 1, since or report.started
    if count > 1:
        body = line.removeprefix(Tag.CYCLE_FAILED.value).lstrip()
        line = Tag.CYCLE_FAILED.line(f"×{count} since {_when(since)}, {report.error_kind}: {body}")
    written = _replace_line(state, previous, line) if previous else None
    written = written or add_note(state, line)
    report.failure_streak = {"count": count, "since": since, "note": secrets.redact_text(written)}
    return written


def _previous_streak(home: Home, kind: str | None) -> tuple[int, str | None, str | None]:
    """(failures in a row of `kind` up to the newest cycle that could change the state, since when,
    the note line it left) from that cycle's record; (0, None, None) when it did not fail so."""
    try:
        newest = newest_working_record(home)
    except Exception:  # an unreadable database: the failure is noted unfolded, the cycle's own error stands
        return 0, None, None
    streak = newest.get("failure_streak") if newest and newest.get("error_kind") == kind else None
    if not isinstance(streak, dict) or not isinstance(streak.get("count"), int) or isinstance(streak["count"], bool):
        return 0, None, None
    since, note = streak.get("since"), streak.get("note")
    return (
        max(streak["count"], 0),
        since if isinstance(since, str) else None,
        note if isinstance(note, str) and note else None,
    )


def _replace_line(state: dict, previous: str, line: str) -> str | None:
    """Rewrite the last notes line equal to `previous` as `line` (escaped like add_note's), in place;
    None when no line equals it."""
    lines = state["notes"].split("\n") if state["notes"] else []
    for index in range(len(lines) - 1, -1, -1):
        if lines[index] == previous:
            probe = {"notes": ""}
            lines[index] = add_note(probe, line)  # the one escape of a note entering the state
            state["notes"] = "\n".join(lines)
            return lines[index]
    return None


def _when(stamp: str) -> str:
    """A record's start for a person: 'Sat 28 Nov 10:00 UTC' (the stamp itself if it is not a time)."""
    when = parse_time(stamp)
    return stamp if when is None else f"{when.astimezone(_dt.timezone.utc):%a %d %b %H:%M} UTC"
