"""Every child's output is bounded, as root and as an ordinary user: an MCP server's stderr, the
on_cycle_end hook's and wake_when's output are read through a pipe keeping a few KiB, never held
whole in memory nor written whole to a file. Each child here prints about 1 GiB; the agent's peak
memory is measured (wait4's ru_maxrss), and it runs under a 64 MiB file-size limit, so output
spooled to a temporary file would kill the child (SIGXFSZ) instead of being bounded (the MCP
server runs without it: there the peak memory tells)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.users import AgentUser, done

NOISE = 1 << 30  # about 1 GiB of output from each child
PEAK_KIB = 200 * 1024  # measured: about 70 MiB with the MCP SDK loaded, 25 MiB without; holding 1 GiB: 2.1 GiB
FILE_LIMIT = ("prlimit", f"--fsize={64 * 1024 * 1024}", "--")
SERVER = Path(__file__).with_name("noisy_mcp_server.py")
LAST_WORDS = "the-noisy-server-last-words"
PRINT = (
    "import os, sys\n"
    "os.write(1, b'FIRST-LINE\\n')\n"
    "chunk = b'y' * 65535 + b'\\n'\n"
    "for _ in range({n} // len(chunk)): os.write(1, chunk)\n"
    "os.write(1, b'LAST-LINE\\n')\n"
    "sys.exit({code})\n"
)

pytestmark = pytest.mark.slow  # each test moves about 1 GiB through a pipe, twice


def _printer(user: AgentUser, code: int) -> list[str]:
    folder = user.folder("printer")
    script = folder / "print.py"
    script.write_text(PRINT.format(n=NOISE, code=code))
    user.give(script)
    return ["/usr/bin/python3", str(script)]


def _run(user: AgentUser, home: Path, replies: list, wrap: tuple[str, ...] = FILE_LIMIT) -> tuple[int, int, str]:
    if shutil.which("prlimit") is None:
        pytest.fail("prlimit (util-linux) is missing")
    script = user.script(home, replies)
    return user.measured("run", "--home", str(home), "--model", f"scripted:{script}", wrap=wrap)


def test_an_mcp_server_printing_a_gigabyte_of_stderr_then_crashing_mid_call(agent_user):
    server = agent_user.folder("server") / SERVER.name
    shutil.copy(SERVER, server)
    agent_user.give(server)
    home = agent_user.make_home(
        {
            "mcp_servers": {"noisy": {"command": "/usr/bin/python3", "args": [str(server), str(NOISE)]}},
            "mcp_timeout": 120,
        }
    )
    # no file-size limit here: the peak memory is what tells (stderr read whole held it all)
    code, peak, output = _run(agent_user, home, [{"tool": "noisy__flood", "args": {}}, done()], wrap=())
    assert code == 0, output
    notes = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"]
    (line,) = [n for n in notes.splitlines() if n.startswith("[TOOL ERROR] noisy__flood(")]
    assert LAST_WORDS in line, line  # the end of its stderr, read from the kept tail
    assert peak < PEAK_KIB, f"peak {peak // 1024} MiB"


def test_an_on_cycle_end_hook_printing_a_gigabyte(agent_user):
    home = agent_user.make_home({"on_cycle_end": _printer(agent_user, 3)})
    code, peak, output = _run(agent_user, home, [done()])
    assert code == 0, output
    log = next((home / "logs").glob("cycle_*.log")).read_text()
    (failed,) = [line for line in log.splitlines() if "on_cycle_end failed:" in line]
    assert "on_cycle_end failed: /usr/bin/python3: exit 3" in failed and failed.endswith("LAST-LINE"), failed[:300]
    assert peak < PEAK_KIB, f"peak {peak // 1024} MiB"


def test_a_wake_when_command_printing_a_gigabyte(agent_user):
    home = agent_user.make_home({"wake_when": _printer(agent_user, 0), "idle": "skip"})
    code, peak, output = _run(agent_user, home, [done()])
    assert code == 0, output
    notes = yaml.safe_load((home / "scratchpad" / "active.yaml").read_text())["notes"]
    (wake,) = [n for n in notes.splitlines() if n.startswith("[WAKE]")]
    assert wake.startswith("[WAKE] wake_when: FIRST-LINE; yyyy") and len(wake) < 4096, wake[:200]
    assert peak < PEAK_KIB, f"peak {peak // 1024} MiB"
