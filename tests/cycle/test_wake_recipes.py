"""The `wake_when` recipes of docs/operations.md, run as written: each consumes what woke it, so
the model is woken once per event, never on every tick while a file is there or a check fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.cli.helpers import done
from tests.helpers import REPO, configure, run_cli, write_script


def recipes() -> dict[str, list[str]]:
    """The first word of each recipe's comment -> its wake_when argv, as docs/operations.md has them."""
    doc = (REPO / "docs" / "operations.md").read_text()
    section = doc.split("## Idle cycles and `wake_when`")[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    found = {}
    for chunk in block.strip().split("\n\n"):
        title = chunk.splitlines()[0].removeprefix("# ").split(":")[0]
        found[title] = yaml.safe_load(chunk)["wake_when"]
    return found


@pytest.fixture
def shims(tmp_path: Path) -> Path:
    """A folder put first on PATH with a `curl` that prints tmp/curl.out and exits tmp/curl.code:
    the recipes' URLs are never fetched."""
    folder = tmp_path / "shims"
    folder.mkdir()
    curl = folder / "curl"
    curl.write_text(f'#!/bin/sh\ncat "{tmp_path}/curl.out"; exit "$(cat "{tmp_path}/curl.code")"\n')
    curl.chmod(0o755)
    return folder


def tick(home: Path, shims: Path) -> dict:
    """One cron tick: `agent run --json` with a model that would finish; the cycle's report."""
    script = write_script(home.parent, [done("handled it")], name="tick.yaml")
    env = {"PATH": f"{shims}{os.pathsep}{os.environ['PATH']}", "AGENT_IDLE": "skip"}
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json", env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def woke(report: dict) -> str | None:
    """What the [WAKE] note said when the cycle called the model; None for an idle tick."""
    return None if report["stop_reason"] == "idle" else report["stop_reason"]


def test_the_doc_has_the_three_recipes():
    assert set(recipes()) == {"a file appeared", "a URL changed", "a check failed"}


def test_the_inbox_recipe_wakes_once_per_new_file_and_never_for_a_link(home, shims):
    configure(home, {"current_task": "read the inbox"}, wake_when=recipes()["a file appeared"])
    inbox = home / "workspace" / "inbox"
    inbox.mkdir(parents=True)
    assert woke(tick(home, shims)) is None  # nothing there
    (inbox / "a.txt").write_text("first")
    assert woke(tick(home, shims)) == "done"
    assert "[WAKE] wake_when: new in the inbox: workspace/inbox/a.txt" in (home / "scratchpad/active.yaml").read_text()
    assert woke(tick(home, shims)) is None  # a.txt is still there: seen, no second wake
    assert woke(tick(home, shims)) is None
    (inbox / "b.txt").write_text("second")
    (inbox / "c.txt").symlink_to("/etc/passwd")  # what a model could make: find -P never follows it
    assert woke(tick(home, shims)) == "done"
    notes = (home / "scratchpad/active.yaml").read_text()
    assert "[WAKE] wake_when: new in the inbox: workspace/inbox/b.txt" in notes and "c.txt" not in notes
    assert woke(tick(home, shims)) is None


def test_the_feed_recipe_wakes_once_per_change(home, shims, tmp_path):
    configure(home, {"current_task": "read the feed"}, wake_when=recipes()["a URL changed"])
    (tmp_path / "curl.code").write_text("0")
    (tmp_path / "curl.out").write_text("<feed>1</feed>")
    assert woke(tick(home, shims)) == "done"
    assert woke(tick(home, shims)) is None
    (tmp_path / "curl.out").write_text("<feed>2</feed>")
    assert woke(tick(home, shims)) == "done"
    assert woke(tick(home, shims)) is None


def test_the_health_recipe_wakes_once_per_outage(home, shims, tmp_path):
    configure(home, {"current_task": "watch the service"}, wake_when=recipes()["a check failed"])
    (tmp_path / "curl.out").write_text("curl: (22) The requested URL returned error: 503")
    (tmp_path / "curl.code").write_text("22")
    assert woke(tick(home, shims)) == "done"
    assert "[WAKE] wake_when: health check failed: curl: (22)" in (home / "scratchpad/active.yaml").read_text()
    assert woke(tick(home, shims)) is None  # still failing: already said
    assert woke(tick(home, shims)) is None
    (tmp_path / "curl.code").write_text("0")
    assert woke(tick(home, shims)) is None  # it passes: nothing to do, and the next failure is news
    (tmp_path / "curl.code").write_text("22")
    assert woke(tick(home, shims)) == "done"
