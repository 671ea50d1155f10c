"""What a command that replaces the state keeps of it: `restore` and `reset` never delete what
they replace. The state (or, when it cannot be used, its raw text) and any queued edits dropped
with it go to the archive (logs/agent.db), committed before active.yaml is replaced, so a crash in between
can only leave them archived twice."""

from __future__ import annotations

from agent.common.outcomes import InvalidScratchpad
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.memory.inbox import discard_queued
from agent.memory.queue_edits import dropped_tasks, queue_drops
from agent.scratchpad import MAX_SCRATCHPAD_BYTES, read_state_file
from agent.store.archive import REPLACED_STATE, Left, archive
from agent.store.home import Home

DROPPED_EDIT = "dropped_edit"  # an archive kind (a replaced state's is REPLACED_STATE)


def unusable_text(home: Home) -> str:
    """active.yaml's raw text, for a state that cannot be loaded (or why even that cannot be read)."""
    try:
        return read_text_file(home.active, "scratchpad", MAX_SCRATCHPAD_BYTES)
    except FileRefused as refused:
        return f"(not archived: {refused.problem})"


def current_state(home: Home) -> tuple[object | None, str | None]:
    """(active.yaml's state, or its text when it cannot be used; None when there is none) and the
    problem that made it unusable (None when it loaded)."""
    try:
        return read_state_file(home.active, home.root), None
    except InvalidScratchpad as exc:
        return unusable_text(home), str(exc)


def archive_replaced(home: Home, why: str, cycle_id: str, new_state: dict | None = None) -> dict:
    """Archive the state active.yaml holds, each queued task `new_state` does not hold, and drop the
    inbox, archiving each edit it held, all before the caller replaces active.yaml. What was kept:
    {"state": ..., "edits": [...], "dropped_tasks": [...]}."""
    state, problem = current_state(home)
    reason = why if problem is None else f"{why}; the replaced active.yaml could not be used: {problem}"
    dropped = dropped_tasks(state, new_state) if isinstance(state, dict) and new_state is not None else []
    replaced = [] if state is None else [Left(REPLACED_STATE, state, reason)]
    replaced += queue_drops(dropped, f"{why}: not in the new state's queue")
    kept: dict = {"state": state, "edits": [], "dropped_tasks": dropped}

    def archive_with(edits: list[dict]) -> None:  # in the inbox's transaction, before it is emptied
        items = replaced + [Left(DROPPED_EDIT, edit, f"{why}: queued for the replaced memory") for edit in edits]
        if items:
            archive(home, items, cycle_id)
        kept["edits"] = edits

    discard_queued(home, before_emptying=archive_with)
    keep_section_ids(home, state)
    return kept


def keep_section_ids(home: Home, state: object) -> None:
    """The replaced state's section ids are never issued again (agent/memory/section_archive.py)."""
    if isinstance(state, dict) and "section_ids" in state:  # a state without sections: nothing to keep
        from agent.memory.section_archive import keep_ids

        keep_ids(home, state)
