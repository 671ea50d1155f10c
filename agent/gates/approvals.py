"""Approvals: calls to gated tools wait for the operator instead of running.

A call to a tool that `approval_required` names is parked (a row of logs/agent.db) with an id,
an [APPROVAL] note says so, and the cycle stops with `awaiting_approval` (exit 8). The
operator answers with `agent approve ID` or `agent deny ID --reason TEXT`, even while a cycle
runs. The next cycle, before the model is asked anything, runs every approved call exactly as
it was parked (same registry, same tool policy), notes its result, and notes each denial with
its reason, so the model learns what was refused and why.

The database is the runtime's (the model's tools cannot reach logs/). Every change is a
read-modify-write in one transaction of the database (milliseconds: SQLite's own lock, never the
home's), so approving never waits for a running cycle and never races it. A call is marked `ran`
before it runs: a crash in between skips it rather than running it twice.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import json
import re
from typing import Any, Callable

from agent.common.escape import escape_controls
from agent.common.outcomes import InvalidScratchpad, Parked, UsageError
from agent.common.tags import Outcome, Tag
from agent.config import Settings
from agent.gates.base import Action, Gate, Tools
from agent.secrets import Secrets
from agent.state import add_note
from agent.store.connection import Database
from agent.store.db import any_rows, records
from agent.store.home import Home
from agent.store.rows import loaded
from agent.tools import NeedsApproval, Registry, ToolContext

PENDING, APPROVED, DENIED, RAN = "pending", "approved", "denied", "ran"
STATUSES = (PENDING, APPROVED, DENIED, RAN)
NO_RESULT = "(no result recorded: the cycle ended before the call returned)"


def _patterns(settings: Settings) -> dict[str, list[str]]:
    """Each `approval_required` pattern with the forms it matches by: as written, and squeezed the
    way MCP tool names are (`my-srv__*` names the tools of server my-srv, exposed as my_srv__...)."""
    return {
        raw: list(dict.fromkeys([raw, re.sub(r"[^A-Za-z0-9_*?\[\]!]", "_", raw)])) for raw in settings.approval_required
    }


def gate(settings: Settings) -> Callable[[str], bool]:
    """Whether a tool's calls need approval: its name matches a pattern in `approval_required`,
    as the operator wrote it or as the server's tools are exposed."""
    forms = [form for found in _patterns(settings).values() for form in found]
    return lambda name: any(fnmatch.fnmatchcase(name, form) for form in forms)


def pattern_warnings(settings: Settings, registry: Registry) -> list[str]:
    """One warning per `approval_required` pattern that matches no tool this home has (offered or
    turned off): a typo, or a server that did not start, would leave its calls ungated."""
    names = [*registry.names(), *registry.disabled]
    return [
        f"approval_required pattern {raw!r} matches no tool (a typo, or a server that did not start?): "
        f"nothing is gated by it"
        for raw, forms in _patterns(settings).items()
        if not any(fnmatch.fnmatchcase(name, form) for name in names for form in forms)
    ]


def call_lines(record: dict, width: int = 100) -> list[str]:
    """The whole parked call, escaped, cut into lines of `width` characters (never clipped:
    the operator approves exactly what they can read)."""
    text = escape_controls(shown_call(record))
    return [text[i : i + width] for i in range(0, len(text), width)] or [""]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def read_approvals(home: Home) -> list[dict]:
    """Every parked call, oldest first ([] when none was ever parked); InvalidScratchpad for a row
    that is not an approval record (edited by hand)."""
    found = []
    for approval_id, text in records(home, create=False).rows("SELECT id, record FROM approval ORDER BY id"):
        record = loaded(text)
        if not _well_formed(record):
            raise InvalidScratchpad(
                f"{records(home, create=False).path}: parked call {approval_id} is not an approval record "
                "(id, cycle_id, tool, args, status)"
            )
        found.append(record)
    return found


def pending_calls(home: Home) -> list[dict]:
    """The parked calls still waiting for the operator, oldest first (InvalidScratchpad: unreadable)."""
    return [record for record in read_approvals(home) if record["status"] == PENDING]


def pending_fields(home: Home) -> dict:
    """What a cycle's index record says of the calls waiting for the operator: how many, and when
    the oldest was parked (None: none waits). Asked after a cycle is saved, where nothing may fail
    the cycle: an unreadable file counts 0 (the next cycle, and `agent approvals`, report it)."""
    try:
        waiting = pending_calls(home)
    except InvalidScratchpad:
        waiting = []
    parked = [r["parked"] for r in waiting if isinstance(r.get("parked"), str)]
    return {"pending_approvals": len(waiting), "oldest_pending_approval": min(parked, default=None)}


def _well_formed(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("id"), str)
        and isinstance(record.get("cycle_id"), str)  # `agent approvals` shows it
        and isinstance(record.get("tool"), str)
        and isinstance(record.get("args"), dict)
        and record.get("status") in STATUSES
    )


def _save(db: Database, record: dict) -> None:
    """One parked call, new or changed (inside `db.write()`)."""
    db.execute(
        "INSERT OR REPLACE INTO approval (id, format, status, record) VALUES (?, 1, ?, ?)",
        (int(record["id"]), record["status"], json.dumps(record, ensure_ascii=False)),
    )


def _next_id(db: Database) -> str:
    return str(db.one("SELECT coalesce(max(id), 0) + 1 FROM approval")[0])


def shown_call(record: dict) -> str:
    return f"{record['tool']}({json.dumps(record['args'], ensure_ascii=False)})"


# ------------------------------------------------------------------------------- in the cycle


def park(home: Home, cycle_id: str, state: dict, outcome: Outcome, secrets: Secrets) -> None:
    """Record a gated call (the same call already pending keeps its id), note it, and end the
    cycle: raises Parked (stop reason awaiting_approval)."""
    record = _parked(home, cycle_id, outcome.tool, secrets.redact(outcome.args))
    add_note(state, Tag.APPROVAL.line(f"call {record['id']} parked for the operator: {shown_call(record)}"))
    raise Parked(
        f"call {record['id']} to {outcome.tool} awaits the operator "
        f"(agent approve {record['id']} / agent deny {record['id']})",
        signature=f"call {record['id']}",  # one incident per parked call
    )


def park_call(home: Home, cycle_id: str, tool: str, args: dict) -> str:
    """Park a call (redacted already) without ending the cycle: an interrupted call the operator
    decides on (agent/cycle/journal.py). Its approval id."""
    return _parked(home, cycle_id, tool, args)["id"]


def _parked(home: Home, cycle_id: str, tool: str, args: dict) -> dict:
    """The pending record for this call: the same call already pending keeps its id."""
    db = records(home)
    with db.write():
        waiting = pending_calls(home)
        record = next((r for r in waiting if r["tool"] == tool and r["args"] == args), None)
        if record is None:
            record = {
                "id": _next_id(db),
                "cycle_id": cycle_id,
                "tool": tool,
                "args": args,
                "status": PENDING,
                "parked": _now(),
                "decided": None,
                "reason": None,
                "handled_in": None,
                "result": None,
            }
            _save(db, record)
    return record


def run_decided(
    home: Home,
    cycle_id: str,
    state: dict,
    registry: Registry,
    ctx: ToolContext,
    log: Callable[[str], None],
    run: Callable[[dict, str], tuple[dict, Outcome]],
) -> dict:
    """Run the approved calls (through `run`: the cycle's tools, no gate) and note the denials the model
    has not heard of yet; the new state."""
    for warning in pattern_warnings(ctx.settings, registry):
        log(f"warning: {warning}")
    if not any_rows(home, "approval"):  # nothing was ever parked (decide needs a parked call)
        return state
    db = records(home)
    with db.write():
        todo = [
            r
            for r in read_approvals(home)
            if r["status"] == APPROVED or (r["status"] == DENIED and r["handled_in"] is None)
        ]
        for record in todo:  # marked before running: at most once, even if the process dies mid-call
            record["handled_in"] = cycle_id
            record["status"] = RAN if record["status"] == APPROVED else DENIED
            _save(db, record)
    for record in todo:
        if record["status"] == DENIED:
            add_note(
                state,
                Tag.APPROVAL.line(
                    f"call {record['id']} denied by the operator: {shown_call(record)}: "
                    f"{record['reason'] or 'no reason given'}"
                ),
            )
            continue
        add_note(state, Tag.APPROVAL.line(f"call {record['id']} approved by the operator; running it"))
        state, outcome = run(state, json.dumps({"tool": record["tool"], "args": record["args"]}))
        log(f"approved call {record['id']}: {outcome.note}")
        _set(home, record["id"], result=ctx.secrets.redact_text(outcome.note))
    return state


class ApprovalGate(Gate):
    """Calls to the tools `approval_required` names wait for the operator: the model's call is held
    (parked, and the cycle stops with awaiting_approval), and what the operator decided runs or is
    told before the model is asked anything."""

    def __init__(self, cycle):
        super().__init__(cycle)
        self.needs = gate(cycle.settings)

    def before_loop(self, state: dict, tools: Tools) -> dict:
        cycle = self.cycle
        return run_decided(cycle.home, cycle.cycle_id, state, tools.registry, tools.ctx, tools.log, tools.run)

    def on_action(self, state: dict, action: Action) -> str | None:
        """A gated call the tool's precheck refuses fails with its ToolError, as it would ungated; any
        other is held, never run (NeedsApproval: the dispatcher returns it as an APPROVAL outcome)."""
        tool = action.tool
        if tool.func is None or not self.needs(tool.name):  # update_scratchpad and done are never gated
            return None
        refused = tool.refusal(action.ctx, action.args)  # refused anyway: never ask the operator
        if refused:
            return refused
        raise NeedsApproval(tool.name)

    def after_action(self, state: dict, outcome: Outcome) -> None:
        if outcome.kind is Tag.APPROVAL:  # a held call: parked, noted, and the cycle stops (Parked)
            park(self.cycle.home, self.cycle.cycle_id, state, outcome, self.cycle.secrets)


def _set(home: Home, approval_id: str, **fields: Any) -> None:
    db = records(home)
    with db.write():
        for record in read_approvals(home):
            if record["id"] == approval_id:
                _save(db, {**record, **fields})


# ------------------------------------------------------------------------------- the operator


def discard_open(home: Home, why: str) -> list[str]:
    """Deny every call still pending or approved (not run yet), with `why`, as if already noted:
    the memory they were parked for was replaced (`agent reset`). The ids so denied."""
    if not any_rows(home, "approval"):
        return []
    db = records(home)
    with db.write():
        open_calls = [r for r in read_approvals(home) if r["status"] in (PENDING, APPROVED)]
        for record in open_calls:
            record.update(status=DENIED, decided=_now(), reason=why, handled_in="reset")
            _save(db, record)
    return [r["id"] for r in open_calls]


def decide(home: Home, approval_id: str, approve: bool, reason: str | None = None) -> dict:
    """Approve or deny a pending call; UsageError (exit 2) for an unknown id or a decided call."""
    if not any_rows(home, "approval"):
        raise UsageError(f"no parked call '{approval_id}': no call was ever parked in {home.root}")
    db = records(home)
    with db.write():
        parked = read_approvals(home)
        record = next((r for r in parked if r["id"] == approval_id), None)
        if record is None:
            known = ", ".join(r["id"] for r in parked if r["status"] == PENDING) or "none"
            raise UsageError(f"no parked call '{approval_id}' (pending: {known}; `agent approvals` lists them)")
        if record["status"] != PENDING:
            raise UsageError(
                f"call {approval_id} is already {record['status']}; only a pending call can be "
                f"{'approved' if approve else 'denied'}"
            )
        record.update(status=APPROVED if approve else DENIED, decided=_now(), reason=reason)
        _save(db, record)
    return record
