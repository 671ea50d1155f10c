"""`agent consolidate`: one consolidation of the memory sections (agent/cycle/consolidate.py), then
exit with a code saying how it ended: 0 consolidated (or nothing to do), 3 reverted, 4 failed,
5 busy, 10 budget spent. Meant for a nightly cron line beside `agent run` (docs/operations.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from agent.cli.common import config_wait_option, echo, existing_home, home_option, reports_errors
from agent.config import load_settings
from agent.cycle.consolidate import consolidate_cycle
from agent.models import resolve_model
from agent.models.resolve import anchor_model_path
from agent.secrets import Secrets


@click.command()
@home_option
@click.option(
    "--model",
    help="PROVIDER[:NAME], as for `agent run`. Default: AGENT_MODEL, config.yaml, else the embedded model.",
)
@config_wait_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the run on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@reports_errors
def consolidate(home_dir: Path, model: str | None, lock_wait: float | None, as_json: bool, quiet: bool) -> None:
    """Rewrite the memory's list sections in one model call: merge what belongs together, archive
    what is stale. Accepted only if every entry ends in exactly one place (kept, cited by one
    successor, or archived), the sections shrink by at most consolidate_max_loss, successors earn
    nothing and protected entries stay; otherwise active.yaml is left byte for byte as it was."""
    home = existing_home(home_dir)
    settings = load_settings(home.root, model=model and anchor_model_path(model, Path.cwd()), lock_wait=lock_wait)
    secrets = Secrets.from_settings(settings)
    chosen = resolve_model(settings, home.root, secrets=secrets)
    report = consolidate_cycle(home, settings, chosen, secrets=secrets)
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=None))
    elif quiet and report.exit_code:  # cron mails one line for what a person may want to read
        echo(f"agent consolidate: {report.stop_reason} (exit {report.exit_code})" + _detail(report, first=True))
    elif not quiet:
        echo(f"{report.cycle_id}: {report.stop_reason} (exit {report.exit_code})" + _detail(report, first=False))
        for violation in report.violations or []:
            echo(f"  {violation}")
    sys.exit(report.exit_code)


def _detail(report, first: bool) -> str:
    """What to say after the stop reason; `first`: with the first violation (one line in all)."""
    if report.idle:
        return f": {report.idle}"
    if report.error:
        return f": {report.error}"
    if report.stop_detail:
        return f": {report.stop_detail}"
    if report.violations and first:
        return f": {report.violations[0]}" + (
            f" (and {len(report.violations) - 1} more)" if len(report.violations) > 1 else ""
        )
    return f", {report.archived} item(s) archived" if report.stop_reason == "consolidated" else ""
