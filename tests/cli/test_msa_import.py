"""`agent init DEST --from-msa SRC`: homes laid out as msa's own versions lay them out (sagecontinuum/msa:
config/config.yaml naming scratchpad_path and rules_path, config/rules.md, the memory in scratchpads/
or scratchpad/, templates as active.NAME.yaml in scratchpads/ or config/, bin/ and msa/ beside them)."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import pytest
import yaml

from agent.config import load_settings
from tests.cli.helpers import done, run_cycle
from tests.helpers import read_active, read_yaml, run_cli, tree_digest, write_script
from tests.models.openai_server import OpenAIServer, Reply

# msa's memory after some cycles: {task, summary} entries, a notes log, msa's naive time stamp, a key
# the model kept of its own and a key YAML reads as a date.
MSA_MEMORY = """\
goals:
- Demonstrate the wake/run/sleep cycle
- Log completion to notes
current_task: Write a file called hello.txt with the current timestamp
pending_actions:
- Signal done
completed_tasks:
- task: Run the echo tool with a hello message
  summary: 'Echoed hello, created hello.txt'
- task: Check the disk
  summary: '41% used'
notes: "\\n[TOOL] echo({'message': 'Hello'}) \\u2192 ECHO: Hello\\n[COMPLETED] Echoed hello"
last_updated: '2026-04-09T08:52:11.604151'
status: waiting for the camera
2026-04-09: first light
"""
TEMPLATES = {
    "reset": {"goals": ["Demonstrate the cycle"], "current_task": "Echo a test message", "pending_actions": []},
    "yolo": {
        "goals": ["Detect objects in a collected image and record results"],
        "current_task": "Run yolo_detect on images/sample.jpg and write detections to results/detections.json",
        "pending_actions": ["Signal done"],
    },
    "camera": {"goals": ["Watch the camera"], "current_task": "Take a picture", "pending_actions": ["Describe it"]},
}
RULES = "# MSA Rules & Identity\n\n- Host: {{HOSTNAME}}\n- Working directory: {{WORKING_DIR}}\n- `yolo_detect`\n"
MODEL = "claude-sonnet-4-20250514"
# The layouts msa's versions have: (where the memory is, where the templates are).
LAYOUTS = {
    "scratchpads": ("scratchpads/active.yaml", "scratchpads"),
    "scratchpad": ("scratchpad/active.yaml", "config"),
}


def msa_home(root: Path, config: str, layout: str = "scratchpads") -> Path:
    """An msa checkout as msa's own files lay it out, with its memory, rules and three templates."""
    memory, templates = LAYOUTS[layout]
    (root / "config").mkdir(parents=True)
    (root / "config" / "config.yaml").write_text(config)
    (root / "config" / "rules.md").write_text(RULES)
    (root / memory).parent.mkdir(exist_ok=True)
    (root / memory).write_text(MSA_MEMORY)
    for name, state in TEMPLATES.items():
        full = {**state, "completed_tasks": [], "notes": "", "last_updated": None}
        (root / templates / f"active.{name}.yaml").write_text(yaml.safe_dump(full, sort_keys=False))
    for part in ("bin/reset.sh", "bin/run.sh", "msa/__init__.py", "msa/agent.py", "requirements.txt"):
        (root / part).parent.mkdir(exist_ok=True)
        (root / part).write_text(f"# msa's {part}\n")
    return root


def msa_config(
    backend: str = "anthropic", scheduler: str = "scheduler: {mode: interval, interval_seconds: 600}", **model
) -> str:
    lines = ["# MSA Configuration", "", "model:", f"  backend: {backend}", f"  model: {MODEL}", "  max_tokens: 2048"]
    lines += [f"  {key}: {value}" for key, value in model.items()]
    return "\n".join(
        [*lines, "", "scratchpad_path: {memory}", "rules_path: config/rules.md", "max_iterations: 7", scheduler, ""]
    )


def expected_memory() -> dict:
    """msa's memory as YAML reads it, its one non-string key converted."""
    data = yaml.safe_load(MSA_MEMORY)
    data["2026-04-09"] = data.pop(_dt.date(2026, 4, 9))
    return data


def import_msa(tmp_path: Path, config: str, layout: str = "scratchpads", env: dict | None = None):
    src = msa_home(tmp_path / "msa", config.replace("{memory}", LAYOUTS[layout][0]), layout)
    before = tree_digest(src)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src), env=env)
    assert result.exit_code == 0, result.output
    return src, before, tmp_path / "home", result


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_field_and_entry_of_msa_memory_comes_over(tmp_path: Path, layout: str):
    _, _, home, _ = import_msa(tmp_path, msa_config(), layout)
    assert read_active(home) == expected_memory()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_msa_templates_become_reset_templates(tmp_path: Path, layout: str):
    _, _, home, result = import_msa(tmp_path, msa_config(), layout)
    assert sorted(p.name for p in (home / "templates").iterdir()) == ["camera.yaml", "reset.yaml", "yolo.yaml"]
    assert run_cli("reset", "--home", str(home), "--template", "yolo").exit_code == 0
    assert read_active(home)["current_task"] == TEMPLATES["yolo"]["current_task"]
    assert "`agent reset --template yolo`" in result.stdout


def test_rules_come_over_as_they_are(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config())
    assert (home / "rules.md").read_text() == RULES
    assert "{{HOSTNAME}} and {{WORKING_DIR}} are not filled in here" in result.stdout


def test_anthropic_backend_becomes_the_openai_provider_at_anthropics_endpoint(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config())
    settings = load_settings(home)
    assert (settings.model, settings.base_url, settings.api_key_env) == (
        f"openai:{MODEL}",
        "https://api.anthropic.com/v1/",
        "ANTHROPIC_API_KEY",
    )
    assert (settings.max_output_tokens, settings.max_iterations, settings.model_keys) == (2048, 7, True)
    assert read_yaml(home / "config.yaml")["idle"] == "plan"  # the tests' AGENT_IDLE=run overrides it here
    assert "-> idle: plan" in result.stdout and "-> model_keys: true" in result.stdout


@pytest.mark.parametrize(
    ("backend", "base_url", "expected"),
    [
        ("vllm", None, "http://localhost:8000/v1"),
        ("vllm", "http://gpu:8000/v1", "http://gpu:8000/v1"),
        ("ollama", None, "http://localhost:11434/v1"),
        ("ollama", "http://box:11434/api/generate", "http://box:11434/v1"),
    ],
)
def test_vllm_and_ollama_become_their_v1_endpoints(tmp_path: Path, backend: str, base_url: str | None, expected: str):
    config = msa_config(backend, **({"base_url": base_url} if base_url else {}))
    _, _, home, _ = import_msa(tmp_path, config)
    settings = load_settings(home)
    assert (settings.model, settings.base_url, settings.api_key_env) == (f"openai:{MODEL}", expected, "OPENAI_API_KEY")


def test_a_config_with_keys_missing_takes_msas_defaults(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, "scratchpad_path: {memory}\n")
    settings = load_settings(home)
    assert (settings.model, settings.max_output_tokens, settings.max_iterations) == (f"openai:{MODEL}", 1024, 5)
    assert "max_iterations: 5 (msa's default) -> max_iterations: 5" in result.stdout
    assert "scheduler: interval every 300 s (msa's default) -> a crontab line; schedule: '*/5 * * * *'" in result.stdout


def test_interval_scheduler_prints_a_crontab_line_and_a_schedule(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config())
    line = next(line for line in result.stdout.splitlines() if line.startswith("crontab line"))
    assert line.split(": ", 1)[1].startswith("*/10 * * * * ") and f"run --home {home} --quiet --wait 30" in line
    assert "schedule: '*/10 * * * *'" in (home / "config.yaml").read_text()


def test_file_watch_becomes_a_link_safe_wake_when(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config(scheduler="scheduler: {mode: file_watch}"))
    command = load_settings(home).wake_when
    assert command[:2] == ["sh", "-c"] and command[2].startswith("find -P ./tmp -maxdepth 1 -type f -name msa_trigger")
    assert " ls " not in command[2]
    assert "* * * * * " in result.stdout  # every minute: the trigger is looked for on each tick


def test_file_watch_wakes_once_per_trigger_and_never_through_a_link(tmp_path: Path):
    _, _, home, _ = import_msa(tmp_path, msa_config(scheduler="scheduler: {mode: file_watch}"))
    script = write_script(tmp_path, [done("woken")])
    (home / "tmp").mkdir()
    (home / "tmp" / "msa_trigger").symlink_to(home / "rules.md")  # a link is never a trigger
    assert (
        json.loads(run_cli("run", "--home", str(home), "--model", f"scripted:{script}", "--json").stdout)["stop_reason"]
        == "idle"
    )
    (home / "tmp" / "msa_trigger").unlink()
    (home / "tmp" / "msa_trigger").touch()
    assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    assert not (home / "tmp" / "msa_trigger").exists()  # consumed, as msa deleted it
    assert "[WAKE] wake_when: triggered: tmp/msa_trigger" in read_yaml(home / "scratchpad" / "active.yaml")["notes"]


def test_slack_is_said_to_have_no_equivalent_with_the_reason(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config(scheduler="scheduler: slack"))
    line = next(line for line in result.stdout.splitlines() if "scheduler: slack" in line)
    assert "no equivalent" in line and "exits" in line
    assert "crontab line" not in result.stdout and load_settings(home).wake_when is None


def test_tools_turned_off_in_msa_are_disabled(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config() + "tools:\n  shell: false\n  echo: true\n")
    assert load_settings(home).tools_disabled == ["shell"]
    assert "yolo_detect has no built-in here: provide it as a plugin" in result.stdout


def test_an_api_key_in_msas_config_is_never_copied(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config(api_key="sk-ant-in-the-config-0123456789"))
    assert "sk-ant-in-the-config" not in (home / "config.yaml").read_text() + result.stdout
    assert "model.api_key: not copied" in result.stdout


def test_every_translated_key_gets_a_line_and_the_last_is_the_next_command(tmp_path: Path):
    _, _, home, result = import_msa(tmp_path, msa_config() + "tools: {shell: false}\nlog_level: debug\n")
    said = [line.split(":")[0] for line in result.stdout.splitlines() if line.startswith("config ")]
    for key in ("config model.backend", "config model.max_tokens", "config max_iterations", "config tools"):
        assert key in said
    assert "config log_level: not translated: msa does not read it" in result.stdout
    assert result.stdout.splitlines()[-1].startswith(("next: agent", "then: agent"))


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_one_cycle_runs_on_a_scripted_model_and_src_is_unchanged(tmp_path: Path, layout: str):
    src, before, home, _ = import_msa(tmp_path, msa_config(), layout)
    assert run_cycle(home, [done("wrote hello.txt")]).exit_code == 0
    state = read_active(home)
    assert state["completed_tasks"][-1] == {"task": expected_memory()["current_task"], "summary": "wrote hello.txt"}
    assert tree_digest(src) == before


def _stub_cycle(home: Path, server: OpenAIServer, env: dict) -> None:
    result = run_cli("run", "--home", str(home), env=env)
    assert result.exit_code == 0, result.output
    chat = server.chat_requests
    assert chat and {r.path for r in chat} == {"/v1/chat/completions"}
    assert {r.body["model"] for r in chat} == {MODEL}


def test_an_anthropic_home_sends_its_model_and_anthropic_key_to_the_chat_endpoint(tmp_path: Path):
    src, before, home, _ = import_msa(tmp_path, msa_config())
    with OpenAIServer(default=Reply.chat(done("ok"))) as server:
        _stub_cycle(home, server, {"OPENAI_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-ant-stub-0123456789"})
    assert {r.headers["authorization"] for r in server.chat_requests} == {"Bearer sk-ant-stub-0123456789"}
    assert tree_digest(src) == before


@pytest.mark.parametrize(("backend", "path"), [("vllm", "/v1"), ("ollama", "/api/generate")])
def test_a_local_backend_home_talks_to_its_server_at_v1(tmp_path: Path, backend: str, path: str):
    with OpenAIServer(default=Reply.chat(done("ok"))) as server:
        root = server.base_url.removesuffix("/v1")
        src, before, home, _ = import_msa(tmp_path, msa_config(backend, base_url=root + path))
        assert load_settings(home).base_url == server.base_url
        _stub_cycle(home, server, {"OPENAI_API_KEY": "sk-local-stub-0123456789"})
    assert {r.headers["authorization"] for r in server.chat_requests} == {"Bearer sk-local-stub-0123456789"}
    assert tree_digest(src) == before


# ------------------------------------------------------------------------------------ refusals


def test_a_folder_that_is_not_an_msa_home_is_refused_in_one_line(tmp_path: Path):
    (tmp_path / "src" / "config").mkdir(parents=True)
    (tmp_path / "src" / "config" / "config.yaml").write_text("colour: blue\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(tmp_path / "src"))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "is not an msa home" in result.stderr and not (tmp_path / "home").exists()


def test_a_dest_that_already_holds_a_home_is_refused_and_kept(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    assert run_cli("init", str(tmp_path / "home")).exit_code == 0
    before = tree_digest(tmp_path / "home")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "already holds a home" in result.stderr and tree_digest(tmp_path / "home") == before


def test_msa_memory_that_is_not_yaml_is_refused_and_nothing_made(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (src / "scratchpads" / "active.yaml").write_text("goals: [unclosed\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 6 and "Traceback" not in result.output
    assert not (tmp_path / "home").exists()


# ---------------------------------------------------------------- msa-shaped folders are named


def test_an_msa_folder_is_named_by_a_command_and_no_plain_init_is_offered(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    result = run_cli("status", "--home", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert f"this looks like an msa home: `agent init NEW --from-msa {src}`" in result.stderr
    assert "`agent init " + str(src) not in result.stderr


def test_an_older_msa_checkout_with_a_scratchpad_folder_is_named_too(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpad/active.yaml"), "scratchpad")
    result = run_cli("tools", "--home", str(src))
    assert result.exit_code == 0  # it passes as a home, as it always did
    assert result.stderr.count("this looks like an msa home") == 1


def test_plain_init_in_an_msa_folder_is_refused(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpad/active.yaml"), "scratchpad")
    before = tree_digest(src)
    result = run_cli("init", str(src))
    assert result.exit_code == 2 and "--from-msa" in result.stderr and len(result.stderr.splitlines()) == 1
    assert tree_digest(src) == before


# -------------------------------------------------------------------- what msa's prompts meet


def test_a_key_of_the_models_own_is_kept_in_an_imported_home(tmp_path: Path):
    _, _, home, _ = import_msa(tmp_path, msa_config())
    update = {"tool": "update_scratchpad", "args": {"status": "camera found", "seen": {"cats": 2}}}
    assert run_cycle(home, [update, done("ok")]).exit_code == 0
    state = read_active(home)
    assert (state["status"], state["seen"]) == ("camera found", {"cats": 2})
    shown = run_cli("show", "--home", str(home)).stdout
    assert 'status: "camera found"' in shown
    assert "other fields changed: seen, status" in run_cli("diff", "--home", str(home)).stdout


def test_a_key_of_the_models_own_is_refused_elsewhere_naming_the_setting(home: Path):
    (home / "scratchpad" / "active.yaml").write_text(yaml.safe_dump({"current_task": "t"}))
    update = {"tool": "update_scratchpad", "args": {"status": "x"}}
    assert run_cycle(home, [update, done("ok")]).exit_code == 0
    notes = read_active(home)["notes"]
    assert "unexpected argument 'status'" in notes and "model_keys" in notes
    assert "status" not in read_active(home)


def test_a_key_of_the_models_own_is_bounded_like_a_field(tmp_path: Path):
    _, _, home, _ = import_msa(tmp_path, msa_config())
    with (home / "config.yaml").open("a") as config:
        config.write("max_reply_bytes: 200000\n")  # a reply that large is read, so the key's own bound is met
    update = {"tool": "update_scratchpad", "args": {"log": "x" * 70_000}}
    assert run_cycle(home, [update, done("ok")]).exit_code == 0
    state = read_active(home)
    assert "log" not in state and "over the 65,536-byte limit for one field" in state["notes"]


def test_a_runtime_key_is_never_the_models_even_in_an_imported_home(tmp_path: Path):
    _, _, home, _ = import_msa(tmp_path, msa_config())
    update = {"tool": "update_scratchpad", "args": {"checks": {"t": "true"}}}
    assert run_cycle(home, [update, done("ok")]).exit_code == 0
    assert "checks" not in read_active(home) and "set by the runtime" in read_active(home)["notes"]


def test_an_msa_config_that_is_not_yaml_is_refused_in_one_line_and_nothing_made(tmp_path: Path):
    src = msa_home(tmp_path / "msa", "model: [unclosed\n")
    before = tree_digest(src)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1 and "invalid YAML" in result.stderr
    assert not (tmp_path / "home").exists() and tree_digest(src) == before


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("max_iterations: lots\n", "config max_iterations: lots: not translated: setting 'max_iterations' must be"),
        ("model: claude\n", "config model: not translated: msa's model must be a mapping"),
        ("model: {backend: bedrock}\n", "config model.backend: not translated: msa has no backend 'bedrock'"),
        (
            "scheduler: {interval_seconds: -5}\n",
            "config scheduler: not translated: interval_seconds must be a positive",
        ),
    ],
)
def test_a_value_that_cannot_be_translated_is_said_and_the_config_still_loads(tmp_path: Path, config: str, said: str):
    _, _, home, result = import_msa(tmp_path, config + "scratchpad_path: {memory}\n")
    assert said in result.stdout
    load_settings(home)  # never a config.yaml that does not load


def test_the_import_as_json_lists_what_it_said_and_the_next_commands(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src), "--json")
    data = json.loads(result.stdout)
    assert data["from"] == str(src) and data["next"] and data["crontab"][0].startswith("*/10 * * * * ")
    assert any(line.startswith("config model.backend: anthropic") for line in data["said"])


def test_reset_in_an_msa_folder_is_refused_and_msas_memory_kept(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpad/active.yaml"), "scratchpad")
    before = tree_digest(src)
    result = run_cli("reset", "--home", str(src), "--template", "yolo")
    assert result.exit_code == 2 and "--from-msa" in result.stderr and len(result.stderr.splitlines()) == 1
    assert tree_digest(src) == before


def test_values_msa_kept_that_are_not_text_come_over_as_their_text(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    memory = "goals: [1, watch]\ncurrent_task: 42\ncompleted_tasks:\n- {task: count, count: 3, seen: [a, b]}\n- 7\n"
    (src / "scratchpads" / "active.yaml").write_text(memory)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    state = read_active(tmp_path / "home")
    assert (state["goals"], state["current_task"]) == (["1", "watch"], "42")
    assert state["completed_tasks"] == [{"task": "count", "count": "3", "seen": '["a", "b"]'}, "7"]
    assert "memory: completed_tasks[0].count: 3 (a number) became text" in result.stdout


@pytest.mark.parametrize(
    ("seconds", "cron"),
    [
        (300, "*/5 * * * *"),
        (45, "* * * * *"),
        (90, "* * * * *"),
        (90 * 60, "0 * * * *"),
        (420, "*/6 * * * *"),
        (3600, "0 * * * *"),
        (5 * 3600, "0 */4 * * *"),
        (86400, "0 0 * * *"),
        (3 * 86400, "0 0 * * *"),
    ],
)
def test_msas_interval_becomes_the_nearest_cron_step_at_least_as_often(seconds: int, cron: str):
    from agent.cli.msa_import import every_seconds_as_cron

    assert every_seconds_as_cron(seconds)[0] == cron


@pytest.mark.parametrize("seconds", [0, -5, float("nan"), float("inf"), "often", True])
def test_an_interval_that_is_not_a_positive_number_is_not_translated(seconds):
    from agent.cli.msa_import import every_seconds_as_cron

    with pytest.raises(ValueError, match="must be a positive number"):
        every_seconds_as_cron(seconds)


def test_another_programs_config_folder_is_no_msa_home(tmp_path: Path):
    (tmp_path / "home" / "config").mkdir(parents=True)
    (tmp_path / "home" / "config" / "config.yaml").write_text("model: gpt-4o\nmax_iterations: 3\n")
    assert run_cli("init", str(tmp_path / "home")).exit_code == 0
    assert "msa" not in run_cli("status", "--home", str(tmp_path / "home")).stderr


def test_a_key_of_msas_memory_the_runtime_reads_as_its_own_is_renamed_not_read(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (src / "scratchpads" / "active.yaml").write_text("current_task: t\nchecks: {t: 'rm -rf x'}\nmsa_checks: kept\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    state = read_active(tmp_path / "home")
    assert "checks" not in state and state["msa_checks_2"] == {"t": "rm -rf x"} and state["msa_checks"] == "kept"
    assert "memory: key 'checks' renamed 'msa_checks_2'" in result.stdout


# ------------------------------------------------------------- SRC is untrusted: only its own files


def _secret_outside(tmp_path: Path) -> Path:
    secret = tmp_path / "operator" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    return secret


@pytest.mark.parametrize("file", ["config/rules.md", "scratchpads/active.yaml", "config/config.yaml"])
def test_an_msa_file_linked_outside_the_msa_home_is_refused_and_nothing_made(tmp_path: Path, file: str):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    secret = _secret_outside(tmp_path)
    (src / file).unlink()
    (src / file).symlink_to(secret)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.output
    assert "outside the msa home" in result.stderr and not (tmp_path / "home").exists()


@pytest.mark.parametrize("key", ["rules_path", "scratchpad_path"])
def test_a_path_msas_config_names_outside_the_msa_home_is_refused(tmp_path: Path, key: str):
    _secret_outside(tmp_path)
    config = msa_config().replace("{memory}", "scratchpads/active.yaml")
    config = "\n".join(
        f"{key}: ../operator/.ssh/id_rsa" if line.startswith(key) else line for line in config.splitlines()
    )
    src = msa_home(tmp_path / "msa", config)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and "outside the msa home" in result.stderr, result.output
    assert not (tmp_path / "home").exists()


def test_a_template_linked_outside_the_msa_home_is_left_out_said(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("goals: [from outside]\n")
    (src / "scratchpads" / "active.stolen.yaml").symlink_to(outside)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert "active.stolen.yaml: left out: it leads to" in result.stdout
    assert not (tmp_path / "home" / "templates" / "stolen.yaml").exists()


def test_a_link_inside_the_msa_home_is_followed(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (src / "config" / "rules.v2.md").write_text("# the rules, moved\n")
    (src / "config" / "rules.md").unlink()
    (src / "config" / "rules.md").symlink_to("rules.v2.md")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "home" / "rules.md").read_text() == "# the rules, moved\n"


def test_a_template_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path):
    import os

    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    os.mkfifo(src / "scratchpads" / "active.pipe.yaml")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 6 and "named pipe" in result.stderr, result.output
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("flags", [(), ("--json",)])
def test_a_password_in_msas_base_url_is_never_printed_and_kept_in_config(tmp_path: Path, flags: tuple):
    config = msa_config("vllm", base_url="http://msa:hunter2-long-password@gpu.example:8000/v1")
    src = msa_home(tmp_path / "msa", config.replace("{memory}", "scratchpads/active.yaml"))
    result = run_cli("init", str(tmp_path / "home"), *flags, "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output and "http://gpu.example:8000/v1" in result.output
    assert "never printed" in result.output
    settings = load_settings(tmp_path / "home")
    assert settings.base_url == "http://msa:hunter2-long-password@gpu.example:8000/v1"


def test_a_password_in_a_base_url_the_anthropic_backend_ignores_is_never_printed(tmp_path: Path):
    config = msa_config("anthropic", base_url="https://msa:hunter2-long-password@proxy.example/v1")
    src = msa_home(tmp_path / "msa", config.replace("{memory}", "scratchpads/active.yaml"))
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0 and "hunter2" not in result.output, result.output
    assert "https://proxy.example/v1" in result.output


# ------------------------------------------------------- the msa line: once a command, once under --quiet


def older_checkout(tmp_path: Path) -> Path:
    """An older msa checkout that passes as a home, its memory one this runtime reads, a task queued."""
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpad/active.yaml"), "scratchpad")
    (src / "scratchpad" / "active.yaml").write_text("goals: [watch]\ncurrent_task: look\n")
    return src


def test_the_msa_line_is_said_once_by_a_command_that_looks_at_the_home_twice(tmp_path: Path):
    src = older_checkout(tmp_path)
    result = run_cli("approve", "--home", str(src), "1")  # reads the home for its secrets, then for the call
    assert result.stderr.count("this looks like an msa home") == 1, result.stderr


def test_under_quiet_the_msa_line_is_mailed_by_the_first_cycle_only(tmp_path: Path):
    src = older_checkout(tmp_path)
    first = run_cycle(src, [done("one")], "--quiet")
    assert first.exit_code == 0 and first.stdout == "", first.output
    assert first.stderr.count("this looks like an msa home") == 1
    run_cli("task", "add", "--home", str(src), "another")
    second = run_cycle(src, [done("two")], "--quiet")
    assert second.exit_code == 0 and second.output == "", second.output  # a done cycle under --quiet mails nothing


def test_without_quiet_every_command_still_says_the_msa_line(tmp_path: Path):
    src = older_checkout(tmp_path)
    assert run_cycle(src, [done("one")], "--quiet").exit_code == 0
    assert "this looks like an msa home" in run_cli("status", "--home", str(src)).stderr


@pytest.mark.parametrize("name", ["\x1b[31mred\x07", "two\nlines", "a b", "\u202eevil"])
def test_a_template_whose_name_has_a_control_character_or_a_space_is_left_out_said(tmp_path: Path, name: str):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (src / "scratchpads" / f"active.{name}.yaml").write_text("goals: [odd]\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert "left out: its name has a control character or a space" in result.stdout
    assert sorted(p.name for p in (tmp_path / "home" / "templates").iterdir()) == sorted(f"{n}.yaml" for n in TEMPLATES)


# ---------------------------------------------------------- what the import says and holds is bounded


def test_what_the_import_says_is_bounded_whatever_msas_config_holds(tmp_path: Path):
    from agent.cli.msa_import import MAX_LINE_CHARS, MAX_LINES_OF_A_KIND

    long_name = "m" * 300_000
    unread = "".join(f"key{n}: 1\n" for n in range(5_000))
    config = msa_config("vllm").replace(MODEL, long_name).replace("{memory}", "scratchpads/active.yaml") + unread
    src = msa_home(tmp_path / "msa", config)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output[:2000]
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= MAX_LINE_CHARS + 40 and len(lines) < 3 * MAX_LINES_OF_A_KIND + 20
    assert "... and 4,980 more keys msa does not read" in result.stdout
    assert load_settings(tmp_path / "home").model == f"openai:{long_name}"  # the setting itself is whole


def test_templates_past_the_limit_are_left_out_said(tmp_path: Path):
    from agent.cli.msa_import import MAX_TEMPLATES

    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    for n in range(MAX_TEMPLATES + 30):
        (src / "scratchpads" / f"active.extra{n:03}.yaml").write_text("goals: [more]\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output[:2000]
    assert len(list((tmp_path / "home" / "templates").iterdir())) == MAX_TEMPLATES
    assert f"the import takes at most {MAX_TEMPLATES}" in result.stdout
    assert "more templates left out" in result.stdout


@pytest.mark.parametrize(
    "trigger",
    ["/home/me/.ssh/id_rsa", "~/.ssh/id_rsa", "../beside/x", "scratchpad/active.yaml", "config.yaml", "tmp/*", "5"],
)
def test_a_trigger_file_the_cycle_must_not_delete_is_not_translated_said(tmp_path: Path, trigger: str):
    scheduler = f"scheduler: {{mode: file_watch, trigger_file: {json.dumps(trigger) if trigger != '5' else 5}}}"
    _, _, home, result = import_msa(tmp_path, msa_config(scheduler=scheduler))
    assert load_settings(home).wake_when is None
    assert "scheduler: file_watch: not translated: trigger_file" in result.stdout


def test_a_path_naming_a_user_there_is_not_is_one_line_not_a_traceback(tmp_path: Path):
    config = msa_config().replace("{memory}", "~no-such-user-here/active.yaml")
    src = msa_home(tmp_path / "msa", config.replace("~no-such-user-here/active.yaml", "scratchpads/active.yaml"))
    (src / "config" / "config.yaml").write_text(config)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.output
    assert "names no folder" in result.stderr and not (tmp_path / "home").exists()


@pytest.mark.parametrize("model", ["{backend: [vllm], model: m}", "{backend: {a: 1}, model: m}"])
def test_a_backend_that_is_not_a_name_is_not_translated_said(tmp_path: Path, model: str):
    src = msa_home(tmp_path / "msa", f"model: {model}\nmax_iterations: 3\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0 and "model.backend: not translated: msa has no backend" in result.stdout


def test_a_base_url_that_is_not_text_is_said_and_msas_default_used(tmp_path: Path):
    src = msa_home(tmp_path / "msa", "model: {backend: vllm, model: m, base_url: [1]}\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0 and "its base_url [1] is not a URL" in result.stdout
    assert load_settings(tmp_path / "home").base_url == "http://localhost:8000/v1"


def test_a_dest_that_is_a_link_to_nothing_is_one_line_naming_the_link(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (tmp_path / "home").symlink_to(tmp_path / "gone")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert f"a link to {tmp_path / 'gone'}, which does not exist" in result.stderr


def test_a_dest_that_is_a_link_to_an_empty_folder_gets_the_home(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (tmp_path / "real").mkdir()
    (tmp_path / "home").symlink_to(tmp_path / "real")
    assert run_cli("init", str(tmp_path / "home"), "--from-msa", str(src)).exit_code == 0
    assert read_active(tmp_path / "real")["current_task"] == expected_memory()["current_task"]


def test_a_dest_that_is_a_folder_of_the_msa_home_is_refused_and_the_msa_home_unchanged(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    before = tree_digest(src)
    result = run_cli("init", str(src / "scratchpads"), "--from-msa", str(src))
    assert result.exit_code == 2 and "is a folder of the msa home" in result.stderr, result.output
    assert tree_digest(src) == before


def test_a_new_folder_inside_the_msa_home_may_be_the_home_as_the_hint_says(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    result = run_cli("init", str(src / "agent-home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert read_active(src / "agent-home")["current_task"] == expected_memory()["current_task"]


def test_the_api_key_of_msas_config_found_in_its_memory_or_rules_comes_over_redacted(tmp_path: Path):
    key = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"
    config = msa_config(api_key=key).replace("{memory}", "scratchpads/active.yaml")
    src = msa_home(tmp_path / "msa", config)
    memory = (src / "scratchpads" / "active.yaml").read_text()
    (src / "scratchpads" / "active.yaml").write_text(memory.replace("status: waiting", f"status: used {key} waiting"))
    (src / "config" / "rules.md").write_text(f"# Rules\nThe key is {key}.\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    home = tmp_path / "home"
    for path in (home / "scratchpad" / "active.yaml", home / "rules.md", home / "config.yaml"):
        assert key not in path.read_text() and key[10:30] not in path.read_text(), path
    assert "[REDACTED]" in read_active(home)["status"] and key not in result.output
    assert "msa's key was in the memory" in result.stdout and "msa's key was in rules.md" in result.stdout


def test_the_keys_of_the_models_own_are_bounded_in_number(tmp_path: Path):
    from agent.cycle.dispatch import MAX_OWN_KEYS

    _, _, home, _ = import_msa(tmp_path, msa_config())
    held = 2  # msa's memory keeps two keys of the model's own: status and a date
    fits = {"tool": "update_scratchpad", "args": {f"k{n}": "v" for n in range(MAX_OWN_KEYS - held)}}
    one_more = {"tool": "update_scratchpad", "args": {"one_more": "v"}}
    assert run_cycle(home, [fits, one_more, done("ok")]).exit_code == 0
    state = read_active(home)
    assert f"k{MAX_OWN_KEYS - held - 1}" in state and "one_more" not in state
    assert f"over {MAX_OWN_KEYS}: set one it has instead" in state["notes"]


@pytest.mark.parametrize("key", ["\x1b[31mred", "current_task ", " goals", "\u202eevil", "a\u2028b"])
def test_a_key_of_the_models_own_that_is_no_plain_name_is_refused(tmp_path: Path, key: str):
    _, _, home, _ = import_msa(tmp_path, msa_config())
    assert run_cycle(home, [{"tool": "update_scratchpad", "args": {key: "x"}}, done("ok")]).exit_code == 0
    state = read_active(home)
    assert key not in state and "is not a name" in state["notes"]


@pytest.mark.parametrize("folder", ["logs", "workspace", "workspace/msa"])
def test_an_msa_home_inside_a_folder_the_new_home_writes_in_is_refused(tmp_path: Path, folder: str):
    src = msa_home(tmp_path / "home" / folder, msa_config().replace("{memory}", "scratchpads/active.yaml"))
    before = tree_digest(src)
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 2 and "a folder the new home writes in" in result.stderr, result.output
    assert tree_digest(src) == before and not (tmp_path / "home" / "scratchpad").exists()


def test_an_msa_home_beside_the_homes_files_in_its_folder_may_come_in(tmp_path: Path):
    src = msa_home(tmp_path / "home" / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    before = tree_digest(src)
    assert run_cli("init", str(tmp_path / "home"), "--from-msa", str(src)).exit_code == 0
    assert tree_digest(src) == before


def test_a_nan_or_infinity_of_the_models_own_is_refused_and_show_json_stays_json(tmp_path: Path):
    _, _, home, _ = import_msa(tmp_path, msa_config())
    reply = '{"tool": "update_scratchpad", "args": {"level": NaN, "seen": {"far": [Infinity]}}}'
    assert run_cycle(home, [reply, done("ok")]).exit_code == 0
    state = read_active(home)
    assert "level" not in state and "seen" not in state and "NaN or Infinity" in state["notes"]
    json.loads(run_cli("show", "--home", str(home), "--json").stdout, parse_constant=_no_constant)


def test_a_nan_or_infinity_in_msas_memory_comes_over_as_its_text(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    memory = (src / "scratchpads" / "active.yaml").read_text()
    (src / "scratchpads" / "active.yaml").write_text(memory + "level: .nan\nrange: {far: [-.inf]}\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0 and "level: .nan (a number) became text" in result.stdout, result.output
    state = read_active(tmp_path / "home")
    assert (state["level"], state["range"]) == (".nan", {"far": ["-.inf"]})
    json.loads(run_cli("show", "--home", str(tmp_path / "home"), "--json").stdout, parse_constant=_no_constant)


def _no_constant(name: str):
    raise AssertionError(f"{name} is not JSON")


def test_binary_and_set_values_of_msas_memory_come_over_as_json_can_say_them(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    memory = (src / "scratchpads" / "active.yaml").read_text()
    (src / "scratchpads" / "active.yaml").write_text(memory + "blob: !!binary aGVsbG8=\ntags: !!set {b, a}\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    state = read_active(tmp_path / "home")
    assert (state["blob"], state["tags"]) == ("aGVsbG8=", ["a", "b"])
    shown = run_cli("show", "--home", str(tmp_path / "home"), "--json").stdout
    assert "b'hello'" not in shown and json.loads(shown)


def test_an_import_into_a_folder_another_holds_is_busy_and_makes_nothing(tmp_path: Path):
    from agent.store.home import Home
    from agent.store.lock import home_lock

    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    (tmp_path / "home").mkdir()
    with home_lock(Home.at(tmp_path / "home")):  # another import (or any command) at work there
        result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 5 and "holds the lock" in result.stderr, result.output
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == [".agent.lock"]


def test_the_msa_line_leaves_json_output_json(tmp_path: Path):
    src = older_checkout(tmp_path)
    result = run_cli("status", "--home", str(src), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)
    assert "this looks like an msa home" in result.stderr and "msa home" not in result.stdout


def test_a_key_that_is_not_text_in_msas_memory_is_named_in_plain_words(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    memory = (src / "scratchpads" / "active.yaml").read_text()
    (src / "scratchpads" / "active.yaml").write_text(memory + "counts: {7: one, true: two}\n")
    result = run_cli("init", str(tmp_path / "home"), "--from-msa", str(src))
    assert result.exit_code == 0, result.output
    assert "memory: counts: key '7' (a number) became text" in result.stdout
    assert "memory: counts: key 'true' (a boolean) became text" in result.stdout
