"""What logs/agent.db's tables and columns hold, in words, and the questions people ask of it: the
metadata `agent datasette-metadata` prints for datasette (titles, descriptions, canned queries).

A test opens a fully migrated database and checks that every table and every column is described
here, so a migration that adds one adds its words in the same change.
"""

from __future__ import annotations

from agent.common.outcomes import FAILURES

DATABASE = "agent"  # datasette names a database after its file: logs/agent.db

_FORMAT = "The shape of the record (1 today): a later release tells an old record from a new one by it."
_SEQ = "The order rows were added in."

# table -> (title, description, {column: description})
TABLES: dict[str, tuple[str, str, dict[str, str]]] = {
    "cycle": (
        "Cycles",
        "One row per cycle id given. `record` is what `agent run --json` printed (less its files), NULL while "
        "the cycle runs or if it was killed; the other columns are read out of it, to filter and sort by.",
        {
            "id": "The cycle id: YYYYMMDD_HHMMSS_NN, UTC, sorting in time order.",
            "format": _FORMAT,
            "record": "The cycle's whole record, as JSON (docs/reference.md: `agent run --json`).",
            "day": "The UTC day the cycle started on (YYYY-MM-DD).",
            "model": "The model that answered (provider:name).",
            "tokens": "Tokens the cycle's model calls used, in all.",
            "prompt_tokens": "Input tokens (the prompts), every call of the cycle.",
            "completion_tokens": "Output tokens (the replies), every call of the cycle.",
            "cost": "Cost of the cycle at the model's `prices` (USD); NULL when the model has no price.",
            "files": "1 while any of the cycle's files (snapshot pair, log) is on disk.",
            "snapshot_files": "The cycle's snapshot files on disk (before, after).",
            "snapshot_bytes": "Their bytes.",
            "log_files": "1 while the cycle's log (logs/cycle_<id>.log) is on disk.",
            "log_bytes": "Its bytes.",
            "started": "When the cycle started (ISO 8601, UTC).",
            "duration_s": "How long the cycle took, in seconds.",
            "ended": "When the cycle ended: the start plus the duration (ISO 8601, UTC).",
            "stop_reason": "Why the cycle stopped: done, idle, held, error, max_iterations, ... "
            "(docs/reference.md: stop reasons).",
            "exit_code": "The exit code `agent run` ended with (0 done, 3 stopped, 4 failed, 8 awaiting "
            "approval, 9 stalled, 10 budget).",
            "error_kind": "What went wrong in a failed cycle, as the runtime classifies it: refused, timeout, "
            "http_5xx, http_401, ... (FailureKind).",
            "error": "A failed cycle's error, one line, redacted.",
            "trace_id": "The cycle's OpenTelemetry trace id, when tracing is on (`otel: true`).",
        },
    ),
    "spend": (
        "Spend per day and model",
        "What every record ever written spent, per UTC day and model, kept by the database itself and never "
        "lowered by a prune or `reset --clean` (budgets read it).",
        {
            "day": "The UTC day (YYYY-MM-DD).",
            "model": "The model (provider:name).",
            "cycles": "Cycles recorded that day with that model.",
            "tokens": "Their tokens.",
            "cost": "Their recorded cost (USD).",
            "uncosted_cycles": "Those of them with tokens and no cost (the model had no price then).",
            "uncosted_prompt": "Their input tokens (priced when read).",
            "uncosted_completion": "Their output tokens (priced when read).",
        },
    ),
    "outcome": (
        "Cycles per stop reason",
        "How many records ever written ended with each stop reason; never lowered (the metrics' agent_cycles_total).",
        {"stop_reason": "The stop reason.", "cycles": "Records that ended with it."},
    ),
    "disk": (
        "Files on disk",
        "The cycles' snapshot pairs and logs on disk, as counted when each record was written and each prune ran.",
        {"kind": "snapshots or logs.", "files": "Files of that kind.", "bytes": "Their bytes."},
    ),
    "transcript": (
        "Transcripts",
        "Each model request of a cycle: exactly what was sent and received, redacted (`agent logs --transcript`).",
        {
            "seq": _SEQ,
            "format": _FORMAT,
            "cycle_id": "The cycle it belongs to.",
            "record": "The request and its reply, as JSON.",
        },
    ),
    "call": (
        "Call journal",
        "Each event of a call with side effects: intent before it runs, result after, interrupted if a kill cut it.",
        {
            "seq": _SEQ,
            "format": _FORMAT,
            "call": "The call's id (<cycle id>/<n>).",
            "event": "intent, result or interrupted.",
            "record": "The event, as JSON.",
        },
    ),
    "archive": (
        "Archive",
        "What left the scratchpad (note lines, completed tasks, queued tasks and goals dropped, replaced states, "
        "dropped edits, memory section entries): nothing leaves memory without a row here first.",
        {
            "seq": _SEQ,
            "format": _FORMAT,
            "cycle_id": "The cycle (or command) that moved it here.",
            "kind": "What it is: note, completed_task, queued_task, goal, dropped_task, replaced_state, dropped_edit, "
            "section_entry or section_text.",
            "record": "The item, as JSON.",
            "section": "The memory section it left, for a section's entry or text.",
            "entry_id": "Its entry id in that section.",
            "replaced_by": "The entry that replaced it, when a consolidation did.",
        },
    ),
    "recall": (
        "Archive search",
        "The full-text index of the archive (FTS5, no copy of the text): the `recall` tool searches it.",
        {
            "text": "The searchable text of an archive row (rowid: its seq).",
            "recall": "FTS5's own.",
            "rank": "FTS5's own.",
        },
    ),
    "section_id": (
        "Section ids",
        "The highest id number each memory section ever archived, so no entry id is issued twice.",
        {"section": "The memory section.", "highest": "The highest id number it archived."},
    ),
    "approval": (
        "Approvals",
        "Calls to gated tools parked for the operator (`agent approvals`, `approve`, `deny`).",
        {
            "id": "The approval's number.",
            "format": _FORMAT,
            "status": "pending, approved, denied, or what became of it.",
            "record": "The call and its decision, as JSON.",
        },
    ),
    "inbox": (
        "Inbox",
        "Edits queued while a cycle held the home's lock, applied at the next wake.",
        {"seq": _SEQ, "format": _FORMAT, "record": "The edit, as JSON."},
    ),
    "probe": (
        "Probes",
        "What a probe found and the runtime remembers: `sandbox` (whether the shell sandbox works here) and "
        "`endpoint` (the response format an openai: endpoint accepted).",
        {"name": "sandbox or endpoint.", "format": _FORMAT, "record": "What it found, as JSON."},
    ),
    "outlet": (
        "Failing outlets",
        "Outlets (on_cycle_end, metrics_file) whose last attempt failed, until one works again.",
        {
            "name": "The outlet.",
            "format": _FORMAT,
            "problem": "What went wrong, one line.",
            "since": "The cycle since which it fails.",
        },
    ),
    "provenance": (
        "Provenance",
        "Where each memory entry came from, as the runtime saw it (the model cannot write it): one row per "
        "entry, the last save's; a plain entry (a notes line, a completed task, a queued task) keyed by its text.",
        {
            "section": "The memory section (`queue` for the current task and the pending actions).",
            "entry_id": "The entry's id in its section; a plain entry's: the digest of its text as read, then its occurrence.",
            "format": _FORMAT,
            "cycle_id": "The cycle (or operator command) that added it.",
            "route": "How it came: operator, inbox, wake, model, reflect or consolidation.",
            "record": "The rest, as JSON.",
        },
    ),
    "workspace_write": (
        "Workspace writes",
        "What the model's file tools last wrote at each workspace path, so a read of it is known to be the "
        "model's own writing while those bytes are still there.",
        {
            "path": "The file, relative to the workspace.",
            "format": _FORMAT,
            "cycle_id": "The cycle that wrote it.",
            "sha256": "The SHA-256 of the bytes written.",
            "size": "How many bytes.",
            "record": "Where what the model had read before the write came from, as JSON.",
        },
    ),
    "upgrade": (
        "Upgrade",
        "The older release's files whose records were moved in (the upgrade from before logs/agent.db).",
        {"files": "Which files, as JSON."},
    ),
}
HIDDEN = ("recall_data", "recall_idx", "recall_docsize", "recall_config")  # FTS5's own tables

_FAILURES = "(" + ", ".join(sorted(f"'{reason.value}'" for reason in FAILURES)) + ")"  # as SQL spells it
QUERIES = {
    "cost_per_day": {
        "title": "Cost per day",
        "description": "Cycles, tokens and recorded cost per UTC day, newest first (every record ever "
        "written, pruned ones too). Cycles of a model without prices count tokens but no cost.",
        "sql": "SELECT day, sum(cycles) AS cycles, sum(tokens) AS tokens, round(sum(cost), 6) AS cost, "
        "sum(uncosted_cycles) AS uncosted_cycles FROM spend WHERE day != '' GROUP BY day ORDER BY day DESC",
    },
    "failed_cycles": {
        "title": "Failed cycles",
        "description": "Every failed cycle, newest first, with what went wrong.",
        "sql": "SELECT id, started, model, stop_reason, exit_code, error_kind, error, duration_s FROM cycle "
        f"WHERE stop_reason IN {_FAILURES} ORDER BY id DESC",
    },
    "slowest_cycles": {
        "title": "Slowest cycles",
        "description": "The 100 cycles that took longest.",
        "sql": "SELECT id, started, duration_s, model, stop_reason, prompt_tokens, completion_tokens, cost "
        "FROM cycle WHERE duration_s IS NOT NULL ORDER BY duration_s DESC LIMIT 100",
    },
}


def datasette_metadata(home_name: str) -> dict:
    """datasette's metadata for the logs/agent.db of the home named `home_name` (its folder's name;
    `datasette logs/agent.db --metadata FILE`)."""
    tables: dict[str, dict] = {
        name: {"title": title, "description": description, "columns": dict(columns)}
        for name, (title, description, columns) in TABLES.items()
    }
    tables.update({name: {"hidden": True} for name in HIDDEN})
    return {
        "title": f"agent: the records of {home_name}",
        "description": "logs/agent.db of an agent home: every cycle's record, what was spent, the archive, "
        "the call journal and the transcripts. Open it read-only beside a running cron "
        "(docs/operations.md).",
        "databases": {DATABASE: {"tables": tables, "queries": QUERIES}},
    }
