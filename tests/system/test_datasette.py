"""datasette (the real one, from the package index, in an environment of its own: tests/tool_venvs.py)
opens a lived-in home's logs/agent.db read-only, with `agent datasette-metadata`, beside cycles that
go on running, and a home the previous release wrote, once its first command upgraded it: its JSON
API filters the failed cycles by the stop_reason column (the old cycles' too), and its canned
queries answer."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_cli, wait_for, write_active, write_script
from tests.store.lived_in import DONE, TASK, lived_in_home, previous_release_home
from tests.tool_venvs import tool


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the unix socket datasette serves on (`--uds`): no port, nothing else can reach it."""

    def __init__(self, path: Path):
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.path))


@pytest.fixture(params=["lived-in", "upgraded"])
def datasette(request, tmp_path: Path, monkeypatch):
    """(the home, a function GETting a path of datasette's JSON API) with datasette serving the
    home's database read-only, as docs/operations.md runs it: a lived-in home, and one the previous
    release wrote, upgraded by its first command (`agent status`)."""
    program = tool("datasette")
    if request.param == "lived-in":
        home = lived_in_home(tmp_path)
    else:
        home = previous_release_home(tmp_path, monkeypatch)
        assert run_cli("status", "--home", str(home)).exit_code == 0
    metadata = tmp_path / "agent-metadata.json"
    printed = run_cli("datasette-metadata", "--home", str(home))
    assert printed.exit_code == 0, printed.output
    metadata.write_text(printed.stdout)
    sock = tmp_path / "datasette.sock"
    server = subprocess.Popen(
        [str(program), "serve", str(home / "logs" / "agent.db"), "--metadata", str(metadata), "--uds", str(sock)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def get(path: str) -> dict:
        connection = UnixConnection(sock)
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        assert response.status == 200, (path, response.status, body[:500])
        return json.loads(body)

    def answers() -> bool:
        if server.poll() is not None:
            pytest.fail(f"datasette exited {server.returncode}: {server.stdout.read().decode()[-1000:]}")
        try:
            return bool(get("/-/versions.json"))
        except OSError:
            return False

    try:
        wait_for(answers, "datasette to answer on its socket")
        yield home, get
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_datasette_filters_the_failed_cycles_by_the_stop_reason_column(datasette):
    home, get = datasette
    found = get("/agent/cycle.json?stop_reason=error&_shape=objects&_col=stop_reason&_col=error_kind&_col=error")
    (failed,) = found["rows"]
    assert failed["stop_reason"] == "error" and "refused the connection" in failed["error"]
    assert failed["error_kind"] == "refused"


def test_datasette_answers_the_three_canned_queries(datasette):
    home, get = datasette
    failed = get("/agent/failed_cycles.json?_shape=objects")["rows"]
    assert [row["stop_reason"] for row in failed] == ["error"] and failed[0]["exit_code"] == 4
    slowest = get("/agent/slowest_cycles.json?_shape=objects")["rows"]
    assert len(slowest) == 4 and slowest[0]["duration_s"] == max(row["duration_s"] for row in slowest)
    (day,) = get("/agent/cost_per_day.json?_shape=objects")["rows"]
    assert day["cycles"] == 4


def test_every_table_and_column_datasette_lists_is_described(datasette):
    home, get = datasette
    described = get("/-/metadata.json")["databases"]["agent"]["tables"]
    listed = {table["name"]: table for table in get("/agent.json")["tables"] if not table["hidden"]}
    assert "cycle" in listed and "spend" in listed
    for name, table in listed.items():
        assert described[name]["description"], name
        assert set(table["columns"]) <= set(described[name]["columns"]), name
    assert {"stop_reason", "error_kind", "trace_id", "ended"} <= set(listed["cycle"]["columns"])


def test_cycles_run_while_datasette_has_the_database_open(datasette, tmp_path):
    home, get = datasette
    write_active(home, TASK)
    script = write_script(tmp_path, [DONE], "again.yaml")
    for _ in range(3):  # as cron would, while datasette reads
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "-q").exit_code == 0
        assert get("/agent/cycle.json?stop_reason=done&_shape=objects")["rows"]
    done = get("/agent/cycle.json?stop_reason=done&_shape=objects&_col=stop_reason")["rows"]
    assert len(done) == 4
