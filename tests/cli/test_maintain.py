"""`agent prune` and `agent doctor` over real homes."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agent.cli import maintain
from agent.store.archive import append_archive
from agent.store.cycles import disk
from agent.store.db import records
from agent.store.home import Home
from agent.store.lock import home_lock
from tests.cli.helpers import cycle_ids, done, json_out, run_cycle
from tests.helpers import (
    mode_bits_bind_root,
    remembered,
    run_cli,
    snapshots,
    tree_digest,
    wait_for,
    write_active,
    write_script,
)
from tests.models.openai_server import OpenAIServer, Reply

# ----------------------------------------------------------------------------------------- prune


def age_cycle(home: Path, cycle_id: str, old_id: str) -> None:
    """Rename a real cycle (its files, its row and record) to an older id (as if it had run then)."""
    for label in ("before", "after"):
        (home / "scratchpad" / f"{cycle_id}_{label}.yaml").rename(home / "scratchpad" / f"{old_id}_{label}.yaml")
    (home / "logs" / f"cycle_{cycle_id}.log").rename(home / "logs" / f"cycle_{old_id}.log")
    db = records(Home.at(home))
    with db.write():
        db.execute(
            "UPDATE cycle SET id = ?, record = json_set(record, '$.cycle_id', ?) WHERE id = ?",
            (old_id, old_id, cycle_id),
        )


def test_prune_dry_run_lists_and_removes_nothing(four_cycles):
    before = tree_digest(four_cycles)
    result = run_cli("prune", "--keep", "1", "--dry-run", "--home", str(four_cycles))
    assert result.exit_code == 0
    assert (
        result.stdout.count("would remove scratchpad/") == 6 and "would remove 3 cycle(s), 9 file(s)" in result.stdout
    )
    assert "and 3 transcript(s); kept 1 cycle(s)" in result.stdout  # pairs and logs, and transcripts
    assert tree_digest(four_cycles) == before


def test_prune_keep_removes_old_pairs_logs_and_transcripts_but_never_active_records_or_archive(four_cycles):
    append_archive(Home.at(four_cycles), [{"kind": "note", "value": "x"}])
    active = (four_cycles / "scratchpad" / "active.yaml").read_bytes()
    ids = cycle_ids(four_cycles)
    data = json_out(run_cli("prune", "--keep", "2", "--json", "--home", str(four_cycles)))
    assert (
        data["removed_cycles"] == ids[:2] and data["kept_cycles"] == 2 and len(data["deleted"]) == 6
    )  # 2 x (pair, log)
    assert (
        data["transcripts"] == 2
        and json.loads(run_cli("show", "--all", "--json", "--home", str(four_cycles)).stdout)["archived_notes"]
    )
    assert cycle_ids(four_cycles) == ids[2:]
    assert sorted(p.name for p in (four_cycles / "logs").glob("cycle_*.log")) == [f"cycle_{i}.log" for i in ids[2:]]
    assert (four_cycles / "scratchpad" / "active.yaml").read_bytes() == active
    history = json_out(run_cli("history", "--json", "--home", str(four_cycles)))
    assert len(history) == 4  # the records still remember pruned cycles


def test_prune_older_than_keeps_the_newest_n_when_both_are_given(four_cycles):
    ids = cycle_ids(four_cycles)
    age_cycle(four_cycles, ids[0], "20200101_000000")
    age_cycle(four_cycles, ids[1], "20200102_000000")
    only_age = json_out(run_cli("prune", "--older-than", "7d", "--dry-run", "--json", "--home", str(four_cycles)))
    assert only_age["removed_cycles"] == ["20200101_000000", "20200102_000000"]
    both = json_out(run_cli("prune", "--older-than", "7d", "--keep", "3", "--json", "--home", str(four_cycles)))
    assert both["removed_cycles"] == ["20200101_000000"]
    assert cycle_ids(four_cycles) == ["20200102_000000", *ids[2:]]


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "--keep N and/or --older-than"),
        (["--older-than", "7 days"], "is not a number followed by a unit"),
        (["--keep", "-1"], "-1"),
    ],
)
def test_prune_bad_input_is_a_usage_error_and_removes_nothing(four_cycles, args, message):
    before = tree_digest(four_cycles)
    result = run_cli("prune", *args, "--home", str(four_cycles))
    assert result.exit_code == 2 and message in result.stderr
    assert tree_digest(four_cycles) == before


def test_a_prune_the_disk_stops_midway_says_what_it_removed_then_why(four_cycles, monkeypatch):
    """logs/ read-only (EROFS on every unlink there): the snapshots that did go are listed, then
    one line naming the file that could not be removed, exit 7, no traceback."""
    real = os.unlink

    def unlink(name, *, dir_fd=None):
        if str(name).startswith("cycle_"):
            raise OSError(30, "Read-only file system", name)
        return real(name, dir_fd=dir_fd)

    monkeypatch.setattr(os, "unlink", unlink)
    result = run_cli("prune", "--keep", "1", "--home", str(four_cycles))
    assert result.exit_code == 7 and "Traceback" not in result.stdout + result.stderr
    removed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("removed ")]
    assert removed and all(name.startswith("scratchpad/") for name in removed)
    assert all(not (four_cycles / name).exists() for name in removed)
    assert "Read-only file system" in result.stderr and "cannot use cycle_" in result.stderr


def test_prune_is_busy_while_a_cycle_runs(four_cycles):
    before = tree_digest(four_cycles)
    with home_lock(Home.at(four_cycles)):
        result = run_cli("prune", "--keep", "1", "--home", str(four_cycles))
    assert result.exit_code == 5 and tree_digest(four_cycles) == before


def test_prune_older_than_beyond_the_calendar_keeps_everything(home):
    assert run_cycle(home, [done("ok")]).exit_code == 0
    result = run_cli("prune", "--home", str(home), "--older-than", "99999999999d")
    assert result.exit_code == 0
    assert len(snapshots(home, "before")) == 1


# ---------------------------------------------------------------------------------------- doctor


class ModelsHandler(BaseHTTPRequestHandler):
    models = ["tiny-model", "other"]
    key = "sk-test-secret-value-123"

    def do_GET(self):  # noqa: N802
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        if self.path != "/v1/models":
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802 - a one-token chat completion, for doctor's chat check
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Authorization") != f"Bearer {self.key}" or self.path != "/v1/chat/completions":
            self.send_response(401 if self.path == "/v1/chat/completions" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 1,
                "model": "tiny-model",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "{"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def models_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelsHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def doctor(home: Path, *args: str, env: dict | None = None):
    return run_cli("doctor", "--home", str(home), *args, env=env)


def checks_of(result) -> dict:
    return {c["check"]: c for c in json.loads(result.stdout)}


@pytest.fixture
def healthy_home(tmp_path: Path) -> Path:
    """A home made by `agent init` (private folders), configured for a scripted model, one cycle run."""
    root = tmp_path / "healthy"
    run_cli("init", str(root))
    script = write_script(tmp_path, [done("x")], name="doctor_script.yaml")
    (root / "config.yaml").write_text(f"model: scripted:{script}\n")
    assert run_cli("run", "--home", str(root)).exit_code == 0
    return root


def test_doctor_passes_a_healthy_scripted_home(healthy_home):
    result = doctor(healthy_home)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines] == [
        "home",
        "config",
        "rules",
        "examples",
        "scratchpad",
        "model",
        "shell",
        "checks",
        "workspace",
        "lock",
        "scratchpad/",
        "logs/",
        "records",
    ]
    assert all(line.startswith("ok ") for line in lines)


def test_doctor_checks_an_openai_endpoint_and_never_prints_the_key(home, models_server):
    run_cli("init", str(home))
    key = ModelsHandler.key
    (home / "config.yaml").write_text(f"model: openai:tiny-model\nbase_url: {models_server}\n")
    result = doctor(home, env={"OPENAI_API_KEY": key})
    assert result.exit_code == 0, result.output
    assert "OPENAI_API_KEY is set" in result.stdout and "serves tiny-model" in result.stdout
    assert "ok   chat" in result.stdout and "response_format tool_calls" in result.stdout
    assert key not in result.output
    assert remembered(home, "endpoint") is None  # the doctor writes nothing
    (home / "config.yaml").write_text(f"model: openai:missing-model\nbase_url: {models_server}\n")
    missing = doctor(home, "--json", env={"OPENAI_API_KEY": key})
    # a name the endpoint does not list is a warning: this server, like llama.cpp's, answers any name
    assert missing.exit_code == 0, missing.output
    endpoint = checks_of(missing)["endpoint"]
    assert endpoint["ok"] and endpoint["warning"] and "tiny-model, other" in endpoint["detail"] and endpoint["fix"]
    assert checks_of(missing)["chat"]["ok"]
    wrong_key = doctor(home, "--json", env={"OPENAI_API_KEY": "sk-wrong-key-0000"})
    assert wrong_key.exit_code == 1 and "refused the key (HTTP 401)" in checks_of(wrong_key)["endpoint"]["detail"]
    assert "sk-wrong-key-0000" not in wrong_key.output


def test_doctor_reports_a_missing_key_and_an_unreachable_endpoint(home):
    run_cli("init", str(home))
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (home / "config.yaml").write_text("model: openai:m\nbase_url: http://192.0.2.1/v1\n")  # TEST-NET: never contacted
    no_key = doctor(home)
    assert no_key.exit_code == 1
    assert "FAIL key" in no_key.stdout and "-> fix: export OPENAI_API_KEY=" in no_key.stdout
    (home / "config.yaml").write_text(f"model: openai:m\nbase_url: http://127.0.0.1:{port}/v1\n")
    down = doctor(home)  # a loopback endpoint needs no key
    assert down.exit_code == 1 and "ok   key" in down.stdout and "needs none" in down.stdout
    assert "refused the connection" in down.stdout and "start the server" in down.stdout


@pytest.mark.embedded_model
def test_doctor_decodes_with_the_embedded_model_and_reports_tokens_per_second(home):
    run_cli("init", str(home))
    (home / "config.yaml").write_text("model: local\n")
    result = doctor(home, "--json")
    assert result.exit_code == 0, result.output
    assert re.search(r"decodes, [0-9.]+ tokens/s \([1-9]\d* tokens\)", checks_of(result)["model"]["detail"])


def test_doctor_flags_bad_config_scratchpad_and_permissions(home):
    run_cli("init", str(home))
    (home / "config.yaml").write_text("temperature: hot\n")
    write_active(home, "goals: {not: a list}\n")
    os.chmod(home / "logs", 0o755)
    result = doctor(home, "--json")
    assert result.exit_code == 1
    checks = checks_of(result)
    assert not checks["config"]["ok"] and "temperature" in checks["config"]["detail"]
    assert not checks["scratchpad"]["ok"] and "agent reset" in checks["scratchpad"]["fix"]
    assert not checks["logs/"]["ok"] and checks["logs/"]["fix"] == f"chmod 700 {home / 'logs'}"
    assert checks["scratchpad/"]["ok"] and checks["lock"]["ok"]


@pytest.mark.parametrize("text", ["", "  \n\n"])
def test_doctor_warns_on_an_empty_rules_md(healthy_home, text):
    (healthy_home / "rules.md").write_text(text)
    result = doctor(healthy_home)
    assert result.exit_code == 0
    [line] = [line for line in result.stdout.splitlines() if " rules " in f" {line} "]
    assert line.startswith("warn rules") and "is empty" in line and "-> fix:" in line
    assert checks_of(doctor(healthy_home, "--json"))["rules"]["warning"] is True


def test_doctor_fails_on_an_unreadable_rules_md(healthy_home):
    (healthy_home / "rules.md").write_bytes(b"\xff\xfe not utf-8")
    result = doctor(healthy_home, "--json")
    assert result.exit_code == 1 and not checks_of(result)["rules"]["ok"]


def test_doctor_fails_on_a_bad_examples_yaml_and_warns_on_examples_left_in_rules_md(healthy_home):
    (healthy_home / "examples.yaml").write_text("- {task: t}\n")
    result = doctor(healthy_home, "--json")
    assert result.exit_code == 1 and "'examples[0]' is missing 'action'" in checks_of(result)["examples"]["detail"]
    (healthy_home / "examples.yaml").unlink()
    with (healthy_home / "rules.md").open("a") as rules:
        rules.write("\n## Examples\n\nTask: x\nLast result: none yet\nAction: {}\n")
    assert checks_of(doctor(healthy_home, "--json"))["examples"]["warning"] is True


def test_doctor_reports_a_held_lock_without_failing(healthy_home):
    with home_lock(Home.at(healthy_home)):
        result = doctor(healthy_home)
    assert result.exit_code == 0 and "a cycle is running now" in result.stdout


def test_doctor_on_a_missing_home_fails_and_suggests_agent_init(tmp_path):
    result = doctor(tmp_path / "nope")
    assert result.exit_code == 1 and "FAIL home" in result.stdout and "agent init" in result.stdout


def test_prune_listing_passes_through_a_temporary_file_and_stays_whole(four_cycles, monkeypatch):
    """What prune prints is spooled while the lock is held; past SPOOL_BYTES in a file, the same text."""
    monkeypatch.setattr(maintain, "SPOOL_BYTES", 16)
    ids = cycle_ids(four_cycles)
    dry = run_cli("prune", "--keep", "1", "--dry-run", "--home", str(four_cycles))
    listed = [line.split(" ", 2)[2] for line in dry.stdout.splitlines()[:-1]]
    assert len(listed) == 9 and all(line.startswith("would remove ") for line in dry.stdout.splitlines()[:-1])
    raw = run_cli("prune", "--keep", "1", "--json", "--dry-run", "--home", str(four_cycles)).stdout
    assert raw == json.dumps(json.loads(raw), indent=2) + "\n"  # laid out as every other --json
    data = json_out(run_cli("prune", "--keep", "1", "--json", "--home", str(four_cycles)))
    assert data["removed_cycles"] == ids[:3] and data["kept_cycles"] == 1 and data["dry_run"] is False
    assert data["files"] == data["deleted"] == listed and data["bytes"] > 0
    counted = disk(Home.at(four_cycles))  # as each record was written (a log gets its last line after)
    assert counted["snapshots"] == [2, data_bytes(four_cycles, "*_*.yaml")] and counted["logs"][0] == 1
    assert 0 < counted["logs"][1] <= data_bytes(four_cycles, "cycle_*.log")
    again = json_out(run_cli("prune", "--keep", "1", "--json", "--home", str(four_cycles)))
    assert again == {
        "removed_cycles": [],
        "kept_cycles": 1,
        "files": [],
        "bytes": 0,
        "transcripts": 0,
        "dry_run": False,
        "deleted": [],
    }


def data_bytes(home: Path, pattern: str) -> int:
    """The bytes of the cycles' files matching `pattern` in scratchpad/ and logs/."""
    return sum(p.stat().st_size for folder in ("scratchpad", "logs") for p in (home / folder).glob(pattern))


# ------------------------------------------------------------ doctor: what reaches beyond a cycle


def test_doctor_fails_on_a_hook_or_wake_when_program_that_is_missing_or_not_executable(healthy_home):
    config = healthy_home / "config.yaml"
    (healthy_home / "bin").mkdir()
    (healthy_home / "bin" / "wake.sh").write_text("#!/bin/sh\nexit 1\n")  # mode 0644: cannot be run
    config.write_text(config.read_text() + "on_cycle_end: [no-such-notifier, --now]\nwake_when: [bin/wake.sh]\n")
    result = doctor(healthy_home)
    assert result.exit_code == 1
    assert (
        "FAIL on_cycle_end program not found on PATH: no-such-notifier  -> fix: install it, or fix on_cycle_end in "
        f"{config} (a relative path is from the home)" in result.stdout
    )
    wake = healthy_home / "bin" / "wake.sh"
    assert f"FAIL wake_when   not executable: {wake}  -> fix: chmod +x {wake}" in result.stdout
    config.write_text(config.read_text().replace("[no-such-notifier, --now]", "[bin/notify.sh]"))
    assert f"FAIL on_cycle_end program not found: {healthy_home}/bin/notify.sh" in doctor(healthy_home).stdout


def test_doctor_passes_a_hook_found_on_path_and_a_wake_when_path_from_the_home(healthy_home):
    config = healthy_home / "config.yaml"
    (healthy_home / "bin").mkdir()
    (healthy_home / "bin" / "wake.sh").write_text("#!/bin/sh\nexit 1\n")
    (healthy_home / "bin" / "wake.sh").chmod(0o755)
    config.write_text(config.read_text() + "on_cycle_end: [sh, -c, 'cat > /dev/null']\nwake_when: [bin/wake.sh]\n")
    result = doctor(healthy_home, "--json")
    assert result.exit_code == 0, result.output
    checks = checks_of(result)
    assert checks["on_cycle_end"]["ok"] and checks["on_cycle_end"]["detail"].endswith("/sh")
    assert checks["wake_when"] == {**checks["wake_when"], "ok": True, "detail": f"runs {healthy_home}/bin/wake.sh"}


def test_doctor_fails_on_a_metrics_file_whose_folder_is_missing_or_a_folder_itself(healthy_home, tmp_path):
    config = healthy_home / "config.yaml"
    script_line = config.read_text()
    config.write_text(script_line + f"metrics_file: {tmp_path}/textfile/agent.prom\n")
    result = doctor(healthy_home)
    assert result.exit_code == 1
    assert f"FAIL metrics     the folder of {tmp_path}/textfile/agent.prom does not exist" in result.stdout
    assert f"-> fix: mkdir -p {tmp_path}/textfile, or fix metrics_file in {config}" in result.stdout
    (tmp_path / "textfile" / "agent.prom").mkdir(parents=True)
    assert f"FAIL metrics     {tmp_path}/textfile/agent.prom is a folder" in doctor(healthy_home).stdout
    (tmp_path / "textfile" / "agent.prom").rmdir()
    result = doctor(healthy_home)
    assert result.exit_code == 0 and f"ok   metrics     {tmp_path}/textfile/agent.prom (its folder is writable)" in (
        result.stdout
    )
    assert list((tmp_path / "textfile").iterdir()) == []  # the doctor left nothing there


def test_doctor_fails_on_a_metrics_folder_this_user_cannot_write(healthy_home, tmp_path):
    folder = tmp_path / "textfile"
    folder.mkdir()
    config = healthy_home / "config.yaml"
    config.write_text(config.read_text() + f"metrics_file: {folder}/agent.prom\n")
    folder.chmod(0o555)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "agent", "doctor", "--home", str(healthy_home)],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=mode_bits_bind_root if os.geteuid() == 0 else None,
        )
    finally:
        folder.chmod(0o755)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"FAIL metrics     {folder} is not writable: Permission denied  -> fix: let this user write {folder}" in (
        proc.stdout
    )


def test_doctor_prints_each_check_as_it_finishes(healthy_home):
    """A real doctor, its model check blocked on an endpoint that has not answered yet: the checks
    before it are on stdout already."""
    release = threading.Event()

    def answer(request):
        release.wait(timeout=120)
        return Reply.chat({"tool": "done", "args": {"summary": "ok"}})

    with OpenAIServer(default=answer) as server:
        (healthy_home / "config.yaml").write_text(f"model: openai:test-model\nbase_url: {server.base_url}\n")
        env = {k: v for k, v in os.environ.items() if k not in ("AGENT_HOME", "AGENT_MODEL", "OPENAI_API_KEY")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "doctor", "--home", str(healthy_home)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        try:
            wait_for(lambda: server.chat_requests and any("scratchpad  active.yaml" in line for line in lines), "", 30)
            assert [line.split()[1] for line in lines][:5] == ["home", "config", "rules", "examples", "scratchpad"]
            assert not any(" lock " in line for line in lines)  # the checks after the model's are still to come
        finally:
            release.set()
            proc.wait(timeout=120)
        reader.join(timeout=30)
    assert any(line.startswith("ok   lock") for line in lines)


def test_doctor_says_how_to_get_the_sandbox_for_the_reason_it_is_missing(tmp_path):
    """No bwrap: install it. A whole-home workspace: a folder for the workspace, bwrap or not.
    (bwrap installed but refused, as in a container: tests/system/test_image.py.)"""
    home = tmp_path / "home"
    run_cli("init", str(home))
    no_bwrap = checks_of(doctor(home, "--json", env={"PATH": str(tmp_path / "nothing")}))["shell"]
    assert no_bwrap["warning"] and no_bwrap["fix"].startswith("install bubblewrap"), no_bwrap
    (home / "config.yaml").write_text('workspace: "."\n')
    whole_home = checks_of(doctor(home, "--json"))["shell"]
    assert whole_home["warning"] and whole_home["fix"].startswith("set workspace to a folder"), whole_home


def test_doctor_probe_forgets_the_remembered_sandbox_probe_and_probes_again(healthy_home):
    from agent.store.db import probe, remember_probe

    home = Home.at(healthy_home)
    stale = {"identity": probe(home, "sandbox")["identity"], "works": False, "why": "a stale answer"}
    remember_probe(home, "sandbox", {**stale, "probed": "2020-01-01"})
    assert "a stale answer" in run_cli("doctor", "--home", str(healthy_home)).stdout
    result = run_cli("doctor", "--home", str(healthy_home), "--probe")
    assert "a stale answer" not in result.stdout and result.exit_code in (0, 1)
    assert probe(home, "sandbox") is None  # the next cycle probes, and remembers, again
