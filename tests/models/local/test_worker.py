"""The embedded model runs in a child process: a crash in its native code (a real SIGSEGV) is a
failed cycle (exit 4, a note naming the signal, the index record, the hook), the lock is free,
and the next cycle starts a new child and works. `agent doctor` decodes in that child, so a
runtime that crashes on decode is a FAIL naming the fix.

Two runtimes: crashing_runtime/ (a llama_cpp whose decode reads address 0, put first on the
child's PYTHONPATH; runs everywhere), and the real llama.cpp with the bundled model, whose child
the test kills with SIGSEGV in the middle of a cycle (needs the [local] extra; CI must run it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml

from agent.common.tags import Tag
from agent.config import load_settings
from agent.cycle.run import run_cycle
from agent.models.local.cache import LOCAL_CACHE_ENV
from agent.models.local.model import LocalModel, bundled_model_path
from agent.models.local.worker import death
from agent.store.home import Home
from agent.store.lock import is_locked
from tests.helpers import cycle_records, read_yaml, run_agent_process, write_active

CRASHING_RUNTIME = Path(__file__).parent.parent / "crashing_runtime"
HOOK = "import sys; open('hook_ran.json', 'w').write(sys.stdin.read())"  # the record it was given, in the home
STATE = {
    "goals": [],
    "current_task": "Echo the message: good morning",
    "pending_actions": ["Echo the word two"],
    "completed_tasks": [],
    "notes": "",
    "last_updated": None,
}


def _home(home: Path) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"on_cycle_end": [sys.executable, "-c", HOOK]}))
    write_active(home, STATE)


def _index(home: Path) -> list[dict]:
    return cycle_records(home)


def _crashing_env(tmp_path: Path, **more: str) -> dict:
    model_file = tmp_path / "any.gguf"
    model_file.write_bytes(b"GGUF")
    path = os.pathsep.join(p for p in (str(CRASHING_RUNTIME), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, LOCAL_CACHE_ENV: "off", "AGENT_MODEL": f"local:{model_file}", **more}


def test_a_segfault_in_the_model_runtime_is_a_failed_cycle_and_the_next_cycle_works(home, tmp_path):
    _home(home)
    env = _crashing_env(tmp_path)

    crashed = run_agent_process("run", "--home", str(home), env=env)

    assert crashed.returncode == 4, crashed.stderr
    assert "Segmentation fault" not in crashed.stderr and "Traceback" not in crashed.stderr
    record = _index(home)[-1]
    assert record["stop_reason"] == "error" and record["exit_code"] == 4 and "died of SIGSEGV" in record["error"]
    assert (record["error_kind"], record["error_endpoint"]) == ("crashed", None)
    assert record["task_before"] == STATE["current_task"]
    notes = read_yaml(home / "scratchpad" / "active.yaml")["notes"]
    assert f"{Tag.CYCLE_FAILED.value}" in notes and "ModelCrashed" not in notes and "died of SIGSEGV" in notes
    told = json.loads((home / "hook_ran.json").read_text())
    assert told.pop("health")["state"] == "failing" and told == record  # the record, and the home's health beside it
    assert not is_locked(Home.at(home))

    worked = run_agent_process("run", "--home", str(home), env=dict(env, CRASHING_RUNTIME="off"))

    assert worked.returncode == 0, worked.stderr
    assert _index(home)[-1]["stop_reason"] == "done"
    assert read_yaml(home / "scratchpad" / "active.yaml")["current_task"] == "Echo the word two"


def test_doctor_fails_naming_the_fix_when_the_runtime_crashes_on_decode(home, tmp_path):
    assert run_agent_process("init", str(home)).returncode == 0

    result = run_agent_process("doctor", "--home", str(home), "--json", env=_crashing_env(tmp_path))

    assert result.returncode == 1, result.stderr
    model = {c["check"]: c for c in json.loads(result.stdout)}["model"]
    assert not model["ok"] and "died of SIGSEGV" in model["detail"]
    assert "-DGGML_NATIVE=OFF" in model["fix"] and "--no-cache-dir --force-reinstall" in model["fix"]


def test_doctor_passes_when_the_runtime_decodes(home, tmp_path):
    assert run_agent_process("init", str(home)).returncode == 0

    result = run_agent_process("doctor", "--home", str(home), env=_crashing_env(tmp_path, CRASHING_RUNTIME="off"))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "tokens/s (8 tokens)" in result.stdout


@pytest.mark.parametrize(
    "code, words",
    [
        (-signal.SIGSEGV, "died of SIGSEGV (a llama-cpp-python built for another CPU?"),
        (-signal.SIGKILL, "died of SIGKILL (killed: out of memory, or by someone)"),
        (-signal.SIGABRT, "died of SIGABRT"),
        (1, "exited with status 1"),
    ],
)
def test_a_dead_child_is_described_by_its_signal(code, words):
    assert death(code).startswith(words)


class _KillsItsChildFirst:
    """The embedded model, whose child the test kills with SIGSEGV on the cycle's first call
    (the child is up, the model loaded: the cycle is under way)."""

    def __init__(self, model: LocalModel):
        self.model, self.name, self.killed = model, model.name, None

    def start(self, log):
        self.model.start(log)

    def complete(self, request):
        if self.killed is None:
            self.killed = self.model.worker.pid
            os.kill(self.killed, signal.SIGSEGV)
            self.model.worker.proc.wait(timeout=60)
        return self.model.complete(request)


@pytest.mark.slow
@pytest.mark.embedded_model
def test_a_sigsegv_to_the_real_models_child_mid_cycle_fails_the_cycle_and_the_next_cycle_works(
    home, tmp_path, monkeypatch
):
    monkeypatch.setenv(LOCAL_CACHE_ENV, str(tmp_path / "prompt-cache"))  # never the user's ~/.cache
    _home(home)
    settings = load_settings(home)
    model = LocalModel(bundled_model_path(), settings)
    try:
        first = run_cycle(Home.at(home), settings, model)  # fills the prompt cache
        assert first.stop_reason != "error", first.error
        write_active(home, STATE)
        killing = _KillsItsChildFirst(model)

        crashed = run_cycle(Home.at(home), settings, killing)

        assert crashed.exit_code == 4 and f"(pid {killing.killed}) died of SIGSEGV" in crashed.error
        record = _index(home)[-1]
        assert record["exit_code"] == 4 and record["task_before"] == STATE["current_task"]
        assert "died of SIGSEGV" in read_yaml(home / "scratchpad" / "active.yaml")["notes"]
        assert json.loads((home / "hook_ran.json").read_text())["cycle_id"] == crashed.cycle_id
        assert not is_locked(Home.at(home))

        worked = run_cycle(Home.at(home), settings, model)  # the same model object: a new child

        assert model.worker.pid != killing.killed
        assert worked.exit_code in (0, 3) and worked.stop_reason != "error", worked.error
        assert _index(home)[-1]["cycle_id"] == worked.cycle_id
        assert "prompt cache: loaded" in (home / "logs" / f"cycle_{worked.cycle_id}.log").read_text()
    finally:
        model.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_the_models_child_process_gets_no_secret_in_its_environment(tmp_path, monkeypatch):
    for name, value in _crashing_env(tmp_path, CRASHING_RUNTIME="off").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-model-process-1234")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-never-in-the-model-process")
    model = LocalModel(tmp_path / "any.gguf", load_settings(tmp_path))
    try:
        model.start(lambda line: None)
        environ = Path(f"/proc/{model.worker.pid}/environ").read_bytes()
        assert b"never-in-the-model-process" not in environ and b"CRASHING_RUNTIME=off" in environ
        assert model.probe(3)[0] == 3  # and it works
    finally:
        model.close()


def test_a_reply_that_outlasts_the_time_budget_is_cut_by_stopping_the_child(home, tmp_path):
    _home(home)
    (home / "config.yaml").write_text(yaml.safe_dump({"time_budget": 2}))

    result = run_agent_process("run", "--home", str(home), env=_crashing_env(tmp_path, CRASHING_RUNTIME="hang"))

    assert result.returncode == 3, result.stderr
    record = _index(home)[-1]
    assert record["stop_reason"] == "time_budget" and record["duration_s"] < 60
    assert "gave no reply in the" in read_yaml(home / "scratchpad" / "active.yaml")["notes"]
