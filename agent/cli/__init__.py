"""The command line: the `agent` group and the map of its commands.

Each command lives in a module of this package and is imported only when it is used (click's
documented lazy-subcommand pattern), so the `agent run` that cron starts every few minutes does
not load diff, history, doctor and the rest. `agent --help` lists every command (and so imports
them all). Commands never import this module: what they share is in common.py.

Errors print one line (`agent: error: ...`) to stderr and exit with the code from
outcomes.ExitCode; data goes to stdout, and every command that prints data has --json.

- run.py, progress.py, live.py       `agent run`, and what it prints while a cycle runs
- setup.py                           `init`, `reset`, `tools`
- msa_import.py, msa_home.py         `init --from-msa`: a home made from an msa home; knowing one
- steer.py                           `task`, `goal` and `resume`
- memory.py, memory_time.py          `memory`: the sections, shown and edited as the operator; as
                                     they were (`--at`), and one entry's life (`--history`)
- consolidate.py                     `consolidate`: one consolidation of the sections
- inspect.py, diffing.py, history.py, spending.py, waiting.py, archive_view.py
                                     `diff`, `history`, `show`, and what `status` reads
- logs.py                            `logs`
- restore.py, snapshots.py, replacing.py, isolation.py
                                     `restore` and `fork`, naming a snapshot, keeping what is replaced,
                                     what a fork or a replay's copy leaves out of config.yaml
- replay.py                          `replay`
- approve.py                         `approvals`, `approve`, `deny`
- maintain.py, endpoint_checks.py    `prune` and `doctor`
- fleet.py, health.py                 `fleet`, `status`, and how a home is doing (what they and `report` show)
- report.py, window.py, page.py       `report`: the records of its window, and the page drawn from them
- datasette.py                       `datasette-metadata`: logs/agent.db described for datasette
- common.py, guard.py                what the commands share; the escape every printed line goes through
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator

import click

# name -> "module:attribute" of the click command; loaded on first use.
COMMANDS = {
    "run": "agent.cli.run:run",
    "init": "agent.cli.setup:init",
    "reset": "agent.cli.setup:reset",
    "tools": "agent.cli.setup:tools",
    "diff": "agent.cli.inspect:diff",
    "history": "agent.cli.inspect:history",
    "show": "agent.cli.inspect:show",
    "status": "agent.cli.health:status",
    "task": "agent.cli.steer:task",
    "goal": "agent.cli.steer:goal",
    "memory": "agent.cli.memory:memory",
    "consolidate": "agent.cli.consolidate:consolidate",
    "resume": "agent.cli.steer:resume",
    "prune": "agent.cli.maintain:prune",
    "doctor": "agent.cli.maintain:doctor",
    "logs": "agent.cli.logs:logs",
    "replay": "agent.cli.replay:replay",
    "restore": "agent.cli.restore:restore",
    "fork": "agent.cli.restore:fork",
    "approvals": "agent.cli.approve:approvals",
    "approve": "agent.cli.approve:approve",
    "deny": "agent.cli.approve:deny",
    "fleet": "agent.cli.fleet:fleet",
    "report": "agent.cli.report:report",
    "datasette-metadata": "agent.cli.datasette:datasette_metadata_command",
}


class LazyGroup(click.Group):
    """A click group whose subcommands are named in a map and imported only when used."""

    def __init__(self, *args, lazy_subcommands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy_subcommands = lazy_subcommands or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_subcommands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    # A usage error under --quiet (-q) is one line, `agent: error: ...`, whatever the command: click's
    # own form is four (Usage, Try, a blank, Error), and cron mails every line. The group's own
    # options are parsed in parse_args, the command's when the group invokes it.

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["agent.quiet"] = quiet_asked(args)  # the whole command line, before click hands it on
        with _one_line_if_quiet(ctx):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        with _one_line_if_quiet(ctx):
            return super().invoke(ctx)

    def _load(self, cmd_name: str) -> click.Command:
        from agent.common.imports import import_frozen  # here: importing the CLI loads nothing of the package

        module_name, _, attribute = self.lazy_subcommands[cmd_name].partition(":")
        # a cycle's ~80 modules: agent/common/imports.py
        command = getattr(import_frozen(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_subcommands[cmd_name]} is not a click command")
        return command


@contextlib.contextmanager
def _one_line_if_quiet(ctx: click.Context) -> Iterator[None]:
    try:
        yield
    except click.UsageError as exc:
        if not ctx.meta.get("agent.quiet"):
            raise
        from agent.cli.common import one_line

        where = f" (`{exc.ctx.command_path} --help` lists the options)" if exc.ctx is not None else ""
        click.echo(f"agent: error: {one_line(exc.format_message())}{where}", err=True)
        sys.exit(exc.exit_code)


def quiet_asked(args: list[str]) -> bool:
    """Whether the command line asks for --quiet: the long flag, or q among short flags (-q, -yq)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--quiet" or (arg.startswith("-") and not arg.startswith("--") and "q" in arg[1:]):
            return True
    return False


@click.group(cls=LazyGroup, lazy_subcommands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scratchpad-agent", prog_name="agent")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Run an LLM agent one cycle at a time, with durable memory in scratchpad/active.yaml.

    Each `agent run` wakes from active.yaml, lets the model act through tools until it calls
    done or hits a limit, and saves: scratchpad/<cycle>_before.yaml and _after.yaml show
    exactly what changed. Exit codes: 0 done, 2 usage, 3 stopped by a limit, 4 failed,
    5 busy, 6 invalid scratchpad, 7 disk error, 8 awaiting approval, 9 stalled,
    10 budget exhausted.
    """
    from agent.cli.guard import guard_output

    guard_output(ctx)  # nothing a command prints can drive the terminal


def entry() -> None:
    """Console-script entry point (keeps `python -m agent` and `agent` identical).

    Output errors never change the outcome: a closed stdin, stdout or stderr is /dev/null, and
    a pipe closed by the reader (`agent run | head -1`) is ignored when it is flushed at exit,
    so the exit code is the command's (a cycle's work is saved before anything is printed)."""
    _reopen_closed_standard_streams()
    try:
        main(prog_name="agent")
    finally:
        _flush_or_silence(sys.stdout)
        _flush_or_silence(sys.stderr)


def _reopen_closed_standard_streams() -> None:
    """`agent run >&-` starts with fd 1 closed: the first file the cycle opened would get that
    number, and printed text would land in it. Give each closed one /dev/null instead."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
            setattr(sys, name, open(fd, mode, closefd=False))


def _flush_or_silence(stream) -> None:
    try:
        stream.flush()
    except (OSError, ValueError):  # the reader went away: the rest of the output goes nowhere
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass
