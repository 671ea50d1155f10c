"""The database's schema: numbered migrations, each a small function, applied in order on open.

As in simonw/llm's migrations.py: `MIGRATIONS` is the list, append-only; the database's
`PRAGMA user_version` is how many have been applied. Those pending run in one transaction with the
bump of that number, so a process killed midway leaves the database as it was before them, and the
next open runs them again. A database whose number is past this list was written by a newer
agent: it is refused (exit 2), never read as if it were ours. Moving in an older release's files
is not a migration but a step run on open whenever such files are found (agent/store/upgrade.py).

Every table holds one kind of record and a `format` column (its shape), so a later migration or
reader can tell an old record from a new one.
"""

from __future__ import annotations

from typing import Callable

from agent.common.files import fault_point
from agent.common.outcomes import UsageError
from agent.store.connection import Database
from agent.store.rows import loaded, section_columns

MIGRATIONS: list[Callable] = []
migration = MIGRATIONS.append


def migrate(db: Database) -> None:
    """Apply the migrations this database lacks, in order; UsageError for one from a newer agent."""
    version = db.one("PRAGMA user_version")[0]
    if version > len(MIGRATIONS):
        raise UsageError(
            f"{db.path} was written by a newer agent (its records are at migration {version}, this agent knows "
            f"{len(MIGRATIONS)}): upgrade agent to use this home"
        )
    if version == len(MIGRATIONS):
        return
    with db.write():
        version = db.one("PRAGMA user_version")[0]  # another process may have applied some meanwhile
        for number, step in enumerate(MIGRATIONS[version:], version + 1):
            step(db)
            db.execute(f"PRAGMA user_version = {number}")
    fault_point(f"agent.db: migrations to {len(MIGRATIONS)} applied")


_SPEND = """INSERT INTO spend VALUES (coalesce(new.day, ''), coalesce(new.model, ''), 1, coalesce(new.tokens, 0),
    coalesce(new.cost, 0), new.cost IS NULL AND coalesce(new.tokens, 0) > 0, iif(new.cost IS NULL, coalesce(new.prompt_tokens, 0), 0),
    iif(new.cost IS NULL, coalesce(new.completion_tokens, 0), 0))
  ON CONFLICT (day, model) DO UPDATE SET cycles = cycles + 1, tokens = tokens + excluded.tokens,
    cost = cost + excluded.cost, uncosted_cycles = uncosted_cycles + excluded.uncosted_cycles,
    uncosted_prompt = uncosted_prompt + excluded.uncosted_prompt,
    uncosted_completion = uncosted_completion + excluded.uncosted_completion"""


def _disk(sign: str, row: str) -> str:
    return (
        f"UPDATE disk SET files = files {sign} {row}.snapshot_files, bytes = bytes {sign} {row}.snapshot_bytes "
        f"WHERE kind = 'snapshots'; UPDATE disk SET files = files {sign} {row}.log_files, "
        f"bytes = bytes {sign} {row}.log_bytes WHERE kind = 'logs';"
    )


@migration
def m001_records(db: Database) -> None:
    for statement in (
        # one row per cycle id given: `record` (what `agent run --json` printed, less its files) is
        # NULL until the cycle ends (running, or killed); the rest is read out of it for queries
        """CREATE TABLE cycle (id TEXT PRIMARY KEY, format INTEGER, record TEXT, day TEXT, model TEXT,
            tokens INTEGER, prompt_tokens INTEGER, completion_tokens INTEGER, cost REAL,
            files INTEGER NOT NULL DEFAULT 1,
            snapshot_files INTEGER NOT NULL DEFAULT 0, snapshot_bytes INTEGER NOT NULL DEFAULT 0,
            log_files INTEGER NOT NULL DEFAULT 0, log_bytes INTEGER NOT NULL DEFAULT 0)""",
        "CREATE INDEX cycle_on_disk ON cycle (id) WHERE files",
        "CREATE INDEX cycle_unrecorded ON cycle (id) WHERE record IS NULL",
        # what the records spent, per UTC day and model, kept by the database itself: never lowered
        # by pruning or by deleting cycles (budgets, and counters that must only grow, read it)
        """CREATE TABLE spend (day TEXT NOT NULL, model TEXT NOT NULL, cycles INTEGER NOT NULL,
            tokens INTEGER NOT NULL, cost REAL NOT NULL, uncosted_cycles INTEGER NOT NULL,
            uncosted_prompt INTEGER NOT NULL, uncosted_completion INTEGER NOT NULL,
            PRIMARY KEY (day, model)) WITHOUT ROWID""",
        f"""CREATE TRIGGER cycle_recorded AFTER UPDATE OF record ON cycle
            WHEN old.record IS NULL AND new.record IS NOT NULL BEGIN {_SPEND}; END""",
        f"CREATE TRIGGER cycle_imported AFTER INSERT ON cycle WHEN new.record IS NOT NULL BEGIN {_SPEND}; END",
        # the snapshot pairs' and cycle logs' files and bytes on disk, kept the same way
        "CREATE TABLE disk (kind TEXT PRIMARY KEY, files INTEGER NOT NULL, bytes INTEGER NOT NULL)",
        "INSERT INTO disk VALUES ('snapshots', 0, 0), ('logs', 0, 0)",
        f"CREATE TRIGGER cycle_files_added AFTER INSERT ON cycle BEGIN {_disk('+', 'new')} END",
        f"""CREATE TRIGGER cycle_files_changed AFTER UPDATE OF snapshot_files, snapshot_bytes, log_files, log_bytes
            ON cycle BEGIN {_disk("-", "old")} {_disk("+", "new")} END""",
        f"CREATE TRIGGER cycle_files_gone AFTER DELETE ON cycle BEGIN {_disk('-', 'old')} END",
        # each cycle's model requests and replies, exactly (agent/after/transcript.py)
        """CREATE TABLE transcript (seq INTEGER PRIMARY KEY, format INTEGER NOT NULL, cycle_id TEXT NOT NULL,
            record TEXT NOT NULL)""",
        "CREATE INDEX transcript_cycle ON transcript (cycle_id)",
        # calls with side effects: intent, result, interrupted (agent/cycle/journal.py)
        """CREATE TABLE call (seq INTEGER PRIMARY KEY, format INTEGER NOT NULL, call TEXT NOT NULL,
            event TEXT NOT NULL, record TEXT NOT NULL)""",
        # what bounded memory moved out of the scratchpad, and its full-text index (agent/store/archive.py)
        """CREATE TABLE archive (seq INTEGER PRIMARY KEY, format INTEGER NOT NULL, cycle_id TEXT,
            kind TEXT NOT NULL, record TEXT NOT NULL)""",
        "CREATE INDEX archive_kind ON archive (kind)",
        "CREATE VIRTUAL TABLE recall USING fts5 (text, content = '', tokenize = 'porter unicode61 remove_diacritics 2')",
        # calls parked for the operator (agent/gates/approvals.py), edits queued while a cycle ran
        # (agent/memory/inbox.py), and what probes found (the sandbox, an endpoint's formats)
        "CREATE TABLE approval (id INTEGER PRIMARY KEY, format INTEGER NOT NULL, status TEXT NOT NULL, record TEXT)",
        "CREATE INDEX approval_status ON approval (status)",
        "CREATE TABLE inbox (seq INTEGER PRIMARY KEY, format INTEGER NOT NULL, record TEXT NOT NULL)",
        "CREATE TABLE probe (name TEXT PRIMARY KEY, format INTEGER NOT NULL, record TEXT NOT NULL)",
        # the older release's files whose records are in (agent/store/upgrade.py)
        "CREATE TABLE upgrade (files TEXT NOT NULL)",
    ):
        db.execute(statement)


_OUTCOME = """INSERT INTO outcome VALUES (json_extract(new.record, '$.stop_reason'), 1)
  ON CONFLICT (stop_reason) DO UPDATE SET cycles = cycles + 1"""
_HAS_STOP_REASON = "json_valid(new.record) AND json_type(new.record, '$.stop_reason') = 'text'"


@migration
def m002_outcomes_and_outlets(db: Database) -> None:
    for statement in (
        # the records per stop reason, kept by the database itself as `spend` is, and never lowered
        # (the metrics file's agent_cycles_total); the records already in are counted once, here
        """CREATE TABLE outcome (stop_reason TEXT PRIMARY KEY, cycles INTEGER NOT NULL) WITHOUT ROWID""",
        f"""INSERT INTO outcome SELECT json_extract(record, '$.stop_reason'), count(*) FROM cycle
            WHERE record IS NOT NULL AND {_HAS_STOP_REASON.replace("new.", "")} GROUP BY 1""",
        f"""CREATE TRIGGER cycle_outcome_recorded AFTER UPDATE OF record ON cycle
            WHEN old.record IS NULL AND new.record IS NOT NULL AND {_HAS_STOP_REASON} BEGIN {_OUTCOME}; END""",
        f"""CREATE TRIGGER cycle_outcome_imported AFTER INSERT ON cycle
            WHEN new.record IS NOT NULL AND {_HAS_STOP_REASON} BEGIN {_OUTCOME}; END""",
        # the operator's outlets (on_cycle_end, metrics_file) whose last attempt failed: the problem
        # and the cycle it first failed in, until one works again (agent/after/outlets.py)
        "CREATE TABLE outlet (name TEXT PRIMARY KEY, format INTEGER NOT NULL, problem TEXT NOT NULL, since TEXT NOT NULL)",
    ):
        db.execute(statement)


def _raise_ids(ids: str) -> str:
    """An upsert raising `section_id` to the highest number among `ids` (a query of one column, `id`,
    each `<section>-<digits>`; anything of another form is not an id the runtime issued: skipped)."""
    section, digits = "substr(id, 1, instr(id, '-') - 1)", "substr(id, instr(id, '-') + 1)"
    return f"""INSERT INTO section_id (section, highest)
        SELECT {section}, max(CAST({digits} AS INTEGER)) FROM ({ids})
        WHERE instr(id, '-') > 1 AND length({digits}) BETWEEN 1 AND 18 AND {digits} NOT GLOB '*[^0-9]*'
        GROUP BY 1
        ON CONFLICT (section) DO UPDATE SET highest = max(highest, excluded.highest)"""


@migration
def m003_memory_sections(db: Database) -> None:
    """What leaves a memory section (agent/memory/section_archive.py): the archive rows say which
    section and entry id (and which successor replaced it), for `recall` and `agent show --all` to
    find it by section and id; `section_id` keeps the highest id number of each section that ever
    reached the archive (raised by the database itself as each row is added, and by `restore` and
    `reset` for the state they replace), so no id is issued twice."""
    for statement in (
        "ALTER TABLE archive ADD COLUMN section TEXT",
        "ALTER TABLE archive ADD COLUMN entry_id TEXT",
        "ALTER TABLE archive ADD COLUMN replaced_by TEXT",
        "CREATE INDEX archive_section ON archive (section, entry_id) WHERE section IS NOT NULL",
        "CREATE TABLE section_id (section TEXT PRIMARY KEY, highest INTEGER NOT NULL) WITHOUT ROWID",
        f"""CREATE TRIGGER archive_section_id AFTER INSERT ON archive
            WHEN new.entry_id IS NOT NULL OR new.replaced_by IS NOT NULL
            BEGIN {_raise_ids("SELECT new.entry_id AS id UNION ALL SELECT new.replaced_by")}; END""",
    ):
        db.execute(statement)
    # Section records a database already holds: their columns read out of the record, then the mark.
    for seq, text in db.rows("SELECT seq, record FROM archive WHERE kind IN ('section_entry', 'section_text')"):
        db.execute(
            "UPDATE archive SET section = ?, entry_id = ?, replaced_by = ? WHERE seq = ?",
            (*section_columns(loaded(text) or {}), seq),
        )
    db.execute(_raise_ids("SELECT entry_id AS id FROM archive UNION ALL SELECT replaced_by FROM archive"))


# The record's fields that people filter and sort by (datasette, sqlite3, the report's buckets), as
# columns: VIRTUAL generated ones, computed from `record` when read, so adding them writes no row
# (an upgrade of a million cycles costs its indexes, not a rewrite). A record a hand edit left
# unreadable reads as NULLs, never an error. `day`, `model`, `tokens`, `prompt_tokens` (input),
# `completion_tokens` (output) and `cost` are stored columns since m001.
_RECORD_FIELD = "iif(json_valid(record), json_extract(record, '$.{}'), NULL)"
CYCLE_COLUMNS = (  # (column, type, expression): their names are in docs/reference.md
    ("started", "TEXT", _RECORD_FIELD.format("started")),
    ("duration_s", "REAL", _RECORD_FIELD.format("duration_s")),
    # UTC, as `started` is: the start plus the duration (NULL when either is missing)
    ("ended", "TEXT", "strftime('%Y-%m-%dT%H:%M:%f', started, '+' || duration_s || ' seconds') || '+00:00'"),
    ("stop_reason", "TEXT", _RECORD_FIELD.format("stop_reason")),
    ("exit_code", "INTEGER", _RECORD_FIELD.format("exit_code")),
    ("error_kind", "TEXT", _RECORD_FIELD.format("error_kind")),  # FailureKind (agent/common/outcomes.py)
    ("error", "TEXT", _RECORD_FIELD.format("error")),
    ("trace_id", "TEXT", _RECORD_FIELD.format("trace_id")),  # the cycle's OpenTelemetry trace, when traced
)


@migration
def m004_cycle_columns(db: Database) -> None:
    """The cycle record's fields as columns (`CYCLE_COLUMNS`), and the indexes of the common
    questions: the failed cycles (by stop reason, newest first) and the slowest. The cost per day
    is the `spend` table's (its key is the day)."""
    for name, kind, expression in CYCLE_COLUMNS:
        db.execute(f"ALTER TABLE cycle ADD COLUMN {name} {kind} GENERATED ALWAYS AS ({expression}) VIRTUAL")
    db.execute("CREATE INDEX cycle_stop_reason ON cycle (stop_reason, id)")
    db.execute("CREATE INDEX cycle_duration ON cycle (duration_s)")


@migration
def m005_cycle_window(db: Database) -> None:
    """`agent report`'s window read from an index alone (agent/store/columns.py): the ids with the
    stop reason (m004's generated column, read out of the record, stored nowhere) and whether the
    cycle left files, so the window's counts by stop reason and by hour, and the search for its
    incidents and newest cycles, never parse a record they do not show."""
    db.execute("CREATE INDEX cycle_window ON cycle (id, stop_reason, files)")


@migration
def m006_provenance(db: Database) -> None:
    """Where each memory section entry came from, as the runtime saw it (agent/store/provenance.py):
    the cycle (or operator command) that added it and the route (`operator`, `inbox`, `wake`,
    `model`, `reflect`, `consolidation`); one row per (section, entry id), the last save's."""
    db.execute(
        """CREATE TABLE provenance (section TEXT NOT NULL, entry_id TEXT NOT NULL, format INTEGER NOT NULL,
        cycle_id TEXT NOT NULL, route TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (section, entry_id))
        WITHOUT ROWID"""
    )


@migration
def m007_workspace_writes(db: Database) -> None:
    """What the model's file tools last wrote at each workspace path (agent/store/provenance.py): the
    cycle, the bytes' SHA-256 and size, and where what it had read before that write came from; so a
    later read of the file is known to be the model's own writing only while those bytes are still there."""
    db.execute(
        """CREATE TABLE workspace_write (path TEXT PRIMARY KEY, format INTEGER NOT NULL, cycle_id TEXT NOT NULL,
        sha256 TEXT NOT NULL, size INTEGER NOT NULL, record TEXT NOT NULL) WITHOUT ROWID"""
    )
