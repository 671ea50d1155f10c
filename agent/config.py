"""Settings: one typed object; every field has a default and a one-line doc.

Precedence, lowest first: defaults, the home's `config.yaml`, environment variables, flags.
Unknown keys and wrongly typed values are a usage error (exit 2) naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import schema
from .outcomes import UsageError

DEFAULT_SHELL_ALLOWLIST = ["date", "ls", "cat", "echo", "uname", "pwd", "wc", "head", "tail", "df", "uptime", "whoami"]


def _doc(text: str, **kw: Any) -> Any:
    return field(metadata={"doc": text}, **kw)


@dataclass
class Settings:
    model: str | None = _doc("PROVIDER[:NAME]: local, local:FILE.gguf, openai:NAME or scripted:FILE. "
                             "Unset: the embedded model when installed.", default=None)
    base_url: str | None = _doc("OpenAI-compatible endpoint (else OPENAI_BASE_URL, else OpenAI's).", default=None)
    api_key_env: str = _doc("Name of the environment variable that holds the API key.", default="OPENAI_API_KEY")
    temperature: float = _doc("Sampling temperature.", default=0.0)
    max_output_tokens: int = _doc("Most tokens the model may write per reply.", default=512)
    request_timeout: float = _doc("Seconds before one model request times out.", default=60.0)
    max_retries: int = _doc("Retries of a failed request (429, 5xx, timeouts), by the openai client.", default=2)
    extra_headers: dict[str, str] = _doc("Extra HTTP headers sent with every model request.", default_factory=dict)
    max_iterations: int = _doc("Most model calls in one cycle.", default=10)
    max_parse_errors: int = _doc("Unparseable replies in a row that end the cycle.", default=3)
    token_budget: int | None = _doc("Most tokens (prompt + completion) one cycle may use; unset: no limit.", default=None)
    time_budget: float | None = _doc("Most seconds one cycle may run; unset: no limit.", default=None)
    repeat_limit: int = _doc("The same action (tool and arguments) this many times in a row ends the cycle.", default=3)
    note_result_chars: int = _doc("A tool result is clipped to this many characters in notes.", default=300)
    shell_policy: str = _doc("shell tool: allowlist (default), any (opt-in) or off.", default="allowlist")
    shell_allowlist: list[str] = _doc("Commands the shell tool may run under the allowlist policy.",
                                      default_factory=lambda: list(DEFAULT_SHELL_ALLOWLIST))
    shell_timeout: float = _doc("Seconds before a shell command's process group is killed.", default=30.0)
    shell_max_output: int = _doc("Bytes of shell output kept; the rest is cut with a marker.", default=8192)
    tools_disabled: list[str] = _doc("Tools not offered to the model nor run.", default_factory=list)
    workspace: str | None = _doc("Folder inside the home that file tools are confined to; unset: the home.",
                                 default=None)
    secret_env: list[str] = _doc("More environment variables whose values are redacted and hidden from tools.",
                                 default_factory=list)
    lock_wait: float = _doc("Seconds to wait for another cycle's lock before exiting busy (5).", default=0.0)
    local_threads: int | None = _doc("Threads for the embedded model; unset: one per core.", default=None)
    local_context: int = _doc("Context window (tokens) for the embedded model.", default=4096)

    def replace(self, **changes: Any) -> "Settings":
        changes = {k: v for k, v in changes.items() if v is not None}
        return check(dataclasses.replace(self, **changes))


_CHOICES = {"shell_policy": ("allowlist", "any", "off")}
_POSITIVE = {"max_iterations", "repeat_limit", "max_parse_errors", "max_output_tokens", "note_result_chars", "shell_max_output",
             "local_context", "token_budget", "time_budget", "request_timeout", "shell_timeout", "local_threads"}


def _schema_for(annotation: Any) -> dict:
    from .tools import _json_schema_for

    if typing.get_origin(annotation) is dict:
        return {"type": "object", "additionalProperties": {"type": "string"}}
    return _json_schema_for(annotation)


def field_docs() -> list[tuple[str, str, Any]]:
    """(name, doc, default) for every setting, in declaration order (for docs and `agent init`)."""
    out = []
    for f in dataclasses.fields(Settings):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out.append((f.name, f.metadata["doc"], default))
    return out


def check(settings: Settings) -> Settings:
    """Raise UsageError naming the first setting whose value is unusable."""
    hints = typing.get_type_hints(Settings)
    for f in dataclasses.fields(Settings):
        value = getattr(settings, f.name)
        problem = schema.check(value, _schema_for(hints[f.name]), f"setting '{f.name}'")
        if problem:
            raise UsageError(problem)
        if f.name in _CHOICES and value not in _CHOICES[f.name]:
            raise UsageError(f"setting '{f.name}' must be one of {', '.join(_CHOICES[f.name])}, got {value!r}")
        if f.name in _POSITIVE and value is not None and value <= 0:
            raise UsageError(f"setting '{f.name}' must be greater than 0, got {value!r}")
    if isinstance(settings.temperature, (int, float)) and not 0 <= settings.temperature <= 2:
        raise UsageError(f"setting 'temperature' must be between 0 and 2, got {settings.temperature!r}")
    return settings


def read_config_file(path: Path) -> dict:
    """The settings in a home's config.yaml ({} when there is none), keys checked."""
    import yaml

    from .scratchpad import load_yaml

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot be read: {exc}") from exc
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: invalid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: must be a mapping of settings, got {schema.describe(data)}")
    known = {f.name for f in dataclasses.fields(Settings)}
    for key in data:
        if key not in known:
            if key in ("api_key", "openai_api_key", "key"):
                raise UsageError(f"{path}: key '{key}': never put the API key in the config file; "
                                 f"put it in an environment variable and name that with 'api_key_env'")
            raise UsageError(f"{path}: unknown key '{key}' (known keys: {', '.join(sorted(known))})")
    return data


# Environment variables that override the config file (flags override these).
ENV_OVERRIDES = {"AGENT_MODEL": "model", "OPENAI_BASE_URL": "base_url"}


def load_settings(home_root: Path, env: typing.Mapping[str, str] | None = None, **flags: Any) -> Settings:
    """Defaults < config.yaml < environment < flags (a flag left as None does not override)."""
    env = os.environ if env is None else env
    values = read_config_file(home_root / "config.yaml")
    for var, key in ENV_OVERRIDES.items():
        if env.get(var):
            values[key] = env[var]
    values.update({k: v for k, v in flags.items() if v is not None})
    try:
        settings = Settings(**values)
    except TypeError as exc:  # only reachable through a bad flag name, a programming error
        raise UsageError(str(exc)) from exc
    return check(settings)
