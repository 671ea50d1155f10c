"""The operator's answer to parked calls: `agent approvals`, `agent approve ID`, `agent deny ID`.

These never take the home's lock: each answer is a transaction of logs/agent.db's `approval`
table, so an operator can answer while a cycle runs. The next cycle runs what was approved, exactly as parked.
"""

from __future__ import annotations

from pathlib import Path

import click

from agent.cli.common import clip, existing_home, home_option, home_settings, json_option, print_json, reports_errors
from agent.common.escape import escape_controls
from agent.gates.approvals import NO_RESULT, RAN, call_lines, decide, read_approvals
from agent.secrets import Secrets


def _secrets(home_dir: Path) -> Secrets:
    """The home's secrets (a broken config still hides the default ones)."""
    return Secrets.from_settings(home_settings(existing_home(home_dir).root))


@click.command()
@home_option
@click.option("--all", "show_all", is_flag=True, help="Also list calls already approved, denied or run.")
@json_option
@reports_errors
def approvals(home_dir: Path, show_all: bool, as_json: bool) -> None:
    """List the pending calls to gated tools (`approval_required`), oldest first.

    --json prints every record (id, cycle_id, tool, args, status, reason, result, ...); status
    is pending, approved, denied or ran.
    """
    home = existing_home(home_dir)
    records = _secrets(home_dir).redact(read_approvals(home))
    if as_json:
        print_json(records)
        return
    shown = records if show_all else [r for r in records if r["status"] == "pending"]
    if not shown:
        click.echo("no pending calls" + ("" if show_all or not records else " (--all lists decided ones)"))
    for record in shown:
        click.echo(escape_controls(f"{record['id']:>4}  {record['status']:<8}  cycle {record['cycle_id']}"))
        for line in call_lines(record):  # the whole call, on as many lines as it needs
            click.echo("      " + line)
        if record["status"] == RAN:
            click.echo("      " + escape_controls(clip(record.get("result") or NO_RESULT, 200)))
        elif record.get("reason"):
            click.echo("      reason: " + escape_controls(clip(record["reason"], 200)))


def _answer(home_dir: Path, approval_id: str, approve: bool, reason: str | None, as_json: bool) -> None:
    record = _secrets(home_dir).redact(decide(existing_home(home_dir), approval_id, approve, reason))
    if as_json:
        print_json(record)
    else:
        verb = "approved: the next cycle runs it first" if approve else "denied: the next cycle tells the model"
        click.echo(escape_controls(f"call {record['id']} {verb}:"))
        for line in call_lines(record):
            click.echo("      " + line)


@click.command()
@home_option
@click.argument("approval_id", metavar="ID")
@json_option
@reports_errors
def approve(home_dir: Path, approval_id: str, as_json: bool) -> None:
    """Approve parked call ID: the next cycle runs it, with the arguments it was parked with."""
    _answer(home_dir, approval_id, True, None, as_json)


@click.command()
@home_option
@click.argument("approval_id", metavar="ID")
@click.option("--reason", help="Why: the model reads it in the next cycle's notes.")
@json_option
@reports_errors
def deny(home_dir: Path, approval_id: str, reason: str | None, as_json: bool) -> None:
    """Deny parked call ID: it never runs; the next cycle notes the denial and the reason."""
    _answer(home_dir, approval_id, False, reason, as_json)
