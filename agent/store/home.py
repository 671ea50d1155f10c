"""A home: the folder of one agent, and where each of its files lives."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from agent.common.cycle_ids import SNAPSHOT_LABELS
from agent.common.files import SECRET_DIR_MODE, disk_error, remove_temporaries


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
    def database(self) -> Path:
        """Every record of the home in one SQLite database (agent/store/db.py): the cycle index, the
        spending totals, transcripts, the journal, the archive with its recall index, parked calls,
        the inbox and the probes."""
        return self.logs / "agent.db"

    @property
    def older_release_files(self) -> tuple[Path, ...]:
        """What the release before logs/agent.db kept in files (agent/store/upgrade.py moves them in)."""
        logs = ("index.jsonl", "cycles.json", "totals.json", "calls.jsonl", "archive.jsonl", "recall.sqlite3")
        logs += ("recall.sqlite3-journal", "endpoint.json", "sandbox.json")
        older = ("approvals.json", ".approvals.lock", "inbox.jsonl")
        return tuple(self.logs / name for name in logs) + tuple(self.scratchpad / name for name in older)

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
    bounds of `common/walk.py` (what lies beyond them is added to `left_out`).
    Call only while holding the lock."""
    removed = remove_temporaries(home.scratchpad) + remove_temporaries(home.logs)
    if workspace is not None:
        removed += remove_temporaries(workspace, recursive=True, left_out=left_out)
    return removed


def has_files(home: Home, cycle_id: str) -> bool:
    """Whether a cycle still has a snapshot or its log on disk."""
    return any(
        p.exists() for p in (*(home.snapshot(cycle_id, label) for label in SNAPSHOT_LABELS), home.cycle_log(cycle_id))
    )
