"""logs/cycle_<id>.log (agent/after/cycle_log.py): one line per call, secrets redacted, nothing the
model wrote can forge a line or drive a terminal, bounded, and a failing disk is no crash."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.after.cycle_log import CycleLog
from agent.common.outcomes import DiskError
from agent.secrets import Secrets

SECRET = "sk-cycle-log-0123456789"
STAMP = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} ")


def test_each_call_writes_one_stamped_line_with_controls_escaped_and_secrets_redacted(tmp_path: Path):
    path = tmp_path / "cycle.log"
    with CycleLog(path, Secrets([SECRET])) as log:
        log("first")
        log(f"forged\n12:00:00.000 [DONE] fake line\x1b[2J key={SECRET}")
        log(12345)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(STAMP.match(line) for line in lines)
    assert lines[1].endswith("forged\\n12:00:00.000 [DONE] fake line\\x1b[2J key=[REDACTED]")
    assert lines[2].endswith(" 12345")
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_block_is_indented_under_a_bar_line_by_line(tmp_path: Path):
    path = tmp_path / "cycle.log"
    with CycleLog(path, Secrets([SECRET])) as log:
        log.block(f"Traceback (most recent call last):\n  File x\nValueError: {SECRET}\x07")
    lines = path.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [
        "  | Traceback (most recent call last):",
        "  |   File x",
        "  | ValueError: [REDACTED]\\x07",
    ]


def test_the_log_appends_to_what_is_there(tmp_path: Path):
    path = tmp_path / "cycle.log"
    path.write_text("12:00:00.000 an earlier line\n")
    with CycleLog(path, Secrets()) as log:
        log("more")
    assert (
        path.read_text().splitlines()[0] == "12:00:00.000 an earlier line" and len(path.read_text().splitlines()) == 2
    )


def test_the_cycle_log_stops_at_its_size_limit_with_one_marker_line(tmp_path):
    path = tmp_path / "cycle.log"
    with CycleLog(path, Secrets([]), max_bytes=100_000) as log:
        for _ in range(1000):
            log("r" * 1000)  # a model that floods the log with raw replies
    text = path.read_text()
    assert len(text.encode()) <= 100_000
    assert text.splitlines()[-1].endswith("[log cut here: over its size limit; the transcript and index keep the rest]")
    assert text.count("log cut here") == 1


def test_a_log_that_cannot_be_opened_is_a_disk_error_naming_it(tmp_path: Path):
    path = tmp_path / "missing" / "cycle.log"
    with pytest.raises(DiskError, match=re.escape(f"could not write {path}")):
        CycleLog(path, Secrets())


def test_a_full_disk_stops_the_log_without_raising():
    log = CycleLog(Path("/dev/full"), Secrets())
    log("this line cannot be written")
    assert isinstance(log.failed, OSError)
    log("nor this one, and no exception either")
    log.close()
