"""`agent run`: one cycle, then exit with a code saying how it ended.

This is what cron starts every few minutes, so it imports only what a cycle needs: no rich
unless stdout is a terminal, and no provider library unless the chosen model uses it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from agent.cli.common import config_wait_option, existing_home, home_option, reports_errors
from agent.cli.progress import make_reporter
from agent.config import load_settings
from agent.cycle.run import run_cycle
from agent.models import resolve_model
from agent.models.resolve import anchor_model_path
from agent.secrets import Secrets


@click.command()
@home_option
@click.option(
    "--model",
    help="PROVIDER[:NAME]: local, local:FILE.gguf, openai:NAME, scripted:FILE. "
    "Default: AGENT_MODEL, config.yaml, else the embedded model.",
)
@click.option("--max-iterations", type=click.IntRange(min=1), help="Most model calls this cycle (default 10).")
@config_wait_option
@click.option(
    "--reflect/--no-reflect",
    default=None,
    help="After done, one more model call curates the memory (default: 'reflect' in config.yaml, off).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Call the model even when there is nothing to do or the home is held; skip 'wake_when'.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the cycle on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@reports_errors
def run(
    home_dir: Path,
    model: str | None,
    max_iterations: int | None,
    lock_wait: float | None,
    reflect: bool | None,
    force: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Run exactly one cycle in the home, then exit with a code saying how it ended."""
    home = existing_home(home_dir)
    # a model path typed on the command line is relative to where it was typed; in config, to the home
    settings = load_settings(
        home.root,
        model=model and anchor_model_path(model, Path.cwd()),
        max_iterations=max_iterations,
        lock_wait=lock_wait,
        reflect=reflect,
    )
    secrets = Secrets.from_settings(settings)  # the cycle's one: the model and the cycle share it
    chosen = resolve_model(settings, home.root, secrets=secrets)
    reporter = make_reporter(as_json, quiet, settings.max_iterations, settings.quiet_resolved)
    try:
        report = run_cycle(home, settings, chosen, reporter, force=force, secrets=secrets)
    finally:
        reporter.close()  # a live display must not outlive a crash
    if as_json:
        try:
            click.echo(json.dumps(report.as_dict(), indent=None))
        except (OSError, ValueError):  # stdout closed (`| head -c 0`): the cycle is saved; its code stands
            pass
    sys.exit(report.exit_code)
