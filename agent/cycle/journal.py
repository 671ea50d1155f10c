"""The journal of calls with side effects: the `call` rows of logs/agent.db.

Tools declare whether a call may change something outside the cycle's memory (`Tool.side_effects`:
MCP tools and plugins do unless they say otherwise). Before such a call runs, an `intent` record
is committed to the journal; when it returns, or raises, its `result`. Calls run one at a time
under the home's lock, so a cycle killed mid-call leaves that call's intent as the journal's last
record, and finding it reads that one row, never the whole journal.

The next cycle that runs (idle.wake, before its before snapshot) does not repeat such a call on
its own. It adds `[INTERRUPTED] call ID tool(args) may or may not have completed` to the notes,
so the model sees it and can check before acting again, appends an `interrupted` record (told
once), and lists the call in its index record's `calls` (`agent history`). When
`approval_required` matches the tool, the call is also parked for the operator: `agent approve
ID` runs it again, `agent deny ID` drops it. Every intent and result is a line in the cycle log
too (`agent logs`).

A call interrupted by SIGTERM or SIGINT is left unfinished the same way: whether it completed is
not known either.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any, Callable

from agent.after.report import CycleReport
from agent.common.escape import escape_controls
from agent.common.tags import Tag
from agent.config import Settings
from agent.models.replies import clip_line
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.db import records
from agent.store.home import Home
from agent.store.rows import loaded

ARGS_KEPT_BYTES = 16 * 1024
RESULT_KEPT_CHARS = 300
CALLS_IN_RECORD = 20  # the most calls one index record lists
INTENT, RESULT, INTERRUPTED = "intent", "result", "interrupted"


def append(home: Home, record: dict) -> None:
    """One record committed to the journal (AgentError, such as a full disk: nothing was written)."""
    db = records(home)
    with db.write():
        db.execute(
            "INSERT INTO call (format, call, event, record) VALUES (1, ?, ?, ?)",
            (record["call"], record["event"], json.dumps(record, ensure_ascii=False)),
        )


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def shown(tool: str, args: Any) -> str:
    """tool(args) as one short line, as notes and logs show a call."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return escape_controls(f"{tool}({clip_line(text, 200)})")


def _listed(report: CycleReport, call: str, tool: str, status: str) -> None:
    if len(report.calls) < CALLS_IN_RECORD:
        report.calls.append({"call": call, "tool": tool, "status": status})


class Journal:
    """One cycle's journal writer; `ToolContext.run` calls `around` for each call with side effects."""

    def __init__(self, home: Home, report: CycleReport, secrets: Secrets, log: Callable[[str], None]):
        self.home, self.report, self.secrets, self.log = home, report, secrets, log
        self.count = 0

    def around(self, tool: str, args: dict, call: Callable[[], Any]) -> Any:
        """Append the intent, make the call, append its result; the call's result or exception."""
        self.count += 1
        call_id = f"{self.report.cycle_id}/{self.count}"
        args = self.secrets.redact(args)
        kept = args if len(json.dumps(args, ensure_ascii=False).encode()) <= ARGS_KEPT_BYTES else shown(tool, args)
        intent = {"call": call_id, "event": INTENT, "cycle_id": self.report.cycle_id, "tool": tool, "args": kept}
        append(self.home, dict(intent, at=_now()))  # a disk error here: the call is not made
        self.log(f"journal: call {call_id} {shown(tool, args)} started")
        try:
            result = call()
        except Exception as exc:
            self._result(call_id, tool, False, f"{type(exc).__name__}: {exc}")
            raise
        self._result(call_id, tool, True, str(result))
        return result

    def _result(self, call_id: str, tool: str, ok: bool, text: str) -> None:
        text = clip_line(self.secrets.redact_text(" ".join(text.split())), RESULT_KEPT_CHARS)
        status = "returned" if ok else "failed"
        _listed(self.report, call_id, tool, status)
        append(self.home, {"call": call_id, "event": RESULT, "ok": ok, "result": text, "at": _now()})
        self.log(f"journal: call {call_id} {status}: {escape_controls(text)}")


def unfinished(home: Home) -> dict | None:
    """The intent of a call a killed cycle left unfinished, or None. AgentError (a disk error: exit 7)
    when the journal cannot be read: whether a call is unfinished must not be guessed."""
    found = records(home, create=False).one("SELECT event, record FROM call ORDER BY seq DESC LIMIT 1")
    last = loaded(found[1]) if found and found[0] == INTENT else None
    return last if isinstance(last, dict) and isinstance(last.get("tool"), str) else None


def note_interrupted(home: Home, settings: Settings, state: dict, report: CycleReport) -> dict:
    """`state` with an [INTERRUPTED] note for the call a killed cycle left unfinished (parked for the
    operator when approval_required names its tool); the state unchanged when there is none."""
    record = unfinished(home)
    if record is None:
        return state
    from agent.gates.approvals import gate, park_call  # here, not at the top: only an interrupted call needs it

    call_id, tool, args = str(record.get("call")), record["tool"], record.get("args")
    parked = park_call(home, report.cycle_id, tool, args) if gate(settings)(tool) and isinstance(args, dict) else None
    append(home, {"call": call_id, "event": INTERRUPTED, "noted_in": report.cycle_id, "approval": parked, "at": _now()})
    _listed(report, call_id, tool, INTERRUPTED)
    text = (
        f"call {call_id} {shown(tool, args)} may or may not have completed: the cycle running it ended "
        f"before it returned, and it is not run again on its own"
    )
    if parked:
        text += f"; parked for the operator as call {parked} (agent approve {parked} runs it again)"
    state = dict(state)
    add_note(state, escape_controls(Tag.INTERRUPTED.line(text)))
    return state
