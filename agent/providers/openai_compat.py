"""Any OpenAI-compatible chat endpoint, through the official openai client.

openai is imported only when a cycle starts the model (`start`) or calls it (`complete`).
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from ..config import Settings
from ..outcomes import UsageError
from ..secrets import Secrets, api_key, model_base_url, request_headers, without_credentials
from .base import Completion, Log, ModelError, ModelTimeout, ModelUnavailable, Request, Usage

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


def rejects_response_format(exc: Exception) -> bool:
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
    `request_timeout`); this class writes no retry loop. It asks for `response_format`
    json_schema (the tool registry's schema) and steps down to json_object, then plain text,
    only when the endpoint rejects response_format itself; the step is logged once and kept for
    the rest of the cycle. A request never outlives `Request.timeout` (the cycle's time budget):
    with less than one request_timeout left it gets what is left and no retries, and when it is
    cut, or fails then, ModelTimeout says so. The API key is never part of a message this class
    raises or logs.

    strict is False on purpose: OpenAI's strict mode needs every property required and no
    free-form objects, so update_scratchpad would have to send every field (a model that fills
    `pending_actions: []` or `notes: ""` to mean "unchanged" would wipe them, and null would be
    ambiguous for current_task), and completed_tasks entries are free-form mappings that strict
    cannot express. Endpoints that constrain decoding (vLLM, llama.cpp) enforce the schema anyway.

    No secret is ever part of an error it raises or logs: the key and headers are checked before
    any header is built (a "Bearer sk-...\\n" header never exists to be quoted by httpx), every
    message passes `_short`, which redacts every form of every secret, and the endpoint is shown
    without its `user:pass@`.
    """

    def __init__(self, model_name: str, settings: Settings, env: Mapping[str, str]):
        if not model_name:
            raise UsageError("openai: needs a model name, e.g. --model openai:gpt-4o-mini")
        self.name = f"openai:{model_name}"
        self.model_name = model_name
        self.settings = settings
        self._key = api_key(settings, env)             # stripped; control characters refused (exit 2)
        self._headers = request_headers(settings)      # the same for extra_headers
        self._secrets = Secrets.from_settings(settings, env)  # were a server or a library to echo them
        self.base_url = model_base_url(settings, env)
        self.shown_url = without_credentials(self.base_url) or "api.openai.com"
        self.format_index = 0
        self.client = None
        self._log: Log = lambda _msg: None

    def start(self, log: Log) -> None:
        import openai

        self._log = log
        self.format_index = 0
        self.client = openai.OpenAI(
            api_key=self._key, base_url=self.base_url, timeout=self.settings.request_timeout,
            max_retries=self.settings.max_retries, default_headers=self._headers or None,
        )

    def _response_format(self, action_schema: dict) -> dict | None:
        kind = RESPONSE_FORMATS[self.format_index]
        if kind == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": "action", "schema": openai_response_schema(action_schema), "strict": False}}
        if kind == "json_object":
            return {"type": "json_object"}
        return None

    def _client_for(self, deadline: float | None) -> tuple[Any, bool]:
        """The client for the next request and whether the time left cut its timeout.

        With less time left than one request_timeout, the request gets what is left and no
        retries: retrying past the budget would only delay the stop the budget asks for.
        """
        if deadline is None:
            return self.client, False
        left = deadline - time.monotonic()
        if left <= 0:
            raise ModelTimeout("no time was left in the time budget for a model request")
        if left >= self.settings.request_timeout:
            return self.client, False
        return self.client.with_options(timeout=left, max_retries=0), True

    def complete(self, request: Request) -> Completion:
        import openai

        deadline = None if request.timeout is None else time.monotonic() + request.timeout
        messages = [{"role": "system", "content": request.system}, {"role": "user", "content": request.user}]
        while True:
            kwargs: dict[str, Any] = dict(model=self.model_name, messages=messages,
                                          temperature=self.settings.temperature,
                                          max_tokens=self.settings.max_output_tokens)
            response_format = self._response_format(request.schema)
            if response_format is not None:
                kwargs["response_format"] = response_format
            client, cut = self._client_for(deadline)
            try:
                response = client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                if response_format is not None and rejects_response_format(exc):
                    old = RESPONSE_FORMATS[self.format_index]
                    self.format_index += 1
                    self._log(f"endpoint rejected response_format {old} (HTTP {exc.status_code}: "
                              f"{self._short(exc.message, 160)}); "
                              f"using {RESPONSE_FORMATS[self.format_index]} for the rest of this cycle")
                    continue
                problem = f"HTTP {exc.status_code}: {self._short(exc.message)}"
                retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500  # as the client does
                if cut and retried:
                    raise self._out_of_time(deadline, problem) from exc
                raise (ModelUnavailable if retried else ModelError)(f"model request failed: {problem}") from exc
            except openai.APITimeoutError as exc:
                if cut:
                    raise self._out_of_time(deadline, "the request was still running when it was cut") from exc
                raise ModelUnavailable(f"model request timed out after {self.settings.request_timeout:g}s "
                                       f"({self.settings.max_retries} retries)") from exc
            except openai.APIConnectionError as exc:
                problem = f"cannot reach the model endpoint {self._short(self.shown_url)}: " \
                          f"{self._short(str(exc.__cause__ or exc))}"
                if cut:
                    raise self._out_of_time(deadline, problem) from exc
                raise ModelUnavailable(problem) from exc
            except openai.OpenAIError as exc:
                raise ModelError(f"model request failed: {self._short(str(exc))}") from exc
            except ValueError as exc:  # the client could not decode the body (not JSON, cut short)
                raise ModelError(f"malformed response from the endpoint: the body is not valid JSON "
                                 f"({self._short(str(exc), 120)})") from exc
            return self._completion(response, messages)

    def _out_of_time(self, deadline: float, problem: str) -> ModelTimeout:
        """The error for a request the time left cut short, or that failed with too little time to retry."""
        left = deadline - time.monotonic()
        if left <= 0.05:
            return ModelTimeout(f"the time budget ran out during a model request ({problem})")
        return ModelTimeout(f"a model request failed ({problem}) with {left:.1f}s of the time budget left, "
                            f"less than one request_timeout ({self.settings.request_timeout:g}s), "
                            f"so it was not retried")

    def _completion(self, response: Any, messages: list[dict]) -> Completion:
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
        finish_reason = getattr(choice, "finish_reason", None)
        if finish_reason == "length":
            self._log(f"the reply was cut at max_output_tokens ({self.settings.max_output_tokens}); "
                      f"raise max_output_tokens if replies are often cut")
        return Completion(text, usage_of(response), finish_reason if isinstance(finish_reason, str) else None,
                          sent=messages)

    def _short(self, text: str, limit: int = 300) -> str:
        """Clipped to one line, with every secret redacted."""
        return _short(self._secrets.redact_text(str(text)), limit)
