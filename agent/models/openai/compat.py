"""Any OpenAI-compatible chat endpoint, through the official openai client.

openai is imported only when a cycle starts the model (`start`) or calls it (`complete`).
"""

from __future__ import annotations

import errno
import time
from pathlib import Path
from typing import Any, Mapping

from agent.common.imports import import_frozen
from agent.common.outcomes import FailureKind, UsageError, http_kind
from agent.config import Settings
from agent.models.base import (
    Completion,
    Log,
    ModelChoice,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    Request,
    Usage,
    chat_messages,
    system_with_examples,
)
from agent.models.local.guidance import guided_schema, without_queue
from agent.models.openai.client_log import Attempts
from agent.models.openai.format_ladder import (
    LADDER,
    OPENAI_ENDPOINT,
    RESPONSE_FORMATS,
    TOOL_CALLS,
    EndpointMemory,
    openai_response_schema,
    rejects_response_format,
    response_format_for,
)
from agent.models.openai.tool_calls import (
    TOOL_CHOICE,
    calls_of,
    function_tools,
    names_strict,
    native_messages,
    rejects_tools,
    with_previous,
)
from agent.secrets import Secrets, api_key, endpoint_host, model_base_url, request_headers, without_credentials
from agent.store.home import Home

MEMORY_SHOWN = Home(Path()).database  # logs/agent.db, as messages name it

__all__ = ["OpenAIModel", "RESPONSE_FORMATS", "openai_response_schema", "rejects_response_format", "usage_of"]

# Examples as chat turns took the 135M model from 1 to 3 of 8 bench tasks through llama_cpp.server
# (5 of 8 with repeat_penalty 1.0), and are the usual few-shot form for chat models.
CHAT_EXAMPLES_DEFAULT = True


def _count(value: Any) -> int:
    """A token count from a server's usage: a non-negative int, else 0 (servers send odd things)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_of(response: Any) -> Usage:
    """The usage a chat.completion reports (calls=1; zeros for what it leaves out)."""
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
    return usage


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class OpenAIModel:
    """Any OpenAI-compatible chat endpoint.

    Retries (429, 5xx, timeouts) and timeouts are the client's own (`max_retries`,
    `request_timeout`); this class writes no retry loop, but each retry and timeout the client
    makes is written to the cycle log (client_log.py), and each call's time, format and
    finish_reason too. The response format comes from the ladder (format_ladder.py): an endpoint
    and model not yet known are probed once, each rung without client retries, and the first
    accepted rung is remembered in the home; a remembered rung refused later is forgotten and the
    ladder walked again. `response_format` in the settings forces a text rung; `tool_calling`
    decides the top rung, native tool calls (tool_calls.py): `auto` probes it first, `native` uses
    only it, `text` never. A native probe whose reply has no call is read as text (its JSON action
    still runs) and the next request probes the text path. A request never
    outlives `Request.timeout` (the cycle's time budget): with less than one request_timeout left
    it gets what is left and no retries, and when it is cut, or fails then, ModelTimeout says so.

    strict is False on purpose: OpenAI's strict mode needs every property required and no
    free-form objects, so update_scratchpad would have to send every field (a model that fills
    `pending_actions: []` or `notes: ""` to mean "unchanged" would wipe them, and null would be
    ambiguous for current_task), and completed_tasks entries are free-form mappings that strict
    cannot express. Endpoints that constrain decoding (vLLM, llama.cpp) enforce the schema anyway.

    No secret is ever part of an error it raises or logs: the key and headers are checked before
    any header is built (a "Bearer sk-...\\n" header never exists to be quoted by httpx), every
    message passes `_short`, which redacts every form of every secret, and the endpoint is shown
    (and remembered) without its `user:pass@`.
    """

    def __init__(
        self,
        model_name: str,
        settings: Settings,
        env: Mapping[str, str],
        home_root: Path | None = None,
        secrets: Secrets | None = None,  # the command's one Secrets; None: built from the settings and env
    ):
        if not model_name:
            raise UsageError("openai: needs a model name, e.g. --model openai:gpt-4o-mini")
        self.name = f"openai:{model_name}"
        self.model_name = model_name
        self.settings = settings
        self._key = api_key(settings, env)  # stripped; control characters refused (exit 2)
        self._headers = request_headers(settings)  # the same for extra_headers
        # were a server or a library to echo them: the command's, when it gives it
        self._secrets = Secrets.from_settings(settings, env) if secrets is None else secrets
        self.base_url = model_base_url(settings, env)
        self.shown_url = without_credentials(self.base_url) or "api.openai.com"
        self.guided = bool(settings.guided)  # off unless asked: a capable model would only be hampered
        self.chat_examples = CHAT_EXAMPLES_DEFAULT if settings.chat_examples is None else settings.chat_examples
        self.memory = EndpointMemory(
            None if home_root is None else Home(home_root),
            without_credentials(self.base_url) or OPENAI_ENDPOINT,
            model_name,
        )
        self.format: str | None = None  # the rung in use; None: not known yet, the next request probes
        self.sent_as: str | None = None  # the rung of the last request sent
        self.probe_from = 0  # where the next probe starts on the ladder
        mode, forced = settings.tool_calling, settings.response_format
        self.ladder = {"native": (TOOL_CALLS,), "text": RESPONSE_FORMATS}.get(mode, LADDER)
        # the rung a refused tool_calls steps down to: the forced text rung, if one is
        self.after_native = LADDER.index(forced) if mode == "auto" and forced != "auto" else 1
        self.strict = True  # strict function schemas, until the endpoint refuses them
        self.previous: tuple[str, list] | None = None  # the last native step (tool_results: messages)
        self.client = None
        self.attempts = Attempts()  # its HTTP client's hooks: each retry in the cycle log
        self._log: Log = lambda _msg: None

    def start(self, log: Log) -> None:
        openai = import_frozen("openai")  # hundreds of pydantic models: agent/common/imports.py

        self._log = log
        self.client = openai.OpenAI(
            api_key=self._key,
            base_url=self.base_url,
            timeout=self.settings.request_timeout,
            max_retries=self.settings.max_retries,
            default_headers=self._headers or None,
            http_client=openai.DefaultHttpxClient(event_hooks=self.attempts.hooks()),  # its retries: client_log.py
        )
        self.probe_from, self.strict, self.previous = 0, True, None
        mode, forced = self.settings.tool_calling, self.settings.response_format
        if mode == "native" or (mode == "text" and forced != "auto"):
            self.format = TOOL_CALLS if mode == "native" else forced
            return
        recalled = self.memory.recall(native_probed=mode == "auto")
        usable = recalled in self.ladder and (forced == "auto" or recalled in (forced, TOOL_CALLS))
        self.format = recalled if usable else None
        if self.format:
            self.strict = self.memory.record().get("strict") is not False
            log(f"response_format {self.format}, remembered in {MEMORY_SHOWN} for this endpoint and model")

    def _client_for(self, deadline: float | None, probing: bool) -> tuple[Any, bool]:
        """The client for the next request and whether the time left cut its timeout.

        A probe gets no retries: a refused format should cost one quick request. With less time
        left than one request_timeout, the request gets what is left and no retries: retrying
        past the budget would only delay the stop the budget asks for.
        """
        client = self.client.with_options(max_retries=0) if probing else self.client
        if deadline is None:
            return client, False
        left = deadline - time.monotonic()
        if left <= 0:
            raise ModelTimeout("no time was left in the time budget for a model request")
        if left >= self.settings.request_timeout:
            return client, False
        return self.client.with_options(timeout=left, max_retries=0), True

    def messages(self, request: Request) -> list[dict]:
        """System and user; with chat_examples, the rules' examples as chat turns in between."""
        if self.chat_examples:
            return chat_messages(request)
        return [{"role": "system", "content": system_with_examples(request)}, {"role": "user", "content": request.user}]

    def complete(self, request: Request) -> Completion:
        deadline = None if request.timeout is None else time.monotonic() + request.timeout
        messages = self.messages(request)
        # a small model behind the endpoint: the schema, never the messages, is narrowed per step
        schema = guided_schema(request) if self.guided else request.schema
        while True:
            probing = self.format is None
            kind = self.sent_as = self.ladder[self.probe_from] if probing else self.format
            kwargs, tools = self._request(kind, request, messages, schema)
            started = time.monotonic()
            try:
                with self.attempts.during(self._log):
                    response = self._send(kwargs, deadline, probing)
            except _FormatRefused as refused:
                self._step_down(kind, refused.exc)
                continue
            completion = self._completion(response, kwargs["messages"], time.monotonic() - started, tools)
            completion.limit = kwargs["max_tokens"]
            if self.guided:  # what was offered: the tool list sent with every request, or this step's schema
                completion.schema = without_queue(request.schema) if tools is not None else schema
            if tools is not None:
                self.previous = (request.user, completion.calls) if completion.calls else None
            if probing:
                self._probed(kind, tools is not None and not completion.calls)
            return completion

    def _request(self, kind: str, request: Request, messages: list[dict], schema: dict) -> tuple[dict, list | None]:
        """The arguments of one chat request on rung `kind`, and the function tools it sends (None: none)."""
        kwargs: dict[str, Any] = dict(
            model=self.model_name,
            messages=messages,
            temperature=self.settings.temperature,
            max_tokens=request.max_output_tokens or self.settings.max_output_tokens,
        )
        tools = None
        if kind == TOOL_CALLS:  # the tool list is the same in every request: byte-stable for caches
            tools = function_tools(without_queue(request.schema) if self.guided else request.schema, self.strict)
            shown = native_messages(messages)
            if self.settings.tool_results == "messages":
                shown = with_previous(shown, self.previous, request.previous and request.previous.note)
            kwargs.update(messages=shown, tools=tools, tool_choice=TOOL_CHOICE)
        response_format = response_format_for(kind, schema) if tools is None else None
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.settings.extra_body:
            kwargs["extra_body"] = self.settings.extra_body
        return kwargs, tools

    def _probed(self, kind: str, no_call: bool) -> None:
        """A probe of rung `kind` was answered: remember the rung, or (tools taken, but the reply
        held no call) probe the next one with the next request."""
        if no_call:
            self.probe_from = self.after_native  # the reply is still read, as text
            self._log(
                "endpoint took tools but the reply holds no tool call: it is read as text, and the next "
                f"request probes {self.ladder[self.probe_from] if self.probe_from < len(self.ladder) else 'again'}"
            )
            if self.probe_from >= len(self.ladder):  # tool_calling: native; stay on the only rung
                self.format = kind
            return
        self.format = kind
        self.memory.remember(kind, self._log, self.strict)
        self._log(
            f"endpoint accepts response_format {kind}; remembered in {MEMORY_SHOWN} "
            f"for {self._short(self.memory.endpoint)} and model {self.model_name}"
        )

    def _step_down(self, kind: str, exc: Any) -> None:
        """The endpoint refused `kind`: the next rung is probed; a remembered or forced rung is forgotten."""
        position = self.ladder.index(kind)
        why = f"(HTTP {exc.status_code}: {self._short(server_message(exc), 160)})"
        if kind == TOOL_CALLS and self.strict and names_strict(exc):  # the same rung again, without strict
            self._log(f"endpoint refused strict function schemas {why}; sending them without strict")
            self.strict, self.format, self.probe_from = False, None, position
            return
        after = self.after_native if kind == TOOL_CALLS else position + 1
        if after >= len(self.ladder):  # text sends no response_format; tool_calling: native has no other rung
            hint = "; the endpoint takes no tools: set tool_calling to auto or text" if kind == TOOL_CALLS else ""
            raise self._error(
                ModelError, f"{self.endpoint} refused the request {why}{hint}", http_kind(exc.status_code)
            )
        if self.format is not None:
            self._log(
                f"endpoint now refuses the remembered response_format {kind} {why}; forgetting it and probing again"
            )
            self.memory.forget(self._log)
        else:
            self._log(f"endpoint refused response_format {kind} {why}; trying {self.ladder[after]}")
        self.format, self.probe_from = None, after

    def _send(self, kwargs: dict, deadline: float | None, probing: bool) -> Any:
        """One request, with the client's retries; a format refusal raises _FormatRefused."""
        import openai

        client, cut = self._client_for(deadline, probing)
        try:
            return client.chat.completions.create(**kwargs)
        except (openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError) as exc:
            if isinstance(exc, openai.APIStatusError) and (
                ("response_format" in kwargs and rejects_response_format(exc))
                or ("tools" in kwargs and rejects_tools(exc))
            ):
                raise _FormatRefused(exc) from exc
            if not probing or cut or self.settings.max_retries == 0:
                raise self._failure(exc, deadline, cut) from exc
            # the probe failed for another reason (busy, timeout): it was the first try, so the
            # same request goes again with the retries that are left (1 + max_retries in all)
            self._log(
                f"probe request failed ({type(exc).__name__}: {self._short(str(exc), 120)}); "
                f"sending it again with {self.settings.max_retries - 1} retries left"
            )
        except (openai.OpenAIError, ValueError) as exc:
            raise self._failure(exc, deadline, cut) from exc
        client, cut = self._client_for(deadline, False)
        if not cut:
            client = client.with_options(max_retries=self.settings.max_retries - 1)
        try:
            return client.chat.completions.create(**kwargs)
        except (openai.OpenAIError, ValueError) as exc:
            raise self._failure(exc, deadline, cut) from exc

    def _failure(self, exc: Exception, deadline: float | None, cut: bool) -> ModelError:
        """The ModelError a failed request raises, with its kind and endpoint (agent/common/outcomes.py
        `FailureKind`); `cut`: the time left cut the request's timeout."""
        import openai

        if isinstance(exc, openai.APIStatusError):
            return self._status_failure(exc, deadline, cut)
        if isinstance(exc, openai.APITimeoutError):
            if cut:
                return self._out_of_time(deadline, "the request was still running when it was cut")
            return self._error(
                ModelUnavailable,
                f"no answer from {self.endpoint} within {self.settings.request_timeout:g}s{self._retried()}",
                FailureKind.TIMEOUT,
            )
        if isinstance(exc, openai.APIConnectionError):
            if refused(exc):
                kind, problem = FailureKind.REFUSED, f"{self.endpoint} refused the connection (nothing listens there)"
            else:
                cause = self._short(str(exc.__cause__ or exc))
                kind, problem = FailureKind.CONNECTION, f"the connection to {self.endpoint} failed or was lost: {cause}"
            if cut:
                return self._out_of_time(deadline, problem)
            return self._error(ModelUnavailable, problem + self._retried(), kind)
        if isinstance(exc, openai.OpenAIError):
            return self._error(ModelError, f"model request failed: {self._short(str(exc))}", FailureKind.BAD_RESPONSE)
        # a ValueError: the client could not decode the body (not JSON, cut short)
        return self._error(
            ModelError,
            f"malformed response from {self.endpoint}: the body is not valid JSON ({self._short(str(exc), 120)})",
            FailureKind.BAD_RESPONSE,
        )

    def _status_failure(self, exc: Any, deadline: float | None, cut: bool) -> ModelError:
        """The ModelError for an HTTP error status: one kind per 4xx code, one for every 5xx, and a 404
        naming the model is model_not_found (with the names the endpoint offers)."""
        status, said = exc.status_code, self._short(server_message(exc))
        if context_exceeded(exc):
            return self._error(
                ModelError,
                f"the prompt does not fit the endpoint's context window (HTTP {status}: "
                f"{self._short(said, 200)}); lower prompt_max_bytes (now "
                f"{self.settings.prompt_max_bytes}) or use a model with a larger context",
                http_kind(status),
            )
        if status == 404 and names_the_model(exc, self.model_name):
            return self._model_not_found(said)
        problem = f"{self.endpoint} answered HTTP {status}" + (f": {said}" if said else "")
        retried = status in (408, 409, 429) or status >= 500  # as the client does
        if cut and retried:
            return self._out_of_time(deadline, problem)
        hint = STATUS_HINTS.get(status, "")
        return self._error(
            ModelUnavailable if retried else ModelError,
            problem + (self._retried() if retried else "") + hint,
            http_kind(status),
        )

    def _model_not_found(self, said: str) -> ModelError:
        """A 404 for the model's name: the names the endpoint offers (GET /models, once, briefly) and what to do."""
        offered = self.offered_models()
        names = (
            f"; it offers {', '.join(offered[:8])}{', …' if len(offered) > 8 else ''}"
            if offered
            else ("; it lists no models" if offered is not None else "")
        )
        if offered and self.model_name in offered:  # listed, yet refused: this key may not use it
            names = f"; it lists {self.model_name!r} but refuses it, so the key may not have access to it{names}"
        return self._error(
            ModelError,
            f"{self.endpoint} has no model named {self.model_name!r} (HTTP 404: {self._short(said, 160)}){names}; set model "
            f"(or --model openai:NAME) to one it offers, or load that model on the server (`agent doctor` checks)",
            FailureKind.MODEL_NOT_FOUND,
        )

    def offered_models(self) -> list[str] | None:
        """The model ids the endpoint lists (GET {base_url}/models, no retries, at most 10s); None: it
        did not say."""
        try:
            page = self.client.with_options(max_retries=0, timeout=min(10.0, self.settings.request_timeout))
            return [self._short(str(m.id), 100) for m in page.models.list().data][:50]
        except Exception:  # noqa: BLE001 - only a help for the message; the failure stands without it
            return None

    @property
    def endpoint(self) -> str:
        """The endpoint as messages and the incident's key name it: its host and port, no credentials."""
        return endpoint_host(self.shown_url) or "the endpoint"

    def _retried(self) -> str:
        retries = self.settings.max_retries
        return f" (after {retries} retr{'y' if retries == 1 else 'ies'})" if retries else ""

    def _error(self, cls: type, message: str, kind: str) -> ModelError:
        return cls(message, kind=str(getattr(kind, "value", kind)), endpoint=self._secrets.redact_text(self.endpoint))

    def _out_of_time(self, deadline: float, problem: str) -> ModelTimeout:
        """The error for a request the time left cut short, or that failed with too little time to retry."""
        left = deadline - time.monotonic()
        if left <= 0.05:
            return self._error(
                ModelTimeout, f"the time budget ran out during a model request ({problem})", FailureKind.TIMEOUT
            )
        return self._error(
            ModelTimeout,
            f"a model request failed ({problem}) with {left:.1f}s of the time budget left, "
            f"less than one request_timeout ({self.settings.request_timeout:g}s), "
            f"so it was not retried",
            FailureKind.TIMEOUT,
        )

    def _completion(self, response: Any, messages: list[dict], seconds: float, tools: list | None) -> Completion:
        try:
            choice = response.choices[0]
            message = choice.message
            text = message.content
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise self._error(
                ModelError,
                f"malformed response from {self.endpoint}: no choices[0].message ({self._short(repr(response), 200)})",
                FailureKind.BAD_RESPONSE,
            ) from exc
        calls, left_out = calls_of(message)
        if left_out:
            self._log(f"the reply made {len(calls) + left_out} tool calls; only the first {len(calls)} are run")
        if not isinstance(text, str) or not text:
            # a refusal (OpenAI) is still text the dispatcher can report as a parse error
            refusal = getattr(message, "refusal", None)
            text = refusal if isinstance(refusal, str) and not calls else ""
        finish_reason = getattr(choice, "finish_reason", None)
        finish_reason = finish_reason if isinstance(finish_reason, str) else None
        self._log(
            f"model call: {seconds:.2f}s, response_format {TOOL_CALLS if tools else self.format}, "
            f"finish_reason {finish_reason}" + (f", {len(calls)} tool call(s)" if calls else "")
        )
        if finish_reason == "length":
            self._log(
                f"the reply was cut at max_output_tokens ({self.settings.max_output_tokens}); "
                f"raise max_output_tokens if replies are often cut"
            )
        return Completion(
            text,
            usage_of(response),
            finish_reason,
            sent=messages,
            limit=self.settings.max_output_tokens,
            calls=calls,
            tools=tools,
            response_model=answered if isinstance(answered := getattr(response, "model", None), str) else None,
        )

    def _short(self, text: str, limit: int = 300) -> str:
        """Clipped to one line, with every secret redacted."""
        return _short(self._secrets.redact_text(str(text)), limit)


class _FormatRefused(Exception):
    """The endpoint refused the response_format itself (not any other error)."""

    def __init__(self, exc: Any):
        super().__init__(str(exc))
        self.exc = exc


# What a status says beyond its number, for the statuses a person can act on.
STATUS_HINTS = {
    401: "; the endpoint refused the key: check the variable named by api_key_env",
    403: "; the key may not use this model or endpoint",
    429: "; the endpoint is rate-limiting this key",
}


def server_message(exc: Any) -> str:
    """What the server said in an HTTP error, once: its `error.message` (the openai client's own
    message repeats the status code and the whole body), else the body's text, else ""."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        said = inner.get("message") if isinstance(inner, dict) else inner
        if said:
            return str(said)
    if isinstance(body, str) and body.strip():
        return body
    response = getattr(exc, "response", None)
    try:
        return "" if response is None else response.text[:2000]
    except Exception:  # noqa: BLE001 - a body that cannot be read says nothing
        return ""


def names_the_model(exc: Any, model_name: str) -> bool:
    """Whether a 404 is about the model's name (OpenAI's `model_not_found` code, or the words vLLM,
    Ollama and LM Studio use), not a wrong path such as a base_url without /v1."""
    code = str(getattr(exc, "code", "") or "")
    text = server_message(exc).lower()
    return code == "model_not_found" or (bool(model_name) and model_name.lower() in text) or "model" in text


def refused(exc: BaseException) -> bool:
    """Whether a connection error was a refusal (nothing listens at the endpoint), not a loss or a timeout."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, ConnectionRefusedError) or getattr(link, "errno", None) == errno.ECONNREFUSED:
            return True
        link = link.__cause__ or link.__context__
    return "connection refused" in str(exc.__cause__ or exc).lower()


def context_exceeded(exc: Any) -> bool:
    """Whether an endpoint's error says the prompt is longer than its context (OpenAI's code, and
    the words vLLM, llama.cpp and others use)."""
    text = f"{getattr(exc, 'code', '')} {getattr(exc, 'message', '')}".lower()
    return any(
        words in text
        for words in (
            "context_length_exceeded",
            "maximum context length",
            "exceeds the context",
            "context window",
            "exceed_context_size",
        )
    )


def provider(choice: ModelChoice) -> OpenAIModel:
    """`openai:NAME`: any OpenAI-compatible chat endpoint, the `agent.models` entry point."""
    return OpenAIModel(choice.name, choice.settings, choice.env, choice.home, choice.secrets)
