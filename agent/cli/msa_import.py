"""`agent init DEST --from-msa SRC`: a home made from an msa home or checkout (sagecontinuum/msa).

msa keeps `config/config.yaml` (which names its own `scratchpad_path` and `rules_path`),
`config/rules.md`, its memory in `scratchpads/active.yaml` or `scratchpad/active.yaml`, and its
templates as `active.NAME.yaml` in `scratchpads/` or `config/` (the versions differ). The import
reads them all, checks everything before it writes anything, never writes into SRC, and prints
one line for each of msa's settings, translated or not, ending with the command to run next.
docs/operations.md, "Coming from msa", says what each key becomes and why.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import datetime as _dt
import json
import math
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import yaml

from agent.cli.msa_home import MSA_CONFIG, UNFINISHED_IMPORT
from agent.common.files import disk_error, remove_temporaries
from agent.common.outcomes import InvalidScratchpad, UsageError
from agent.common.plain import described, kind
from agent.common.safe_yaml import FileRefused, load_yaml, read_text_file, yaml_problem
from agent.config import MAX_CONFIG_BYTES, MSA_DEFAULTS, settings_from
from agent.scratchpad import MAX_SCRATCHPAD_BYTES
from agent.secrets import REDACTED, Secrets, is_secret_value, url_credentials, without_credentials
from agent.state import RUNTIME_KEYS, normalize, problems
from agent.store.home import Home

# Where msa's versions keep `active.NAME.yaml` templates (bin/reset.sh), besides the memory's folder.
TEMPLATE_FOLDERS = ("scratchpads", "config", "scratchpad")
# What msa runs when its rules file is missing (msa/agent.py).
MSA_FALLBACK_RULES = "You are a helpful agent. Complete tasks listed in your scratchpad.\n"
# msa's built-in tools (msa/tools.py); those this project lacks come from a plugin or an MCP server.
MSA_TOOLS = ("echo", "shell", "read_file", "write_file", "http_get", "yolo_detect")
ANTHROPIC_OPENAI_ENDPOINT = "https://api.anthropic.com/v1/"
MODEL_KEYS = ("backend", "model", "max_tokens", "base_url", "api_key")  # what msa reads of its model mapping
# Each OpenAI-compatible backend's endpoint when msa's config names none (msa/model.py's defaults,
# Ollama's at its OpenAI-compatible /v1 instead of /api/generate).
BACKEND_URLS = {
    "vllm": "http://localhost:8000/v1",
    "openai": "http://localhost:8000/v1",
    "ollama": "http://localhost:11434/v1",
}
WHERE_KEYS_LIVE = "a key never goes in config.yaml"
# What the import says is bounded whatever SRC holds: a line shows at most this many characters (its
# head and tail), and a run of lines of one kind (keys msa does not read, values made text) at most
# MAX_LINES_OF_A_KIND, then how many more there are.
MAX_LINE_CHARS = 1000
MAX_LINES_OF_A_KIND = 20
# Templates are read whole before anything is written: at most this many bytes of them in all (a
# template is a few hundred bytes; thousands of 4 MiB files would hold gigabytes in memory).
MAX_TEMPLATE_BYTES = 16 * 1024 * 1024
MAX_TEMPLATES = 100


# ------------------------------------------------------------------------------------ reading


def merged_config(user: dict) -> dict:
    """msa's defaults with its config.yaml deep-merged over them, as msa merges them."""
    out = copy.deepcopy(MSA_DEFAULTS)
    _deep_merge(out, user)
    return out


def _deep_merge(base: dict, over: dict) -> None:
    for key, value in over.items():
        if isinstance(base.get(key), dict) and isinstance(value, dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)


def read_msa_config(src: Path) -> dict:
    """SRC's config.yaml as a mapping; UsageError (exit 2) when SRC is not an msa home."""
    if not src.is_dir():
        raise UsageError(f"{src} is not an msa home: it is not a folder")
    if not (src / MSA_CONFIG).is_file():
        raise UsageError(f"{src} is not an msa home: it has no {MSA_CONFIG}")
    try:
        text = read_text_file(own_file(src, src / MSA_CONFIG), "msa config", MAX_CONFIG_BYTES) or ""
        data = load_yaml(text)
    except FileRefused as exc:
        raise UsageError(f"{src} is not an msa home: {exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"{src / MSA_CONFIG}: {yaml_problem(exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict) or not any(key in MSA_DEFAULTS for key in data):
        raise UsageError(f"{src} is not an msa home: {MSA_CONFIG} holds none of msa's settings")
    return string_keys(data, [])


def string_keys(value: Any, converted: list[str], where: str = "") -> Any:
    """`value` with every mapping key that is not a string turned into one (a date as ISO 8601,
    anything else as YAML writes it), each conversion added to `converted`."""
    if isinstance(value, dict):
        out = {}
        for key, child in value.items():
            if not isinstance(key, str):
                new = key.isoformat() if isinstance(key, (_dt.date, _dt.datetime)) else _yaml_scalar(key)
                converted.append(f"{where or 'top level'}: key {_quoted(new)} ({kind(key)}) became text")
                key = new
            out[key] = string_keys(child, converted, f"{where}.{key}" if where else key)
        return out
    if isinstance(value, list):
        return [string_keys(child, converted, f"{where}[{n}]") for n, child in enumerate(value)]
    return value


def finite_or_text(value: Any, converted: list[str], where: str = "") -> Any:
    """`value` with what JSON cannot say made JSON, each named in `converted`: every NaN and infinity
    (YAML's .nan, .inf) its YAML text, a !!binary its base64, a !!set a list; every command prints the
    state as JSON too."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = _yaml_scalar(value)
        converted.append(f"{where or 'top level'}: {shown} (a number) became text")
        return shown
    if isinstance(value, bytes):  # YAML's !!binary: its base64 text, as the file had it
        converted.append(f"{where or 'top level'}: !!binary ({len(value):,} bytes) became its base64 text")
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset)):  # YAML's !!set: its members, as a list
        converted.append(f"{where or 'top level'}: !!set became a list")
        return [finite_or_text(v, converted, where) for v in sorted(value, key=str)]
    if isinstance(value, dict):
        return {k: finite_or_text(v, converted, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_or_text(v, converted, f"{where}[{n}]") for n, v in enumerate(value)]
    return value


def _yaml_scalar(key: Any) -> str:
    return "null" if key is None else yaml.safe_dump(key, default_flow_style=True).strip().removesuffix("...").strip()


def msa_path(src: Path, configured: Any, what: str) -> Path:
    """A path msa's config names: relative ones from msa's project root (where msa runs)."""
    if not isinstance(configured, str) or not configured.strip():
        raise UsageError(f"{src / MSA_CONFIG}: '{what}' must be a path, got {described(configured)}")
    try:
        path = Path(configured).expanduser()
    except RuntimeError as exc:  # ~user of no such user
        raise UsageError(f"{src / MSA_CONFIG}: '{what}' names no folder ({_quoted(configured)}: {exc})") from exc
    return path if path.is_absolute() else src / path


def own_file(src: Path, path: Path) -> Path:
    """`path` resolved, when it is a file of SRC's own; UsageError (exit 2) when it (or a link on the way)
    leads outside SRC. SRC is untrusted: a link to ~/.ssh/id_rsa as its rules.md, or a `rules_path`
    naming it, would otherwise copy the operator's secrets into the new home and so into every prompt."""
    resolved, problem = _resolved_inside(src, path)
    if problem:
        raise UsageError(f"{path}: {problem} (copy the file into it, as a regular file, and import again)")
    return resolved


def _resolved_inside(src: Path, path: Path) -> tuple[Path, str | None]:
    """`path` resolved, and why it is not SRC's own file (None: it is)."""
    try:
        resolved, root = path.resolve(), src.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        return path, f"cannot be resolved ({exc})"
    if not resolved.is_relative_to(root):
        return resolved, f"leads to {resolved}, outside the msa home {root}: the import reads only its own files"
    return resolved, None


def read_msa_state(path: Path, what: str) -> tuple[dict | None, list[str]]:
    """An msa scratchpad file as this project's state (None: there is none), and the keys converted.
    InvalidScratchpad (exit 6) when it cannot be one."""
    try:
        text = read_text_file(path, what, MAX_SCRATCHPAD_BYTES)
    except FileRefused as exc:
        raise InvalidScratchpad(str(exc)) from exc
    if text is None:
        return None, []
    try:
        data = load_yaml(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        raise InvalidScratchpad(f"{path}: {yaml_problem(exc)}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidScratchpad(f"{path}: {problems(data)[0]}")
    converted: list[str] = []
    state = as_text_where_needed(normalize(finite_or_text(string_keys(data, converted), converted)), converted)
    found = problems(state)
    if found:
        raise InvalidScratchpad(f"{path}: {'; '.join(found)}")
    return state, converted


def as_text_where_needed(state: dict, converted: list[str]) -> dict:
    """msa kept whatever the model wrote (a number as a goal, a count in a completed task); this
    runtime's fields hold text. Each such value becomes its text (YAML's for a scalar, JSON's for a
    list or mapping), each named in `converted`: nothing of the memory is dropped."""

    def text(value: Any, where: str) -> str:
        shown = (
            _yaml_scalar(value)
            if not isinstance(value, (dict, list))
            else json.dumps(value, ensure_ascii=False, default=str)
        )
        converted.append(f"{where}: {_clipped(shown)} ({kind(value)}) became text")
        return shown

    out = dict(state)
    for name in ("goals", "pending_actions"):
        items = out[name] if isinstance(out[name], list) else [out[name]]
        if not isinstance(out[name], list):
            converted.append(f"{name}: one value became a list of it")
        out[name] = [item if isinstance(item, str) else text(item, f"{name}[{n}]") for n, item in enumerate(items)]
    for name in ("current_task", "notes", "last_updated"):
        if out[name] is not None and not isinstance(out[name], str):
            out[name] = text(out[name], name)
    tasks = out["completed_tasks"] if isinstance(out["completed_tasks"], list) else [out["completed_tasks"]]
    if not isinstance(out["completed_tasks"], list):
        converted.append("completed_tasks: one value became a list of it")
    out["completed_tasks"] = [_task_as_text(entry, f"completed_tasks[{n}]", text) for n, entry in enumerate(tasks)]
    return out


def _task_as_text(entry: Any, where: str, text) -> Any:
    if isinstance(entry, str):
        return entry
    if not isinstance(entry, dict):
        return text(entry, where)
    return {k: v if v is None or isinstance(v, str) else text(v, f"{where}.{k}") for k, v in entry.items()}


def bounded_line(line: str) -> str:
    """A line as the import says it: its head and tail when it is over MAX_LINE_CHARS."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    half = MAX_LINE_CHARS // 2
    return f"{line[:half]}…[{len(line) - 2 * half:,} characters left out]…{line[-half:]}"


def at_most(lines: list[str], what: str) -> list[str]:
    """The first MAX_LINES_OF_A_KIND of `lines`, then one saying how many more `what` there are."""
    if len(lines) <= MAX_LINES_OF_A_KIND:
        return lines
    return [*lines[:MAX_LINES_OF_A_KIND], f"... and {len(lines) - MAX_LINES_OF_A_KIND:,} more {what}"]


def _clipped(shown: str) -> str:
    return shown if len(shown) <= 60 else shown[:59] + "…"


def _quoted(value: Any) -> str:
    """A name msa's files gave, as this project's lines quote one: text in single quotes (clipped),
    anything else described."""
    return f"'{_clipped(value)}'" if isinstance(value, str) else described(value)


def rename_runtime_keys(state: dict, where: str) -> list[str]:
    """Keys of msa's memory this runtime reads as its own (checks, inbox_applied, section_ids), each moved
    to a name of its own (msa_KEY, or msa_KEY_2, ...) in place; a line for each."""
    lines = []
    for key in [key for key in state if key in RUNTIME_KEYS]:
        new, n = f"msa_{key}", 1
        while new in state:
            n += 1
            new = f"msa_{key}_{n}"
        state[new] = state.pop(key)
        lines.append(f"{where}: key '{key}' renamed '{new}': this runtime keeps its own '{key}' there")
    return lines


# -------------------------------------------------------------------------------- the config


@dataclasses.dataclass
class Translation:
    """What one of msa's settings became: the line printed about it, the settings it set, and the
    crontab line it asks for."""

    line: str
    settings: dict = dataclasses.field(default_factory=dict)
    crontab: str | None = None


def translate_model(model: Any, user: dict) -> list[Translation]:
    """msa's `model` mapping: backend, model, max_tokens, base_url, api_key."""
    if not isinstance(model, dict):
        return [Translation(f"model: not translated: msa's model must be a mapping, got {described(model)}")]
    source = _given(user.get("model"))
    backend, name = model.get("backend"), model.get("model")
    out: list[Translation] = []
    if not isinstance(name, str) or not name.strip():
        out.append(Translation(f"model.model: not translated: msa's model name must be text, got {described(name)}"))
    elif backend == "anthropic":
        settings = {
            "model": f"openai:{name}",
            "base_url": ANTHROPIC_OPENAI_ENDPOINT,
            "api_key_env": "ANTHROPIC_API_KEY",
        }
        out.append(
            Translation(
                f"model.backend: anthropic{source('backend')} -> the openai provider at Anthropic's OpenAI-compatible "
                f"endpoint: model: openai:{name}, base_url: {ANTHROPIC_OPENAI_ENDPOINT}, api_key_env: ANTHROPIC_API_KEY",
                settings,
            )
        )
        if model.get("base_url"):
            out.append(
                Translation(
                    f"model.base_url: not translated: msa's anthropic backend never read it ({_shown_url(model['base_url'])})"
                )
            )
    elif isinstance(backend, str) and backend in BACKEND_URLS:
        url = _v1_url(model.get("base_url")) or BACKEND_URLS[backend]
        given = _where_from(model.get("base_url"), url)
        out.append(
            Translation(
                f"model.backend: {backend}{source('backend')} -> the openai provider at its /v1 endpoint: "
                f"model: openai:{name}, base_url: {_shown_url(url)}{given}; msa sent ANTHROPIC_API_KEY to every backend, here "
                f"this server is sent OPENAI_API_KEY when it is set (api_key_env names another; a loopback server needs none)",
                {"model": f"openai:{name}", "base_url": url},
            )
        )
    else:
        out.append(
            Translation(
                f"model.backend: not translated: msa has no backend {_quoted(backend)} (anthropic, vllm, ollama)"
            )
        )
    if "max_tokens" in model:
        out.append(
            Translation(
                f"model.max_tokens: {model['max_tokens']}{source('max_tokens')} -> max_output_tokens: {model['max_tokens']}",
                {"max_output_tokens": model["max_tokens"]},
            )
        )
    if "api_key" in model:
        out.append(
            Translation(
                f"model.api_key: not copied ({WHERE_KEYS_LIVE}): put the key in the environment variable "
                f"api_key_env names ({'ANTHROPIC_API_KEY' if backend == 'anthropic' else 'OPENAI_API_KEY'})"
            )
        )
    unread = [f"model.{key}: not translated: msa does not read it" for key in model if key not in MODEL_KEYS]
    return out + [Translation(line) for line in at_most(unread, "keys of model msa does not read")]


def _where_from(given: Any, url: str) -> str:
    """Where a backend's endpoint came from, and where its credentials went (never what they are)."""
    if given and not isinstance(given, str):
        said = f" (msa's default endpoint: its base_url {_shown_url(given)} is not a URL)"
    else:
        said = f" (from {_shown_url(given)})" if given else " (msa's default endpoint)"
    if url_credentials(url):
        said += "; its user:password goes in config.yaml (the one place it can, mode 0600), never printed"
    return said


def _shown_url(url: Any) -> str:
    """A URL of msa's config as a line may show it: never its user:password (a secret)."""
    return without_credentials(url) if isinstance(url, str) else _clipped(repr(url))


def _given(user_part: Any):
    """A function naming where a key of msa's model mapping came from: its config, or msa's default."""
    given = user_part if isinstance(user_part, dict) else {}
    return lambda key: "" if key in given else " (msa's default)"


def _v1_url(url: Any) -> str | None:
    """An msa base_url as the OpenAI-compatible /v1 endpoint of the same server (Ollama's /api/generate
    becomes /v1)."""
    if not isinstance(url, str) or not url.strip():
        return None
    url = url.strip().rstrip("/")
    for tail in ("/api/generate", "/api/chat", "/api"):
        if url.endswith(tail):
            return url[: -len(tail)] + "/v1"
    return url if url.endswith("/v1") else url + "/v1"


def translate_tools(tools: Any) -> list[Translation]:
    """msa's `tools` mapping (name: false turns a tool off; msa itself never read it, here it holds)."""
    out: list[Translation] = []
    missing = [name for name in MSA_TOOLS if name not in _builtin_names()]
    if missing:
        out.append(
            Translation(
                f"tools: msa's {', '.join(missing)} has no built-in here: provide it as a plugin (the agent.tools "
                "entry point) or an MCP server (mcp_servers); `agent tools` lists what a cycle offers"
            )
        )
    if tools in (None, {}):
        return out
    if not isinstance(tools, dict):
        return [*out, Translation(f"tools: not translated: msa's tools must be a mapping, got {described(tools)}")]
    off = [str(name) for name, on in tools.items() if on is False]
    if off:
        out.append(
            Translation(f"tools: {', '.join(off)} off -> tools_disabled: [{', '.join(off)}]", {"tools_disabled": off})
        )
    on = [str(name) for name, value in tools.items() if value is not False]
    if on:
        out.append(Translation(f"tools: {', '.join(on)}: nothing to translate (every tool is on unless turned off)"))
    return out


def _builtin_names() -> set[str]:
    from agent.tools.builtin import TOOLS

    return {tool.name for tool in TOOLS}


def every_seconds_as_cron(seconds: Any) -> tuple[str, str]:
    """A cron expression for msa's interval, and what it says about the fit ('' when exact)."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 < seconds < float("inf"):
        raise ValueError(f"interval_seconds must be a positive number, got {described(seconds)}")
    minutes = max(1, int(seconds // 60))
    note = "" if seconds == minutes * 60 else f" (cron's step is a minute: every {minutes} min for {seconds} s)"
    if minutes < 60:
        step = max(m for m in range(1, minutes + 1) if 60 % m == 0)  # at least as often as msa's
        if step != minutes:
            note = f" (every {step} min: cron steps divide the hour; msa's was {seconds} s)"
        return ("* * * * *" if step == 1 else f"*/{step} * * * *"), note
    hours = max(1, minutes // 60)
    if hours >= 24:
        return (
            "0 0 * * *",
            "" if seconds == 86400 else f" (once a day: cron has no longer even step; msa's was {seconds} s)",
        )
    step = max(h for h in range(1, hours + 1) if 24 % h == 0)
    if step * 3600 != seconds:
        note = f" (every {step} h: cron steps divide the day; msa's was {seconds} s)"
    return ("0 * * * *" if step == 1 else f"0 */{step} * * *"), note


def translate_scheduler(scheduler: Any, user: dict, crontab_command: str) -> list[Translation]:
    """msa's scheduler: interval -> a schedule and a crontab line; file_watch -> wake_when; slack -> none."""
    config = {"mode": scheduler} if isinstance(scheduler, str) else scheduler
    if not isinstance(config, dict):
        return [
            Translation(
                f"scheduler: not translated: msa's scheduler must be a name or a mapping, got {described(scheduler)}"
            )
        ]
    mode = config.get("mode", "interval")
    source = "" if "scheduler" in user else " (msa's default)"
    if mode == "interval":
        try:
            cron, fit = every_seconds_as_cron(config.get("interval_seconds", 300))
        except ValueError as exc:
            return [Translation(f"scheduler: not translated: {exc}")]
        said = f"scheduler: interval every {config.get('interval_seconds', 300)} s{source}{fit} -> a crontab line"
        return [_scheduled(cron, said, crontab_command)]
    if mode == "file_watch":
        return [translate_file_watch(config, crontab_command)]
    if mode == "slack":
        return [
            Translation(
                "scheduler: slack: no equivalent: a cycle here is one process that cron (or a timer) starts and that "
                "exits, so nothing stays connected to listen for messages; a Slack bot of your own can queue the "
                "message with `agent task add` and run `agent run`, and on_cycle_end can post the notes back"
            )
        ]
    return [
        Translation(
            f"scheduler: not translated: msa has no scheduler mode {_quoted(mode)} (interval, file_watch, slack)"
        )
    ]


def _scheduled(cron: str, said: str, crontab_command: str, extra: dict | None = None) -> Translation:
    """The schedule setting and the crontab line."""
    settings = {**(extra or {}), "schedule": cron}
    return Translation(f"{said}; schedule: '{cron}' and the crontab line below", settings, f"{cron} {crontab_command}")


def translate_file_watch(config: dict, crontab_command: str) -> Translation:
    """msa's file_watch: a cycle when the trigger file appears, which it then deletes. Here a wake_when
    command every minute does that, as docs/operations.md's link-safe recipes do: `find -P ... -type f`
    sees only a regular file, never through a link, and deletes the trigger it saw."""
    given = config.get("trigger_file") or "tmp/msa_trigger"
    problem = trigger_problem(given)
    if problem:
        return Translation(
            f"scheduler: file_watch: not translated: trigger_file {_quoted(given)} {problem}; the cycle "
            "deletes the file it sees, so it must be one of the home's own, in a folder of its own (msa's default: "
            "tmp/msa_trigger); docs/operations.md has the wake_when recipe to write by hand"
        )
    trigger = Path(given)
    folder, name = f"./{trigger.parent}", trigger.name  # ./ : a folder named -delete is no option of find
    script = (
        f"find -P {shlex.quote(folder)} -maxdepth 1 -type f -name {shlex.quote(name)} -delete -print | grep -q . "
        f"&& echo {shlex.quote('triggered: ' + str(trigger))}"
    )
    said = f"scheduler: file_watch on {trigger} -> wake_when: a cycle when the file appears (then deleted), looked for each minute"
    return _scheduled("* * * * *", said, crontab_command, {"wake_when": ["sh", "-c", script]})


# The home's own folders: a trigger there could name its memory, its records or its templates.
HOME_FOLDERS = ("scratchpad", "logs", "templates")


def trigger_problem(given: Any) -> str | None:
    """Why msa's trigger_file cannot be the file a wake_when deletes each time it appears (None: it can).
    SRC is untrusted: `/home/me/.ssh/id_rsa`, `../x`, `scratchpad/active.yaml` or a name `*` would have
    cron delete the operator's key, a file beside the home, the memory, or every file in the folder."""
    if not isinstance(given, str) or not given.strip() or any(not ch.isprintable() for ch in given):
        return "is not a path"
    trigger = Path(given)
    if trigger.is_absolute() or given.startswith("~"):
        return "is outside the home (an absolute path)"
    if ".." in trigger.parts:
        return "leads out of the home (..)"
    if len(trigger.parts) < 2 or trigger.parts[0] in HOME_FOLDERS or trigger.parts[0].startswith("."):
        return "is not in a folder of its own (the home's root, scratchpad/, logs/ and templates/ hold its files)"
    if any(ch in trigger.name for ch in "*?[]\\"):
        return "has a wildcard in its name (find would delete every file it matches)"
    return None


def translate_config(merged: dict, user: dict, crontab_command: str) -> list[Translation]:
    """Every one of msa's settings, msa's defaults merged first, as Translations in msa's order."""
    out = translate_model(merged.get("model"), user)
    iterations = merged.get("max_iterations")
    source = "" if "max_iterations" in user else " (msa's default)"
    out.append(
        Translation(
            f"max_iterations: {iterations}{source} -> max_iterations: {iterations}", {"max_iterations": iterations}
        )
    )
    out += translate_tools(merged.get("tools"))
    out += translate_scheduler(merged.get("scheduler"), user, crontab_command)
    for key in ("scratchpad_path", "rules_path"):
        out.append(Translation(f"{key}: {merged[key]} -> read from there (this home keeps {_our_place(key)})"))
    unread = [f"{key}: not translated: msa does not read it" for key in merged if key not in MSA_DEFAULTS]
    out += [Translation(line) for line in at_most(unread, "keys msa does not read")]
    out.append(
        Translation(
            "msa called the model every cycle, even with an empty queue -> idle: plan (a model with goals plans from "
            "them; with no goals and no task a cycle is idle and calls no model)",
            {"idle": "plan"},
        )
    )
    out.append(
        Translation("msa kept any key the model wrote with update_scratchpad -> model_keys: true", {"model_keys": True})
    )
    return out


def _our_place(key: str) -> str:
    here = Home(Path("."))
    return str(here.active if key == "scratchpad_path" else here.rules)


def checked_settings(translations: list[Translation]) -> dict:
    """The translations' settings, each checked with those before it: one this project would refuse
    is left out, its line saying why (the import never writes a config.yaml that does not load)."""
    settings: dict = {}
    for item in translations:
        if not item.settings:
            continue
        try:
            settings_from({**settings, **item.settings})
        except UsageError as exc:
            item.line = f"{item.line.split(' -> ')[0]}: not translated: {exc}"
            item.settings, item.crontab = {}, None
            continue
        settings.update(item.settings)
    return settings


def config_part(settings: dict) -> str:
    """config.yaml's first part: the translated settings."""
    dumped = yaml.safe_dump(settings, sort_keys=False, allow_unicode=True, width=100_000).rstrip()
    return "\n".join(["# Translated from msa's config by `agent init --from-msa`.", dumped])


# ------------------------------------------------------------------------------ the templates


def find_templates(src: Path, memory: Path) -> tuple[dict[str, Path], list[str]]:
    """msa's `active.NAME.yaml` templates, wherever either version keeps them; lines for those left out."""
    found: dict[str, Path] = {}
    skipped: list[str] = []
    folders = [memory.parent] + [src / name for name in TEMPLATE_FOLDERS]
    seen: set[Path] = set()
    total = 0
    for folder in folders:
        if folder in seen or not folder.is_dir():
            continue
        seen.add(folder)
        for path in sorted(folder.glob("active.*.yaml")):
            name = path.name[len("active.") : -len(".yaml")]
            if not name or "/" in name or name.startswith(".") or name.endswith(".config") or name == "examples":
                skipped.append(f"template {path}: left out: '{name}' cannot be a template name here")
            elif not name.isprintable() or any(ch.isspace() for ch in name):
                skipped.append(
                    f"template {path}: left out: its name has a control character or a space (rename the file "
                    "to a plain name and import again)"
                )
            elif name in found:
                skipped.append(f"template {path}: left out: {found[name]} has the same name")
            else:
                resolved, problem = _resolved_inside(src, path)
                problem = problem or _over_budget(resolved, len(found), total)
                if problem:
                    skipped.append(f"template {path}: left out: it {problem}")
                else:
                    found[name] = resolved
                    total += _size(resolved)
    return found, at_most(skipped, "templates left out")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # said when it is read
        return 0


def _over_budget(path: Path, count: int, total: int) -> str | None:
    """Why one more template would be too many or too much (None: it fits)."""
    if count >= MAX_TEMPLATES:
        return f"would be template {count + 1:,}: the import takes at most {MAX_TEMPLATES}"
    if total + _size(path) > MAX_TEMPLATE_BYTES:
        return f"would take the templates over {MAX_TEMPLATE_BYTES:,} bytes in all"
    return None


# ----------------------------------------------------------------------------------- the import


@dataclasses.dataclass
class Plan:
    """Everything the import will write, read and checked before anything is."""

    state: dict
    rules: str
    config: str  # config.yaml's first part (config_part); every other setting follows, commented
    settings: dict  # the settings it sets
    templates: dict[str, dict]
    lines: list[str]
    crontab: list[str]


def plan_import(src: Path, crontab_command: str) -> Plan:
    """Read SRC and check every file; UsageError (2) or InvalidScratchpad (6) before anything is written."""
    user = read_msa_config(src)
    merged = merged_config(user)
    lines: list[str] = []
    memory_path = msa_path(src, merged["scratchpad_path"], "scratchpad_path")
    state, converted = read_msa_state(own_file(src, memory_path), "msa scratchpad")
    if state is None:
        from agent.state import fresh_state

        state = fresh_state()
        lines.append(f"memory: {memory_path} does not exist: an empty memory, as msa would start")
    else:
        lines.append(
            f"memory: {memory_path} -> scratchpad/active.yaml, every field and entry ({len(state['completed_tasks'])} "
            f"completed tasks, {len(state['notes'].splitlines())} note lines); the first cycle moves what is over "
            "notes_budget and completed_window to the archive (`agent show --all`)"
        )
    lines += at_most([f"memory: {item}" for item in converted], "values of the memory that became text")
    lines += rename_runtime_keys(state, "memory")
    rules_path = msa_path(src, merged["rules_path"], "rules_path")
    try:
        rules = read_text_file(own_file(src, rules_path), "rules", MAX_CONFIG_BYTES)
    except FileRefused as exc:
        raise UsageError(str(exc)) from exc
    if rules is None:
        rules = MSA_FALLBACK_RULES
        lines.append(f"rules: {rules_path} does not exist: msa's fallback rules -> rules.md")
    else:
        placeholders = [p for p in ("{{HOSTNAME}}", "{{WORKING_DIR}}") if p in rules]
        filled = f" (its {' and '.join(placeholders)} are not filled in here)" if placeholders else ""
        lines.append(f"rules: {rules_path} -> rules.md, as it is{filled}")
    templates, skipped = find_templates(src, memory_path)
    states = {}
    for name, path in templates.items():
        template_state, template_converted = read_msa_state(path, "msa template")
        states[name] = template_state
        converted_said = f" ({len(template_converted)} values became text)" if template_converted else ""
        lines.append(
            f"template {path} -> templates/{name}.yaml: `agent reset --template {shlex.quote(name)}`{converted_said}"
        )
        lines += rename_runtime_keys(template_state, f"template {name}")
    lines += skipped
    state, rules, states, redacted = without_msas_key(merged.get("model"), state, rules, states)
    lines += redacted
    translations = translate_config(merged, user, crontab_command)
    settings = checked_settings(translations)
    lines += [f"config {item.line}" for item in translations]
    crontab = [item.crontab for item in translations if item.crontab]
    lines = [bounded_line(line) for line in lines]
    return Plan(state, rules, config_part(settings), settings, states, lines, crontab)


def without_msas_key(model: Any, state: dict, rules: str, templates: dict) -> tuple[dict, str, dict, list[str]]:
    """The memory, rules and templates with the API key msa's config holds replaced by [REDACTED] (each of
    its forms, as everywhere here: agent/secrets.py), and a line for each file it was found in. The key is
    never copied into config.yaml; msa's notes may have logged it, and the memory is every prompt."""
    key = model.get("api_key") if isinstance(model, dict) else None
    if not isinstance(key, str) or not is_secret_value(key):
        return state, rules, templates, []
    secrets = Secrets([key.strip()])
    lines = []
    new_state, new_rules = secrets.redact(state), secrets.redact_text(rules)
    new_templates = {name: secrets.redact(template) for name, template in templates.items()}
    for what, before, after in (
        ("the memory", state, new_state),
        (Home(Path(".")).rules.name, rules, new_rules),
        *((f"template {name}", templates[name], new_templates[name]) for name in templates),
    ):
        if before != after:
            lines.append(f"model.api_key: msa's key was in {what}: it comes over as {REDACTED}")
    return new_state, new_rules, new_templates, lines


def refuse_existing_home(dest: Home) -> None:
    """DEST may be a new or empty folder, or one without a home's files: never a home to overwrite."""
    held = [p for p in (dest.active, dest.config, dest.rules, dest.scratchpad, dest.templates) if p.exists()]
    if held:
        raise UsageError(
            f"{dest.root} already holds a home ({', '.join(str(p.relative_to(dest.root)) for p in held)}): "
            "import into a new folder"
        )


def refuse_a_folder_of_the_msa_home(dest: Home, src: Path) -> None:
    """Neither the import nor the new home's cycles ever write into SRC: a DEST inside it may be a new (or
    empty) folder, never one of msa's own (`scratchpads/`, `config/`), whose files the import would sit
    among; and SRC may not be inside a folder the home writes in (logs/, the workspace, ...)."""
    root, there = dest.root.resolve(), src.resolve()
    for folder in (dest.scratchpad, dest.logs, dest.templates, dest.root / "workspace"):
        if there.is_relative_to(folder.resolve()):  # the cycles would write there (the model, in workspace/)
            raise UsageError(f"{src} is inside {folder}, a folder the new home writes in: import into another folder")
    if not root.is_relative_to(there) or not root.is_dir():
        return
    try:
        empty = next(root.iterdir(), None) is None
    except OSError:
        empty = False
    if not empty and not os.path.lexists(root / UNFINISHED_IMPORT):  # an import killed there: run again
        raise UsageError(
            f"{dest.root} is a folder of the msa home {there} with files in it: the import never writes among "
            "msa's files; import into a new folder"
        )


def remove_unfinished(dest: Home) -> None:
    """What an import killed in DEST made, so that it starts over: rules.md, config.yaml, scratchpad/ and
    templates/, and the temporaries of its writes. The import alone made them (it refuses a DEST that
    holds any, and no command uses a folder with its marker); logs/ and the workspace stay."""
    try:
        for path in (dest.rules, dest.config):
            path.unlink(missing_ok=True)
        for folder in (dest.scratchpad, dest.templates):
            if folder.is_symlink() or folder.is_file():
                folder.unlink()
            elif folder.is_dir():
                shutil.rmtree(folder)
        remove_temporaries(dest.root)
    except OSError as exc:
        raise disk_error(dest.root, exc) from exc


def remove_marker(marker: Path) -> None:
    """The import finished: its marker goes (the folder synced, so a crash after leaves a whole home)."""
    try:
        marker.unlink()
        fd = os.open(marker.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise disk_error(marker, exc) from exc


def crontab_command(dest: Home) -> str:
    """What the crontab line runs: this home's cycle, as docs/operations.md's cron line does."""
    program = shutil.which("agent") or "agent"
    return f"{shlex.quote(program)} run --home {shlex.quote(str(dest.root))} --quiet --wait 30"
