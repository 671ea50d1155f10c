"""A stuck home stays stuck, whatever the model writes: twelve ticks of `agent run --quiet` under a
model that dodges the stall (renaming its task, swapping it with the next one, rewriting the queue)
and under an operator who keeps queueing tasks behind the stalled one.

The model is an OpenAI-compatible stub on 127.0.0.1 whose every answer is the evasion, computed
from the state the cycle woke with, so each model call is counted where it arrives. What is
checked is what an operator would see: the model asked at most `stall_cycles` + 1 times, exit 9
from the stall on, one line for cron to mail, and the same count of stalled cycles in `status
--json`, `fleet --json`, the metrics file and the record the hook was given."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import read_active, run_cli, write_active
from tests.models.openai_server import OpenAIServer, Reply, usage

STALL_CYCLES = 2
TICKS = 12
TASKS = ["fix the backup job", "rotate the logs", "deploy", "write it up"]


def reply(action: dict) -> Reply:
    return Reply.chat(action, usage=usage(900, 100))


def update(**fields) -> Reply:
    return reply({"tool": "update_scratchpad", "args": fields})


def renamed(state: dict, n: int) -> Reply:
    return update(current_task=f"Fix the backup job (attempt {n})")


def swapped(state: dict, n: int) -> Reply:
    first, *rest = state["pending_actions"]
    return update(current_task=first, pending_actions=[state["current_task"], *rest])


def rewritten(state: dict, n: int) -> Reply:
    queue = [state["current_task"], *state["pending_actions"]]
    queue = queue[n % len(queue) :] + queue[: n % len(queue)]  # another order each time, one task reworded
    return update(current_task=queue[0], pending_actions=[f"{queue[1]} (revised {n})", *queue[2:]])


def looking(state: dict, n: int) -> Reply:
    return reply({"tool": "echo", "args": {"message": "still looking"}})


def metrics(home: Path) -> dict[str, float]:
    families = text_string_to_metric_families((home / "agent.prom").read_text())
    return {
        sample.name: sample.value
        for family in families
        for sample in family.samples
        if not sample.labels.keys() - {"home"}
    }


def ticked(home: Path, server: OpenAIServer, queue_behind: bool) -> tuple[list[int], list[list[str]]]:
    codes, mails = [], []
    for tick in range(TICKS):
        if queue_behind and tick >= STALL_CYCLES and tick % 3 == 0:  # the operator queues more work
            assert run_cli("task", "add", f"extra task {tick}", "--home", str(home)).exit_code == 0
        result = run_cli("run", "--home", str(home), "--quiet")
        assert result.stdout == "", result.stdout
        codes.append(result.exit_code)
        mails.append(result.stderr.splitlines())
    return codes, mails


@pytest.mark.parametrize(
    ("evasion", "queue_behind"),
    [(renamed, False), (swapped, False), (rewritten, False), (looking, True)],
    ids=["rename", "swap", "rewritten queue", "queued behind"],
)
def test_a_stuck_home_stays_stuck_and_every_view_counts_the_same(home, tmp_path, evasion, queue_behind):
    hooked = tmp_path / "hooked.jsonl"
    hook = tmp_path / "hook.sh"
    hook.write_text(f'#!/bin/sh\ncat >> "{hooked}"\necho >> "{hooked}"\n')
    hook.chmod(0o755)
    write_active(home, {"current_task": TASKS[0], "pending_actions": TASKS[1:]})
    asked: list[int] = []

    def answer(request) -> Reply:  # the evasion, from the state this cycle woke with
        asked.append(1)
        return evasion(read_active(home), len(asked))

    with OpenAIServer(default=answer) as server:
        settings = {
            "model": "openai:test-model",
            "base_url": server.base_url,
            "max_retries": 0,
            "tool_calling": "text",
            "response_format": "text",
            "max_iterations": 1,
            "stall_cycles": STALL_CYCLES,
            "metrics_file": "agent.prom",
            "on_cycle_end": [str(hook)],
        }
        (home / "config.yaml").write_text(yaml.safe_dump(settings))
        codes, mails = ticked(home, server, queue_behind)

    assert len(asked) <= STALL_CYCLES + 1 and len(asked) == STALL_CYCLES
    assert codes == [3] * (STALL_CYCLES - 1) + [9] * (TICKS - STALL_CYCLES + 1)
    lines = [line for tick in mails for line in tick]
    assert len(lines) == 1 and " stalled: task " in lines[0] and mails[STALL_CYCLES - 1] == lines

    status = json.loads(run_cli("status", "--home", str(home), "--json").stdout)
    fleet = json.loads(run_cli("fleet", str(home), "--json").stdout)
    [row] = fleet if isinstance(fleet, list) else fleet["homes"]
    [*_, last_hooked] = [json.loads(line) for line in hooked.read_text().splitlines() if line.strip()]
    assert status["stall"]["stalled"] is True and status["stall"]["cycles"] == STALL_CYCLES
    assert row["stall"]["cycles"] == STALL_CYCLES and row["state"] == "held"
    assert metrics(home)["agent_consecutive_stalls"] == STALL_CYCLES
    assert last_hooked["streak"] == STALL_CYCLES and last_hooked["held_for"] == "stalled"
    assert status["incident"]["key"] == row["incident"]["key"] == last_hooked["incident"]  # one incident
    assert status["incident"]["cycles"] == TICKS - STALL_CYCLES + 1  # the stall and every held tick
    waiting = len(read_active(home)["pending_actions"])
    assert status["stall"]["waiting"] == last_hooked["waiting"] == waiting
    assert f"; {waiting} tasks wait behind it;" in status["stall"]["held"]
    if queue_behind:
        assert waiting == len(TASKS) - 1 + 3  # three tasks queued behind the stalled one, none ran
