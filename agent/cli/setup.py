"""Setting a home up: `agent init`, `agent reset` from a template, and `agent tools`."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import click
import yaml

import agent.gates.approvals as approvals
from agent.cli.common import checked_home, echo, existing_home, home_option, print_json, reports_errors, wait_option
from agent.cli.replacing import archive_replaced
from agent.common.escape import escape_controls
from agent.common.files import atomic_write
from agent.common.jsonschema import type_name
from agent.common.outcomes import UsageError
from agent.config import field_docs, load_settings
from agent.cycle.prompt import default_rules
from agent.memory.queue_edits import describe as describe_edit
from agent.store.cycles import forget_history
from agent.store.home import Home, remove_stale_temporaries
from agent.store.lock import home_lock
from agent.store.state_file import read_state_file, write_state
from agent.tools import CONTROL_TOOLS, open_registry
from agent.tools.workspace import ensure_workspace


def template_path(home_root: Path, name: str) -> Path:
    """A template by name: the home's templates/NAME.yaml, else the packaged one."""
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"template name '{name}' is not a plain name")
    own = Home(home_root).templates / f"{name}.yaml"
    if own.is_file():
        return own
    packaged = Path(str(resources.files("agent").joinpath(f"templates/{name}.yaml")))
    if packaged.is_file():
        return packaged
    raise UsageError(
        f"no template named '{name}' (looked in {own.parent} and the packaged templates: "
        f"{', '.join(packaged_templates())})"
    )


def packaged_templates() -> list[str]:
    folder = resources.files("agent").joinpath("templates")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


def config_template() -> str:
    """A commented config.yaml listing every setting with its default (all commented out)."""
    lines = [
        "# Settings for this agent home. Uncomment a line to change it.",
        "# Precedence: these < environment (AGENT_MODEL, OPENAI_BASE_URL) < command-line flags.",
        "# Never put an API key here: name the variable that holds it with api_key_env.",
        "",
    ]
    for name, doc, default in field_docs():
        lines.append(f"# {doc}")
        dumped = yaml.safe_dump({name: default}, default_flow_style=True, width=1000).strip()[1:-1]
        lines.append(f"# {dumped}")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- init


def make_home(
    home: Home, first_state: dict, rules: str | None = None, config: str | None = None, examples: str | None = None
) -> tuple[list[str], list[str]]:
    """Create the home's folders, then rules.md, config.yaml (the given texts, else the defaults),
    examples.yaml (only when a text is given: else the packaged examples apply) and active.yaml
    (`first_state`) where they are missing, and the workspace. Returns (created, kept) paths."""
    settings = load_settings(home.root)  # a broken config.yaml already there: exit 2, nothing made
    try:
        home.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {home.root}: {exc.strerror}") from exc
    home.ensure_dirs()
    made, kept = [], []
    for path, make in (
        (home.rules, lambda p: atomic_write(p, (default_rules() if rules is None else rules).encode())),
        (home.config, lambda p: atomic_write(p, (config_template() if config is None else config).encode())),
        (home.examples, None if examples is None else lambda p: atomic_write(p, examples.encode())),
        (home.active, lambda p: write_state(p, first_state)),
    ):
        if make is None:
            continue
        if path.exists():
            kept.append(str(path.relative_to(home.root)))
        else:
            make(path)
            made.append(str(path.relative_to(home.root)))
    ensure_workspace(home.root, settings if config is None else load_settings(home.root))
    return made, kept


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--template", default="default", show_default=True, help="Template for the first active.yaml.")
@click.option("--json", "as_json", is_flag=True, help="Print what was created and kept as JSON.")
@reports_errors
def init(directory: Path, template: str, as_json: bool) -> None:
    """Create a new home in DIRECTORY (existing files are kept, never overwritten)."""
    home = checked_home(directory)
    # Check the template before creating anything: a bad name or file leaves no half-made home.
    source = template_path(home.root, template)
    first_state = read_state_file(source, source.parent)
    made, kept = make_home(home, first_state)
    if as_json:
        print_json({"home": str(home.root), "created": made, "kept": kept})
        return
    click.echo(
        f"home ready at {home.root}: created {', '.join(made) or 'nothing'}"
        + (f"; kept existing {', '.join(kept)}" if kept else "")
    )
    click.echo(f"next: agent run --home {directory}")


# ---------------------------------------------------------------------------------------- reset


@click.command()
@home_option
@click.option(
    "--template",
    default="default",
    show_default=True,
    help="Template to reset from: templates/NAME.yaml in the home, or a packaged one.",
)
@click.option(
    "--clean",
    is_flag=True,
    help="Also delete the home's snapshots, cycle logs, transcripts and cycle index "
    "(asks first on a terminal; needs --yes without one).",
)
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Do not ask before --clean deletes.")
@wait_option
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@reports_errors
def reset(home_dir: Path, template: str, clean: bool, assume_yes: bool, lock_wait: float, as_json: bool) -> None:
    """Replace active.yaml with a template (refused with exit 5 while a cycle runs, unless --wait).

    Nothing is lost: the replaced state and every queued edit dropped with it are appended to
    archive (kinds replaced_state and dropped_edit, `agent show --all`) before active.yaml is replaced.
    """
    home = existing_home(home_dir)
    source = template_path(home.root, template)
    state = read_state_file(source, source.parent)  # InvalidScratchpad (6) for a bad template
    if clean and not assume_yes:
        _confirm_clean(home)
    removed: list[str] = []
    records = 0
    with home_lock(home, wait=lock_wait):
        home.ensure_dirs()
        remove_stale_temporaries(home)
        # queued edits and parked calls are meant for the memory being replaced: never apply them to
        # the new one. Calls first: an unreadable approvals file stops the reset before anything changed.
        calls = approvals.discard_open(home, "discarded by agent reset: the memory it was parked for was replaced")
        kept = archive_replaced(home, f"agent reset from template '{template}'", "reset")
        write_state(home.active, state)
        if clean:
            doomed = [*home.scratchpad.glob("*_before.yaml"), *home.scratchpad.glob("*_after.yaml")]
            for path in sorted([*doomed, *home.logs.glob("cycle_*.log")]):
                path.unlink(missing_ok=True)
                removed.append(str(path.relative_to(home.root)))
            records = forget_history(home)  # after the files: a kill between leaves records, not orphans
    archive = str(home.database.relative_to(home.root))
    edits = kept["edits"]
    if as_json:
        print_json(
            {
                "template": str(source),
                "active": str(home.active),
                "removed": removed,
                "removed_records": records,
                "archived_to": archive,
                "replaced_state_archived": kept["state"] is not None,
                "discarded_edits": edits,
                "discarded_calls": calls,
            }
        )
        return
    echo(f"reset {home.active} from template '{template}'")
    if kept["state"] is not None:
        task = kept["state"].get("current_task") if isinstance(kept["state"], dict) else None
        echo(f"archived the replaced state to {archive}" + (f" (task: {task})" if task else ""))
    for edit in edits:
        echo(f"archived the dropped queued edit to {archive}: {describe_edit(edit)}")
    for call in calls:
        echo(f"denied parked call {call}, not yet run (agent approvals lists it)")
    if clean:
        echo(f"removed {len(removed)} snapshot/log file(s) and {records} cycle record(s)")


def _confirm_clean(home: Home) -> None:
    """--clean deletes every snapshot and the index for good: ask a person; refuse a script that did not say --yes."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "reset --clean deletes every snapshot, cycle log and the cycle index for good: "
            "add --yes to do it without a terminal to ask on"
        )
    if not click.confirm(f"delete every snapshot, cycle log and the cycle index in {home.root}?", default=False):
        raise UsageError("reset --clean: not confirmed; nothing changed")


# ---------------------------------------------------------------------------------------- tools


@click.command()
@home_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the tools as a JSON list (name, signature, description, arguments, schema, source).",
)
@reports_errors
def tools(home_dir: Path, as_json: bool) -> None:
    """List the tools a cycle in this home offers the model, with their arguments and source.

    The source is "built-in", "control" (update_scratchpad and done, handled by the runtime),
    "plugin:<distribution>" for tools installed through the agent.tools entry-point group, or
    "mcp:<server>" for tools of an MCP server in config.yaml (started to list them). Tools turned
    off by config (tools_disabled, tools_enabled, shell_policy: off) are not listed; a plugin or
    MCP server that cannot be loaded is reported on stderr.
    """
    home = existing_home(home_dir)
    settings = load_settings(home.root)

    def warn(problem: str) -> None:  # stderr: --json stays a list of tools
        click.echo("agent: warning: " + escape_controls(problem), err=True)

    with open_registry(settings, home.root, warn=warn) as registry:
        pass  # MCP servers run only to list their tools
    for warning in approvals.pattern_warnings(settings, registry):
        warn(warning)

    def source(tool) -> str:
        return "control" if tool.name in CONTROL_TOOLS and tool.func is None else tool.source

    def arguments(tool) -> list[dict]:
        return [
            {
                "name": key,
                "type": type_name(prop),
                "required": key in tool.args_schema["required"],
                "description": prop.get("description", ""),
            }
            for key, prop in tool.args_schema["properties"].items()
        ]

    if as_json:
        print_json(
            [
                {
                    "name": t.name,
                    "signature": t.signature(),
                    "description": t.description,
                    "arguments": arguments(t),
                    "args_schema": t.args_schema,
                    "source": source(t),
                }
                for t in registry
            ]
        )
        return
    for tool in registry:
        click.echo(escape_controls(f"{tool.name}  [{source(tool)}]"))
        click.echo("    " + escape_controls(tool.description))
        for arg in arguments(tool):
            optional = "" if arg["required"] else ", optional"
            about = f": {arg['description']}" if arg["description"] else ""
            click.echo("    " + escape_controls(f"- {arg['name']} ({arg['type']}{optional}){about}"))
    if registry.disabled:
        click.echo(f"turned off by config: {', '.join(registry.disabled)}")
