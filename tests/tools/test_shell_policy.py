"""The shell allowlist is read-only: every default command has an argument policy that refuses
options which set, write, delete, read a list of files, follow forever or reach outside the
workspace, in every spelling GNU getopt would accept."""

from __future__ import annotations

import time

import pytest

from agent.common.tags import Tag
from agent.config import DEFAULT_SHELL_ALLOWLIST
from agent.tools.shell_policy import POLICIES, option_refusal
from tests.helpers import tree_digest
from tests.tools.helpers import call, ctx_for


@pytest.fixture
def shome(tmp_path):
    """A home whose workspace holds a text file and a list naming files outside."""
    home = tmp_path / "home"
    ws = home / "workspace"
    ws.mkdir(parents=True)
    (ws / "notes.txt").write_text("one\ntwo\nthree\n")
    (ws / "list.txt").write_text("/etc/passwd\0/etc/shadow\0")
    (ws / ".env").write_text("OPENAI_API_KEY=sk-live-abcdef123456\n")
    (home / "config.yaml").write_text("model: x\n")
    (tmp_path / "secret.txt").write_text("s3cr3t")
    return home


def test_every_default_command_has_an_argument_policy():
    assert sorted(POLICIES) == sorted(DEFAULT_SHELL_ALLOWLIST)


DANGEROUS = [
    # date: set the clock, read a list of dates, stat a file
    "date -s 2001-01-01",
    "date --set=@0",
    "date --set 2001-01-01",
    "date -s@0",
    "date -us 2001-01-01",
    "date -u -s 2001-01-01",
    "date --s=2001-01-01",
    "date --se=2001-01-01",
    "date --se 2001-01-01",
    "date 010100002001",
    "date -- 010100002001",
    "date +%s 010100002001",
    "date -f list.txt",
    "date --file=list.txt",
    "date --fi=list.txt",
    "date -r notes.txt",
    "date --reference=/etc/passwd",
    "date -d today -s 2001-01-01",
    "date -ud@0 -s 1",
    # wc / head / tail / cat: a list of files to read
    "wc --files0-from=list.txt",
    "wc -c --files0-from=list.txt",
    "wc --files0=list.txt",
    "wc --files0-from list.txt",
    "wc --f=list.txt",
    "wc notes.txt --files0-from=list.txt",
    "head --files0-from=list.txt",
    # tail: follow forever
    "tail -f notes.txt",
    "tail -F notes.txt",
    "tail --follow notes.txt",
    "tail --follow=name notes.txt",
    "tail --foll notes.txt",
    "tail --fo notes.txt",
    "tail -nf 1 notes.txt",
    "tail -n1 -f notes.txt",
    "tail notes.txt -f",
    "tail -qf notes.txt",
    "tail --retry notes.txt",
    "tail --pid=1 notes.txt",
    "tail -s 1 notes.txt",
    "tail -5f notes.txt",
    "tail --max-unchanged-stats=1 notes.txt",
    # ls: dereference symlinks out while listing
    "ls -L",
    "ls -lL",
    "ls --dereference",
    "ls -H",
    "ls --deref",
    # options with values that are paths, or unknown options
    "cat --number=/etc/passwd",
    "head -n /etc/passwd notes.txt",
    "head --lines=x notes.txt",
    "df --output=source /etc",
    "uname -X",
    "pwd --help=x",
    "whoami root",
    "whoami -x",
    "uptime /var/run/utmp",
    "uname /etc",
    "pwd /etc",
    # paths outside the workspace: absolute, .., ~, after --, after operands, glued
    "cat /etc/passwd",
    "cat ../config.yaml",
    "cat -- /etc/passwd",
    "cat -- ../config.yaml",
    "ls ../",
    "ls ..",
    "ls -la ..",
    "ls notes.txt /etc",
    "df /",
    "df -h /etc",
    "wc -l ~/.bashrc",
    "head -n1 -- ~root/x",
    "tail -n 1 /etc/shadow",
    "ls -- -l ../",
    "cat .env",
    "wc -c .env",
    "head -- .env",
]


@pytest.mark.parametrize("command", DANGEROUS)
def test_dangerous_options_and_paths_are_refused_before_anything_runs(shome, command):
    before = tree_digest(shome.parent)
    started = time.monotonic()
    kind, note = call(ctx_for(shome), "shell", command=command)
    assert kind is Tag.TOOL_ERROR, note
    assert "s3cr3t" not in note and "sk-live" not in note and "root:" not in note
    assert time.monotonic() - started < 5  # refused, not run until a timeout
    assert tree_digest(shome.parent) == before


SAFE = [
    ("date -u", "UTC"),
    ("date -u +%Y", ""),
    ("date --utc --iso-8601=seconds", "T"),
    ("date -d @0 -u +%Y", "1970"),
    ("date --date=@0 -u +%Y", "1970"),
    ("date -uR", "+0000"),
    ("date -I", "-"),
    ("ls", "notes.txt"),
    ("ls -la", "notes.txt"),
    ("ls -l -- notes.txt", "notes.txt"),
    ("ls --sort=size -1", "notes.txt"),
    ("cat notes.txt", "three"),
    ("cat -n notes.txt", "1 one"),
    ("cat -- notes.txt", "one"),
    ("echo -n hello -x --set=1 /etc", "hello -x --set=1 /etc"),
    ("uname -s", "Linux"),
    ("uname --kernel-name", "Linux"),
    ("pwd", "/workspace"),
    ("pwd -P", "/workspace"),
    ("wc -l notes.txt", "3 notes.txt"),
    ("wc --lines notes.txt", "3"),
    ("wc notes.txt -c", "14"),
    ("head -n 1 notes.txt", "one"),
    ("head -n1 notes.txt", "one"),
    ("head -1 notes.txt", "one"),
    ("head --lines=2 notes.txt", "two"),
    ("head -c 3 notes.txt", "one"),
    ("tail -n 1 notes.txt", "three"),
    ("tail -n +3 notes.txt", "three"),
    ("tail --lines=1 notes.txt", "three"),
    ("tail -qn1 notes.txt", "three"),
    ("df -h .", "%"),
    ("df --output=size .", ""),
    ("uptime", ""),
    ("whoami", ""),
]


@pytest.mark.parametrize("command, expected", SAFE)
def test_read_only_uses_of_every_default_command_still_run(shome, command, expected):
    kind, note = call(ctx_for(shome), "shell", command=command)
    assert kind is Tag.TOOL and expected in note, note


def test_long_options_match_exactly_so_no_abbreviation_gets_through():
    date = POLICIES["date"]
    assert option_refusal("date", date, ["--utc"])[0] is None
    for abbreviation in ("--ut", "--u", "--s=1", "--se=1", "--set=1", "--iso=seconds"):
        assert "is not allowed for date" in option_refusal("date", date, [abbreviation])[0]


def test_a_value_taking_short_option_takes_the_rest_of_its_cluster_or_the_next_argument():
    head = POLICIES["head"]
    assert option_refusal("head", head, ["-qn5", "a.txt"]) == (None, ["a.txt"])
    assert option_refusal("head", head, ["-n", "-5", "a.txt"]) == (None, ["a.txt"])
    assert "needs a value" in option_refusal("head", head, ["-n"])[0]
    assert "needs a value" in option_refusal("head", head, ["-nx"])[0]


def test_everything_after_a_double_dash_is_an_operand_checked_as_a_path(shome):
    assert option_refusal("cat", POLICIES["cat"], ["--", "-n", "x"]) == (None, ["-n", "x"])
    kind, note = call(ctx_for(shome), "shell", command="cat -- -n")
    assert kind is Tag.TOOL and "No such file" in note  # ran, reading a file named -n in the workspace


def test_the_any_policy_is_an_explicit_opt_in_that_skips_every_argument_check(shome):
    kind, note = call(ctx_for(shome, shell_policy="any"), "shell", command="wc -c --files0-from=list.txt")
    assert kind is Tag.TOOL and "/etc/passwd" in note  # the risk the operator opted into


@pytest.mark.parametrize(
    "command, args, refusal, operands",
    [
        ("head", ["--lines"], "option '--lines' needs a value matching", []),
        ("head", ["--lines=x"], "option '--lines' needs a value matching", []),
        ("wc", ["--total", "x"], "option '--total' needs a value matching 'auto|always|only|never'", []),
        ("ls", ["a", "-Z", "b"], "option '-Z' (in '-Z') is not allowed for ls (allowed: -1, ", ["a"]),
        ("pwd", ["x"], "pwd takes no operands here, got 'x'", []),
        ("date", ["0101"], "date takes only a +FORMAT operand here (any other would set the clock), got '0101'", []),
        ("tail", ["+f"], "operand '+f' is not a path the allowlist can classify", []),
        ("date", ["+%Y", "-d", "@0"], None, []),  # a +FORMAT is not a path to check
        ("tail", ["a", "-5", "b"], None, ["a", "b"]),  # the obsolete count among operands
        ("echo", ["-Z", "/etc"], None, []),  # echo's arguments are text it prints
    ],
)
def test_each_refusal_names_the_option_or_operand_and_paths_are_returned_to_check(command, args, refusal, operands):
    problem, paths = option_refusal(command, POLICIES[command], args)
    assert (problem is None) == (refusal is None) and (refusal is None or problem.startswith(refusal)), problem
    assert paths == operands
