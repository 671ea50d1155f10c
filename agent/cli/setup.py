"""Setting a home up: `agent init`, `agent reset` from a template, and `agent tools`."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import click
import yaml

import agent.gates.approvals as approvals
from agent.cli.common import (
    checked_home,
    echo,
    existing_folder,
    existing_home,
    home_option,
    one_line,
    print_json,
    reports_errors,
    wait_option,
)
from agent.cli.replacing import archive_replaced
from agent.common.escape import escape_controls
from agent.common.files import atomic_write
from agent.common.jsonschema import type_name
from agent.common.outcomes import UsageError
from agent.common.safe_yaml import FileRefused, read_text_file
from agent.config import MAX_CONFIG_BYTES, Settings, config_values, field_docs, load_settings, settings_from
from agent.cycle.prompt import default_rules
from agent.memory.queue_edits import describe as describe_edit
from agent.memory.queue_edits import dropped_line
from agent.scratchpad import read_state_file, write_state
from agent.store.cycles import forget_history
from agent.store.home import Home, remove_stale_temporaries
from agent.store.lock import home_lock
from agent.tools import CONTROL_TOOLS, open_registry
from agent.tools.workspace import ensure_workspace

# A template is templates/NAME.yaml, the first active.yaml, and optionally templates/NAME.config.yaml,
# settings that `agent init` writes into the new config.yaml (a template's sections, say).
CONFIG_PART = ".config"
# Names in a templates folder that are not templates: examples.yaml holds the packaged worked examples.
NOT_TEMPLATES = ("examples",)


def template_path(home_root: Path, name: str) -> Path:
    """A template by name: the home's templates/NAME.yaml, else the packaged one."""
    if not name or "/" in name or name.startswith(".") or name.endswith(CONFIG_PART):
        raise UsageError(f"template name '{name}' is not a plain name")
    own = Home(home_root).templates / f"{name}.yaml"
    packaged = _packaged_folder() / f"{name}.yaml"
    for path in (own, packaged):
        if name not in NOT_TEMPLATES and path.is_file():
            return path
    mine = template_names(own.parent)
    raise UsageError(
        f"no template named '{name}' (templates: {', '.join(sorted(set(mine + packaged_templates())))}; "
        f"a home's own go in {own.parent})"
    )


def _packaged_folder() -> Path:
    return Path(str(resources.files("agent").joinpath("templates")))


def template_names(folder: Path) -> list[str]:
    """The templates in `folder`: each NAME.yaml but a template's config part and the examples file."""
    try:
        names = [p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml") and p.is_file()]
    except OSError:  # no templates/ folder (or an unreadable one): none of its own
        return []
    return sorted(name for name in names if not name.endswith(CONFIG_PART) and name not in NOT_TEMPLATES)


def packaged_templates() -> list[str]:
    return template_names(_packaged_folder())


@dataclass(frozen=True)
class Template:
    name: str
    path: Path  # NAME.yaml
    state: dict
    config: str | None = None  # the text of NAME.config.yaml, comments and all
    settings: dict = field(default_factory=dict)  # the settings it holds

    @property
    def sections(self) -> dict:
        return self.settings.get("sections") or {}


def read_template(home_root: Path, name: str) -> Template:
    """Template NAME: its state (InvalidScratchpad, exit 6, when unusable) and its config part,
    checked like config.yaml (UsageError, exit 2, naming the file)."""
    path = template_path(home_root, name)
    state = read_state_file(path, path.parent)
    part = path.with_name(f"{name}{CONFIG_PART}.yaml")
    try:
        text = read_text_file(part, "template's config part", MAX_CONFIG_BYTES)
        values = {} if text is None else config_values(text, part)
        settings_from(values)
    except FileRefused as exc:
        raise UsageError(str(exc)) from exc
    except UsageError as exc:
        raise UsageError(str(exc) if str(exc).startswith(str(part)) else f"{part}: {exc}") from exc
    return Template(name, path, state, text, values)


def sections_to_add(template: Template, settings: Settings) -> dict:
    """The template's sections the home's config.yaml lacks or defines as another kind."""
    have = settings.sections
    return {
        name: spec
        for name, spec in template.sections.items()
        if name not in have or have[name].get("kind") != spec.get("kind")
    }


def refuse_missing_sections(template: Template, settings: Settings, config: Path) -> None:
    """UsageError (exit 2) naming what to add when the home's config.yaml lacks the template's sections:
    its state would be memory no section of this home describes."""
    missing = sections_to_add(template, settings)
    if missing:
        wanted = yaml.safe_dump({"sections": missing}, default_flow_style=True, sort_keys=False, width=100_000)
        raise UsageError(
            f"template '{template.name}' needs sections that {config} does not define (or defines as another "
            f"kind): {', '.join(missing)}; add them (config.yaml is never rewritten): {wanted.strip()}"
        )


def config_template(part: str | None = None, part_settings: dict | None = None) -> str:
    """A commented config.yaml listing every setting with its default (all commented out); with a
    template's config `part`, that text first, and its settings left out of the list."""
    lines = [
        "# Settings for this agent home. Uncomment a line to change it.",
        "# Precedence: these < environment (AGENT_MODEL, OPENAI_BASE_URL) < command-line flags.",
        "# Never put an API key here: name the variable that holds it with api_key_env.",
        "",
    ]
    if part:
        lines += [part.rstrip(), "", "# Every other setting, with its default:", ""]
    for name, doc, default in field_docs():
        if name in (part_settings or {}):
            continue
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
@click.option(
    "--from-msa",
    "from_msa",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Make the home from an msa home or checkout (its memory, rules, templates and config, translated "
    "key by key); the msa folder is never changed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was created and kept as JSON.")
@reports_errors
def init(directory: Path, template: str, from_msa: Path | None, as_json: bool) -> None:
    """Create a new home in DIRECTORY (existing files are kept, never overwritten).

    With --from-msa SRC, DIRECTORY must hold no home yet: the import prints one line for each of
    msa's settings, translated or not (docs/operations.md, "Coming from msa")."""
    if from_msa is not None:
        if template != "default":
            raise UsageError("--from-msa brings msa's memory and templates: it takes no --template")
        init_from_msa(directory, from_msa, as_json)
        return
    home = checked_home(directory, hint=False)  # an msa home: the refusal below says it
    refuse_in_an_msa_home(home, directory, "a plain `agent init` here would start from an empty memory")
    # Check the template before creating anything: a bad name or file leaves no half-made home.
    chosen = read_template(home.root, template)
    if home.config.exists():  # kept as it is: it must already define the template's sections
        refuse_missing_sections(chosen, load_settings(home.root), home.config)
    config = config_template(chosen.config, chosen.settings) if chosen.config else None
    made, kept = make_home(home, chosen.state, config=config)
    steps = next_steps(home, directory)
    if as_json:
        print_json({"home": str(home.root), "created": made, "kept": kept, "next": steps})
        return
    click.echo(
        f"home ready at {home.root}: created {', '.join(made) or 'nothing'}"
        + (f"; kept existing {', '.join(kept)}" if kept else "")
    )
    print_steps(steps)


def refuse_in_an_msa_home(home: Home, directory: Path, why: str) -> None:
    """A plain `agent init` or `agent reset` in an msa home would start from an empty memory (or a template)
    beside msa's own, or replace it in an older checkout: refused (exit 2), saying how to import it."""
    from agent.cli.msa_home import looks_like_msa, msa_hint

    if looks_like_msa(home.root):
        raise UsageError(f"{msa_hint(str(directory))} ({why})")


def init_from_msa(directory: Path, source: Path, as_json: bool) -> None:
    """`agent init DIRECTORY --from-msa SOURCE`: read and check everything (msa_import.plan_import), write
    the home, then say what became of each of msa's settings; the last line is the command to run next."""
    from agent.cli.msa_home import UNFINISHED_IMPORT
    from agent.cli.msa_import import (
        crontab_command,
        plan_import,
        refuse_a_folder_of_the_msa_home,
        refuse_existing_home,
        remove_marker,
        remove_unfinished,
    )

    src = Path(source).expanduser().absolute()
    home = checked_home(directory, hint=False, importing=True)
    if home.root.resolve() == src.resolve():
        raise UsageError(f"{home.root} is the msa home itself: import it into a new folder (it is never changed)")
    refuse_a_folder_of_the_msa_home(home, src)
    marker = home.root / UNFINISHED_IMPORT
    if not os.path.lexists(marker):
        refuse_existing_home(home)  # before anything is made; again under the lock
    plan = plan_import(src, crontab_command(home))
    try:
        home.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        dangling = f" (a link to {os.readlink(home.root)}, which does not exist)" if home.root.is_symlink() else ""
        raise UsageError(f"cannot create {home.root}: {exc.strerror}{dangling}") from exc
    with home_lock(home):  # a second import into the same folder at once: exit 5, never a mix of two
        if os.path.lexists(marker):  # an import killed here: what it made goes, and this one starts over
            remove_unfinished(home)
            plan.lines.insert(0, f"an import into {home.root} that did not finish was removed: this one starts over")
        else:
            refuse_existing_home(home)
        for left in home.root.glob(f".{UNFINISHED_IMPORT}.*.tmp"):  # a kill while the marker was written
            left.unlink(missing_ok=True)
        atomic_write(marker, str(src).encode())
        make_home(home, plan.state, rules=plan.rules, config=config_template(plan.config, plan.settings))
        for name, state in plan.templates.items():
            home.templates.mkdir(exist_ok=True)
            write_state(home.templates / f"{name}.yaml", state)
        remove_marker(marker)
    steps = next_steps(home, directory)
    if as_json:
        print_json(
            {"home": str(home.root), "from": str(src), "said": plan.lines, "crontab": plan.crontab, "next": steps}
        )
        return
    click.echo(f"home ready at {home.root}, imported from msa at {src}")
    for line in [*plan.lines, *(f"crontab line (crontab -e): {line}" for line in plan.crontab)]:
        echo(line)
    print_steps(steps)


# A first task the embedded model can do (it names its tool), for a home with an empty queue.
FIRST_TASK = "Run date -u and note the time"


def next_steps(home: Home, directory: Path) -> list[str]:
    """The commands that take a new home to its first cycle that does something, each as it works
    when typed: a task first when nothing is queued (a cycle with nothing to do calls no model),
    then the run, with a model named when none is configured and the embedded one is missing."""
    from agent.models import resolve_model  # here: only init and fork print these

    where = f"--home {shlex.quote(str(directory))}"
    settings = load_settings(home.root)
    state = read_state_file(home.active, home.root) or {}
    steps = []
    if settings.idle == "skip" and not (state.get("current_task") or state.get("pending_actions")):
        steps.append(f"agent task add {where} {shlex.quote(FIRST_TASK)}")
    try:
        resolve_model(settings, home.root)
    except UsageError as exc:
        if settings.model:  # configured, but not usable yet (a key, a file): doctor says what
            return [*steps, f"agent doctor {where}   # {one_line(str(exc).splitlines()[0])}"]
        return [*steps, f"agent run {where} --model openai:gpt-4o-mini   # {no_model_hint()}"]
    return [*steps, f"agent run {where}"]


def no_model_hint() -> str:
    from agent.common.extras import install_hint

    return (
        "with OPENAI_API_KEY set (or OPENAI_BASE_URL for a local server): no model is configured and the "
        f"embedded one is not installed ({install_hint('local')})"
    )


def print_steps(steps: list[str]) -> None:
    for n, step in enumerate(steps):
        click.echo(f"{'then' if n else 'next'}: {step}")


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
    home = existing_folder(home_dir, hint=False)  # makes a home of a folder (the README's set-up: a fresh clone)
    refuse_in_an_msa_home(home, home_dir, "a reset here would replace msa's memory; its templates come over too")
    chosen = read_template(home.root, template)  # InvalidScratchpad (6) for a bad state, UsageError (2) config
    refuse_missing_sections(chosen, load_settings(home.root), home.config)
    source, state = chosen.path, chosen.state
    if clean and not assume_yes:
        _confirm_clean(home)
    removed: list[str] = []
    records = 0
    with home_lock(home, wait=lock_wait):
        home.ensure_dirs()
        remove_stale_temporaries(home)
        # queued edits and parked calls are meant for the memory being replaced: never apply them to
        # the new one. Calls first: unreadable records stop the reset before anything changed.
        calls = approvals.discard_open(home, "discarded by agent reset: the memory it was parked for was replaced")
        kept = archive_replaced(home, f"agent reset from template '{template}'", "reset", state)
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
                "dropped_tasks": kept["dropped_tasks"],
            }
        )
        return
    echo(f"reset {home.active} from template '{template}'")
    if kept["state"] is not None:
        task = kept["state"].get("current_task") if isinstance(kept["state"], dict) else None
        echo(f"archived the replaced state to {archive}" + (f" (task: {task})" if task else ""))
    if kept["dropped_tasks"]:
        echo(f"archived with it: {dropped_line(kept['dropped_tasks'], 'the reset')}")
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
