"""Choosing the model: settings.model -> a checked model, relative file paths found in the home."""

from __future__ import annotations

from pathlib import Path

import pytest

import agent.models.local.model
from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.models import ScriptedModel, resolve_model
from agent.models.local.model import LocalModel
from agent.models.openai.compat import OpenAIModel
from agent.models.resolve import anchor_model_path
from tests.helpers import run_cli, write_script

DONE = {"tool": "done", "args": {"summary": "ok"}}


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The command runs from a directory that is not the home (as under cron or systemd)."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_a_relative_scripted_path_is_found_in_the_home_not_the_current_directory(home, elsewhere):
    write_script(home, ["from the home"], name="replies.yaml")
    write_script(elsewhere, ["from the current directory"], name="replies.yaml")

    model = resolve_model(Settings(model="scripted:replies.yaml"), home, {})

    assert isinstance(model, ScriptedModel) and model.replies == ["from the home"]


def test_a_relative_local_path_is_found_in_the_home_not_the_current_directory(home, elsewhere, monkeypatch):
    monkeypatch.setattr(agent.models.local.model, "local_runtime_installed", lambda: True)
    (home / "models").mkdir()
    (home / "models" / "tiny.gguf").write_bytes(b"GGUF")

    model = resolve_model(Settings(model="local:models/tiny.gguf"), home, {})

    assert isinstance(model, LocalModel) and model.path == home / "models" / "tiny.gguf"
    with pytest.raises(UsageError, match=f"local model file not found: {home / 'models' / 'other.gguf'}"):
        resolve_model(Settings(model="local:models/other.gguf"), home, {})


@pytest.mark.parametrize(
    "spec", ["scripted:/abs/replies.yaml", "local:/models/x.gguf", "local", "openai:gpt-4o-mini", "scripted:"]
)
def test_absolute_paths_and_specs_without_a_file_are_not_anchored(home, spec):
    assert anchor_model_path(spec, home) == spec


def test_a_tilde_path_is_expanded_not_anchored_at_the_home(home):
    assert anchor_model_path("scripted:~/replies.yaml", home) == f"scripted:{Path.home() / 'replies.yaml'}"


def test_an_openai_spec_gives_an_openai_model_with_the_key_from_env(home):
    model = resolve_model(Settings(model="openai:tiny"), home, {"OPENAI_API_KEY": "k"})
    assert isinstance(model, OpenAIModel) and model.name == "openai:tiny"


def test_an_unknown_provider_is_a_usage_error_listing_the_providers(home):
    with pytest.raises(UsageError, match="unknown model provider 'claude' .*local, openai, scripted"):
        resolve_model(Settings(model="claude:x"), home, {})


def test_a_relative_model_path_on_the_command_line_is_relative_to_the_current_directory(home, elsewhere):
    write_script(elsewhere, [DONE], name="replies.yaml")
    result = run_cli("run", "--home", str(home), "--model", "scripted:replies.yaml")
    assert result.exit_code == 0, result.output


def test_a_relative_model_path_in_config_yaml_is_found_in_the_home_by_agent_run(home, elsewhere):
    write_script(home, [DONE], name="replies.yaml")
    (home / "config.yaml").write_text("model: scripted:replies.yaml\n")
    result = run_cli("run", "--home", str(home))
    assert result.exit_code == 0, result.output


def test_scripted_without_a_file_is_a_usage_error_with_an_example(home):
    with pytest.raises(UsageError, match="scripted: needs a file, e.g. --model scripted:replies.yaml"):
        resolve_model(Settings(model="scripted:"), home, {})
