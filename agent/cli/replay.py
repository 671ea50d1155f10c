"""`agent replay CYCLE --model M`: run a past cycle again, from the state it started with, on
another model, and show both outcomes side by side. Production history becomes an evaluation set.

The replay runs in a scratch copy of the home (a temporary folder): config.yaml, rules.md,
templates/ and the workspace are copied, and its active.yaml is the cycle's `_before` snapshot.
The replay's tools act on that copy. The home itself is only read: its scratchpad/ and logs/
are never written, its lock is not taken, and neither its on_cycle_end command nor its metrics
file hear of the replay: the copy's config.yaml leaves them out, with wake_when and (unless
--with-mcp) mcp_servers (isolation.py), so a copy kept with --keep and run later reaches none
of them either. The workspace is copied as it is now; its state when the cycle ran is
not recorded anywhere.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from agent.after.transcript import read_transcript
from agent.cli.common import clip, existing_home, home_option, print_json, reports_errors
from agent.cli.diffing import summarize_change, summary_lines
from agent.cli.isolation import SIDE_EFFECT_SETTINGS, without_settings
from agent.cli.logs import chosen_cycle
from agent.common.escape import escape_controls
from agent.common.files import atomic_write
from agent.common.outcomes import UsageError
from agent.common.plain import plain
from agent.common.walk import copy_tree, remove_tree
from agent.config import Settings, load_settings
from agent.cycle.run import run_cycle
from agent.models import resolve_model
from agent.models.replies import ReplyError, parse_reply
from agent.models.resolve import anchor_model_path
from agent.scratchpad import read_state_file
from agent.secrets import Secrets
from agent.store.cycles import record_of
from agent.store.home import Home

# Never copied into the scratch home: the runtime's own files, and version control.
NOT_COPIED = (*(path.name for path in Home(Path()).runtime_files), ".git")
COLUMN = 46  # characters of the recorded column before the replay's


def make_scratch_home(
    home: Home, settings: Settings, cycle_id: str, folder: Path, without: tuple[str, ...] = SIDE_EFFECT_SETTINGS
) -> Home:
    """A copy of `home` in `folder` that starts where `cycle_id` started, its config.yaml without the
    settings named in `without` (isolation.py). Folders are copied by the bounded walk (`common/walk.py`);
    what it leaves out (a tree too deep) is said on stderr."""
    scratch = Home(folder)
    if Path(settings.workspace).parts:  # a workspace folder: only it and the operator's files are needed
        names = [*(path.name for path in home.operator_files), settings.workspace]
    else:  # workspace ".": the tools reach the whole home: copy it, but for the runtime's files
        names = [p.name for p in home.root.iterdir() if p.name not in NOT_COPIED]
    for name in names:
        source, target = home.root / name, folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir() and not source.is_symlink():
            left_out = copy_tree(source, target).describe()  # a workspace folder named logs/ is the model's
            if left_out:
                click.echo(f"replay: not copied from {escape_controls(name)}/: {left_out}", err=True)
        elif source.exists() or source.is_symlink():
            shutil.copy2(source, target, follow_symlinks=False)
    scratch.ensure_dirs()
    shutil.copyfile(home.snapshot(cycle_id, "before"), scratch.active)
    if scratch.config.is_file():  # a kept copy (--keep) run later must not reach the home's side effects either
        text, _ = without_settings(scratch.config.read_text(encoding="utf-8"), home.config, without, "agent replay")
        atomic_write(scratch.config, text.encode("utf-8"))
    return scratch


def actions(home: Home, cycle_id: str, counted: Any) -> list[str]:
    """The tools a cycle called, in order, from its transcript; without one, its record's counts."""
    names: list[str] = []
    for _, record in read_transcript(home, cycle_id):
        if "reply" not in record:
            names.append("(cut)" if "cut" in record else "(model error)")
            continue
        calls = record.get("tool_calls")
        called = (
            [str((c.get("function") or {}).get("name")) for c in calls if isinstance(c, dict)]
            if isinstance(calls, list) and calls
            else []
        )  # a native reply: each call is an action
        try:
            called = called or [str(parse_reply(record["reply"]).get("tool"))]
        except ReplyError:
            called = ["(unparseable)"]
        names += [name if record.get("purpose") == "action" else f"{record.get('purpose')}:{name}" for name in called]
    if not names and isinstance(counted, dict):  # no transcript (pruned, or transcript_max_bytes: 0)
        return [f"{kind}x{n}" for kind, n in counted.items()]
    return names


def _change(home: Home, cycle_id: str) -> dict | None:
    """What the cycle changed, before snapshot to after snapshot (None: no after snapshot)."""
    after = home.snapshot(cycle_id, "after")
    if not after.is_file():
        return None
    return summarize_change(
        read_state_file(home.snapshot(cycle_id, "before"), home.root), read_state_file(after, home.root)
    )


def side(record: dict, home: Home, cycle_id: str) -> dict:
    """One outcome: how the cycle ended, what it did, and what it changed."""
    return {
        "cycle_id": cycle_id,
        "model": record.get("model"),
        "stop_reason": record.get("stop_reason"),
        "exit_code": record.get("exit_code"),
        "iterations": record.get("iterations"),
        "usage": record.get("usage"),
        "error": record.get("error"),
        "actions": actions(home, cycle_id, record.get("actions")),
        "change": _change(home, cycle_id),
    }


def _rows(outcome: dict) -> dict[str, str]:
    usage = outcome["usage"] if isinstance(outcome["usage"], dict) else {}
    rows = {
        "model": plain(outcome["model"], "(not recorded)"),
        "stop reason": f"{plain(outcome['stop_reason'], '?')} (exit {plain(outcome['exit_code'], '?')})",
        "iterations": plain(outcome["iterations"], "-"),
        "tokens": plain(usage.get("total_tokens"), "-"),
        "actions": ", ".join(outcome["actions"]) or "(none)",
    }
    if outcome["error"]:
        rows["error"] = plain(outcome["error"])
    for line in summary_lines(outcome["change"]) if outcome["change"] else ["state: no after snapshot"]:
        label, _, text = line.partition(": ")
        if label != "last_updated":  # a snapshot never stamps it: always "unchanged"
            rows[label] = text
    return rows


def side_by_side(recorded: dict, replayed: dict) -> list[str]:
    left, right = _rows(recorded), _rows(replayed)
    labels = list(left) + [label for label in right if label not in left]
    width = max(len(label) for label in labels) + 2
    lines = [f"{'':{width}}{'recorded ' + recorded['cycle_id']:{COLUMN}}  replay"]
    for label in labels:
        cell = escape_controls(clip(left.get(label, "-"), COLUMN))
        lines.append(f"{label:{width}}{cell:{COLUMN}}  {escape_controls(right.get(label, '-'))}")
    return lines


@click.command()
@home_option
@click.argument("cycle_id", metavar="CYCLE")
@click.option("--model", required=True, help="The model to replay the cycle on: PROVIDER[:NAME], as for agent run.")
@click.option("--keep", is_flag=True, help="Keep the scratch home the replay ran in (its path is printed).")
@click.option("--json", "as_json", is_flag=True, help="Print both outcomes as JSON.")
@click.option("--with-mcp", is_flag=True, help="Start the home's MCP servers too (their tools act outside the copy).")
@reports_errors
def replay(home_dir: Path, cycle_id: str, model: str, keep: bool, as_json: bool, with_mcp: bool) -> None:
    """Run CYCLE again from its before snapshot on another model, in a scratch copy of the home,
    and show both outcomes side by side: stop reason, actions in order, and the state change.

    The home is only read: its scratchpad/ and logs/ are never written; the replay's tools work
    on the copy. MCP servers are not started unless --with-mcp: what their tools do (a git
    commit, a message sent) happens outside the copy. `latest` names the newest cycle.
    """
    home = existing_home(home_dir)
    chosen = chosen_cycle(home, cycle_id)
    if not home.snapshot(chosen, "before").is_file():
        raise UsageError(
            f"cycle {chosen} has no before snapshot to replay "
            f"(scratchpad/{chosen}_before.yaml is missing: the cycle was pruned)"
        )
    settings = load_settings(home.root, model=anchor_model_path(model, Path.cwd())).replace(
        fallback_models=[], model_budgets={}
    )  # the model asked for, and only that one
    secrets = Secrets.from_settings(settings)  # the replay's one: the model and the cycle share it
    chosen_model = resolve_model(settings, home.root, secrets=secrets)
    # nothing outside the copy may hear of the replay
    settings = dataclasses.replace(settings, on_cycle_end=None, metrics_file=None, lock_wait=0.0)
    if settings.mcp_servers and not with_mcp:
        click.echo(
            f"MCP servers not started ({', '.join(sorted(settings.mcp_servers))}): their tools act outside "
            f"the scratch copy; --with-mcp starts them",
            err=True,
        )
        settings = dataclasses.replace(settings, mcp_servers={})
    recorded_record = record_of(home, chosen)[1] or {"stop_reason": "incomplete", "model": None}
    folder = Path(tempfile.mkdtemp(prefix="agent-replay-"))
    try:
        kept_mcp = ("mcp_servers",) if with_mcp else ()
        left_out = tuple(name for name in SIDE_EFFECT_SETTINGS if name not in kept_mcp)
        scratch = make_scratch_home(home, settings, chosen, folder, left_out)
        click.echo(f"replaying cycle {chosen} on {chosen_model.name} in {folder}", err=True)
        report = run_cycle(
            scratch, settings, chosen_model, force=True, secrets=secrets
        )  # it ran: no wake_when, no idle
        recorded = side(recorded_record, home, chosen)
        replayed = side(report.index_record(), scratch, report.cycle_id)
    finally:
        if not keep:
            remove_tree(folder)  # however deep the replay's tools made it
    if as_json:
        print_json(
            {
                "cycle_id": chosen,
                "recorded": recorded,
                "replay": replayed,
                "scratch_home": str(folder) if keep else None,
            }
        )
        return
    click.echo(f"replay of cycle {chosen} from scratchpad/{chosen}_before.yaml on {chosen_model.name}")
    for line in side_by_side(recorded, replayed):
        click.echo(line)
    if keep:
        click.echo(f"scratch home kept: {folder}")
