"""Settings: one typed object; every field has a default and a one-line doc.

Precedence, lowest first: defaults, the home's `config.yaml`, environment variables, flags.
Unknown keys and wrongly typed values are a usage error (exit 2) naming the key.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent.common.jsonschema as jsonschema
from agent.common.jsonschema import schema_for
from agent.common.outcomes import StopReason, UsageError
from agent.common.plain import described
from agent.setting_checks import (
    FALLBACK_MODELS_SCHEMA,
    MCP_SERVER_SCHEMA,
    MODEL_BUDGETS_SCHEMA,
    SectionSpec,
    check_constraints,
    check_mcp_server,
    check_model_settings,
    check_prices,
    section_specs,
)
from agent.setting_checks import MOST_SECONDS as MOST_SECONDS  # the --wait flags' bound too
from agent.state import taken_keys
from agent.store.home import Home

INHERIT = "inherit"  # a fallback's api_key_env that sends the primary's key to its own base_url
NOBODY = 65534  # the id `sandbox_uid` may never be
RESOLVED = "resolved"  # in notify_on: run on_cycle_end once when an incident ends (agent/after/incidents.py)
DEFAULT_SHELL_ALLOWLIST = ["date", "ls", "cat", "echo", "uname", "pwd", "wc", "head", "tail", "df", "uptime", "whoami"]


def _doc(
    text: str,
    *,
    choices: tuple[str, ...] | None = None,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    unit: str | None = None,
    **kw: Any,
) -> Any:
    """A setting: its one-line doc and its own constraints, which check() reads (setting_checks.check_constraints).

    choices: the allowed values; minimum: the least value; above: a bound the value must exceed (above=0: positive);
    maximum: the most; unit: named in messages, and unit="seconds" caps the value at a day. kw: default or
    default_factory, as for dataclasses.field.
    """
    rules = {"choices": choices, "minimum": minimum, "above": above, "maximum": maximum, "unit": unit}
    return field(metadata={"doc": text, **{k: v for k, v in rules.items() if v is not None}}, **kw)


@dataclass
class Settings:
    """Every setting of a home, each with its doc and its own constraints (`_doc`)."""

    # (A class docstring also spares @dataclass from rendering a signature of every field as one at import.)
    model: str | None = _doc(
        "PROVIDER[:NAME]: local, local:FILE.gguf, openai:NAME or scripted:FILE. "
        "Unset: the embedded model when installed.",
        default=None,
    )
    base_url: str | None = _doc(
        "OpenAI-compatible endpoint; OPENAI_BASE_URL overrides it; unset: OpenAI's.", default=None
    )
    api_key_env: str = _doc("Name of the environment variable that holds the API key.", default="OPENAI_API_KEY")
    temperature: float = _doc("Sampling temperature.", minimum=0, maximum=2, default=0.0)
    max_output_tokens: int = _doc("Most tokens the model may write per reply.", above=0, default=512)
    request_timeout: float = _doc("Seconds before one model request times out.", above=0, unit="seconds", default=60.0)
    max_retries: int = _doc(
        "Retries of a failed request (429, 5xx, timeouts), by the openai client.", minimum=0, default=2
    )
    extra_headers: dict[str, str] = _doc("Extra HTTP headers sent with every model request.", default_factory=dict)
    max_iterations: int = _doc("Most model calls in one cycle.", above=0, default=10)
    max_parse_errors: int = _doc("Unparseable replies in a row that end the cycle.", above=0, default=3)
    token_budget: int | None = _doc(
        "Most tokens (prompt + completion) one cycle may use; unset: no limit.", above=0, default=None
    )
    time_budget: float | None = _doc(
        "Most seconds one cycle may run; a model request is cut at the budget's end "
        "and not retried in its last request_timeout. Unset: no limit.",
        above=0,
        unit="seconds",
        default=None,
    )
    repeat_limit: int = _doc(
        "The same action (tool and arguments) this many times in a row ends the cycle.", above=0, default=3
    )
    notes_budget: int | None = _doc(
        "Most characters of notes kept in active.yaml (at least 200); older lines move to "
        "the archive (logs/agent.db). Unset: unbounded.",
        minimum=200,
        unit="characters",
        default=4000,
    )
    completed_window: int | None = _doc(
        "Most completed_tasks kept in active.yaml; older ones move to the archive (logs/agent.db). Unset: unbounded.",
        minimum=0,
        default=20,
    )
    reflect: bool = _doc(
        "After done, one more model call curates notes (APPEND: / CLEAR / a replacement); with sections, the "
        "sections and notes, also after max_iterations or the time budget.",
        default=False,
    )
    note_result_chars: int = _doc("A tool result is clipped to this many characters in notes.", above=0, default=300)
    shell_policy: str = _doc(
        "shell tool: auto (the sandbox where it works here, else the allowlist), sandbox (any "
        "command, kept in the workspace by bubblewrap), allowlist (read-only commands), any (the "
        "operator's whole account: a warning in every cycle log) or off. AGENT_SHELL_POLICY overrides it.",
        choices=("auto", "sandbox", "allowlist", "any", "off"),
        default="auto",
    )
    shell_allowlist: list[str] = _doc(
        "Commands the shell tool may run under the allowlist policy.",
        default_factory=lambda: list(DEFAULT_SHELL_ALLOWLIST),
    )
    shell_timeout: float = _doc(
        "Seconds before a shell command's process group is killed.", above=0, unit="seconds", default=30.0
    )
    shell_max_output: int = _doc("Bytes of shell output kept; the rest is cut with a marker.", above=0, default=8192)
    tools_disabled: list[str] = _doc("Tools not offered to the model nor run.", default_factory=list)
    tools_enabled: list[str] | None = _doc(
        "When set, only these tools (plus update_scratchpad and done) are offered.", default=None
    )
    plugins_disabled: list[str] = _doc(
        "Tool plugins not loaded (distribution or entry-point names; '*': all).", default_factory=list
    )
    file_max_read: int = _doc("Bytes read_file returns at most; the rest is cut with a marker.", above=0, default=65536)
    file_max_write: int = _doc("Largest file (bytes) write_file and append_file may leave.", above=0, default=262144)
    http_timeout: float = _doc(
        "Seconds an http_get may take in all (connect, redirects, body).", above=0, unit="seconds", default=10.0
    )
    http_max_bytes: int = _doc(
        "Bytes of a response body http_get reads, after decoding gzip or deflate (at most "
        "two layers); it stops reading and decoding there.",
        above=0,
        default=65536,
    )
    http_max_redirects: int = _doc(
        "Redirects http_get follows (each one checked like the first URL).", minimum=0, default=5
    )
    http_allow_networks: list[str] = _doc(
        "Non-public networks http_get may reach, as CIDRs (e.g. 127.0.0.0/8). Cloud metadata addresses stay refused.",
        default_factory=list,
    )
    workspace: str = _doc(
        "Folder inside the home that the file tools and the shell are confined to (created if "
        "missing). '.': the whole home, minus the runtime's files, templates, dot-files and code "
        "(an opt-in; see docs/reference.md).",
        default="workspace",
    )
    secret_env: list[str] = _doc(
        "More environment variables whose values are redacted and hidden from tools.", default_factory=list
    )
    lock_wait: float = _doc(
        "Seconds to wait for another cycle's lock before exiting busy (5).", minimum=0, unit="seconds", default=0.0
    )
    local_threads: int | None = _doc(
        "Threads for the embedded model; unset: a prompt is read on every core no other "
        "process is running on when the model loads, and a reply decoded on one fewer, at "
        "least one (decoding never takes the last free core). They spin briefly, then sleep "
        "(GOMP_SPINCOUNT=10000 unless OMP_WAIT_POLICY or it is set), so a machine that gets "
        "busy slows it a little, not many times over (see docs/measurements.md).",
        above=0,
        default=None,
    )
    local_context: int = _doc("Context window (tokens) for the embedded model.", above=0, default=4096)
    guided: bool | None = _doc(
        "Narrow the model's choices each step, through the schema its replies must follow, "
        "to the likeliest tools, a first step's paths and contents from the task's words, and a "
        "done summary that starts with a value just found; never "
        "offer it pending_actions, so the queue stays the operator's and done's (was "
        "local_guided). Unset: on for the bundled tiny model, off for others (local:FILE, openai:).",
        default=None,
    )
    keep_cycles: int | None = _doc(
        "Automatic retention: keep the snapshots and logs of only the newest N cycles "
        "(the index and archive keep everything); null: keep all.",
        above=0,
        default=500,
    )
    keep_days: float | None = _doc(
        "Automatic retention: keep the snapshots and logs of cycles younger than this many days; unset: keep all.",
        above=0,
        maximum=36500,
        unit="days",
        default=None,
    )
    transcript_max_bytes: int = _doc(
        "Most bytes of one cycle's exact transcript (in logs/agent.db: "
        "every request and reply, redacted); 0: no transcript.",
        minimum=0,
        default=1024 * 1024,
    )
    on_cycle_end: list[str] | None = _doc(
        "A command (argv list, no shell) run after every saved cycle, from the home, "
        "with the cycle's index record as JSON on stdin; its failure is only logged.",
        default=None,
    )
    notify_on: list[str] | None = _doc(
        "Stop reasons that run on_cycle_end (e.g. [error, stalled]), once per incident, and `resolved`: once "
        "when an incident ends, with the incident's record; unset: every cycle.",
        default=None,
    )
    hook_timeout: float = _doc(
        "Seconds on_cycle_end may run before its process group is killed.", above=0, unit="seconds", default=30.0
    )
    metrics_file: str | None = _doc(
        "Prometheus text file rewritten after every saved cycle (relative: to the home), "
        "for node_exporter's textfile collector; unset: none.",
        default=None,
    )
    check_timeout: float = _doc(
        "Seconds an acceptance check (task add --check) may run before its process group "
        "is killed and the done refused.",
        above=0,
        unit="seconds",
        default=60.0,
    )
    approval_required: list[str] = _doc(
        "Tools whose calls are parked for the operator (agent approve ID / deny ID) "
        "instead of run; shell-style patterns, e.g. github__* for an MCP server.",
        default_factory=list,
    )
    stall_cycles: int = _doc(
        "This many cycles in a row ending without done on the same task stop with 'stalled' (exit 9).",
        above=0,
        default=5,
    )
    daily_token_budget: int | None = _doc(
        "Most tokens all cycles may use per UTC day; spent: exit 10, nothing sent. Unset: no limit.",
        above=0,
        default=None,
    )
    monthly_token_budget: int | None = _doc(
        "Most tokens all cycles may use per UTC month; unset: no limit.", above=0, default=None
    )
    prices: dict[str, dict[str, float]] = _doc(
        "Price per million tokens by model as history names it, e.g. openai:gpt-4o-mini: {input: 0.15, output: 0.6}.",
        default_factory=dict,
    )
    daily_cost_budget: float | None = _doc(
        "Most money (in the prices' currency) all cycles may spend per UTC day; "
        "needs a price for the model. Unset: no limit.",
        above=0,
        default=None,
    )
    monthly_cost_budget: float | None = _doc(
        "Most money all cycles may spend per UTC month; unset: no limit.", above=0, default=None
    )
    max_reply_bytes: int = _doc(
        "Largest model reply (bytes) that is parsed; a larger one is a parse error and nothing in it is applied.",
        above=0,
        default=65536,
    )
    mcp_servers: dict[str, dict] = _doc(
        "MCP servers whose tools each cycle offers, as <server>__<tool>: name -> "
        '{command, args, env, tools_enabled}. An env value "${VAR}" passes the '
        "agent's VAR.",
        default_factory=dict,
    )
    mcp_start_timeout: float = _doc(
        "Seconds an MCP server may take to start and list its tools.", above=0, unit="seconds", default=60.0
    )
    mcp_timeout: float = _doc("Seconds one MCP tool call may take.", above=0, unit="seconds", default=30.0)
    response_format: str = _doc(
        "openai: structured output: auto (probe json_schema, json_object_schema, json_object, "
        "text once; remember the first accepted in logs/agent.db), or one of those to "
        "force it.",
        choices=("auto", "json_schema", "json_object_schema", "json_object", "text"),
        default="auto",
    )
    chat_examples: bool | None = _doc(
        "Send the examples (examples.yaml) to an openai: model as chat turns, not system text. "
        "Unset: on (it helps a small model through a server, for a larger prompt in the "
        "stable prefix that caches absorb; see docs/measurements.md).",
        default=None,
    )
    extra_body: dict[str, Any] = _doc(
        "Extra JSON fields merged into every openai: request body: sampling options "
        "a server takes, e.g. {repeat_penalty: 1.0} for llama.cpp servers.",
        default_factory=dict,
    )
    tool_calling: str = _doc(
        "openai: how the model calls tools: auto (probe native tool calls once, else the "
        "JSON-in-text path; remembered in logs/agent.db), native (tools / tool_calls "
        "only), or text (one JSON action in the reply's text).",
        choices=("auto", "native", "text"),
        default="auto",
    )
    tool_results: str = _doc(
        "openai: with native calls, where the model sees its previous calls and their "
        "results: state (the scratchpad's notes, as on the text path) or messages (also as "
        "assistant tool_calls + tool messages, one step back).",
        choices=("state", "messages"),
        default="state",
    )

    sandbox_network: bool = _doc(
        "Let sandboxed commands and checks reach the network (and the machine's own "
        "services on 127.0.0.1). Off: no network at all.",
        default=False,
    )
    sandbox_max_memory: int = _doc(
        "Bytes of memory one sandboxed command may use in all (a memory cgroup where one "
        "can be made, else per process as RLIMIT_AS); also the size of its private /tmp and /dev/shm each.",
        above=0,
        unit="bytes",
        default=1024**3,
    )
    sandbox_max_processes: int = _doc(
        "Processes one sandboxed command may run at once (a fork bomb stops there).", above=0, default=128
    )
    sandbox_max_file_bytes: int = _doc(
        "Largest file a sandboxed command may write (RLIMIT_FSIZE).", above=0, unit="bytes", default=256 * 1024**2
    )
    workspace_max_bytes: int = _doc(
        "Disk space the workspace may take; watched while a command runs, counted after it "
        "and on every file tool's write. Past it, writes are refused.",
        above=0,
        unit="bytes",
        default=1024**3,
    )
    workspace_max_files: int = _doc(
        "Files and folders the workspace may hold, checked like workspace_max_bytes.", above=0, default=20000
    )
    idle: str = _doc(
        "A cycle with no current task, an empty queue and nothing in the inbox: skip (call no model, "
        "record an idle outcome, exit 0), plan (a model with goals plans from them) or run (call the "
        "model anyway). AGENT_IDLE overrides it.",
        choices=("skip", "plan", "run"),
        default="skip",
    )
    wake_when: list[str] | None = _doc(
        "A command (argv list, no shell) run from the home before the model is "
        "called, like on_cycle_end (scrubbed environment, hook_timeout): exit 0 runs "
        "the cycle with its stdout as a [WAKE] note, any other exit is an idle "
        "outcome. `agent run --force` skips it. Unset: the state decides.",
        default=None,
    )
    fallback_models: list[str | dict[str, str]] = _doc(
        "Models a cycle continues on, in order, when the one in use is unreachable, fails after its retries, or "
        "has spent its model_budgets: names (openai:gpt-4o-mini, local) that share the primary's endpoint, or "
        "{model, base_url, api_key_env} mappings.",
        default_factory=list,
    )
    model_budgets: dict[str, dict[str, float]] = _doc(
        "Budgets per model as history names it: {daily_tokens, monthly_tokens, daily_cost, monthly_cost}; "
        "spent: the cycle continues on the next of fallback_models (none left: exit 10).",
        default_factory=dict,
    )

    prompt_max_bytes: int = _doc(
        "Most bytes of one prompt (system message, example turns and user message). A scratchpad that does not "
        "fit is shown clipped, with a note saying so; the state itself is kept whole.",
        above=0,
        unit="bytes",
        default=98304,
    )
    tool_schemas_max_bytes: int = _doc(
        "Most bytes of tool schemas sent in one request; tools past it (in the order "
        "listed, built-ins first) are left out with a note naming them.",
        above=0,
        unit="bytes",
        default=32768,
    )
    sandbox_uid: int = _doc(
        "When the agent runs as root: the unprivileged user id (and group id) its sandboxes run as "
        "and the workspace belongs to, so nothing a command makes is root's. It needs no account; "
        "give it to nothing else (never 65534, which nobody shares), one per home.",
        minimum=1,
        maximum=2**32 - 2,
        default=65533,
    )
    checks_unsandboxed: bool = _doc(
        "Where no sandbox can start, run acceptance checks on the host, as the operator, instead of "
        "refusing them (a check may run the model's code: doctor and every cycle log warn).",
        default=False,
    )

    sections: dict[str, dict[str, Any]] = _doc(
        "The operator's own parts of the scratchpad, each a top-level key of active.yaml: name -> {kind: text "
        "(limit in characters) or list (limit in entries, entry_chars each, default 500), description, read_only, "
        "when_full: archive or refuse, surface}. Unset: msa's six fields only (see SCRATCHPAD.md).",
        default_factory=dict,
    )
    consolidate_max_loss: float = _doc(
        "The share of a list section's entries that may leave it in one cycle (by REMOVE or eviction, always at "
        "least one) or in one consolidation (merged or archived).",
        minimum=0,
        maximum=1,
        default=0.25,
    )
    stale_after: float | None = _doc(
        "Hours without a cycle after which `agent fleet` and `agent report` say this home needs a person "
        "(its scheduler may have stopped); unset: three times its usual interval (the median gap between "
        "its last 20 cycles), a day while it has run fewer than two.",
        above=0,
        maximum=8760,
        unit="hours",
        default=None,
    )
    model_keys: bool = _doc(
        "update_scratchpad may also set top-level keys of the model's own, as msa kept them (`agent init "
        "--from-msa` turns it on): each a plain name (no control character, no spaces around it), each value at "
        "most 64 KiB, at most 100 keys besides the fields (memory sections count), the state within its size "
        "limit, listed by "
        "`show` and `diff`. Off: such a key is refused.",
        default=False,
    )
    incident_close_after: int = _doc(
        "Cycles in a row, not idle and not part of an incident, after which it is over (resolved): until "
        "then a flapping endpoint (down, up, down) is one incident and is told once.",
        minimum=1,
        maximum=1000,
        default=3,
    )
    quiet_resolved: bool = _doc(
        "`agent run --quiet` also prints one line when an incident is resolved (off: cron mails only when "
        "a person is needed; `notify_on: [resolved]` tells a hook).",
        default=False,
    )
    schedule: str | None = _doc(
        "When cycles are due: the cron expression of the home's cron line (five fields, e.g. '0 2 * * *'), "
        "read in schedule_timezone. Set, every view counts the slots that had no cycle and says when the next is "
        "due, and a home is late or down by it (not by stale_after); unset: by the median gap.",
        default=None,
    )
    schedule_grace: float = _doc(
        "Seconds after a slot of `schedule` before a slot with no cycle is missed (the home is late meanwhile).",
        above=0,
        unit="seconds",
        default=3600.0,
    )
    schedule_timezone: str = _doc(
        "The time zone `schedule` is read in: a tz database name (Europe/Berlin) or UTC, as the cron daemon's.",
        default="UTC",
    )
    currency: str = _doc(
        "The currency `prices` and the cost budgets are in (a code such as USD or EUR): `agent report` shows it "
        "beside every cost.",
        default="USD",
    )
    otel: bool = _doc(
        "Send each cycle that asks a model as one OpenTelemetry trace (GenAI conventions), after the "
        "home's lock is released, to the OTLP/HTTP collector the OTEL_EXPORTER_OTLP_* variables name "
        "(the [otel] extra). Off: no trace, whatever the environment says.",
        default=False,
    )
    otel_content: bool = _doc(
        "With otel: put the messages sent and the replies (redacted) in the model-call spans. Off: "
        "sizes, tokens and names only.",
        default=False,
    )

    consolidate_max_lineage: int = _doc(
        "The most original entries one entry of a list section may stand for after consolidations, over "
        "its whole lineage (a successor stands for what each of its sources stood for): night after night, "
        "merges never end with one line standing for many facts.",
        minimum=1,
        maximum=1000,
        default=3,
    )
    consolidate_near_identical: float = _doc(
        "How alike (shared words over all words, as read and case aside) every two sources of a successor "
        "must be for the runtime to call them near-identical: such a merge, whose text keeps every word of "
        "its sources, loses nothing and costs one entry against consolidate_max_loss, however many it merges. "
        "1: only the same words.",
        above=0,
        maximum=1,
        default=0.5,
    )

    @property
    def schedule_spec(self) -> Any:
        """The checked `schedule` (agent/common/schedule.py's Schedule), or None when unset."""
        if self.schedule is None:
            return None
        from agent.common.schedule import checked

        return checked(self.schedule, self.schedule_timezone, self.schedule_grace)

    @property
    def section_specs(self) -> tuple[SectionSpec, ...]:
        """The checked `sections`, in config order (empty: a home without sections)."""
        return section_specs(self.sections, taken_keys())

    @property
    def budgeted(self) -> bool:
        """Whether a daily or monthly budget is set: only then does a cycle read what earlier ones spent."""
        return any(
            v is not None
            for v in (
                self.daily_token_budget,
                self.monthly_token_budget,
                self.daily_cost_budget,
                self.monthly_cost_budget,
            )
        )

    @property
    def secret_names(self) -> set[str]:
        """Environment variables whose values are secrets: redacted everywhere, hidden from tools. Every
        model's key variable is one, fallbacks' included."""
        fallback_keys = {e.get("api_key_env") for e in self.fallback_models if isinstance(e, dict)}
        return {self.api_key_env, "OPENAI_API_KEY", *self.secret_env, *(fallback_keys - {None, INHERIT})}

    def replace(self, **changes: Any) -> "Settings":
        changes = {k: v for k, v in changes.items() if v is not None}
        return check(dataclasses.replace(self, **changes))


# Old setting names still read from config.yaml: old -> new.
RENAMED = {"local_guided": "guided"}

# Settings whose shape their annotation cannot say.
_FIELD_SCHEMAS = {
    "mcp_servers": {"type": "object", "additionalProperties": MCP_SERVER_SCHEMA},
    "fallback_models": FALLBACK_MODELS_SCHEMA,
    "model_budgets": MODEL_BUDGETS_SCHEMA,
}


def field_docs() -> list[tuple[str, str, Any]]:
    """(name, doc, default) for every setting, in declaration order (for docs and `agent init`)."""
    out = []
    for f in dataclasses.fields(Settings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out.append((f.name, f.metadata["doc"], default))
    return out


@functools.cache
def _schemas() -> dict[str, dict]:
    """Each setting's JSON Schema (from its annotation, else _FIELD_SCHEMAS), built once per process."""
    hints = typing.get_type_hints(Settings)
    return {f.name: _FIELD_SCHEMAS.get(f.name) or schema_for(hints[f.name]) for f in dataclasses.fields(Settings)}


def check(settings: Settings) -> Settings:
    """Raise UsageError naming the first setting whose value is unusable."""
    schemas = _schemas()
    for f in dataclasses.fields(Settings):
        value = getattr(settings, f.name)
        problem = jsonschema.check(value, schemas[f.name], f.name)
        if problem:
            raise UsageError(f"setting {problem}")
        check_constraints(f.name, value, f.metadata)
    check_tool_settings(settings)
    check_hook_settings(settings)
    check_prices(settings.prices)
    check_model_settings(settings.fallback_models, settings.model_budgets)
    section_specs(settings.sections, taken_keys())
    check_schedule(settings)
    return settings


def check_schedule(settings: Settings) -> None:
    """A `schedule` cronsim can read, in a zone the tz database has (only a home that sets one reads it)."""
    if settings.schedule is None and settings.schedule_timezone.upper() == "UTC":
        return
    from agent.common.schedule import ScheduleError, checked, time_zone

    try:
        time_zone(settings.schedule_timezone)
        if settings.schedule is not None:
            checked(settings.schedule, settings.schedule_timezone, settings.schedule_grace)
    except ScheduleError as exc:
        name = "schedule_timezone" if settings.schedule is None or "time zone" in str(exc) else "schedule"
        raise UsageError(f"setting '{name}': {exc}") from None


def check_hook_settings(settings: Settings) -> None:
    """What runs or is written after a cycle: a usable argv, known stop reasons, sizes and names."""
    if settings.on_cycle_end is not None and (not settings.on_cycle_end or not settings.on_cycle_end[0]):
        raise UsageError("setting 'on_cycle_end' must be a non-empty list: the program, then its arguments")
    if settings.wake_when is not None and (not settings.wake_when or not settings.wake_when[0]):
        raise UsageError("setting 'wake_when' must be a non-empty list: the program, then its arguments")
    reasons = [r.value for r in StopReason] + [RESOLVED]
    for reason in settings.notify_on or []:
        if reason not in reasons:
            raise UsageError(
                f"setting 'notify_on': {reason!r} is not a stop reason or {RESOLVED} (one of {', '.join(reasons)})"
            )
    if settings.metrics_file is not None and not settings.metrics_file.strip():
        raise UsageError("setting 'metrics_file' must be a file name (e.g. /var/lib/node_exporter/agent.prom)")


def check_tool_settings(settings: Settings) -> None:
    """The tool settings plain types cannot check: paths, networks, names."""
    import ipaddress

    workspace = Path(settings.workspace)
    if not settings.workspace.strip() or workspace.is_absolute() or ".." in workspace.parts:
        raise UsageError(
            f"setting 'workspace' must be a relative folder inside the home without '..' "
            f"('.': the whole home), got {settings.workspace!r}"
        )
    for cidr in settings.http_allow_networks:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise UsageError(f"setting 'http_allow_networks': {cidr!r} is not a network like 127.0.0.0/8") from None
    if settings.sandbox_uid == NOBODY:
        raise UsageError(
            f"setting 'sandbox_uid' must not be {NOBODY} (nobody's, shared by every service that runs as nobody); "
            f"pick an id no account or service uses, e.g. 65533"
        )
    for control in ("update_scratchpad", "done"):
        if control in settings.tools_disabled:
            raise UsageError(f"setting 'tools_disabled': '{control}' cannot be disabled; every cycle needs it")
    for name, server in settings.mcp_servers.items():
        check_mcp_server(name, server)


MAX_CONFIG_BYTES = 1024 * 1024


def read_config_file(path: Path) -> dict:
    """The settings in a home's config.yaml ({} when there is none), keys checked."""
    from agent.common.safe_yaml import FileRefused, read_text_file

    try:
        text = read_text_file(path, "config file", MAX_CONFIG_BYTES)
    except FileRefused as exc:
        raise UsageError(str(exc)) from exc
    if text is None:
        return {}
    return config_values(text, path)


def config_values(text: str, path: Path) -> dict:
    """The settings config.yaml's `text` holds (read from `path`, named in messages), keys checked."""
    import yaml

    from agent.common.safe_yaml import load_yaml, yaml_problem

    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: {yaml_problem(exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping of settings, got {described(data)}")
    known = {f.name for f in dataclasses.fields(Settings)} | set(RENAMED)
    msa_problem = msa_setting(data)
    if msa_problem:
        raise UsageError(
            f"{path}: {msa_problem}; a config of msa's is translated by `agent init NEW --from-msa MSA_HOME`"
        )
    for key in data:
        if key not in known:
            if key in ("api_key", "openai_api_key", "key"):
                raise UsageError(
                    f"{path}: key '{key}': never put the API key in the config file; "
                    f"put it in an environment variable and name that with 'api_key_env'"
                )
            import difflib  # only for a mistyped key

            close = difflib.get_close_matches(str(key), sorted(known), n=3, cutoff=0.6)
            if close:
                raise UsageError(
                    f"{path}: unknown key '{key}': did you mean {' or '.join(repr(k) for k in close)}? "
                    f"(`agent init` in a new folder writes a config.yaml listing every setting)"
                )
            raise UsageError(f"{path}: unknown key '{key}' (known keys: {', '.join(sorted(known))})")
    return data


# msa's settings and their defaults (sagecontinuum/msa, msa/config.py): its config.yaml, put here as a
# home's, is told how to import it (cli/msa_import.py translates each key).
MSA_DEFAULTS: dict[str, Any] = {
    "model": {"backend": "anthropic", "model": "claude-sonnet-4-20250514", "max_tokens": 1024},
    "scratchpad_path": "scratchpad/active.yaml",
    "rules_path": "config/rules.md",
    "max_iterations": 5,
    "tools": {},
    "scheduler": {"mode": "interval", "interval_seconds": 300},
}


def msa_setting(data: dict) -> str | None:
    """Why `data` reads as msa's config rather than this project's: a key only msa has, or its model mapping."""
    only_msa = [
        key for key in data if key in MSA_DEFAULTS and key not in {f.name for f in dataclasses.fields(Settings)}
    ]
    if only_msa:
        return f"key '{only_msa[0]}' is msa's setting, not this project's"
    if isinstance(data.get("model"), dict):
        return "setting 'model' must be a string or null, got a mapping (msa's model: {backend, model, ...})"
    return None


# Environment variables that override the config file (flags override these).
ENV_OVERRIDES = {
    "AGENT_MODEL": "model",
    "OPENAI_BASE_URL": "base_url",
    "AGENT_IDLE": "idle",
    "AGENT_SHELL_POLICY": "shell_policy",  # a systemd unit or a pod says `sandbox`: a hardening that stops bwrap fails loudly
}


def load_settings(home_root: Path, env: typing.Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Defaults < config.yaml < environment < flags (a flag left as None does not override)."""
    env = os.environ if env is None else env
    values = read_config_file(Home(home_root).config)
    settings_from(values)  # a config.yaml that does not load is an error whatever overrides it (exit 2)
    for var, key in ENV_OVERRIDES.items():
        if env.get(var):
            values[key] = env[var]
    values.update({k: v for k, v in flags.items() if v is not None})
    return settings_from(values)


def settings_from(values: dict) -> Settings:
    """Checked settings from config.yaml's `values` (old names read as their new ones)."""
    values = dict(values)
    for old, new in RENAMED.items():
        if old in values:
            values.setdefault(new, values.pop(old))
    try:
        settings = Settings(**values)
    except TypeError as exc:  # only reachable through a bad flag name, a programming error
        raise UsageError(str(exc)) from exc
    return check(settings)
