"""`agent init --from-msa` killed at every write step: the folder is never taken for a home, and running
the import again finishes it, the same as an import that was never killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli.msa_home import UNFINISHED_IMPORT
from tests.cli.test_msa_import import msa_config, msa_home
from tests.helpers import run_cli, tree_digest


def home_files(home: Path) -> dict[str, str]:
    """What an import makes, by digest: the memory, templates, config and rules (not logs/)."""
    return {path: digest for path, digest in tree_digest(home).items() if not path.startswith("logs")}


def killed_import(dest: Path, src: Path, k: int) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("AGENT_HOME", "AGENT_MODEL")}
    env["AGENT_TEST_KILL_AT"] = str(k)
    command = [sys.executable, "-m", "agent", "init", str(dest), "--from-msa", str(src)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow  # a real process for each write step
def test_an_import_killed_at_any_step_is_no_home_and_running_it_again_finishes_it(tmp_path: Path):
    src = msa_home(tmp_path / "msa", msa_config().replace("{memory}", "scratchpads/active.yaml"))
    before = tree_digest(src)
    assert run_cli("init", str(tmp_path / "clean"), "--from-msa", str(src)).exit_code == 0
    clean = home_files(tmp_path / "clean")
    k = 0
    while True:
        k += 1
        assert k < 80, "more kill points than expected: is the AGENT_TEST_KILL_AT counter broken?"
        dest = tmp_path / f"kill-{k}"
        killed = killed_import(dest, src, k)
        if killed.returncode == 0:
            break  # past the last write step
        assert killed.returncode == -signal.SIGKILL, killed.stderr
        if (dest / UNFINISHED_IMPORT).exists():
            used = run_cli("status", "--home", str(dest))
            assert used.exit_code == 2 and "did not finish" in used.stderr, (k, used.output)
            assert f"--from-msa {src}" in used.stderr
        again = run_cli("init", str(dest), "--from-msa", str(src))
        assert again.exit_code == 0, (k, again.output)
        assert home_files(dest) == clean, k
    assert k > 10 and tree_digest(src) == before
