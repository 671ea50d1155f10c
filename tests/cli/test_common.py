"""What the commands share (agent/cli/common.py): error reporting for every command, the home
checks, and the small formatting the listings use, each fed what a model or a broken home gives."""

from __future__ import annotations

import datetime as dt
import errno
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent.cli.common import (
    clip,
    echo,
    existing_home,
    home_settings,
    print_json,
    reports_errors,
    seconds_since,
    size,
    task_text,
    terminal_width,
    unusable_file,
)
from agent.common.outcomes import Busy, InvalidScratchpad, UsageError
from agent.config import Settings


def _command(exc: BaseException | None):
    @click.command()
    @reports_errors
    def command() -> None:
        click.echo("before")
        if exc is not None:
            raise exc

    return command


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (UsageError("bad flag\x1b[2J\nsecond line"), 2, "agent: error: bad flag\\x1b[2J\nsecond line\n"),
        (Busy("a cycle is running"), 5, "agent: error: a cycle is running\n"),
        (InvalidScratchpad("active.yaml: broken"), 6, "agent: error: active.yaml: broken\n"),
        (
            PermissionError(errno.EACCES, "Permission denied", "/home/x/logs/index.jsonl"),
            7,
            "agent: error: cannot use /home/x/logs/index.jsonl: Permission denied; check that this user owns",
        ),
        (IsADirectoryError(errno.EISDIR, "Is a directory"), 7, "cannot use a file of the home: Is a directory"),
    ],
)
def test_every_error_is_one_message_on_stderr_and_its_exit_code(exc, code: int, message: str):
    result = CliRunner().invoke(_command(exc), [])
    assert result.exit_code == code and result.stdout == "before\n"
    assert result.stderr.startswith(message) or message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_reader_that_went_away_is_exit_0_and_silence():
    result = CliRunner().invoke(_command(BrokenPipeError()), [])
    assert result.exit_code == 0 and result.stderr == ""


def test_any_other_exception_is_a_bug_and_not_swallowed():
    result = CliRunner().invoke(_command(KeyError("x")), [])
    assert isinstance(result.exception, KeyError)


def test_unusable_file_names_the_file_and_what_to_check():
    text = unusable_file(OSError(errno.EROFS, "Read-only file system", "/srv/agent/config.yaml"))
    assert text.startswith("cannot use /srv/agent/config.yaml: Read-only file system;") and "agent doctor" in text


def test_a_missing_home_is_a_usage_error_saying_how_to_make_one(tmp_path: Path):
    with pytest.raises(UsageError, match=r"home .*/nowhere does not exist \(create one with: agent init .*nowhere\)"):
        existing_home(tmp_path / "nowhere")
    (tmp_path / "scratchpad").mkdir()
    assert existing_home(tmp_path).root == tmp_path


def test_a_broken_config_gives_the_defaults_to_a_command_that_only_reads(tmp_path: Path):
    (tmp_path / "config.yaml").write_text("max_iterations: [not a number\n")
    assert home_settings(tmp_path) == Settings()
    (tmp_path / "config.yaml").write_text("max_iterations: 3\n")
    assert home_settings(tmp_path).max_iterations == 3


def test_printed_json_and_lines_obey_no_terminal_escape(capsys):
    print_json({"task": "a\x1b[2Jb\u202e", "n": dt.date(2026, 1, 1)})
    echo("one\ntwo\x07")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert '"n": "2026-01-01"' in out and out.endswith("one\\ntwo\\x07\n")


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("  several\n\tlines  here ", 60, "several lines here"),
        ("abcdef", 4, "abc…"),
        ("abcdef", 6, "abcdef"),
        ("abcdef", 0, "…"),
        ("x" * 500, None, "x" * 500),
        (["not", "text"], 60, "['not', 'text']"),
    ],
)
def test_clip_puts_anything_on_one_cut_line(text, limit, shown: str):
    assert clip(text, limit) == shown


@pytest.mark.parametrize(
    ("task", "line"),
    [
        ({"task": "rotate logs", "summary": "4 files"}, "rotate logs: 4 files"),
        ({"task": "rotate logs"}, "rotate logs"),
        ({"summary": "orphan summary"}, "(no task): orphan summary"),
        ({"other": 1, "more": "x"}, "other: 1; more: x"),
        ("a plain string", "a plain string"),
        (42, "42"),
    ],
)
def test_task_text_shows_any_completed_entry_on_one_line(task, line: str):
    assert task_text(task) == line


@pytest.mark.parametrize(
    ("num", "text"), [(0, "0 B"), (512, "512 B"), (1536, "1.5 KiB"), (3 << 20, "3.0 MiB"), (5 << 30, "5.0 GiB")]
)
def test_size_is_for_people(num: int, text: str):
    assert size(num) == text


def test_seconds_since_reads_a_stamp_and_nothing_else():
    an_hour_ago = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).isoformat()
    assert 3590 < seconds_since(an_hour_ago) < 3700
    naive = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert 3590 < seconds_since(naive) < 3700  # no zone: UTC
    for junk in (None, "", "yesterday", 12345, ["2026-01-01"]):
        assert seconds_since(junk) is None


@pytest.mark.parametrize(("columns", "width"), [("120", 120), ("", None), ("0", None), ("wide", None), ("-3", None)])
def test_off_a_terminal_the_width_is_columns_or_none(monkeypatch, columns: str, width):
    monkeypatch.setenv("COLUMNS", columns)
    assert terminal_width() == width
