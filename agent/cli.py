"""The command line: `agent run`, `agent reset`, `agent init`, `agent tools`.

Errors print one line (`agent: error: ...`) to stderr and exit with the code from
outcomes.ExitCode; data goes to stdout, and every command that prints data has --json.
Heavy modules are imported inside the commands that need them, so a cron cycle starts fast.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import click

from .outcomes import AgentError

home_option = click.option(
    "--home", "home_dir", type=click.Path(file_okay=False, path_type=Path), envvar="AGENT_HOME",
    default=".", show_default="AGENT_HOME, else the current directory",
    help="The agent's home: scratchpad/, logs/, rules.md, config.yaml.",
)


def reports_errors(func):
    """Turn AgentError into its message on stderr and its exit code."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AgentError as exc:
            click.echo(f"agent: error: {exc}", err=True)
            sys.exit(int(exc.exit_code))

    return wrapper


class LazyGroup(click.Group):
    """A click group whose operator commands are imported only when one of them is used.

    `agent run` is what cron starts every few minutes; it should not pay for loading diff,
    history, doctor and the rest. `--help` still lists them (listing imports them).
    """

    lazy_commands = {name: "agent.operator_cli"
                     for name in ("diff", "history", "show", "status", "task", "goal", "prune", "doctor")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy_commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy_commands:
            import importlib

            importlib.import_module(self.lazy_commands[name])  # registers its commands on `main`
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scratchpad-agent", prog_name="agent")
def main() -> None:
    """Run an LLM agent one cycle at a time, with durable memory in scratchpad/active.yaml.

    Each `agent run` wakes from active.yaml, lets the model act through tools until it calls
    done or hits a limit, and saves: scratchpad/<cycle>_before.yaml and _after.yaml show
    exactly what changed. Exit codes: 0 done, 2 usage, 3 stopped by a limit, 4 failed,
    5 busy, 6 invalid scratchpad, 7 disk error.
    """


# ------------------------------------------------------------------------------------------ run


class PlainReporter:
    """One plain line per event, no control codes: right for cron mail, pipes and logs."""

    def __init__(self, stream, quiet: bool):
        self.stream, self.quiet = stream, quiet

    def __call__(self, event: str, **data) -> None:
        if self.quiet:
            if event == "end" and data["report"].error:  # --quiet still reports a failed cycle
                r = data["report"]
                click.echo(f"agent: cycle {r.cycle_id} failed: {r.error} (see logs/cycle_{r.cycle_id}.log)", err=True)
            return
        if event == "start":
            task = data["task"] or "(none)"
            self._line(f"cycle {data['cycle_id']} started (model {data['model']}); task: {task}")
        elif event == "iteration":
            usage = data["usage"]
            tokens = f" [{usage.total_tokens} tokens]" if usage.total_tokens else ""
            self._line(f"  {data['n']}/{data['max']} {data['outcome'].note}{tokens}")
        elif event == "end":
            r = data["report"]
            self._line(f"cycle {r.cycle_id} {r.stop_reason} after {r.iterations} iteration(s) in {r.duration_s:.1f}s "
                       f"(exit {r.exit_code}); task: {r.task_before or '(none)'} -> {r.task_after or '(none)'}")
            if r.error:
                self._line(f"  error: {r.error} (see logs/cycle_{r.cycle_id}.log)")

    def _line(self, text: str) -> None:
        click.echo(" ".join(text.split("\n")), file=self.stream)


@main.command()
@home_option
@click.option("--model", help="PROVIDER[:NAME]: local, local:FILE.gguf, openai:NAME, scripted:FILE. "
                              "Default: AGENT_MODEL, config.yaml, else the embedded model.")
@click.option("--max-iterations", type=click.IntRange(min=1), help="Most model calls this cycle (default 10).")
@click.option("--wait", "lock_wait", type=click.FloatRange(min=0),
              help="Seconds to wait for a running cycle to finish instead of exiting busy (5).")
@click.option("--reflect/--no-reflect", default=None,
              help="After done, one more model call curates notes (default: 'reflect' in config.yaml, off).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the cycle on stdout.")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@reports_errors
def run(home_dir: Path, model: str | None, max_iterations: int | None, lock_wait: float | None,
        reflect: bool | None, as_json: bool, quiet: bool) -> None:
    """Run exactly one cycle in the home, then exit with a code saying how it ended."""
    from .config import load_settings
    from .cycle import Cycle
    from .models import resolve_model
    home = existing_home(home_dir)
    settings = load_settings(home.root, model=model, max_iterations=max_iterations, lock_wait=lock_wait,
                             reflect=reflect)
    chosen = resolve_model(settings)
    if sys.stdout.isatty() and not (as_json or quiet):
        from .ui import LiveReporter  # rich live progress, for people at a terminal

        reporter = LiveReporter()
    else:
        reporter = PlainReporter(sys.stderr if as_json else sys.stdout, quiet)
    try:
        report = Cycle(home, settings, chosen, reporter).run()
    finally:
        getattr(reporter, "close", lambda: None)()  # a live display must not outlive a crash
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=None))
    sys.exit(report.exit_code)


def _usage(message: str) -> AgentError:
    from .outcomes import UsageError

    return UsageError(message)


# ---------------------------------------------------------------------------------------- reset


def template_path(home_root: Path, name: str) -> Path:
    """A template by name: the home's templates/NAME.yaml, else the packaged one."""
    from importlib import resources

    if not name or "/" in name or name.startswith("."):
        raise _usage(f"template name '{name}' is not a plain name")
    own = home_root / "templates" / f"{name}.yaml"
    if own.is_file():
        return own
    packaged = Path(str(resources.files("agent").joinpath(f"templates/{name}.yaml")))
    if packaged.is_file():
        return packaged
    raise _usage(f"no template named '{name}' (looked in {own.parent} and the packaged templates: "
                 f"{', '.join(packaged_templates())})")


def packaged_templates() -> list[str]:
    from importlib import resources

    folder = resources.files("agent").joinpath("templates")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


@main.command()
@home_option
@click.option("--template", default="default", show_default=True,
              help="Template to reset from: templates/NAME.yaml in the home, or a packaged one.")
@click.option("--clean", is_flag=True, help="Also delete the home's snapshots, cycle logs and cycle index.")
@click.option("--wait", "lock_wait", type=click.FloatRange(min=0), default=0.0,
              help="Seconds to wait for a running cycle to finish instead of exiting busy.")
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@reports_errors
def reset(home_dir: Path, template: str, clean: bool, lock_wait: float, as_json: bool) -> None:
    """Replace active.yaml with a template (refused with exit 5 while a cycle runs, unless --wait)."""
    from .scratchpad import home_lock, read_state_file, remove_stale_temporaries, write_state

    home = existing_home(home_dir)
    source = template_path(home.root, template)
    state = read_state_file(source, source.parent)  # InvalidScratchpad (6) for a bad template
    removed: list[str] = []
    with home_lock(home, wait=lock_wait):
        home.ensure_dirs()
        remove_stale_temporaries(home)
        write_state(home.active, state)
        if clean:
            doomed = [*home.scratchpad.glob("*_before.yaml"), *home.scratchpad.glob("*_after.yaml"),
                      *home.logs.glob("cycle_*.log"), home.index]
            for path in sorted(doomed):
                if path.exists():
                    path.unlink()
                    removed.append(str(path.relative_to(home.root)))
    if as_json:
        click.echo(json.dumps({"template": str(source), "active": str(home.active), "removed": removed}))
    else:
        click.echo(f"reset {home.active} from template '{template}'"
                   + (f"; removed {len(removed)} snapshot/log file(s)" if clean else ""))


# ----------------------------------------------------------------------------------------- init


def config_template() -> str:
    """A commented config.yaml listing every setting with its default (all commented out)."""
    import yaml

    from .config import field_docs

    lines = ["# Settings for this agent home. Uncomment a line to change it.",
             "# Precedence: these < environment (AGENT_MODEL, OPENAI_BASE_URL) < command-line flags.",
             "# Never put an API key here: name the variable that holds it with api_key_env.", ""]
    for name, doc, default in field_docs():
        lines.append(f"# {doc}")
        dumped = yaml.safe_dump({name: default}, default_flow_style=True, width=1000).strip()[1:-1]
        lines.append(f"# {dumped}")
        lines.append("")
    return "\n".join(lines)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--template", default="default", show_default=True, help="Template for the first active.yaml.")
@click.option("--json", "as_json", is_flag=True, help="Print what was created and kept as JSON.")
@reports_errors
def init(directory: Path, template: str, as_json: bool) -> None:
    """Create a new home in DIRECTORY (existing files are kept, never overwritten)."""
    from .prompt import default_rules
    from .scratchpad import Home, atomic_write, read_state_file, write_state

    home = Home.at(directory)
    # Check the template before creating anything: a bad name or file leaves no half-made home.
    source = template_path(home.root, template)
    first_state = read_state_file(source, source.parent)
    try:
        home.root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _usage(f"cannot create {home.root}: {exc.strerror}") from exc
    home.ensure_dirs()
    made, kept = [], []
    for path, make in (
        (home.rules, lambda p: atomic_write(p, default_rules().encode())),
        (home.config, lambda p: atomic_write(p, config_template().encode())),
        (home.active, lambda p: write_state(p, first_state)),
    ):
        if path.exists():
            kept.append(str(path.relative_to(home.root)))
        else:
            make(path)
            made.append(str(path.relative_to(home.root)))
    if as_json:
        click.echo(json.dumps({"home": str(home.root), "created": made, "kept": kept}))
        return
    click.echo(f"home ready at {home.root}: created {', '.join(made) or 'nothing'}"
               + (f"; kept existing {', '.join(kept)}" if kept else ""))
    click.echo(f"next: agent run --home {directory}")


# ---------------------------------------------------------------------------------------- tools


@main.command()
@home_option
@click.option("--json", "as_json", is_flag=True,
              help="Print the tools as a JSON list (name, signature, description, arguments, schema, source).")
@reports_errors
def tools(home_dir: Path, as_json: bool) -> None:
    """List the tools a cycle in this home offers the model, with their arguments and source.

    The source is "built-in", "control" (update_scratchpad and done, handled by the runtime) or
    "plugin:<distribution>" for tools installed through the agent.tools entry-point group.
    Tools turned off by config (tools_disabled, tools_enabled, shell_policy: off) are not
    listed; a plugin that cannot be loaded is reported on stderr.
    """
    from .config import load_settings
    from .tools import CONTROL_TOOLS, build_registry

    settings = load_settings(existing_home(home_dir).root)
    registry = build_registry(settings)

    def source(tool) -> str:
        return "control" if tool.name in CONTROL_TOOLS and tool.func is None else tool.source

    def arguments(tool) -> list[dict]:
        from .schema import type_name

        return [{"name": key, "type": type_name(prop), "required": key in tool.args_schema["required"],
                 "description": prop.get("description", "")} for key, prop in tool.args_schema["properties"].items()]

    if as_json:
        click.echo(json.dumps([{"name": t.name, "signature": t.signature(), "description": t.description,
                                "arguments": arguments(t), "args_schema": t.args_schema, "source": source(t)}
                               for t in registry], indent=2))
        return
    for tool in registry:
        click.echo(f"{tool.name}  [{source(tool)}]\n    {tool.description}")
        for arg in arguments(tool):
            optional = "" if arg["required"] else ", optional"
            about = f": {arg['description']}" if arg["description"] else ""
            click.echo(f"    - {arg['name']} ({arg['type']}{optional}){about}")
    if registry.disabled:
        click.echo(f"turned off by config: {', '.join(registry.disabled)}")


def existing_home(home_dir: Path):
    """The home at `home_dir`, or a usage error (exit 2) when the folder does not exist."""
    from .scratchpad import Home

    home = Home.at(home_dir)
    if not home.root.is_dir():
        raise _usage(f"home {home.root} does not exist (create one with: agent init {home_dir})")
    return home


# The operator commands (diff, history, show, status, task, goal, prune, doctor) register
# themselves on `main`; imported last because they use the helpers above.


def entry() -> None:
    """Console-script entry point (keeps `python -m agent` and `agent` identical)."""
    main(prog_name="agent")


if __name__ == "__main__":  # pragma: no cover
    entry()

