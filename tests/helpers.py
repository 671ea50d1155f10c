"""Helpers shared by the tests: real homes, scripted models, and ways to run the CLI.

`run_cli` runs the command in-process with click's CliRunner (fast, for most tests);
`run_agent_process` runs `python -m agent` as a real subprocess (for locks, signals, kills).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

from agent.cli import main
from agent.store.home import Home

REPO = Path(__file__).resolve().parent.parent


def write_script(folder: Path, replies: list, name: str = "script.yaml") -> Path:
    """A scripted model file: each reply a raw string (dicts are written as JSON strings)."""
    path = folder / name
    path.write_text(yaml.safe_dump([r if isinstance(r, str) else json.dumps(r) for r in replies]))
    return path


def write_active(home: Path, state: dict | str) -> Path:
    path = home / "scratchpad" / "active.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(state if isinstance(state, str) else yaml.safe_dump(state, sort_keys=False))
    return path


def configure(home: Path, state: dict | str | None = None, **settings) -> Path:
    """Write the home's config.yaml from `settings` and, when given, its active.yaml; returns the home."""
    (home / "scratchpad").mkdir(parents=True, exist_ok=True)  # what makes a folder a home
    (home / "config.yaml").write_text(yaml.safe_dump(settings))
    if state is not None:
        write_active(home, state)
    return home


def make_home(folder: Path, config: dict | str = "", name: str = "home") -> Path:
    """A home made by `agent init` in folder/name, its config.yaml then replaced by `config` (settings or YAML text)."""
    home = folder / name
    result = run_cli("init", str(home))
    assert result.exit_code == 0, result.output
    (home / "config.yaml").write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return home


def store_home(root: Path) -> Home:
    """The Home at `root` with its private scratchpad/ and logs/ made: for tests that call the store,
    memory or gates directly instead of running a command."""
    home = Home.at(root)
    home.ensure_dirs()
    return home


def cycle_records(home: Path | Home) -> list[dict]:
    """Every cycle record in the home's database, oldest first (`agent history -n 0 --json` reversed)."""
    from agent.store.cycles import newest_first

    return list(newest_first(home if isinstance(home, Home) else Home.at(home)))[::-1]


def transcript(home: Path, cycle_id: str | None = None) -> list[dict]:
    """A cycle's transcript records in order (the newest cycle's, or every cycle's, without an id)."""
    from agent.after.transcript import read_transcript
    from agent.store.db import records

    h = Home.at(home)
    ids = [cycle_id] if cycle_id else [i for (i,) in records(h).rows("SELECT DISTINCT cycle_id FROM transcript")]
    return [record for one in ids for _, record in read_transcript(h, one)]


def remembered(home: Path, name: str) -> dict | None:
    """A probe the home remembers in its database: "sandbox", "endpoint"."""
    from agent.store.db import probe

    return probe(Home.at(home), name)


def remember_raw(home: Path, name: str, text: str) -> None:
    """A probe's record replaced by `text`, whatever it holds (a hand edit, or a bug)."""
    from agent.store.db import records

    db = records(Home.at(home))
    with db.write():
        db.execute("INSERT OR REPLACE INTO probe VALUES (?, 1, ?)", (name, text))


def stored_bytes(home: Path) -> bytes:
    """Every byte the home's database holds on disk (its file and its write-ahead log): what a secret
    must never be found in."""
    logs = Path(home) / "logs"
    return b"".join(p.read_bytes() for p in (logs / "agent.db", logs / "agent.db-wal") if p.exists())


def read_yaml(path: Path):
    return yaml.safe_load(path.read_text())


def read_active(home: Path) -> dict:
    """The home's scratchpad/active.yaml, as YAML reads it."""
    return read_yaml(home / "scratchpad" / "active.yaml")


def leaked_pieces(text: str, *secrets: str) -> list[str]:
    """Every 8-character piece of any of `secrets` found in `text` (a secret shown in pieces is shown)."""
    return [s[i : i + 8] for s in secrets for i in range(len(s) - 7) if s[i : i + 8] in text]


def tree_digest(root: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file below root (to prove nothing changed).

    The empty .agent.lock is left out: taking the lock may create it, and it holds no data; so is
    the database's shared-memory index (agent.db-shm), which any reader of the database writes.
    """
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.name not in (".agent.lock", "agent.db-shm"):
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_cli(*args: str, env: dict | None = None):
    """Run `agent ARGS` in-process; returns click's Result (exit_code, stdout, stderr)."""
    runner = CliRunner()
    return runner.invoke(main, list(args), env=env, catch_exceptions=False)


def run_openai(home: Path, base_url: str, *flags: str, env: dict | None = None):
    """`agent run --json` on an `openai:` model at `base_url` (a stub server's); click's Result."""
    full_env = {"OPENAI_BASE_URL": base_url, **(env or {})}
    return run_cli("run", "--home", str(home), "--model", "openai:test-model", "--json", *flags, env=full_env)


def run_agent_process(*args: str, env: dict | None = None, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    """Run `python -m agent ARGS` as a real process."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, env=full_env, timeout=timeout, **kw
    )


def mode_bits_bind_root() -> None:
    """For preexec_fn: in the child before exec, drop the capabilities that let root ignore mode
    bits (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH from the bounding set), so a folder chmod 000 or
    555 stops it as it stops anyone (the suite runs as root in CI)."""
    import ctypes

    pr_capbset_drop, cap_dac_override, cap_dac_read_search = 24, 1, 2
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (cap_dac_override, cap_dac_read_search):
        if libc.prctl(pr_capbset_drop, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def snapshots(home: Path, label: str) -> list[Path]:
    return sorted((home / "scratchpad").glob(f"*_{label}.yaml"))


def wait_for(predicate, what: str = "condition", timeout: float = 60.0):
    """Poll `predicate` until it is truthy and return its value; bounded and generous, for a busy
    CI machine (never a fixed sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


# Archived items of every shape bounded memory writes: (kind, value).
ARCHIVED_SAMPLE = [
    ("note", '[TOOL] shell({"command": "df -h"}) -> /dev/sda1 disk: 12G free of 50G'),
    ("note", "The backup job failed on Tuesday: disk full"),
    ("completed_task", {"task": "Rotate the nginx logs", "summary": "rotated and compressed 4 files"}),
    ("completed_task", "Check the weather"),
    ("note", "Nothing to see here"),
]


def archive_items(home: Path, items: list[tuple[str, object]], cycle_id: str = "20260101_000000") -> None:
    """Archive (kind, value) items the way bounded memory does, through the archive's one writer."""
    from agent.store.archive import Left, archive

    archive(Home.at(home), [Left(kind, value, "notes_budget") for kind, value in items], cycle_id)


def install_dist(
    site: Path, name: str, group: str, entry_points: dict[str, str], modules: dict[str, str] | None = None
) -> Path:
    """Install a distribution by hand, as pip lays one out: a .dist-info with METADATA and an
    entry_points.txt declaring `entry_points` in `group`, plus top-level `modules` (name -> source)."""
    info = site / f"{name.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    lines = [f"{key} = {value}" for key, value in entry_points.items()]
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "\n".join(lines) + "\n")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)
    return info
