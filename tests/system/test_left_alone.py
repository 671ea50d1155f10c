"""A home left alone under cron: fifteen ticks of `agent run --quiet`, each its own run, through a
task that never finishes, a call left waiting for approval, a spent budget and a dead endpoint.

The model is an OpenAI-compatible stub on 127.0.0.1 with scripted replies (and, for the outage, a
503 and a fallback model on a closed port), so every model call is counted where it arrives. What
is checked is what an operator who looks once a week would see: the model calls (none after the
stall and while the call is parked, until a task edit or an approval), the lines cron would mail
(one per incident), the notify_on hook (once per incident), the stop reasons, and the metrics
(the outage stays a failure to the end: exit 4 and a growing agent_consecutive_failures)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import run_cli, write_active
from tests.models.openai_server import OpenAIServer, Reply, usage

ECHO = Reply.chat({"tool": "echo", "args": {"message": "still looking"}}, usage=usage(900, 100))
WRITE = Reply.chat({"tool": "write_file", "args": {"path": "report.txt", "content": "all fine"}}, usage=usage(900, 100))
DONE = Reply.chat({"tool": "done", "args": {"summary": "reported"}}, usage=usage(900, 100))
HUGE = Reply.chat({"tool": "echo", "args": {"message": "counting"}}, usage=usage(1_000_000, 0))
OUTAGE = Reply.error(503, "the service is overloaded")


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def metrics(home: Path) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families((home / "agent.prom").read_text()):
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "home"}
            out[(sample.name, tuple(sorted(labels.items())))] = sample.value
    return out


class Cron:
    """Ticks of `agent run --quiet`, counting what each one cost and mailed."""

    def __init__(self, home: Path, server: OpenAIServer):
        self.home, self.server = home, server
        self.codes: list[int] = []
        self.calls: list[int] = []  # model calls each tick made
        self.mails: list[list[str]] = []  # the lines cron would mail, per tick

    def tick(self, *replies: Reply) -> int:
        self.server.add(*replies)
        before = len(self.server.chat_requests)
        result = run_cli("run", "--home", str(self.home), "--quiet")
        assert result.stdout == "", result.stdout  # --quiet: stdout stays empty, mail is stderr
        self.codes.append(result.exit_code)
        self.calls.append(len(self.server.chat_requests) - before)
        self.mails.append(result.stderr.splitlines())
        return result.exit_code


def test_a_month_left_alone_spends_nothing_while_stuck_and_mails_once_per_incident(home, tmp_path):
    hook_calls = tmp_path / "hook.log"
    hook = tmp_path / "notify.sh"
    hook.write_text(f'#!/bin/sh\necho "$AGENT_STOP_REASON" >> "{hook_calls}"\n')
    hook.chmod(0o755)
    (home / "workspace").mkdir()
    write_active(
        home, {"current_task": "fix the flaky build", "pending_actions": ["write the report", "count the logs"]}
    )
    with OpenAIServer() as server:
        settings = {
            "model": "openai:test-model",
            "base_url": server.base_url,
            "fallback_models": [
                {"model": "openai:second-model", "base_url": closed_port_url(), "api_key_env": "inherit"}
            ],
            "max_retries": 0,
            "request_timeout": 10,
            "tool_calling": "text",
            "response_format": "text",
            "max_iterations": 1,
            "stall_cycles": 2,
            "approval_required": ["write_file"],
            "workspace": "workspace",
            "daily_token_budget": 500_000,
            "prices": {"openai:test-model": {"input": 1.0, "output": 2.0}},
            "metrics_file": "agent.prom",
            "on_cycle_end": [str(hook)],
            "notify_on": ["error", "stalled", "awaiting_approval", "budget_exhausted"],
        }
        (home / "config.yaml").write_text(yaml.safe_dump(settings))
        cron = Cron(home, server)

        # a task that never finishes: two cycles, the stall, then held ticks that call no model
        assert [cron.tick(ECHO), cron.tick(ECHO), cron.tick(), cron.tick()] == [3, 9, 9, 9]
        got = metrics(home)
        assert got[("agent_consecutive_stalls", ())] == 2  # the streak status shows: the held ticks keep it
        assert run_cli("task", "drop", "0", "--home", str(home)).exit_code == 0  # the operator moves on

        # an approval left waiting: the parked call, then held ticks, then the approval
        assert [cron.tick(WRITE), cron.tick(), cron.tick()] == [8, 8, 8]
        assert metrics(home)[("agent_pending_approvals", ())] == 1
        assert run_cli("approve", "1", "--home", str(home)).exit_code == 0
        assert cron.tick(DONE) == 0 and (home / "workspace" / "report.txt").read_text() == "all fine"

        # a budget spent: one cycle uses a million tokens; the next ones send nothing
        assert [cron.tick(HUGE), cron.tick(), cron.tick()] == [3, 10, 10]
        settings["daily_token_budget"] = 10**9  # the operator raises it
        (home / "config.yaml").write_text(yaml.safe_dump(settings))

        # a dead endpoint: the primary answers 503, the fallback's port is closed, on every tick
        server.default = OUTAGE
        assert [cron.tick() for _ in range(4)] == [4, 4, 4, 4]

    assert len(cron.codes) == 15
    assert cron.calls == [1, 1, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1]  # none while stalled, parked or spent
    mailed = [len(lines) for lines in cron.mails]
    assert mailed == [0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0]  # one line per incident
    lines = [line for tick in cron.mails for line in tick]
    assert "stalled: task 'fix the flaky build'" in lines[0]
    assert "awaiting approval: call 1 to write_file" in lines[1]
    assert "budget exhausted, nothing sent to the model: the daily token budget is spent" in lines[2]
    assert " refused the connection (nothing listens there)" in lines[3]  # the fallback, after the 503
    assert hook_calls.read_text().split() == ["stalled", "awaiting_approval", "budget_exhausted", "error"]

    history = json.loads(run_cli("history", "--home", str(home), "--json", "--limit", "0").stdout)
    reasons = [r["stop_reason"] for r in reversed(history)]
    assert reasons == [
        "max_iterations",
        "stalled",
        "held",
        "held",
        "awaiting_approval",
        "held",
        "held",
        "done",
        "max_iterations",
        "budget_exhausted",
        "budget_exhausted",
        "error",
        "error",
        "error",
        "error",
    ]
    assert [r["held_for"] for r in reversed(history) if r["stop_reason"] == "held"] == ["stalled"] * 2 + [
        "awaiting_approval"
    ] * 2
    visible = json.loads(run_cli("history", "--home", str(home), "--json", "--limit", "0", "--no-idle").stdout)
    assert len(visible) == 11  # the held ticks hidden

    got = metrics(home)
    assert got[("agent_last_cycle_exit_code", ())] == 4
    assert got[("agent_last_cycle_stop_reason", (("reason", "error"),))] == 1
    assert got[("agent_consecutive_failures", ())] == 4  # the outage stays a failure to the end
    assert got[("agent_consecutive_stalls", ())] == 0
    counted = {dict(k[1])["reason"]: v for k, v in got.items() if k[0] == "agent_cycles_total"}
    assert {reason: n for reason, n in counted.items() if n} == {
        "max_iterations": 2,
        "stalled": 1,
        "held": 4,
        "awaiting_approval": 1,
        "done": 1,
        "budget_exhausted": 2,
        "error": 4,
    }
    assert got[("agent_tokens_total", ())] == 4 * 1000 + 1_000_000  # four replies, then the big one
    assert got[("agent_cost_total", ())] > 1.0  # a million prompt tokens at 1.0 per million, and the rest

    status = run_cli("status", "--home", str(home)).stdout
    [incident] = [line for line in status.splitlines() if line.startswith("incident:")]
    assert "failing since " in incident and "refused the connection" in incident and "4 cycle(s)" in incident
