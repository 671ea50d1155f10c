"""A home: the folder of one agent, where each of its files lives, and its cycle index."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent.store.files import SECRET_DIR_MODE, append_jsonl, disk_error, read_jsonl, remove_temporaries
from agent.store.tail import records_backwards


@dataclass(frozen=True)
class Home:
    """A working directory for one agent: scratchpad/, logs/, rules.md, optional config.yaml."""

    root: Path

    @classmethod
    def at(cls, path: str | os.PathLike) -> "Home":
        return cls(Path(path).expanduser().absolute())

    @property
    def scratchpad(self) -> Path:
        return self.root / "scratchpad"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def active(self) -> Path:
        return self.scratchpad / "active.yaml"

    @property
    def rules(self) -> Path:
        return self.root / "rules.md"

    @property
    def examples(self) -> Path:
        """The worked examples the model is shown; none here: the packaged ones (agent/cycle/examples.py)."""
        return self.root / "examples.yaml"

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def templates(self) -> Path:
        return self.root / "templates"

    @property
    def lock_file(self) -> Path:
        return self.root / ".agent.lock"

    @property
    def index(self) -> Path:
        return self.logs / "index.jsonl"

    @property
    def archive(self) -> Path:
        return self.logs / "archive.jsonl"

    @property
    def inbox(self) -> Path:
        """Operator edits queued while a cycle holds the lock (store/inbox.py)."""
        return self.scratchpad / "inbox.jsonl"

    @property
    def approvals(self) -> Path:
        """Calls to gated tools parked for the operator (agent/gates/approvals.py), and that file's own lock."""
        return self.scratchpad / "approvals.json"

    @property
    def approvals_lock(self) -> Path:
        return self.scratchpad / ".approvals.lock"

    @property
    def recall_index(self) -> Path:
        """SQLite FTS5 over the archive (store/recall_index.py): derived, rebuilt when missing."""
        return self.logs / "recall.sqlite3"

    @property
    def endpoint_memory(self) -> Path:
        """The response format each openai: endpoint and model accepted (agent/models/openai/format_ladder.py)."""
        return self.logs / "endpoint.json"

    @property
    def outlets(self) -> Path:
        """Whether the on_cycle_end hook and the metrics file worked the last time they were due
        (agent/after/outlets.py): a failing one is shown by `status` until it works again."""
        return self.logs / "outlets.json"

    @property
    def operator_files(self) -> tuple[Path, ...]:
        """What the operator writes at the top of the home (a replay copies them; the tools never reach them)."""
        return (self.config, self.rules, self.examples, self.templates)

    @property
    def runtime_files(self) -> tuple[Path, ...]:
        """What the runtime writes at the top of the home (the tools never reach them)."""
        return (self.scratchpad, self.logs, self.lock_file)

    def snapshot(self, cycle_id: str, label: str) -> Path:
        return self.scratchpad / f"{cycle_id}_{label}.yaml"

    def cycle_log(self, cycle_id: str) -> Path:
        return self.logs / f"cycle_{cycle_id}.log"

    def transcript(self, cycle_id: str) -> Path:
        """Every request and reply of the cycle (agent/after/transcript.py); kept and pruned with its log."""
        return self.logs / f"cycle_{cycle_id}.transcript.jsonl"

    def ensure_dirs(self) -> None:
        """Create scratchpad/ and logs/ private to the owner (they may hold tool output).

        A folder that already exists with wider permissions is narrowed to 0700 when we own it.
        """
        for folder in (self.scratchpad, self.logs):
            try:
                folder.mkdir(mode=SECRET_DIR_MODE, parents=True, exist_ok=True)
            except OSError as exc:
                raise disk_error(folder, exc) from exc
            with contextlib.suppress(OSError):
                info = folder.stat()
                if info.st_mode & 0o077 and info.st_uid == os.geteuid():
                    folder.chmod(SECRET_DIR_MODE)


def remove_stale_temporaries(
    home: Home, workspace: Path | None = None, left_out: list[str] | None = None
) -> list[Path]:
    """Delete the temporary files a killed process left in scratchpad/, logs/ and, when given,
    anywhere in the tools' workspace (write_file writes through atomic_write too), within the
    bounds of `store/walk.py` (what lies beyond them is added to `left_out`).
    Call only while holding the lock."""
    removed = remove_temporaries(home.scratchpad) + remove_temporaries(home.logs)
    if workspace is not None:
        removed += remove_temporaries(workspace, recursive=True, left_out=left_out)
    return removed


def append_index(home: Home, record: dict) -> None:
    """Add one cycle's record to logs/index.jsonl."""
    append_jsonl(home.index, [record])


def read_index(home: Home, tail_bytes: int | None = None) -> list[dict]:
    """Every cycle record in the index (with `tail_bytes`, the last ones), oldest first.
    Records with a malformed id are skipped."""
    return [r for r in read_jsonl(home.index, "cycle_id", tail_bytes) if isinstance(r["cycle_id"], str)]


def index_newest_first(home: Home) -> Iterator[dict]:
    """The index's cycle records, newest first, read backwards from the end only as far as the caller
    goes (bounded memory: `agent/store/tail.py`). Records with a malformed id are skipped."""
    return (r for r in records_backwards(home.index, "cycle_id") if isinstance(r["cycle_id"], str))
