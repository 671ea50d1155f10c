"""A consolidation SIGKILLed at each of its write steps (AGENT_TEST_KILL_AT=k): active.yaml is the old
one or the new one, whole; what `agent show --all` and `recall` list never includes an entry
active.yaml still holds (a record the killed run left is ignored); and once a consolidation finishes,
every entry that left the section is listed exactly once."""

from __future__ import annotations

import json
import shutil
import signal

import pytest
import yaml

from tests.helpers import run_agent_process, run_cli, write_script
from tests.memory.homes import known, with_sections
from tests.tools.helpers import ctx_for

pytestmark = pytest.mark.slow

CONFIG = {"known": {"kind": "list", "limit": 12, "entry_chars": 80}}
FACTS = ["The NAS is at 10.0.0.5", "Backups run at 02:00", "Backups take an hour", "The printer is on floor 2"]
REPLY = {
    "tool": "consolidate",
    "args": {
        "sections": {
            "known": [{"id": "known-1"}, {"text": "Backups run at 02:00 for an hour", "cites": ["known-2", "known-3"]}]
        },
        "archive": ["known-4"],
    },
}


def held_ids(home) -> set[str]:
    return {e["id"] for e in yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["known"]}


def listed(home) -> list[str]:
    data = json.loads(run_cli("show", "--all", "--json", "--home", str(home)).stdout)
    return [r["id"] for r in data.get("archived_from_sections", [])]


def test_a_consolidation_killed_at_any_write_step_never_shows_an_entry_active_yaml_holds(tmp_path):
    from agent.tools.recall import recall

    base = with_sections(
        tmp_path / "base",
        {"known": known(*FACTS), "section_ids": {"known": 4}},
        sections=CONFIG,
        consolidate_max_loss=0.5,
    )
    script = write_script(tmp_path, [REPLY])
    old = (base / "scratchpad" / "active.yaml").read_bytes()
    k, finished = 0, False
    while not finished:
        k += 1
        assert k < 80, "more kill points than expected"
        home = tmp_path / f"kill-{k}"
        shutil.copytree(base, home)
        killed = run_agent_process(
            "consolidate", "--home", str(home), "--model", f"scripted:{script}", env={"AGENT_TEST_KILL_AT": str(k)}
        )
        finished = killed.returncode == 0
        if not finished:
            assert killed.returncode == -signal.SIGKILL, killed.stderr
        now = (home / "scratchpad" / "active.yaml").read_bytes()
        consolidated = held_ids(home) == {"known-1", "known-5"} or held_ids(home) == {"known-1", "known-6"}
        assert now == old or consolidated, f"kill {k}: active.yaml is neither the old nor a consolidated one"
        assert not set(listed(home)) & held_ids(home), f"kill {k}: a record of a run that did not save is shown"
        assert "known-2:" not in recall(ctx_for(home), "known-2", 10) or "known-2" not in held_ids(home)
        if now == old:  # the next consolidation saves, and each entry that left is listed once
            again = run_cli("consolidate", "--home", str(home), "--model", f"scripted:{script}")
            assert again.exit_code == 0, again.output
        assert sorted(listed(home)) == ["known-2", "known-3", "known-4"], f"kill {k}: {listed(home)}"
        successor = [i for i in held_ids(home) if i != "known-1"][0]
        assert successor in ("known-5", "known-6")  # never an id a killed run's record already names
    assert k > 20  # the kills reached every step between the archive and active.yaml


def test_a_queued_memory_drop_killed_at_any_write_step_is_never_lost_nor_shown_while_held(tmp_path):
    """`agent memory drop` queued while the lock was held, then applied by the next command, SIGKILLed
    at each write step: known-2 is in active.yaml (the edit still queued, or its archive row already
    committed and not shown) or in the archive, never neither; once a command finishes, it is listed once."""
    from agent.store.home import Home
    from agent.store.lock import home_lock

    base = with_sections(tmp_path / "base", {"known": known(*FACTS), "section_ids": {"known": 4}}, sections=CONFIG)
    with home_lock(Home.at(base)):
        assert run_cli("memory", "drop", "known", "known-2", "--home", str(base)).exit_code == 0  # queued
    k, finished = 0, False
    while not finished:
        k += 1
        assert k < 80, "more kill points than expected"
        home = tmp_path / f"kill-{k}"
        shutil.copytree(base, home)
        killed = run_agent_process(
            "memory", "add", "known", "Mail goes through smtp", "--home", str(home), env={"AGENT_TEST_KILL_AT": str(k)}
        )
        finished = killed.returncode == 0
        if not finished:
            assert killed.returncode == -signal.SIGKILL, killed.stderr
        assert "known-2" in held_ids(home) or listed(home) == ["known-2"], f"kill {k}: known-2 was lost"
        assert not set(listed(home)) & held_ids(home), f"kill {k}: a record of an edit that did not save is shown"
        again = run_cli("memory", "add", "known", "Mail goes through smtp", "--home", str(home))  # the inbox first
        assert again.exit_code == 0, again.output
        assert "known-2" not in held_ids(home) and listed(home) == ["known-2"], f"kill {k}: {listed(home)}"
    assert k > 3  # the kills reached the steps between the archive and active.yaml
