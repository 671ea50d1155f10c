"""agent/store/catalog.py describes every table and column a fully migrated logs/agent.db has, and
its canned queries run on one (datasette itself: tests/system/test_datasette.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent.store import catalog
from agent.store.db import Database
from agent.store.migrations import migrate
from tests.helpers import run_cli


@pytest.fixture
def migrated() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    migrate(Database(connection, Path(":memory:"), ""))
    return connection


def test_every_table_and_column_of_the_database_is_described(migrated):
    tables = [name for (name,) in migrated.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for table in tables:
        if table in catalog.HIDDEN:
            continue
        title, description, columns = catalog.TABLES[table]
        assert title and description, table
        present = [
            row[1] for row in migrated.execute(f"PRAGMA table_xinfo({table})") if row[1] not in ("recall", "rank")
        ]
        assert set(present) <= set(columns), (table, set(present) - set(columns))
    assert set(catalog.TABLES) | set(catalog.HIDDEN) == set(tables)


@pytest.mark.parametrize("name", sorted(catalog.QUERIES))
def test_each_canned_query_runs_on_a_migrated_database(migrated, name):
    migrated.execute(catalog.QUERIES[name]["sql"]).fetchall()


def test_datasette_metadata_prints_the_catalog_as_json(home):
    result = run_cli("datasette-metadata", "--home", str(home))
    assert result.exit_code == 0
    printed = json.loads(result.stdout)
    assert printed["title"] == "agent: the records of home"
    database = printed["databases"][catalog.DATABASE]
    assert set(database["queries"]) == {"cost_per_day", "failed_cycles", "slowest_cycles"}
    assert database["tables"]["cycle"]["columns"]["stop_reason"].startswith("Why the cycle stopped")
    assert database["tables"]["recall_data"] == {"hidden": True}
