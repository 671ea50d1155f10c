"""Settings: each field carries its own constraints (agent/config.py `_doc`), and one checker reads them."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from agent.common.outcomes import UsageError
from agent.config import Settings, check, load_settings
from agent.setting_checks import MOST_INTEGER
from tests.helpers import run_cli, tree_digest, write_active, write_script

FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
HINTS = typing.get_type_hints(Settings)
SECONDS = sorted(name for name, f in FIELDS.items() if f.metadata.get("unit") == "seconds")
DONE = {"tool": "done", "args": {"summary": "ok"}}


def _is_number(name: str) -> bool:
    return any(t in (int, float) for t in typing.get_args(HINTS[name]) or (HINTS[name],))


def test_every_timeout_and_every_seconds_setting_is_in_seconds():
    """A field that says it counts seconds, or is named a timeout, carries unit="seconds" (so a day caps it)."""
    for name, f in FIELDS.items():
        says_seconds = "second" in f.metadata["doc"].lower() or name.endswith(("_timeout", "_wait"))
        assert says_seconds == (f.metadata.get("unit") == "seconds"), name
    assert {
        "check_timeout",
        "hook_timeout",
        "mcp_timeout",
        "mcp_start_timeout",
        "request_timeout",
        "time_budget",
        "shell_timeout",
        "http_timeout",
        "lock_wait",
    } <= set(SECONDS)


def test_every_number_setting_has_a_floor():
    for name, f in FIELDS.items():
        if _is_number(name):
            assert "minimum" in f.metadata or "above" in f.metadata, f"{name} has no minimum"


def test_the_defaults_pass_their_own_constraints():
    assert check(Settings()) == Settings()


@pytest.mark.parametrize("name", SECONDS)
def test_a_seconds_setting_past_a_day_exits_2_naming_it_and_writes_nothing(home, tmp_path, name):
    (home / "config.yaml").write_text(f"{name}: 10000000000\n")
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2
    assert f"setting '{name}' must be at most 86400 seconds (a day), got 10000000000" in result.stderr
    assert tree_digest(home) == digest


@pytest.mark.parametrize(
    "config, message",
    [
        ("check_timeout: 0\n", "setting 'check_timeout' must be greater than 0, got 0"),
        ("mcp_start_timeout: -1.5\n", "setting 'mcp_start_timeout' must be greater than 0, got -1.5"),
        ("temperature: 2.5\n", "setting 'temperature' must be between 0 and 2, got 2.5"),
        ("notes_budget: 199\n", "setting 'notes_budget' must be at least 200 characters, got 199"),
        ("keep_days: 40000\n", "setting 'keep_days' must be at most 36500 days, got 40000"),
        ("max_retries: -1\n", "setting 'max_retries' must be 0 or more, got -1"),
        ("http_max_redirects: -1\n", "setting 'http_max_redirects' must be 0 or more, got -1"),
        ("transcript_max_bytes: -5\n", "setting 'transcript_max_bytes' must be 0 or more, got -5"),
        (
            "response_format: xml\n",
            "setting 'response_format' must be one of auto, json_schema, json_object_schema, "
            "json_object, text, got 'xml'",
        ),
        ("shell_max_output: 100000000000000000000\n", f"setting 'shell_max_output' must be at most {MOST_INTEGER}"),
        ("hook_timeout: .nan\n", "setting 'hook_timeout' must be a finite number, got nan"),
    ],
)
def test_a_value_outside_its_fields_constraints_exits_2_with_the_message(home, tmp_path, config, message):
    (home / "config.yaml").write_text(config)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2
    assert message in result.stderr
    assert not (home / "logs").exists()


def test_an_invalid_model_mapping_is_exit_2_even_with_a_model_flag(home, tmp_path):
    (home / "config.yaml").write_text("model:\n  backend: anthropic\n  model: claude-sonnet-4-20250514\n")
    before = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2 and "'model' must be a string or null" in result.stderr
    assert tree_digest(home) == before and not (home / "logs").exists()


def test_a_flag_overrides_a_valid_value_only(home):
    (home / "config.yaml").write_text("max_iterations: 0\n")
    with pytest.raises(UsageError, match="'max_iterations' must be greater than 0"):
        load_settings(home, env={}, max_iterations=4)
    (home / "config.yaml").write_text("max_iterations: 3\n")
    assert load_settings(home, env={}, max_iterations=4).max_iterations == 4


def test_flags_are_checked_like_the_config_file(home):
    with pytest.raises(UsageError, match="'check_timeout' must be at most 86400 seconds"):
        load_settings(home, env={}, check_timeout=1e10)
    with pytest.raises(UsageError, match="'mcp_timeout' must be greater than 0"):
        Settings().replace(mcp_timeout=0.0)


@pytest.mark.parametrize(
    "config, message",
    [
        ("sections: {known: {kind: list, limit: 0}}\n", "setting 'sections.known.limit' must be between 1 and 1000"),
        ("sections: {goals: {kind: list, limit: 5}}\n", "setting 'sections': 'goals' is already a key of active.yaml"),
        ("sections: {inbox_applied: {kind: text, limit: 5}}\n", "'inbox_applied' is already a key of active.yaml"),
        ("sections: {known: {kind: list, limit: 5, when_full: evict}}\n", "'sections.known.when_full' must be one of"),
        ("sections: [known]\n", "setting 'sections' must be a mapping"),
        ("consolidate_max_loss: 1.5\n", "setting 'consolidate_max_loss' must be between 0 and 1, got 1.5"),
    ],
)
def test_a_wrong_section_exits_2_with_one_line_naming_it_and_writes_nothing(home, tmp_path, config, message):
    (home / "config.yaml").write_text(config)
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert tree_digest(home) == digest


def test_a_home_without_sections_has_no_section_specs():
    assert Settings().section_specs == ()
    assert Settings().consolidate_max_loss == 0.25


def test_msas_config_as_a_homes_config_is_told_how_to_import_it(home, tmp_path):
    (home / "config.yaml").write_text("scratchpad_path: scratchpads/active.yaml\nmax_iterations: 5\n")
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, [DONE])}")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "key 'scratchpad_path' is msa's setting" in result.stderr and "--from-msa" in result.stderr


def test_agent_shell_policy_in_the_environment_overrides_the_config_file(tmp_path):
    (tmp_path / "config.yaml").write_text("shell_policy: allowlist\n")
    assert load_settings(tmp_path, env={"AGENT_SHELL_POLICY": "sandbox"}).shell_policy == "sandbox"


def test_a_bad_agent_shell_policy_is_one_line_naming_the_choices(tmp_path):
    from agent.common.outcomes import UsageError

    with pytest.raises(UsageError, match="shell_policy") as refused:
        load_settings(tmp_path, env={"AGENT_SHELL_POLICY": "sandboxx"})
    assert "\n" not in str(refused.value) and "sandbox" in str(refused.value)
