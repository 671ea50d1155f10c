"""The response formats an OpenAI-compatible endpoint may take, and what the home remembers of them.

The ladder runs from native tool calls (TOOL_CALLS: `tools` sent, `tool_calls` read back) through
the text path's RESPONSE_FORMATS, from the most constrained to none; `tool_calling: text` starts
below the top rung, `native` uses only it. An endpoint and model not
yet known are probed once: each rung is sent without the client's retries until one is accepted
(llama-cpp-python's server refuses json_schema with an HTTP 500 that the client would otherwise
retry, three requests and ~1.4 s in every cycle). The first accepted rung is remembered in the
home (the `endpoint` probe in logs/agent.db) for that endpoint and model; a different endpoint or
model, an unreadable record, or the remembered rung being refused later means probing again.
"""

from __future__ import annotations

import datetime as _dt
from typing import Callable

from agent.common.outcomes import AgentError
from agent.models.base import Log
from agent.store.db import probe, remember_probe
from agent.store.home import Home

# "json_object_schema" is {"type": "json_object", "schema": ...}: llama-cpp-python's server
# refuses json_schema but takes this, and builds a grammar from the schema.
RESPONSE_FORMATS = ("json_schema", "json_object_schema", "json_object", "text")
TOOL_CALLS = "tool_calls"  # the top rung: the native path
LADDER = (TOOL_CALLS, *RESPONSE_FORMATS)
OPENAI_ENDPOINT = "https://api.openai.com/v1"  # the endpoint a record names when base_url is unset


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


def response_format_for(kind: str, action_schema: dict) -> dict | None:
    """The request's response_format for one rung of the ladder (None: plain text, nothing sent)."""
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "action", "schema": openai_response_schema(action_schema), "strict": False},
        }
    if kind == "json_object_schema":
        # llama.cpp needs no object at the root, so the action schema itself goes: each tool paired
        # with its own arguments (the root form let a small model give echo a `command`), strings
        # bounded as the embedded model's are. Over the bench: 0 parse errors, against 3 with
        # openai_response_schema and 21 with no schema.
        from agent.models.local.runtime import bounded_schema  # here: other rungs never load the local runtime

        return {"type": "json_object", "schema": bounded_schema(action_schema)}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


def error_text(exc: Exception) -> str:
    """Everything an HTTP error says, lower-cased: its message, its body and the raw response text."""
    texts = [str(exc), str(getattr(exc, "body", "") or "")]
    response = getattr(exc, "response", None)
    try:
        texts.append(response.text if response is not None else "")
    except Exception:  # a body that cannot be decoded: the other texts still count
        pass
    return " ".join(texts).lower()


def rejects_response_format(exc: Exception) -> bool:
    """Whether an HTTP error is the endpoint refusing the response_format we sent (not any error).

    llama-cpp-python's server answers json_schema with HTTP 500 "Input should be 'text' or
    'json_object'" (a validation error on body.response_format.type); older vLLM and other
    FastAPI servers answer 422 with that field in `loc`; others 400 naming response_format.
    """
    if getattr(exc, "status_code", None) not in (400, 415, 422, 500, 501):
        return False
    text = error_text(exc)
    return "response_format" in text or "json_schema" in text or "'text' or 'json_object'" in text


class EndpointMemory:
    """The `endpoint` probe of logs/agent.db: the response format an endpoint and model accepted, kept
    across cycles.

    One record, {"endpoint", "model", "response_format", "tool_calling", "strict", "probed"}:
    `response_format` is the rung ("tool_calls" for the native path), `tool_calling` says which
    path that is (native or text), `strict` whether the endpoint took strict function schemas. A
    record for another endpoint or model, unreadable or foreign content, or (`native_probed`) a
    record written before native calls were probed: nothing remembered. A failed write is only
    logged (the next cycle probes again). Retention prunes cycle files only. `recall` reads the
    record; `record` reuses that reading until this object changes it (a cycle's start asks for the
    rung, then whether it was strict: one read). No home (the doctor): nothing read or written.
    """

    def __init__(self, home: Home | None, endpoint: str, model: str):
        self.home, self.endpoint, self.model = home, endpoint, model
        self._read: dict | None = None  # the record as `recall` last read it; None: read again

    def recall(self, native_probed: bool = False) -> str | None:
        data = self._read = self._load()
        if native_probed and "tool_calling" not in data:
            return None
        kind = data.get("response_format")
        return kind if kind in LADDER else None

    def record(self) -> dict:
        """The record for this endpoint and model ({} when there is none)."""
        if self._read is None:
            self._read = self._load()
        return self._read

    def _load(self) -> dict:
        if self.home is None:
            return {}
        try:
            data = probe(self.home, "endpoint")
        except AgentError:
            return {}
        if not isinstance(data, dict) or data.get("endpoint") != self.endpoint or data.get("model") != self.model:
            return {}
        return data

    def remember(self, kind: str, log: Log, strict: bool = True) -> None:
        record = {
            "endpoint": self.endpoint,
            "model": self.model,
            "response_format": kind,
            "tool_calling": "native" if kind == TOOL_CALLS else "text",
            "strict": strict,
            "probed": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        }
        self._write(lambda home: remember_probe(home, "endpoint", record), log)

    def forget(self, log: Log) -> None:
        self._write(lambda home: remember_probe(home, "endpoint", None), log)

    def _write(self, change: Callable[[Home], None], log: Log) -> None:
        self._read = None  # read again when next asked
        if self.home is None or not self.home.logs.is_dir():
            return
        try:
            change(self.home)
        except AgentError as exc:  # the next cycle probes again
            log(f"could not update the endpoint probe in {self.home.database}: {exc}")
