"""What each command of the default shell allowlist may be given: a read-only argument policy.

Every default command gets an explicit list of the options it may take; anything else is
refused before it runs (default deny). That is how options that set the clock (`date -s`),
read a list of files (`wc --files0-from`, `date -f`), follow forever (`tail -f`) or reach
outside the workspace are kept out, whatever spelling is tried:

- long options match exactly: GNU getopt would also take an unambiguous abbreviation
  (`--s=...` for `--set`, `--foll`), so no abbreviation is accepted, even of an allowed option;
- short options may be combined (`-la`); each letter is checked, and a letter that takes a
  value takes the rest of the cluster or the next argument, as getopt does (`-n5`, `-n 5`);
- options after operands count as options (GNU permutes them), and `--` ends the options:
  whatever follows is an operand;
- operands are paths inside the workspace (checked like the file tools' paths; one starting
  with `+`, which GNU tools read as an option, as tail's obsolete `+f` follow is refused), a `+FORMAT`
  (date: any other operand would set the clock), or not allowed at all; echo's arguments are
  all text it prints.

A command an operator adds to `shell_allowlist` has no policy here: only its path check applies,
and an argument starting with `+` is refused. The list no longer grows case by case: new power
goes to the sandbox (sandbox.py), where the kernel, not a list, keeps commands in the workspace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

NUMBER = r"[+-]?\d{1,18}[A-Za-z]{0,3}"  # head/tail counts: 5, -5, +5, 10K, 1MB
ANY_TEXT = r"[^\x00]*"


@dataclass(frozen=True)
class ArgumentPolicy:
    """The options and operands one command may be given."""

    flags: str = ""  # short options without a value (-l, -la)
    valued: dict[str, str] = field(default_factory=dict)  # short option -> regex its value must match
    long_flags: frozenset[str] = frozenset()  # --name exactly
    long_valued: dict[str, str] = field(default_factory=dict)  # --name=VALUE or --name VALUE, exactly
    operands: str = "paths"  # paths | format | none | text (all args)
    obsolete_count: bool = False  # head/tail's -5 (= -n 5)

    def describe(self) -> str:
        shown = [f"-{c}" for c in self.flags] + [f"-{c} VALUE" for c in self.valued]
        shown += [f"--{n}" for n in sorted(self.long_flags)] + [f"--{n}=VALUE" for n in sorted(self.long_valued)]
        return ", ".join(shown) or "no options"


_HEAD_TAIL = ArgumentPolicy(
    flags="qvz",
    valued={"n": NUMBER, "c": NUMBER},
    long_flags=frozenset({"quiet", "silent", "verbose", "zero-terminated"}),
    long_valued={"lines": NUMBER, "bytes": NUMBER},
    obsolete_count=True,
)

POLICIES: dict[str, ArgumentPolicy] = {
    # not -s/--set (sets the clock), -f/--file (reads a list of dates), -r/--reference (stats a file)
    "date": ArgumentPolicy(
        flags="uRI",
        valued={"d": ANY_TEXT},
        long_flags=frozenset({"utc", "universal", "rfc-email", "iso-8601"}),
        long_valued={"date": ANY_TEXT, "iso-8601": "date|hours|minutes|seconds|ns", "rfc-3339": "date|seconds|ns"},
        operands="format",
    ),
    # not -L/-H/--dereference* (would follow symlinks out of the workspace while listing)
    "ls": ArgumentPolicy(
        flags="1aAbBcCdfFghiklmnNopqQrRsStuUvxX",
        long_flags=frozenset(
            {
                "all",
                "almost-all",
                "human-readable",
                "si",
                "recursive",
                "reverse",
                "size",
                "inode",
                "classify",
                "directory",
                "numeric-uid-gid",
                "no-group",
                "full-time",
            }
        ),
        long_valued={
            "sort": "none|size|time|version|extension|name|width",
            "time": "atime|access|use|ctime|status|birth|creation|mtime|modification",
            "format": "across|commas|horizontal|long|single-column|verbose|vertical",
        },
    ),
    "cat": ArgumentPolicy(
        flags="AbeEnstTuv",
        long_flags=frozenset(
            {"show-all", "number-nonblank", "show-ends", "number", "squeeze-blank", "show-tabs", "show-nonprinting"}
        ),
    ),
    # echo reads nothing and changes nothing: every argument is text it prints (or -n, -e, -E)
    "echo": ArgumentPolicy(operands="text"),
    "uname": ArgumentPolicy(
        flags="asnrvmpio",
        long_flags=frozenset(
            {
                "all",
                "kernel-name",
                "nodename",
                "kernel-release",
                "kernel-version",
                "machine",
                "processor",
                "hardware-platform",
                "operating-system",
            }
        ),
        operands="none",
    ),
    "pwd": ArgumentPolicy(flags="LP", long_flags=frozenset({"logical", "physical"}), operands="none"),
    # not --files0-from (reads a list of file names: anything on the machine)
    "wc": ArgumentPolicy(
        flags="clmwL",
        long_flags=frozenset({"bytes", "chars", "lines", "words", "max-line-length"}),
        long_valued={"total": "auto|always|only|never"},
    ),
    "head": _HEAD_TAIL,
    # not -f/-F/--follow/--retry/--pid/-s (follow forever), same as head otherwise
    "tail": _HEAD_TAIL,
    "df": ArgumentPolicy(
        flags="ahHiklPT",
        valued={"t": r"[a-z0-9.]+", "x": r"[a-z0-9.]+"},
        long_flags=frozenset(
            {"all", "human-readable", "si", "inodes", "local", "portability", "print-type", "total", "output"}
        ),
        long_valued={"output": r"[a-z,]+", "type": r"[a-z0-9.]+", "exclude-type": r"[a-z0-9.]+"},
    ),
    # coreutils' uptime takes a FILE (a utmp file to read): no operands
    "uptime": ArgumentPolicy(flags="ps", long_flags=frozenset({"pretty", "since"}), operands="none"),
    "whoami": ArgumentPolicy(operands="none"),
}


def option_refusal(command: str, policy: ArgumentPolicy, args: list[str]) -> tuple[str | None, list[str]]:
    """(why the options are refused or None, the operands to check as paths)."""
    if policy.operands == "text":
        return None, []
    operands: list[str] = []
    pending = list(args)
    options_ended = False
    while pending:
        arg = pending.pop(0)
        if options_ended or arg == "-" or not arg.startswith("-"):
            operands.append(arg)
        elif arg == "--":
            options_ended = True
        else:
            refused = _option_refusal(command, policy, arg, pending)
            if refused:
                return refused, operands
    return _operands_refusal(command, policy, operands)


def _option_refusal(command: str, policy: ArgumentPolicy, arg: str, pending: list[str]) -> str | None:
    """Why one option word is refused, or None; a value it takes from the next argument is popped from `pending`."""
    if arg.startswith("--"):
        return _long_option_refusal(command, policy, arg, pending)
    if policy.obsolete_count and re.fullmatch(r"-\d{1,18}", arg):
        return None
    return _short_options_refusal(command, policy, arg, pending)


def _long_option_refusal(command: str, policy: ArgumentPolicy, arg: str, pending: list[str]) -> str | None:
    """--name matches a flag exactly; --name=VALUE or --name VALUE a valued option and its pattern."""
    name, has_value, value = arg[2:].partition("=")
    if name in policy.long_flags and not has_value:
        return None
    if name not in policy.long_valued:
        return f"option '{arg}' is not allowed for {command} (allowed: {policy.describe()})"
    value = value if has_value else (pending.pop(0) if pending else None)
    if value is None or not re.fullmatch(policy.long_valued[name], value):
        return f"option '--{name}' needs a value matching {policy.long_valued[name]!r}"
    return None


def _short_options_refusal(command: str, policy: ArgumentPolicy, arg: str, pending: list[str]) -> str | None:
    """A cluster of short options (-la): each letter a flag, until one that takes a value takes the
    rest of the cluster or else the next argument, as getopt does."""
    for at, letter in enumerate(arg[1:], start=2):
        if letter in policy.flags:
            continue
        if letter not in policy.valued:
            return f"option '-{letter}' (in '{arg}') is not allowed for {command} (allowed: {policy.describe()})"
        value = arg[at:] or (pending.pop(0) if pending else None)
        if value is None or not re.fullmatch(policy.valued[letter], value):
            return f"option '-{letter}' needs a value matching {policy.valued[letter]!r}"
        return None
    return None


def _operands_refusal(command: str, policy: ArgumentPolicy, operands: list[str]) -> tuple[str | None, list[str]]:
    """(why the operands are refused or None, the operands to check as paths) for the policy's kind."""
    if policy.operands == "paths":
        unclassified = next((op for op in operands if op.startswith("+")), None)
        if unclassified is not None:
            return (
                f"operand '{unclassified}' is not a path the allowlist can classify (GNU tools read a leading "
                f"'+' as an option: tail +f follows forever)"
            ), []
        return None, operands
    if policy.operands == "none" and operands:
        return f"{command} takes no operands here, got '{operands[0]}'", []
    if policy.operands == "format":
        wrong = [op for op in operands if not op.startswith("+")]
        if wrong:
            return f"{command} takes only a +FORMAT operand here (any other would set the clock), got '{wrong[0]}'", []
    return None, []
