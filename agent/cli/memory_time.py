"""Memory through time: `agent memory --at WHEN` and `agent memory --history ID`.

`--at` reads the snapshot pairs: the memory as a cycle left it is its after snapshot (the state it
started from, for one killed before it saved). WHEN is a cycle id (that cycle), or a time (a UTC
date, an ISO time, a duration ago such as 7d): the newest cycle that started by then. Retention
(`keep_cycles`, `agent prune`) deletes old pairs, so `--at` reaches back exactly to the oldest cycle
whose snapshots are kept, and says so with every answer; before that, what left memory is in the
archive (`agent show --all`, `--history`), but what stayed in it is not kept anywhere else.

`--history ID` is one section entry's life, from what the runtime wrote: its provenance (the cycle
and route logs/agent.db recorded, agent/store/provenance.py), when and by whom it was added, on how
many days it was stated, what it was merged from, and each time it left (why, and the successor
that replaced it), from active.yaml and the archive's rows of that id. `--history SECTION:TEXT` is
a plain entry's (a notes line, a completed task, a task of the queue), by its text: whether
active.yaml holds it, and its provenance row.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from agent.cli.history import parse_when
from agent.common.cycle_ids import CYCLE_ID, cycle_started
from agent.common.outcomes import UsageError
from agent.common.plain import plain
from agent.scratchpad import read_state_file
from agent.store.archive import entry_records
from agent.store.cycles import oldest_with_files, with_files_newest_first
from agent.store.home import Home
from agent.store.provenance import PLAIN_SECTIONS, plain_entry_keys, plain_keys, provenance_of


def state_at(home: Home, when: str, now: _dt.datetime) -> dict:
    """{cycle_id, snapshot, state, reaches_back_to} for `--at WHEN`; UsageError (exit 2) naming how far
    back the snapshots reach when none is at or before WHEN."""
    oldest = oldest_with_files(home)
    if CYCLE_ID.fullmatch(when.strip()):
        cycle_id = when.strip()
        label = _saved_side(home, cycle_id)
        if label is None:
            raise UsageError(f"cycle {cycle_id} has no snapshot in {home.root}: {_reach(oldest)}")
    else:
        until = parse_when(when, now)
        cycle_id, label = _newest_by(home, until)
        if cycle_id is None:
            raise UsageError(f"no snapshot of a cycle started by {until:%Y-%m-%d %H:%M} UTC: {_reach(oldest)}")
    path = home.snapshot(cycle_id, label)
    return {
        "cycle_id": cycle_id,
        "snapshot": str(path.relative_to(home.root)),
        "state": read_state_file(path, home.root),
        "reaches_back_to": oldest,
    }


def _reach(oldest: str | None) -> str:
    if oldest is None:
        return "no snapshot is kept (no cycle ran, or retention pruned them all); the archive keeps what left memory"
    return (
        f"--at reaches back to cycle {oldest}, the oldest whose snapshots are kept (keep_cycles and agent prune "
        f"delete older ones); what left memory before then is in the archive (agent show --all)"
    )


def _saved_side(home: Home, cycle_id: str) -> str | None:
    """'after' when the cycle saved, 'before' when it was killed before it did, None: no snapshot."""
    return next((label for label in ("after", "before") if home.snapshot(cycle_id, label).is_file()), None)


def _newest_by(home: Home, until: _dt.datetime) -> tuple[str | None, str | None]:
    """The newest cycle with a snapshot that started at or before `until`, read back only that far."""
    for cycle_id in with_files_newest_first(home):
        started = cycle_started(cycle_id)
        if started is None or started > until:
            continue
        label = _saved_side(home, cycle_id)
        if label is not None:
            return cycle_id, label
    return None, None


def entry_history(home: Home, state: dict, entry_id: str, sections: dict) -> dict:
    """One entry's life: {id, section, text, in_memory, events}; UsageError when neither active.yaml
    nor the archive knows the id. `sections`: the list sections by name (config.yaml's)."""
    plain_entry = _plain_history(home, state, entry_id)
    if plain_entry is not None:
        return plain_entry
    section = _section_of(entry_id, sections)
    now = next((e for e in state.get(section) or [] if isinstance(e, dict) and e.get("id") == entry_id), None)
    left = entry_records(home, section, entry_id)
    if now is None and not left:
        raise UsageError(f"no entry {entry_id} in active.yaml or the archive of {home.root}")
    entry = now if now is not None else (left[-1].get("value") if isinstance(left[-1].get("value"), dict) else {})
    events = _life(entry)
    for record in left:
        events.append(
            {
                "event": "left",
                "cycle_id": record.get("cycle_id"),
                "reason": record.get("reason"),
                "replaced_by": record.get("replaced_by"),
            }
        )
    if now is not None and left:
        events.append({"event": "back", "note": "active.yaml holds it again (a cycle that did not save, or a restore)"})
    return {
        "id": entry_id,
        "section": section,
        "text": entry.get("text"),
        "in_memory": now is not None,
        "provenance": provenance_of(home, section, entry_id),
        "events": events,
    }


def _plain_history(home: Home, state: dict, asked: str) -> dict | None:
    """`--history SECTION:TEXT` for a plain entry (a notes line, a completed task, a task of the queue:
    no id, keyed by its text as read, agent/store/provenance.py): whether active.yaml holds it and its
    provenance (of the first entry reading so); None when `asked` is not of that form."""
    section, colon, text = asked.partition(":")
    if not colon or section not in PLAIN_SECTIONS:
        return None
    key = plain_keys(section, [text])[0]
    found, in_memory = provenance_of(home, *key), key in plain_entry_keys(state, (section,))
    if found is None and not in_memory:
        raise UsageError(f"no {section} entry reads '{text}' in active.yaml or the provenance records of {home.root}")
    where = "in active.yaml" if in_memory else "not in active.yaml (agent show --all lists what left)"
    return {
        "id": asked,
        "section": section,
        "key": key[1],
        "text": text,
        "in_memory": in_memory,
        "where": where,
        "provenance": found,
        "events": [],
    }


def _section_of(entry_id: str, sections: dict) -> str:
    name, _, number = entry_id.rpartition("-")
    if name not in sections or not number.isdigit():
        known = ", ".join(sections) or "none"
        raise UsageError(f"'{entry_id}' is not an entry id of a list section (SECTION-N; list sections: {known})")
    return name


def _life(entry: dict) -> list[dict]:
    """What an entry's runtime fields say of it: added, stated, merged from."""
    events: list[dict[str, Any]] = [{"event": "added", "cycle_id": entry.get("added"), "by": entry.get("by")}]
    if isinstance(entry.get("days"), int) and entry["days"] > 1:
        events.append({"event": "stated", "days": entry["days"], "last_day": entry.get("last_day")})
    if isinstance(entry.get("merged_from"), list):
        stands = entry.get("stands_for") if isinstance(entry.get("stands_for"), int) else len(entry["merged_from"])
        events.append({"event": "merged", "merged_from": entry["merged_from"], "stands_for": stands})
    return events


def history_lines(history: dict) -> list[str]:
    """`--history` for a person (escaped by the caller)."""
    where = history.get("where") or ("in active.yaml" if history["in_memory"] else "in the archive only")
    lines = [f"{history['id']} ({history['section']}, {where}): {plain(history['text'])}"]
    found = history["provenance"]
    lines.append(
        f"  provenance: cycle {plain(found['cycle_id'])}, by the {plain(found['route'])} route (logs/agent.db)"
        if found
        else "  provenance: none recorded (an entry older than the record, or one no save kept)"
    )
    if found and isinstance(found.get("read"), list):
        lines.append("  " + read_line(found["read"]))
    for event in history["events"]:
        lines.append("  " + _event_line(event))
    return lines


def read_line(read: list) -> str:
    """What the model had read in its cycle before it wrote the entry, in words (agent/tools/origins.py)."""
    if not read:
        return "read before it was written: nothing from a tool or the operator"
    return "read before it was written: " + "; ".join(origin_words(origin) for origin in read)


def origin_words(origin: object) -> str:
    """One origin in words; one the runtime does not know (an older record's) as what it says."""
    if not isinstance(origin, dict):
        return plain(origin)
    kind = origin.get("origin")
    if kind == "operator":
        return "the operator's task and queue"
    if kind == "model" and origin.get("input") == "task":
        return "a task the model had queued itself"
    if kind == "workspace":
        return _file_words(origin)
    if kind == "http":
        return f"http_get from {plain(origin.get('host'), 'no host')}"
    if kind == "mcp":
        return f"the MCP server {plain(origin.get('server'))}"
    if kind == "plugin":
        return f"the plugin tool {plain(origin.get('tool'))}"
    words = {"shell": "a shell command's output", "archive": "the archive (recall)"}
    if kind == "more":
        return f"and {plain(origin.get('count'))} more"
    return words.get(kind) or plain(kind, "an unknown origin")


def _file_words(origin: dict) -> str:
    path = plain(origin.get("path"))
    if not origin.get("written_in"):
        return f"the workspace file {path}, not written by the model (as far as its records tell)"
    after = origin.get("written_after") if isinstance(origin.get("written_after"), list) else []
    then = f", after reading {', '.join(origin_words(o) for o in after)}" if after else ""
    return f"the workspace file {path}, the model's own writing of cycle {plain(origin['written_in'])}{then}"


def _event_line(event: dict) -> str:
    kind = event["event"]
    if kind == "added":
        return f"added in {plain(event['cycle_id'], 'an unknown cycle')} by {plain(event['by'], 'someone')}"
    if kind == "stated":
        return f"stated on {event['days']} days, the last {plain(event['last_day'])}"
    if kind == "merged":
        return f"merged from {', '.join(plain(i) for i in event['merged_from'])} (stands for {event['stands_for']})"
    if kind == "left":
        successor = f", superseded by {plain(event['replaced_by'])}" if event.get("replaced_by") else ""
        return f"left in {plain(event['cycle_id'])}: {plain(event['reason'])}{successor}"
    return plain(event.get("note"))
