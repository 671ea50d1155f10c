"""A field-level summary of what changed between two states, for `agent diff` (pure)."""

from __future__ import annotations

import difflib
import json
from collections import Counter

from agent.cli.common import clip, task_text
from agent.common.plain import plain
from agent.state import FIELDS


def _multiset_change(old: list, new: list) -> tuple[list, list]:
    """(items in new but not old, items in old but not new), counting repeats, in list order."""

    def key(item) -> str:
        return json.dumps(item, sort_keys=True, default=str)

    def only_in(items: list, extra: Counter) -> list:
        found = []
        for item in items:
            if extra[key(item)] > 0:
                extra[key(item)] -= 1
                found.append(item)
        return found

    left, right = Counter(map(key, old)), Counter(map(key, new))
    return only_in(new, right - left), only_in(old, left - right)


def _notes_change(old: str, new: str) -> dict:
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "delete"):
            removed += i2 - i1
        if op in ("replace", "insert"):
            added += j2 - j1
    return {"lines_added": added, "lines_removed": removed}


def summarize_change(old: dict, new: dict) -> dict:
    """What changed from state `old` to state `new`, field by field."""
    old_done, new_done = old.get("completed_tasks") or [], new.get("completed_tasks") or []
    old_pending, new_pending = old.get("pending_actions") or [], new.get("pending_actions") or []
    completed_added, completed_removed = _multiset_change(old_done, new_done)
    pending_added, pending_removed = _multiset_change(old_pending, new_pending)
    goals_added, goals_removed = _multiset_change(old.get("goals") or [], new.get("goals") or [])
    others = sorted(k for k in set(old) | set(new) if k not in FIELDS and old.get(k) != new.get(k))
    return {
        "task": {
            "before": old.get("current_task"),
            "after": new.get("current_task"),
            "changed": old.get("current_task") != new.get("current_task"),
        },
        "completed": {
            "added": completed_added,
            "removed": len(completed_removed),
            # the oldest entries gone, in order: the completed_window moved them to the archive
            "archived": bool(completed_removed) and completed_removed == old_done[: len(completed_removed)],
            "before": len(old_done),
            "after": len(new_done),
        },
        "pending": {
            "added": pending_added,
            "removed": pending_removed,
            "reordered": not pending_added and not pending_removed and old_pending != new_pending,
            "before": len(old_pending),
            "after": len(new_pending),
        },
        "goals": {"added": goals_added, "removed": goals_removed},
        "notes": _notes_change(old.get("notes") or "", new.get("notes") or ""),
        "last_updated": {
            "before": old.get("last_updated"),
            "after": new.get("last_updated"),
            "changed": old.get("last_updated") != new.get("last_updated"),
        },
        "other_fields_changed": others,
    }


def summary_lines(summary: dict) -> list[str]:
    """summarize_change's result as lines for a person."""
    task = summary["task"]
    lines = [
        f"task: {task['before'] or '(none)'} -> {task['after'] or '(none)'}"
        if task["changed"]
        else f"task: {task['after'] or '(none)'} (unchanged)"
    ]
    done = summary["completed"]
    text = f"completed: +{len(done['added'])}"
    if done["added"]:
        text += " (" + "; ".join(clip(task_text(t), 50) for t in done["added"]) + ")"
    if done["removed"]:
        text += (
            f", -{done['removed']} oldest moved to the archive"
            if done.get("archived")
            else f", -{done['removed']} (completed_tasks shrank: edited by hand?)"
        )
    lines.append(text)
    pending = summary["pending"]
    parts = [
        f"{sign}{len(items)} ({', '.join(clip(p, 40) for p in items)})"
        for sign, items in (("+", pending["added"]), ("-", pending["removed"]))
        if items
    ]
    if pending["reordered"]:
        parts.append("reordered")
    lines.append(
        f"pending: {', '.join(parts)}; {pending['before']} -> {pending['after']} queued"
        if parts
        else f"pending: unchanged ({pending['after']} queued)"
    )
    goals = summary["goals"]
    if goals["added"] or goals["removed"]:
        lines.append(f"goals: +{len(goals['added'])}, -{len(goals['removed'])}")
    notes = summary["notes"]
    lines.append(
        f"notes: +{notes['lines_added']} line(s)"
        + (f", -{notes['lines_removed']} line(s)" if notes["lines_removed"] else "")
    )
    stamp = summary["last_updated"]
    lines.append(
        f"last_updated: {plain(stamp['before'], 'never')} -> {plain(stamp['after'], 'never')}"
        if stamp["changed"]
        else f"last_updated: {plain(stamp['after'], 'never')} (unchanged)"
    )
    if summary["other_fields_changed"]:
        lines.append(f"other fields changed: {', '.join(summary['other_fields_changed'])}")
    return lines
