"""`agent datasette-metadata`: the titles, descriptions and canned queries of a home's
logs/agent.db, as the metadata file datasette reads (agent/store/catalog.py holds them)."""

from __future__ import annotations

from pathlib import Path

import click

from agent.cli.common import existing_home, home_option, json_option, print_json, reports_errors
from agent.store.catalog import datasette_metadata


@click.command("datasette-metadata")
@home_option
@json_option
@reports_errors
def datasette_metadata_command(home_dir: Path, as_json: bool) -> None:
    """Print datasette's metadata for the home's logs/agent.db (JSON, with or without --json):
    every table and column titled and described, and three canned queries (cost per day, failed
    cycles, slowest cycles).

    \b
    agent datasette-metadata > agent-metadata.json
    datasette logs/agent.db --metadata agent-metadata.json   # read-only, beside a running cron
    """
    print_json(datasette_metadata(existing_home(home_dir).root.resolve().name))
