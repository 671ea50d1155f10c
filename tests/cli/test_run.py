"""`agent run`: configuration and model selection errors, what it prints on and off a
terminal, and a lean start-up."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest

from agent.config import load_settings
from agent.store.db import probe
from agent.store.home import Home
from tests.cli.helpers import ANSI, DONE_REPLIES, done, echo, run_cycle
from tests.helpers import read_yaml, run_cli, tree_digest, write_active, write_script
from tests.models.openai_server import OpenAIServer, Reply, Request

# --------------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "config, fragment",
    [
        ("max_iteration: 5\n", "unknown key 'max_iteration': did you mean 'max_iterations'?"),
        ("zzz_nothing_like_it: 5\n", "unknown key 'zzz_nothing_like_it' (known keys: "),
        ("max_iterations: lots\n", "setting 'max_iterations' must be an integer"),
        ("max_iterations: 0\n", "'max_iterations' must be greater than 0"),
        ("shell_policy: everything\n", "'shell_policy' must be one of auto, sandbox, allowlist, any, off"),
        ("api_key: sk-123\n", "never put the API key in the config file"),
        ("- a list\n", "must be a mapping of settings"),
        ("model: [unclosed\n", "invalid YAML"),
        ("extra_headers: {X-Team: 5}\n", "'extra_headers.X-Team' must be a string"),
        ("lock_wait: .nan\n", "'lock_wait' must be a finite number"),
        ("time_budget: .inf\n", "'time_budget' must be a finite number"),
        ("keep_days: 1.0e+10\n", "'keep_days' must be at most 36500"),
        ("lock_wait: -1\n", "'lock_wait' must be 0 or more"),
    ],
)
def test_bad_config_exits_2_naming_the_key_and_writes_nothing(home, tmp_path, config, fragment):
    (home / "config.yaml").write_text(config)
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, DONE_REPLIES)}")
    assert result.exit_code == 2
    assert fragment in result.stderr
    assert tree_digest(home) == digest


def test_flags_override_environment_which_overrides_config(home, tmp_path):
    (home / "config.yaml").write_text("model: scripted:from-config.yaml\nmax_iterations: 4\n")
    assert load_settings(home, env={}).model == "scripted:from-config.yaml"
    assert load_settings(home, env={"AGENT_MODEL": "scripted:env.yaml"}).model == "scripted:env.yaml"
    assert (
        load_settings(home, env={"AGENT_MODEL": "scripted:env.yaml"}, model="scripted:flag.yaml").model
        == "scripted:flag.yaml"
    )
    assert load_settings(home, env={}).max_iterations == 4


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["--model", "telepathy:gpt"], 2, "unknown model provider 'telepathy'"),
        (["--model", "openai:gpt-4o-mini"], 2, "OPENAI_API_KEY"),
        (["--model", "openai:"], 2, "needs a model name"),
        (["--model", "scripted:/no/such/file.yaml"], 2, "scripted model file not found"),
        (["--model", "local:/no/such/model.gguf"], 2, "not found"),
        (["--max-iterations", "0", "--model", "scripted:x"], 2, "0 is not in the range"),
    ],
)
def test_bad_model_or_flag_exits_2_before_anything_is_written(home, args, code, fragment):
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), *args)
    assert result.exit_code == code
    assert fragment in result.stderr
    assert tree_digest(home) == digest
    assert not (home / "logs").exists() or not list((home / "logs").iterdir())


def test_scripted_file_that_is_not_a_list_exits_2(home, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text("tool: done\n")
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 2 and "must hold a YAML list" in result.stderr


def test_missing_home_exits_2(tmp_path):
    result = run_cli("run", "--home", str(tmp_path / "absent"), "--model", "scripted:x")
    assert result.exit_code == 2 and "does not exist" in result.stderr


def test_scripted_replay_restarts_at_the_first_reply_every_cycle(home, tmp_path):
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": "first"}}, *DONE_REPLIES])
    for _ in range(2):
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    notes = read_yaml(home / "scratchpad/active.yaml")["notes"]
    assert notes.count("-> first") == 2


def test_a_scripted_reply_that_yaml_reads_as_a_date_is_sent_as_text(home, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text("- 2024-01-01\n- {tool: done, args: {summary: on 2024-01-02}}\n")
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0
    assert "[PARSE ERROR]" in read_yaml(home / "scratchpad/active.yaml")["notes"]


# ------------------------------------------------------------------------------------ run output


def test_run_off_a_terminal_prints_plain_lines(home):
    result = run_cycle(home, [echo("hello"), done("said it")])
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cycle ") and "[TOOL] echo" in lines[1] and "[COMPLETED] said it" in lines[2]
    assert lines[3].startswith("cycle ") and " done after 2 iteration(s)" in lines[3]
    assert ANSI not in result.output and "\r" not in result.output


def test_run_quiet_prints_nothing_but_a_failure(home):
    ok = run_cycle(home, [done("x")], "--quiet")
    assert ok.exit_code == 0 and ok.output == ""
    failed = run_cycle(home, [], "--quiet")
    assert failed.exit_code == 4 and failed.stdout == ""
    assert "failed: the script has only 0 replies" in failed.stderr and "logs/cycle_" in failed.stderr


def test_run_on_a_terminal_shows_live_progress(home, tmp_path):
    script = write_script(tmp_path, [echo("hi"), done("ok")], name="tty.yaml")
    main_fd, child_fd = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}
    env.update(TERM="xterm", COLUMNS="120")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent", "run", "--home", str(home), "--model", f"scripted:{script}"],
        stdin=child_fd,
        stdout=child_fd,
        stderr=child_fd,
        env=env,
        close_fds=True,
    )
    os.close(child_fd)
    chunks = []
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0
    out = b"".join(chunks).decode("utf-8", errors="replace")
    assert ANSI in out and "[TOOL] echo" in out and "[COMPLETED] ok" in out
    assert "\x1b[?25h" in out  # the cursor is shown again when the live display stops


# ------------------------------------------------------------------------------------- start-up


# What a plain scripted cycle (no budget, nothing parked, no recall call, no command run, no hook,
# no metrics file, a rules.md of its own) must not import: heavy libraries, the standard library's
# slow or unneeded corners, and the features it does not use. sqlite3 is not among them: every
# cycle writes its records to logs/agent.db (its import is measured in docs/measurements.md); the
# upgrade from an older release's files is, once done.
NOT_IMPORTED_BY_A_PLAIN_CYCLE = {
    "openai",
    "rich",
    "llama_cpp",
    "httpx",
    "pydantic",
    "mcp",
    "mcp_types",
    "anyio",
    "ctypes",
    "logging",
    "socket",
    "subprocess",
    "selectors",
    "shutil",
    "tempfile",
    "asyncio",
    "importlib.metadata",  # entry points (tools, providers) are read without it: agent/common/entry_points.py
    "email",
    "agent.models.local.model",
    "agent.models.local.runtime",
    "agent.models.local.guidance",
    "agent.models.openai.compat",
    "agent.models.openai.client_log",
    "agent.store.upgrade",
    "agent.gates.approvals",
    "agent.gates.budgets",
    "agent.after.hooks",
    "agent.after.metrics",
    "agent.after.health",  # judged after a cycle only for a metrics file or a hook
    "agent.common.schedule",
    "cronsim",
    "zoneinfo",
    "statistics",
    "agent.tools.mcp",
    "agent.memory.sections",
    "agent.memory.section_edits",
    "agent.memory.section_settle",
    "agent.memory.section_block",
    "agent.memory.section_archive",
    "agent.memory.consolidation",
    "agent.memory.reflect",  # only a cycle that reflects
    "fractions",
    "jinja2",  # agent report's page, and what it shows: never a cycle's
    "markupsafe",
    "agent.cli.report",
    "agent.cli.fleet",
    "agent.cli.health",
    "agent.cli.window",
    "agent.cli.page",
    "opentelemetry",  # traces: only with otel: true (agent/after/traces.py), sent after the lock
    "google",  # protobuf, the OTLP exporter's
    "requests",
    "urllib3",
    "agent.after.traces",
}


# What a plain openai: cycle (the same, on an endpoint that takes native tool calls) must not
# import: the openai client needs httpx, pydantic, logging, sockets and the rest, but nothing
# else heavy; and the other providers' code stays off its path.
NOT_IMPORTED_BY_AN_OPENAI_CYCLE = {
    "rich",
    "llama_cpp",
    "mcp",
    "mcp_types",
    "ctypes",
    "agent.models.local.model",
    "agent.models.local.runtime",
    "agent.models.local.cache",
    "agent.models.local.threads",
    "agent.models.local.worker",
    "agent.models.local.child",
    "agent.models.scripted",
    "agent.store.upgrade",
    "agent.gates.approvals",
    "agent.gates.budgets",
    "agent.after.hooks",
    "agent.after.metrics",
    "agent.after.health",
    "cronsim",
    "agent.tools.mcp",
}


def modules_a_cycle_loads(home, *flags: str, env: dict | None = None) -> set[str]:
    """The modules a fresh `agent run` process has loaded when it exits, after one cycle on a task
    (a cycle with nothing to do would call no model), which must end with done."""
    write_active(home, {"goals": ["g"], "current_task": "say hi", "pending_actions": []})
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['agent', 'run', '--home', {str(home)!r}, '--json', *{list(flags)!r}]\n"
        "from agent.cli import entry\n"
        "entry()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    report, loaded = proc.stdout.split("LOADED ", 1)
    assert json.loads(report)["stop_reason"] == "done"  # the probe saw a real cycle, not an idle one
    return set(json.loads(loaded))


def test_a_scripted_cycle_imports_only_what_it_uses(home, tmp_path):
    script = write_script(tmp_path, [echo("hi"), done("ok")])
    assert run_cli("init", str(home)).exit_code == 0  # rules.md of its own, as every real home has
    # A home's first cycle probes the shell sandbox once (remembered in logs/agent.db): the
    # cycles cron runs after it are the ones measured.
    write_active(home, {"goals": ["g"], "current_task": "say hi", "pending_actions": []})
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    assert probe(Home.at(home), "sandbox")["identity"]
    loaded = modules_a_cycle_loads(home, "--model", f"scripted:{script}")
    assert not {
        name
        for name in loaded
        if name.split(".")[0] in NOT_IMPORTED_BY_A_PLAIN_CYCLE or name in NOT_IMPORTED_BY_A_PLAIN_CYCLE
    }


def test_an_openai_cycle_imports_only_what_it_uses(home):
    def answer(request: Request) -> Reply:  # done, as a native call when tools are offered
        return Reply.calls(("done", {"summary": "ok"})) if request.tools else Reply.chat(done("ok"))

    with OpenAIServer(default=answer) as server:
        assert run_cli("init", str(home)).exit_code == 0
        with (home / "config.yaml").open("a") as config:
            config.write(f"model: openai:test-model\nbase_url: {server.base_url}\n")
        # the first cycle probes the sandbox and the endpoint's format (both remembered in logs/)
        write_active(home, {"goals": ["g"], "current_task": "say hi", "pending_actions": []})
        assert run_cli("run", "--home", str(home)).exit_code == 0
        assert probe(Home.at(home), "endpoint")["response_format"] == "tool_calls"
        env = {k: v for k, v in os.environ.items() if k not in ("AGENT_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
        loaded = modules_a_cycle_loads(home, env=env)
    assert {"openai", "agent.models.openai.compat", "agent.cycle.run"} <= loaded
    assert not {
        name
        for name in loaded
        if name.split(".")[0] in NOT_IMPORTED_BY_AN_OPENAI_CYCLE or name in NOT_IMPORTED_BY_AN_OPENAI_CYCLE
    }


def test_a_cycle_that_uses_a_feature_imports_it(home, tmp_path):
    """The other side of the list above: laziness must not lose a feature (each is exercised for real elsewhere)."""
    script = write_script(tmp_path, [echo("hi"), done("ok")])
    assert run_cli("init", str(home)).exit_code == 0
    (home / "config.yaml").write_text(
        "daily_token_budget: 100000\napproval_required: [shell]\nmetrics_file: agent.prom\non_cycle_end: [/bin/true]\n"
    )
    probe = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: print('LOADED', json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['agent', 'run', '--home', {str(home)!r}, '--model', 'scripted:{script}']\n"
        "from agent.cli import entry\n"
        "entry()\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.split("LOADED ", 1)[1]))
    assert {
        "agent.gates.budgets",
        "agent.gates.approvals",
        "agent.after.metrics",
        "agent.after.hooks",
        "subprocess",
    } <= loaded
    assert (home / "agent.prom").exists()
