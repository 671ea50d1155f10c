"""Going back and branching off: `agent restore` and `agent fork`.

`agent restore CYCLE[:before|:after]` makes a snapshot the state again, under the lock. The state
it replaces is never deleted: it goes to the archive (kind "replaced_state", `agent show --all`)
before active.yaml is replaced, so a crash in between can only leave it archived twice. Edits queued in
the inbox are applied to the state being replaced first (a restore means "exactly this state").
A restore also repairs a home whose active.yaml cannot be read: its raw text is archived instead.

`agent fork CYCLE[:before|:after] DIR` starts a new home from a snapshot: what `agent init DIR`
makes, with the source home's rules.md, config.yaml and examples.yaml (read as a cycle reads them:
regular files within their size limits, UTF-8), and that snapshot as its state. Its config.yaml
leaves out the settings that act beyond the home (isolation.py) unless --keep-side-effects.
"""

from __future__ import annotations

from pathlib import Path

import click

from agent.cli.common import existing_home, home_option, json_option, print_json, reports_errors, wait_option
from agent.cli.history import KnownCycles
from agent.cli.isolation import SIDE_EFFECT_SETTINGS, without_settings
from agent.cli.replacing import keep_section_ids, unusable_text
from agent.cli.setup import make_home, next_steps, print_steps
from agent.cli.snapshots import Side, resolve_snapshot
from agent.common.escape import escape_controls
from agent.common.outcomes import InvalidScratchpad, UsageError
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.config import MAX_CONFIG_BYTES, config_values, settings_from
from agent.cycle.examples import MAX_EXAMPLES_BYTES
from agent.cycle.prompt import MAX_RULES_BYTES
from agent.memory.inbox import apply_inbox
from agent.memory.queue_edits import dropped_line, dropped_tasks, queue_drops
from agent.scratchpad import load_state, write_state
from agent.state import now_iso
from agent.store.archive import REPLACED_STATE, Left, archive
from agent.store.home import Home
from agent.store.lock import home_lock


def _snapshot(home: Home, spec: str, under_lock: bool = False) -> Side:
    if spec.partition(":")[0] == "active":
        raise UsageError("name a cycle's snapshot (ID, ID:before or ID:after), not active")
    return resolve_snapshot(home, spec, "after", KnownCycles(home), under_lock)


def _replaced(home: Home) -> tuple[object, str]:
    """(what active.yaml holds now, inbox applied; why it is being archived)."""
    try:
        return apply_inbox(home, load_state(home)).state, "restore"
    except InvalidScratchpad as exc:  # restoring is how such a home is repaired: keep its raw text
        return unusable_text(home), f"restore; the replaced active.yaml could not be used: {exc}"


@click.command()
@home_option
@click.argument("cycle")
@wait_option
@json_option
@reports_errors
def restore(home_dir: Path, cycle: str, lock_wait: float, as_json: bool) -> None:
    """Make a cycle's snapshot the current state (active.yaml); the replaced state is archived.

    \b
      agent restore 20260401_100137          that cycle's after snapshot
      agent restore 20260401_100137:before   the state that cycle started from
    """
    home = existing_home(home_dir)
    if cycle.partition(":")[0] == "active":
        _snapshot(home, cycle)  # a usage error, busy or not
    with home_lock(home, wait=lock_wait):  # first: `latest` is then never a cycle still running (exit 5, or --wait)
        side = _snapshot(home, cycle, under_lock=True)
        home.ensure_dirs()
        replaced, reason = _replaced(home)
        source_cycle = Path(side.label).name.rsplit("_", 1)[0]
        dropped = dropped_tasks(replaced, side.state) if isinstance(replaced, dict) else []
        items = [Left(REPLACED_STATE, replaced, f"{reason} {side.label}")]
        items += queue_drops(dropped, f"restore {side.label}: not in the restored state's queue")
        archive(home, items, source_cycle)  # one transaction: the state and its tasks
        keep_section_ids(home, replaced)  # a restored older state never issues the replaced one's ids again
        restored = dict(side.state, last_updated=now_iso())
        write_state(home.active, restored)
    data = {
        "restored_from": side.label,
        "active": str(home.active),
        "replaced_state_archived_to": str(home.database.relative_to(home.root)),
        "current_task": restored["current_task"],
        "dropped_tasks": dropped,
    }
    if as_json:
        print_json(data)
        return
    task = escape_controls(restored["current_task"] or "(none)")
    click.echo(
        f"active.yaml is now {side.label} (task: {task}); the replaced state is archived in {data['replaced_state_archived_to']} (agent show --all)"
    )
    if dropped:
        click.echo(escape_controls(f"archived with it: {dropped_line(dropped, 'the restore')}"))


@click.command()
@home_option
@click.argument("cycle")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--keep-side-effects",
    is_flag=True,
    help="Keep on_cycle_end, metrics_file, wake_when and mcp_servers in the fork's config.yaml: its "
    "cycles then run this home's hook, write its metrics file and start its MCP servers.",
)
@json_option
@reports_errors
def fork(home_dir: Path, cycle: str, directory: Path, keep_side_effects: bool, as_json: bool) -> None:
    """Start a new home in DIRECTORY from a cycle's snapshot, with this home's rules.md, config.yaml
    and examples.yaml (the workspace's files are not copied). DIRECTORY must not hold a state yet.

    The fork's config.yaml leaves out what acts on the world beyond the home (on_cycle_end,
    metrics_file, wake_when, mcp_servers), so its cycles never fire this home's alerts or
    replace its metrics; it says what it left out. --keep-side-effects keeps them."""
    home = existing_home(home_dir)
    side = _snapshot(home, cycle)
    target = Home.at(directory)
    if target.active.exists() or target.active.is_symlink():
        raise UsageError(f"{target.root} is already a home with a state ({target.active}); fork into a new folder")

    try:  # all read before anything is made: a refused file leaves no half-made home
        rules = read_text_file(home.rules, "rules file", MAX_RULES_BYTES)
        config = read_text_file(home.config, "config file", MAX_CONFIG_BYTES)
        examples = read_text_file(home.examples, "examples file", MAX_EXAMPLES_BYTES)
        settings_from(config_values(config or "", home.config))  # a config a cycle would refuse: exit 2 here
    except FileRefused as exc:
        raise UsageError(f"cannot fork: {exc}") from None
    except UsageError as exc:  # name the file, once
        message = str(exc) if str(exc).startswith(str(home.config)) else f"{home.config}: {exc}"
        raise UsageError(f"cannot fork: {message}") from None
    dropped: list[str] = []
    if not keep_side_effects:
        config, dropped = without_settings(config, home.config, SIDE_EFFECT_SETTINGS, "agent fork")
    made, kept = make_home(
        target, dict(side.state, last_updated=now_iso()), rules=rules, config=config, examples=examples
    )
    dropped = dropped if target.config.name in made else []  # a config.yaml already there is the operator's, kept
    steps = next_steps(target, directory)
    data = {
        "home": str(target.root),
        "forked_from": str(home.root / side.label),
        "created": made,
        "kept": kept,
        "left_out": dropped,
        "next": steps,
    }
    if as_json:
        print_json(data)
        return
    click.echo(
        f"forked {side.label} into {target.root}: created {', '.join(made)}"
        + (f"; kept existing {', '.join(kept)}" if kept else "")
    )
    if dropped:
        click.echo(
            f"left out of its config.yaml: {', '.join(dropped)} (they act beyond the home: this home's hook, "
            f"metrics, events and MCP servers; --keep-side-effects keeps them)"
        )
    print_steps(steps)
