"""The shell tool: argv without a shell, the policy (allowlist, any, off), and a child that
never outlives its call (timeout, leftovers), with capped output and no secrets."""

from __future__ import annotations

import time

import pytest

from agent.common.tags import Tag
from agent.config import Settings
from agent.tools import ToolContext, ToolError, build_registry
from agent.tools.shell import shell
from tests.tools.helpers import call, ctx_for


@pytest.fixture(autouse=True)
def _workspace(tmp_path):
    (tmp_path / "workspace").mkdir(exist_ok=True)


def test_shell_runs_argv_from_the_workspace_without_a_shell(tmp_path):
    ctx = ctx_for(tmp_path)
    assert call(ctx, "shell", command="echo $HOME; rm -rf x")[1].endswith("-> $HOME; rm -rf x")
    assert call(ctx, "shell", command="pwd")[1].endswith(f"-> {tmp_path.resolve() / 'workspace'}")
    assert call(ctx_for(tmp_path, shell_policy="any"), "shell", command="pwd")[1].endswith("/workspace")


def test_shell_refuses_to_run_when_the_workspace_is_not_a_folder(tmp_path):
    kind, note = call(ctx_for(tmp_path, workspace="missing"), "shell", command="pwd")
    assert kind is Tag.TOOL_ERROR and "is not a folder; commands run there" in note


@pytest.mark.parametrize(
    "command, why",
    [
        ("rm -rf scratchpad", "command 'rm' is not allowed"),
        ("/bin/ls", "command '/bin/ls' is not allowed"),
        ("sh -c ls", "command 'sh' is not allowed"),
        ("cat /etc/passwd", "argument '/etc/passwd' names a path outside the workspace"),
        ("cat ../secret", "argument '../secret' names a path outside the workspace"),
        ("head --lines=1 ~/.bashrc", "argument '~/.bashrc' names a path outside the workspace"),
        ("date -f/etc/passwd", "option '-f' (in '-f/etc/passwd') is not allowed for date"),
        ("tail --file=/etc/passwd", "option '--file=/etc/passwd' is not allowed for tail"),
        ("wc -xf/etc/passwd", "option '-x' (in '-xf/etc/passwd') is not allowed for wc"),
        ("cat -f../x", "option '-f' (in '-f../x') is not allowed for cat"),
        ("", "the command is empty"),
        ("echo 'unclosed", "cannot split the command"),
    ],
)
def test_shell_allowlist_refuses_commands_and_paths_outside_it(tmp_path, command, why):
    kind, note = call(ctx_for(tmp_path), "shell", command=command)
    assert kind is Tag.TOOL_ERROR and why in note


@pytest.mark.parametrize("policy", ["allowlist", "any"])
def test_shell_refuses_to_run_in_a_workspace_the_protection_rule_refuses(tmp_path, policy):
    (tmp_path / "scratchpad").mkdir()
    kind, note = call(ctx_for(tmp_path, workspace="scratchpad", shell_policy=policy), "shell", command="ls")
    assert kind is Tag.TOOL_ERROR and "fix 'workspace' in config.yaml" in note


def test_shell_allowlist_refuses_a_symlink_that_leads_out_of_the_workspace(tmp_path):
    home = tmp_path / "home"
    (home / "workspace").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("s3cr3t")
    (home / "workspace" / "link.txt").symlink_to(tmp_path / "secret.txt")
    kind, note = call(ctx_for(home), "shell", command="cat link.txt")
    assert kind is Tag.TOOL_ERROR and "argument 'link.txt': path 'link.txt' resolves through a symlink" in note
    assert "s3cr3t" not in note


def test_shell_allowlist_is_configurable_and_an_added_command_gets_the_path_check(tmp_path):
    ctx = ctx_for(tmp_path, shell_allowlist=["true", "grep"])
    assert call(ctx, "shell", command="true")[0] is Tag.TOOL
    assert "command 'date' is not allowed (allowed: true, grep)" in call(ctx, "shell", command="date")[1]
    for command in ("grep -r x /etc", "grep --file=/etc/passwd x", "grep x .env"):
        assert call(ctx, "shell", command=command)[0] is Tag.TOOL_ERROR, command


def test_shell_policy_off_removes_the_tool_and_refuses_a_direct_call(tmp_path):
    settings = Settings(shell_policy="off")
    registry = build_registry(settings, entry_points=[])
    assert "shell" not in registry and "shell" in registry.disabled
    with pytest.raises(ToolError, match="turned off"):
        shell(ToolContext(tmp_path, settings), "date")


def test_shell_policy_any_runs_any_program_and_reports_its_exit_status(tmp_path):
    kind, note = call(ctx_for(tmp_path, shell_policy="any"), "shell", command="sh -c 'echo one; exit 3'")
    assert kind is Tag.TOOL and note.endswith("-> one; [exit status 3]")


def test_a_command_that_is_not_installed_is_a_tool_error_naming_it(tmp_path):
    with pytest.raises(ToolError, match="command not found: no-such-command-here"):
        shell(ctx_for(tmp_path, shell_policy="any"), "no-such-command-here")


def _alive(pid: int) -> bool:
    """Whether a process is still running, allowing the kernel a moment to deliver SIGKILL."""
    deadline = time.monotonic() + 2
    while True:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                running = handle.read().rsplit(")", 1)[1].split()[0] not in "ZX"  # a zombie is dead, just unreaped
        except FileNotFoundError:
            running = False
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.01)


def test_shell_timeout_kills_the_whole_process_group(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_timeout=0.5)
    with pytest.raises(ToolError, match=r"timed out after 0.5s and was killed") as caught:
        shell(ctx, "sh -c 'sleep 100 & echo grandchild $!; sleep 100'")
    grandchild = int(str(caught.value).split("grandchild ")[1].split()[0])
    assert not _alive(grandchild)


def test_shell_kills_background_processes_a_finished_command_left_behind(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_timeout=5)
    out = shell(ctx, "sh -c 'sleep 100 >/dev/null 2>&1 & echo left $!'")
    assert "[background processes it left running were killed]" in out
    assert not _alive(int(out.split("left ")[1].split()[0]))


def test_shell_output_is_capped_in_bytes_with_a_marker(tmp_path):
    ctx = ctx_for(tmp_path, shell_policy="any", shell_max_output=100)
    out = shell(ctx, "head -c 5000 /dev/zero")
    assert out.endswith("[output cut at 100 bytes; 4900 more bytes dropped]")
    assert len(out.split("\n[output cut")[0].encode()) == 100


def test_shell_environment_is_scrubbed_of_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-123456789")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh")
    monkeypatch.setenv("CUSTOM_THING", "hidden-by-config")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    out = shell(ctx_for(tmp_path, shell_policy="any", secret_env=["CUSTOM_THING"]), "env")
    assert "PLAIN_SETTING=visible" in out
    for name in ("OPENAI_API_KEY", "MY_SERVICE_TOKEN", "CUSTOM_THING"):
        assert name not in out
