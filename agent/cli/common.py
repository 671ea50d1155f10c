"""What the commands share: the --home, --json and --wait options, error reporting, the home
check, and the small text formatting the listings use."""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from agent.common.escape import escape_controls, escape_json
from agent.common.outcomes import AgentError, ExitCode, UsageError
from agent.common.plain import plain
from agent.config import MOST_SECONDS, Settings, load_settings
from agent.state import parse_time
from agent.store.db import close_all
from agent.store.home import Home

home_option = click.option(
    "--home",
    "home_dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="AGENT_HOME",
    default=".",
    show_default="AGENT_HOME, else the current directory",
    help="The agent's home: scratchpad/, logs/, rules.md, config.yaml.",
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
wait_seconds = click.FloatRange(min=0, max=MOST_SECONDS)  # the lock_wait setting's bound
wait_option = click.option(
    "--wait",
    "lock_wait",
    type=wait_seconds,
    default=0.0,
    help="Seconds to wait for a running cycle to finish before giving up with exit code 5 (busy).",
)
# The same for a command that runs a model (run, consolidate): unset, config.yaml's lock_wait decides.
config_wait_option = click.option(
    "--wait",
    "lock_wait",
    type=wait_seconds,
    help="Seconds to wait for a running cycle to finish before giving up with exit code 5 "
    "(busy). Default: 'lock_wait' in config.yaml, else 0.",
)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '90s', '2w', '1.5d' -> seconds. UsageError for anything else."""
    match = _DURATION.match(str(text))
    if not match:
        raise UsageError(f"duration '{text}' is not a number followed by a unit: s, m, h, d or w (e.g. 7d, 12h)")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def reports_errors(func):
    """Turn AgentError into its message on stderr and its exit code; every command goes through here.

    Two more cases hold for every command by construction, not command by command:
    - a reader that closed the pipe (`agent show | head -1`): the rest of the output goes nowhere,
      nothing is printed about it, exit 0 (`agent run` keeps its cycle's code: it prints after saving);
    - a file of the home that cannot be read or written (permissions, a folder where a file should
      be, an I/O error): one line naming it, exit 7, never a traceback."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AgentError as exc:
            message = one_line(str(exc)) if kwargs.get("quiet") else escape_controls(exc, keep_newlines=True)
            click.echo(f"agent: error: {message}", err=True)  # --quiet: cron mails one line
            sys.exit(int(exc.exit_code))
        except BrokenPipeError:
            silence_stdout()
            sys.exit(0)
        except OSError as exc:
            click.echo(f"agent: error: {escape_controls(unusable_file(exc))}", err=True)
            sys.exit(int(ExitCode.DISK))
        finally:
            close_all()  # the command's records are committed; closing the last connection ends the WAL

    return wrapper


def one_line(message: str) -> str:
    """A message of several lines (a remedy indented under it) as one line, escaped: what `--quiet`
    prints, since cron mails each line a job prints (docs/operations.md, the cron mail table)."""
    return escape_controls(" ".join(message.split()))


def unusable_file(exc: OSError) -> str:
    """What an operator reads when a file the command needs cannot be read or written."""
    where = exc.filename if exc.filename is not None else "a file of the home"
    return (
        f"cannot use {where}: {exc.strerror or exc}; check that this user owns the home's files "
        f"and may read them (`agent doctor` checks the folders)"
    )


def silence_stdout() -> None:
    """The reader of stdout went away: send the rest (Python's buffer included) to /dev/null."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def checked_home(home_dir: Path, hint: bool = True, importing: bool = False) -> Home:
    """The home at `home_dir`, or a usage error (exit 2) when it is the user's home folder or
    `/` and was never made a home: the model's workspace and the runtime's files would sit among
    dot-files, keys and code that the operator's shell and tools run. A folder `agent init` made
    a home (it has scratchpad/active.yaml) is accepted wherever it is: a service user's $HOME
    (`useradd -d /srv/agent`) may be its agent home."""
    home = Home.at(home_dir)
    if hint:
        say_if_msa(home, home_dir)
    if not importing:
        refuse_an_unfinished_import(home, home_dir)
    if home.active.is_file():
        return home
    resolved = home.root.resolve()
    try:
        users_home = Path.home().resolve()
    except (RuntimeError, KeyError, OSError):  # no $HOME and no passwd entry (a container's bare uid)
        users_home = None
    for unsafe, what in ((Path("/"), "the root folder /"), (users_home, "your home folder ($HOME)")):
        if resolved == unsafe:
            raise UsageError(
                f"refusing to use {what} as the agent's home ({home.root}): it was never made one. "
                f"Make a folder for it, e.g. agent init ~/my-agent, and pass --home ~/my-agent (or "
                f"set AGENT_HOME); for a service user whose $HOME is the agent home, run agent init "
                f"{home.root} as another user (root) and chown it"
            )
    return home


def refuse_an_unfinished_import(home: Home, home_dir: Path) -> None:
    """A folder an `agent init --from-msa` was killed in is no home yet (its memory, config or templates may
    be missing): exit 2, saying that running the import again finishes it."""
    from agent.cli.msa_home import UNFINISHED_IMPORT

    marker = home.root / UNFINISHED_IMPORT
    if os.path.lexists(marker):
        from agent.common.safe_yaml import FileRefused, read_text_file

        try:
            src = (read_text_file(marker, "marker", 4096) or "").strip() or "MSA_HOME"
        except FileRefused:
            src = "MSA_HOME"
        raise UsageError(
            f"{home.root}: an `agent init --from-msa` into it did not finish (killed?); run it again, it starts "
            f"over: agent init {shlex.quote(str(home_dir))} --from-msa {shlex.quote(src)}"
        )


def say_if_msa(home: Home, home_dir: Path) -> None:
    """One line on stderr when the folder holds msa's config/config.yaml, home or not: an older msa
    checkout passes as a home (it has scratchpad/) and would run with default rules, ignoring config/.
    Once per command, however many times it looks at the home; under --quiet (cron mails what a job
    prints) once per home, the first time: then every tick would mail it."""
    from agent.cli.msa_home import looks_like_msa, msa_hint  # a stat first: all a plain cycle pays

    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    looked = meta.setdefault("agent.msa_looked", set())  # its config is read once per command
    if home.root in looked:
        return
    looked.add(home.root)
    if not looks_like_msa(home.root):
        return
    if meta.get("agent.quiet") and not _first_msa_hint(home):
        return
    click.echo(f"agent: {msa_hint(str(home_dir))}", err=True)


MSA_HINT_SAID = "msa_hint_said"  # in logs/: a --quiet command said the msa line once


def _first_msa_hint(home: Home) -> bool:
    """Whether no --quiet command said the msa line in this home before (recorded now, where it can be)."""
    try:
        if home.scratchpad.is_dir():  # a home (an older checkout is one): its logs/, as a cycle makes it
            home.logs.mkdir(mode=0o700, exist_ok=True)
        os.close(os.open(home.logs / MSA_HINT_SAID, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        return False
    except OSError:  # no logs/ yet, or a read-only home: said each time rather than never
        return True
    return True


def existing_folder(home_dir: Path, hint: bool = True) -> Home:
    """The home at `home_dir` (see `checked_home`), or a usage error (exit 2) when the folder
    does not exist. Only `agent reset` takes any folder that exists (the README's set-up resets a
    fresh clone); every other command wants a home (`existing_home`)."""
    home = checked_home(home_dir, hint)
    if not home.root.is_dir():
        raise UsageError(f"home {home.root} does not exist (create one with: agent init {shlex.quote(str(home_dir))})")
    return home


def existing_home(home_dir: Path) -> Home:
    """The home at `home_dir`: a folder with scratchpad/ (what `agent init` makes; a clone of the
    repository has one), or a usage error (exit 2) saying how to make one. Every command that uses
    a home comes through here, so none turns a folder it was pointed at by mistake into a home
    (`agent task add` in the wrong folder used to leave scratchpad/, logs/ and a lock there).
    `init`, `reset` and `fork`'s target make homes and are exempt."""
    home = existing_folder(home_dir, hint=False)  # an msa folder: said once, below
    if not home.scratchpad.is_dir():
        folder = shlex.quote(str(home_dir))
        from agent.cli.msa_home import looks_like_msa, msa_hint

        if looks_like_msa(home.root):  # no `agent init` offered here: it would start from an empty memory
            raise UsageError(f"{msa_hint(str(home_dir))} (it is not an agent home yet: no scratchpad/ folder)")
        raise UsageError(
            f"{home.root} is not an agent home (it has no scratchpad/ folder): make it one with "
            f"`agent init {folder}`, or name the home with --home or AGENT_HOME"
        )
    say_if_msa(home, home_dir)
    return home


def home_settings(root: Path) -> Settings:
    """The home's settings for a command that only reads; the defaults when its config is broken
    (status and doctor report that themselves; a cycle refuses to run)."""
    try:
        return load_settings(root)
    except UsageError:
        return Settings()


def operator_text(text: str, what: str, strip: bool = True) -> str:
    """Text from the command line for the home's files (a task, a goal, a check, a memory entry):
    refused in one line (UsageError, exit 2) when it is empty, or is not valid UTF-8 (an argument
    with bytes no UTF-8 text has: the terminal's encoding is not UTF-8, or a raw byte was typed),
    which no YAML or JSON file of the home could hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = ord(text[exc.start]) - 0xDC00 if "\udc80" <= text[exc.start] <= "\udcff" else None
        shown = f"byte 0x{byte:02x}" if byte is not None else "a character no file can hold"
        raise UsageError(
            f"the {what} is not valid UTF-8 text ({shown} at character {exc.start + 1}); "
            f"the home's files are UTF-8: check the terminal's encoding (locale)"
        ) from None
    if not text.strip():
        raise UsageError(f"the {what} is empty")
    return text.strip() if strip else text


def print_json(data: Any) -> None:
    click.echo(escape_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)))


def echo(line: object = "", **kwargs: Any) -> None:
    """Print one line that may hold text the model wrote: control characters, newlines and line
    separators escaped (the terminal, and cron mail, obey none of them; a field never spills
    onto a line of its own). Style only after escaping."""
    click.echo(escape_controls(line), **kwargs)


# ---------------------------------------------------------------------------------- formatting


def clip(text: Any, limit: int | None = 60) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis (None: never cut)."""
    text = " ".join(str(text).split())
    return text if limit is None or len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def task_text(task: Any) -> str:
    """One completed_tasks entry as a line: 'task: summary' for mappings, the string otherwise."""
    if isinstance(task, dict):
        name, summary = task.get("task"), task.get("summary")
        if name is not None or summary is not None:
            return f"{plain(name or None, '(no task)')}: {plain(summary, '')}".rstrip(": ")
    return plain(task)


def size(num: int) -> str:
    """A byte count for people: 512 B, 1.5 KiB, 3.2 MiB."""
    value = float(num)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def seconds_since(stamp: Any) -> float | None:
    """Seconds from an ISO time stamp (UTC when it names no zone) to now; None if it is not one."""
    when = parse_time(stamp)
    return None if when is None else (_dt.datetime.now(_dt.timezone.utc) - when).total_seconds()


def terminal_width() -> int | None:
    """The width to fit a table in: the terminal's (or COLUMNS); None when stdout is not a
    terminal and COLUMNS is not set, so pipes and files get every character."""
    if sys.stdout.isatty():
        import shutil  # not at the top: `agent run` never draws a table

        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None
