"""reset, init, configuration and model selection: messages, exit codes, and files left alone."""

from __future__ import annotations

import os
import re
import stat
import subprocess

import pytest

from agent import schema
from agent.outcomes import ExitCode
from agent.scratchpad import Home, home_lock
from tests.helpers import REPO, read_yaml, run_agent_process, run_cli, snapshots, tree_digest, write_active, write_script

DONE = [{"tool": "done", "args": {"summary": "ok"}}]


# ---------------------------------------------------------------------------------------- reset

def test_reset_writes_the_default_template(home):
    write_active(home, {"goals": ["old"], "notes": "old notes"})
    result = run_cli("reset", "--home", str(home))
    assert result.exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml") == schema.fresh_state()


def test_reset_with_a_packaged_template(home):
    assert run_cli("reset", "--home", str(home), "--template", "demo").exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml")["current_task"] == "Run the echo tool with a hello message"


def test_reset_prefers_the_homes_own_template(home):
    (home / "templates").mkdir()
    (home / "templates/mine.yaml").write_text("current_task: my own task\n")
    assert run_cli("reset", "--home", str(home), "--template", "mine").exit_code == 0
    assert read_yaml(home / "scratchpad/active.yaml")["current_task"] == "my own task"


def test_reset_clean_removes_snapshots_logs_and_index(home, tmp_path):
    run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, DONE)}")
    assert snapshots(home, "before")
    result = run_cli("reset", "--home", str(home), "--clean")
    assert result.exit_code == 0 and "removed 4" in result.stdout
    assert sorted(p.name for p in (home / "scratchpad").iterdir()) == ["active.yaml"]
    assert list((home / "logs").iterdir()) == []


def test_reset_unknown_template_exits_2_and_changes_nothing(home):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "nope")
    assert result.exit_code == 2 and "no template named 'nope'" in result.stderr
    assert tree_digest(home) == digest


def test_reset_from_an_invalid_template_exits_6_and_changes_nothing(home):
    (home / "templates").mkdir()
    (home / "templates/broken.yaml").write_text("goals: 5\n")
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    result = run_cli("reset", "--home", str(home), "--template", "broken")
    assert result.exit_code == 6 and "broken.yaml" in result.stderr and "'goals'" in result.stderr
    assert tree_digest(home) == digest


def test_reset_refuses_while_a_cycle_holds_the_lock(home):
    write_active(home, {"notes": "keep me"})
    digest = tree_digest(home)
    with home_lock(Home.at(home)):
        proc = run_agent_process("reset", "--home", str(home), "--clean")
    assert proc.returncode == 5 and "holds the lock" in proc.stderr
    assert tree_digest(home) == digest


def test_bin_reset_sh_resets_the_home_in_agent_home(home):
    write_active(home, {"notes": "old"})
    env = dict(os.environ, AGENT_HOME=str(home))
    proc = subprocess.run([str(REPO / "bin/reset.sh"), "--template", "demo"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert read_yaml(home / "scratchpad/active.yaml")["goals"] == ["Demonstrate the wake/run/sleep cycle"]


def test_bin_reset_sh_passes_the_busy_exit_code_through(home):
    env = dict(os.environ, AGENT_HOME=str(home))
    with home_lock(Home.at(home)):
        proc = subprocess.run([str(REPO / "bin/reset.sh")], capture_output=True, text=True, env=env)
    assert proc.returncode == 5


# ----------------------------------------------------------------------------------------- init

def test_init_creates_a_working_home(tmp_path):
    target = tmp_path / "new-home"
    result = run_cli("init", str(target))
    assert result.exit_code == 0
    assert (target / "rules.md").read_text().startswith("# Rules")
    assert (target / "config.yaml").read_text().startswith("# Settings")
    assert read_yaml(target / "scratchpad/active.yaml") == schema.fresh_state()
    for folder in ("scratchpad", "logs"):
        assert stat.S_IMODE((target / folder).stat().st_mode) == 0o700
    script = write_script(tmp_path, DONE)
    assert run_cli("run", "--home", str(target), "--model", f"scripted:{script}").exit_code == 0


def test_init_never_overwrites_existing_files(tmp_path):
    target = tmp_path / "h"
    target.mkdir()
    (target / "rules.md").write_text("my rules")
    result = run_cli("init", str(target))
    assert result.exit_code == 0 and "kept existing rules.md" in result.stdout
    assert (target / "rules.md").read_text() == "my rules"


def test_init_config_file_parses_and_lists_every_setting(tmp_path):
    from agent.config import field_docs, load_settings

    run_cli("init", str(tmp_path / "h"))
    text = (tmp_path / "h/config.yaml").read_text()
    for name, _, _ in field_docs():
        assert f"# {name}:" in text
    load_settings(tmp_path / "h")  # all commented out: loads as defaults


# --------------------------------------------------------------------------------- configuration

@pytest.mark.parametrize("config, fragment", [
    ("max_iteration: 5\n", "unknown key 'max_iteration'"),
    ("max_iterations: lots\n", "setting 'max_iterations' must be an integer"),
    ("max_iterations: 0\n", "'max_iterations' must be greater than 0"),
    ("shell_policy: everything\n", "'shell_policy' must be one of allowlist, any, off"),
    ("api_key: sk-123\n", "never put the API key in the config file"),
    ("- a list\n", "must be a mapping of settings"),
    ("model: [unclosed\n", "invalid YAML"),
    ("extra_headers: {X-Team: 5}\n", "'extra_headers.X-Team' must be a string"),
])
def test_bad_config_exits_2_naming_the_key_and_writes_nothing(home, tmp_path, config, fragment):
    (home / "config.yaml").write_text(config)
    write_active(home, {"notes": "keep"})
    digest = tree_digest(home)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, DONE)}")
    assert result.exit_code == 2
    assert fragment in result.stderr and "config.yaml" in result.stderr or fragment in result.stderr
    assert tree_digest(home) == digest


def test_flags_override_environment_which_overrides_config(home, tmp_path):
    from agent.config import load_settings

    (home / "config.yaml").write_text("model: scripted:from-config.yaml\nmax_iterations: 4\n")
    assert load_settings(home, env={}).model == "scripted:from-config.yaml"
    assert load_settings(home, env={"AGENT_MODEL": "scripted:env.yaml"}).model == "scripted:env.yaml"
    assert load_settings(home, env={"AGENT_MODEL": "scripted:env.yaml"}, model="scripted:flag.yaml").model == "scripted:flag.yaml"
    assert load_settings(home, env={}).max_iterations == 4


@pytest.mark.parametrize("args, code, fragment", [
    (["--model", "telepathy:gpt"], 2, "unknown model provider 'telepathy'"),
    (["--model", "openai:gpt-4o-mini"], 2, "OPENAI_API_KEY"),
    (["--model", "openai:"], 2, "needs a model name"),
    (["--model", "scripted:/no/such/file.yaml"], 2, "scripted model file not found"),
    (["--model", "local:/no/such/model.gguf"], 2, "not found"),
    (["--max-iterations", "0", "--model", "scripted:x"], 2, "0 is not in the range"),
])
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
    script = write_script(tmp_path, [{"tool": "echo", "args": {"message": "first"}}, *DONE])
    for _ in range(2):
        assert run_cli("run", "--home", str(home), "--model", f"scripted:{script}").exit_code == 0
    notes = read_yaml(home / "scratchpad/active.yaml")["notes"]
    assert notes.count("-> first") == 2


# ------------------------------------------------------------------------------------ the docs

def test_exit_code_table_in_claude_md_matches_the_code():
    text = (REPO / "CLAUDE.md").read_text()
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", text, re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}


def test_root_rules_md_is_the_packaged_default():
    from agent.prompt import default_rules

    assert (REPO / "rules.md").read_text() == default_rules()


def test_readme_settings_table_lists_every_setting_with_its_default():
    from agent.docs import with_settings_table

    readme = (REPO / "README.md").read_text()
    assert readme == with_settings_table(readme), "run: python -m agent.docs --write"


@pytest.mark.parametrize("config, fragment", [
    ("lock_wait: .nan\n", "'lock_wait' must be a finite number"),
    ("time_budget: .inf\n", "'time_budget' must be a finite number"),
    ("keep_days: 1.0e+10\n", "'keep_days' must be at most 36500"),
    ("lock_wait: -1\n", "'lock_wait' must be 0 or more"),
])
def test_non_finite_or_absurd_time_settings_are_refused(home, tmp_path, config, fragment):
    (home / "config.yaml").write_text(config)
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, DONE)}")
    assert result.exit_code == 2 and fragment in result.stderr


def test_prune_older_than_beyond_the_calendar_keeps_everything(home, tmp_path):
    run_cli("run", "--home", str(home), "--model", f"scripted:{write_script(tmp_path, DONE)}")
    result = run_cli("prune", "--home", str(home), "--older-than", "99999999999d")
    assert result.exit_code == 0
    assert len(snapshots(home, "before")) == 1


def test_a_scripted_reply_that_yaml_reads_as_a_date_is_sent_as_text(home, tmp_path):
    script = tmp_path / "s.yaml"
    script.write_text("- 2024-01-01\n- {tool: done, args: {summary: on 2024-01-02}}\n")
    result = run_cli("run", "--home", str(home), "--model", f"scripted:{script}")
    assert result.exit_code == 0
    assert "[PARSE ERROR]" in read_yaml(home / "scratchpad/active.yaml")["notes"]
