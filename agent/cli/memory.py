"""`agent memory`: the sections config.yaml defines, as the operator sees and edits them.

    agent memory                       each section, the most stable first, with its fill and entries
    agent memory add SECTION TEXT      an entry of a list (or a line of a text), by: operator
    agent memory drop SECTION ID       an entry of a list, archived
    agent memory set SECTION TEXT      a text section's whole text ('' empties it), the old one archived
    agent memory --at WHEN             the memory as a cycle left it then (memory_time.py: its reach)
    agent memory --history ID          one entry's life: added, stated, merged, left, superseded
    agent memory --history notes:TEXT  a plain entry's provenance, by its text (notes, completed_tasks, queue)

An edit is the operator's (agent/memory/section_edits.py `operator_edit`): read-only sections included,
never bound by the per-cycle share, within the limits. Like `agent task`, it never blocks and is
never lost: while a cycle holds the lock it waits in the inbox for the next wake
(agent/cli/steer.py `edit_state`, the one path every operator edit takes).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click

import agent.memory.queue_edits as queue_edits
from agent.cli.common import (
    echo,
    existing_home,
    home_option,
    json_option,
    operator_text,
    print_json,
    reports_errors,
)
from agent.cli.steer import edit_state, wait_option
from agent.common.outcomes import UsageError
from agent.config import load_settings
from agent.memory.builtin import Stamp
from agent.memory.inbox import queued_edits
from agent.memory.section_edits import operator_edit
from agent.memory.section_settle import over_limits
from agent.memory.sections import OPERATOR, checked, fill, shown_entries, specs_by_name, text_of
from agent.scratchpad import load_state
from agent.setting_checks import SectionSpec, by_stability
from agent.store.home import Home

NO_SECTIONS = "config.yaml defines no sections: the memory is the scratchpad's fields (agent show)"


@click.group(invoke_without_command=True)
@home_option
@click.option(
    "--at",
    "when",
    metavar="WHEN",
    help="The memory as it was then, from the snapshots: a cycle id, a UTC date (2026-11-20), an ISO "
    "time or a duration ago (7d). It reaches back to the oldest cycle whose snapshots are kept.",
)
@click.option(
    "--history",
    "entry_id",
    metavar="ID",
    help="One entry's life: added, stated, merged, left, superseded. A plain entry by its text: "
    "notes:TEXT, completed_tasks:TEXT or queue:TEXT.",
)
@json_option
@click.pass_context
@reports_errors
def memory(ctx: click.Context, home_dir: Path, when: str | None, entry_id: str | None, as_json: bool) -> None:
    """The memory sections config.yaml defines: each with its fill and its entries (id, days, who
    wrote it), the most stable first; then the edits queued for the next wake and what is over a
    limit. `agent memory add|drop|set` edit them as the operator."""
    if ctx.invoked_subcommand is not None:
        return
    home = existing_home(home_dir)
    if when is not None and entry_id is not None:
        raise UsageError("--at and --history are two questions: ask one at a time")
    if when is not None:
        return _show_at(home, operator_text(when, "time"), as_json)
    if entry_id is not None:
        return _show_history(home, operator_text(entry_id, "id"), as_json)
    _show_now(home, as_json)


def _show_now(home: Home, as_json: bool) -> None:
    specs = load_settings(home.root).section_specs
    state = load_state(home)
    checked(state, specs, home.active)
    queued = [r for r in queued_edits(home) if str(r.get("op", "")).startswith("memory_")]
    if as_json:
        print_json(
            {
                "sections": [_section_json(state, spec) for spec in by_stability(specs)],
                "queued": queued,
                "warnings": over_limits(state, specs),
            }
        )
        return
    if not specs:
        echo(NO_SECTIONS)
        return
    for spec in by_stability(specs):
        for line in _section_lines(state, spec):
            echo(line)
    for record in queued:
        echo(f"queued: {queue_edits.describe(record)}  (applied at the next wake)")
    for warning in over_limits(state, specs):
        echo(f"warning: {warning}")


def _show_at(home: Home, when: str, as_json: bool) -> None:
    from agent.cli.memory_time import state_at  # only --at reads the snapshots

    specs = load_settings(home.root).section_specs
    found = state_at(home, when, _dt.datetime.now(_dt.timezone.utc))
    state = found["state"]
    fields = {key: state.get(key) for key in ("current_task", "pending_actions", "notes")}
    if as_json:
        sections = [_section_json(state, spec) for spec in by_stability(specs)]
        print_json({**{k: v for k, v in found.items() if k != "state"}, "sections": sections, **fields})
        return
    echo(f"memory as cycle {found['cycle_id']} left it ({found['snapshot']})")
    for spec in by_stability(specs):
        for line in _section_lines(state, spec):
            echo(line)
    echo(f"current task: {fields['current_task'] or '(none)'}")
    for n, task in enumerate(fields["pending_actions"] or [], 1):
        echo(f"  {n}. {task}")
    notes = fields["notes"] or ""
    echo("notes:" if notes else "notes: (none)")
    for line in notes.split("\n") if notes else []:
        echo(f"  {line}")
    echo(f"(--at reaches back to cycle {found['reaches_back_to']}, the oldest whose snapshots are kept)")


def _show_history(home: Home, entry_id: str, as_json: bool) -> None:
    from agent.cli.memory_time import entry_history, history_lines

    specs = load_settings(home.root).section_specs
    lists = {spec.name: spec for spec in specs if spec.is_list}
    history = entry_history(home, load_state(home), entry_id, lists)
    if as_json:
        print_json(history)
        return
    for line in history_lines(history):
        echo(line)


def _flags(spec: SectionSpec) -> str:
    return "".join(f", {word}" for word, on in (("read-only", spec.read_only), ("surface", spec.surface)) if on)


def _section_lines(state: dict, spec: SectionSpec) -> list[str]:
    head = f"{spec.name} ({fill(state, spec)}{_flags(spec)})"
    lines = [f"{head}  {spec.description}" if spec.description else head]
    if not spec.is_list:
        text = text_of(state, spec)
        return lines + ([f"  {line}" for line in text.split("\n")] if text else ["  (empty)"])
    entries = shown_entries(state, spec)
    for entry in entries:
        days = entry.get("days", 1)
        who = OPERATOR if entry.get("by") == OPERATOR else ""
        head = entry.get("id", "(adopted at the next wake)")
        lines.append(f"  {head}  {days} day{'s' if days != 1 else ''}  {who:<8} {entry.get('text')}")
    return lines + ([] if entries else ["  (empty)"])


def _section_json(state: dict, spec: SectionSpec) -> dict:
    shown = {
        "name": spec.name,
        "kind": spec.kind,
        "fill": fill(state, spec),
        "limit": spec.limit,
        "description": spec.description,
        "read_only": spec.read_only,
        "surface": spec.surface,
        "when_full": spec.when_full,
    }
    if spec.is_list:
        return {**shown, "entry_chars": spec.entry_chars, "entries": shown_entries(state, spec)}
    return {**shown, "text": text_of(state, spec)}


def _edit(home_dir: Path, lock_wait: float, as_json: bool, op: str, section: str, value: str) -> None:
    """Check the edit against config.yaml now (exit 2, nothing written or queued), then apply it or
    queue it for the next wake."""
    home = existing_home(home_dir)
    spec = _section(home, section)
    if op != "drop":  # what does not depend on the state is refused now, queued or not
        trial = operator_edit({}, spec, op, value, Stamp.of())
        if trial.refusal:
            raise UsageError(trial.refusal)
    edit_state(home_dir, lock_wait, queue_edits.memory_edit(op, section, value), as_json)


def _section(home: Home, name: str) -> SectionSpec:
    specs = load_settings(home.root).section_specs
    spec = specs_by_name(specs).get(name)
    if spec is None:
        known = ", ".join(s.name for s in specs)
        raise UsageError(
            f"there is no section {name!r} in config.yaml" + (f" (sections: {known})" if known else f"; {NO_SECTIONS}")
        )
    return spec


@memory.command("add")
@home_option
@click.argument("section")
@click.argument("text")
@wait_option
@json_option
@reports_errors
def memory_add(home_dir: Path, section: str, text: str, lock_wait: float, as_json: bool) -> None:
    """Add TEXT to SECTION as the operator: an entry of a list (restating one confirms it, and makes
    it the operator's), or a line of a text. Read-only sections too."""
    _edit(home_dir, lock_wait, as_json, "add", section, operator_text(text, "text"))


@memory.command("drop")
@home_option
@click.argument("section")
@click.argument("entry_id", metavar="ID")
@wait_option
@json_option
@reports_errors
def memory_drop(home_dir: Path, section: str, entry_id: str, lock_wait: float, as_json: bool) -> None:
    """Remove entry ID (as `agent memory` lists it) from the list SECTION, the operator's entries
    included; it goes to the archive."""
    _edit(home_dir, lock_wait, as_json, "drop", section, operator_text(entry_id, "id"))


@memory.command("set")
@home_option
@click.argument("section")
@click.argument("text")
@wait_option
@json_option
@reports_errors
def memory_set(home_dir: Path, section: str, text: str, lock_wait: float, as_json: bool) -> None:
    """Set the text SECTION to TEXT as given ('' empties it); the old text goes to the archive.
    Read-only sections too: this is how the operator writes them."""
    text = operator_text(text, "text") if text.strip() else ""
    _edit(home_dir, lock_wait, as_json, "set", section, text)
