"""What every provider shares: the request the cycle sends, the completion it gets back, the
Model protocol, and the errors a provider raises.

A provider raises only its own ModelError kinds; the loop decides what each one means (a
ModelTimeout ends the cycle as a time-budget stop, any other ModelError fails the cycle).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Protocol

from agent.common.tags import Outcome, Tag

Log = Callable[[str], None]


class Notice(str):
    """A line a model logs that the operator should also see now, such as the embedded model
    preparing itself on its first run on a machine. `with_notices` sends it on."""


def with_notices(log: Log, notify: Callable[[str], None]) -> Log:
    """A Log that writes every line to `log` and hands a Notice to `notify` as well."""

    def both(line: str) -> None:
        log(line)
        if isinstance(line, Notice):
            notify(str(line))

    return both


@dataclass(frozen=True)
class Request:
    """One model call, as the cycle builds it.

    `system`, `user` and `schema` are what is sent. `task` and `previous` are the same step as
    structured fields, so a provider that narrows the schema per step (a guided model:
    agent/models/local/guidance.py) never parses them back out of `user`.
    """

    system: str  # byte-stable across iterations and cycles: prompt caches hit on it
    user: str  # the changing part: scratchpad, iteration, task, last result, what to do now
    schema: dict  # the action schema: {"anyOf": [one option per tool]}
    task: str | None = None  # the current task; None when there is none
    previous: Outcome | None = None  # what the previous action of this cycle did (redacted); None before the first
    timeout: float | None = None  # seconds left in the cycle's time budget; None: no budget
    purpose: str = "action"  # what the call is for, as the transcript records it: "action", "reflect", "consolidate"
    examples: tuple = ()  # worked steps as (user turn, reply) pairs, for chat_messages (agent/cycle/examples.py)
    examples_text: str = ""  # the same examples as a section of system text, for a model sent no turns
    max_output_tokens: int | None = None  # this call's own cap (a consolidation's reply); None: the setting's

    @classmethod
    def from_fields(cls, fields: dict) -> "Request":
        """A Request from its `dataclasses.asdict` (as the embedded model's child process receives it)."""
        previous = fields.get("previous")
        if previous is not None:  # its tag arrives as the tag's text: made a Tag again, or `is` fails
            previous = Outcome(
                **{**previous, "kind": Tag(previous["kind"]), "leaving": tuple(previous.get("leaving", ()))}
            )
        return cls(**{**fields, "previous": previous})


def chat_messages(request: Request) -> list[dict]:
    """The messages for a chat model: the system text, the examples as user/assistant turns, then
    this step's message."""
    messages = [{"role": "system", "content": request.system}]
    for example_user, example_reply in request.examples:
        messages += [{"role": "user", "content": example_user}, {"role": "assistant", "content": example_reply}]
    messages.append({"role": "user", "content": request.user})
    return messages


def system_with_examples(request: Request) -> str:
    """The system text with the examples written into it, for a model sent no example turns."""
    if not request.examples_text:
        return request.system
    return f"{request.system.rstrip()}\n\n{request.examples_text}"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    calls: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.calls += other.calls

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __str__(self) -> str:
        """For a log line: `1,200 prompt + 34 completion tokens (1,000 cached), 2 calls`."""
        cached = f" ({self.cached_tokens:,} cached)" if self.cached_tokens else ""
        calls = f", {self.calls} call{'' if self.calls == 1 else 's'}"
        return f"{self.prompt_tokens:,} prompt + {self.completion_tokens:,} completion tokens{cached}{calls}"

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "total_tokens": self.total_tokens,
            "calls": self.calls,
        }


@dataclass(frozen=True)
class ToolCall:
    """One native tool call as the endpoint sent it: `arguments` is kept exactly as received (OpenAI
    sends a JSON string; it is decoded, like a text reply, only when the call is dispatched)."""

    id: str
    name: Any
    arguments: Any

    def as_sent(self) -> dict:
        """The call in the chat API's shape, as a transcript shows it and an assistant message repeats it."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass
class Completion:
    text: str
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None  # as the endpoint reported it ("stop", "length", ...); None: not reported
    sent: list[dict] | None = None  # the chat messages the provider really sent; None: system + user as they are
    limit: int | None = None  # the most tokens the reply could have (max_output_tokens as sent)
    calls: list[ToolCall] = field(default_factory=list)  # native tool calls, in the order the reply gave them
    tools: list[dict] | None = None  # the function definitions sent with the request; None: none were sent
    # the action schema the reply was asked to follow when the provider narrowed the request's (a
    # guided model); the dispatcher refuses a call outside it. None: the request's schema
    schema: dict | None = None
    response_model: str | None = None  # the model the endpoint says answered (its `model` field); None: not said

    @property
    def cut_at(self) -> int | None:
        """The token limit the reply was cut at (finish_reason "length"); None: not cut."""
        return self.limit if self.finish_reason == "length" else None

    def replies(self) -> list[str | ToolCall]:
        """What the dispatcher gets, one at a time: each native call in order, else the reply's text
        (a model that writes its JSON action as text instead of a call is still heard)."""
        return list(self.calls) if self.calls else [self.text]

    @property
    def shown(self) -> str:
        """The reply for the cycle log: its text, or its native calls as JSON."""
        return json.dumps([c.as_sent() for c in self.calls], ensure_ascii=False) if self.calls else self.text


class Model(Protocol):
    name: str

    def start(self, log: Log) -> None:
        """Get ready for one cycle (load weights, open a client); `log` writes to the cycle log
        (and shows a Notice to the operator)."""

    def complete(self, request: Request) -> Completion: ...


class ModelChoice(NamedTuple):
    """What a provider is called with when `model` is PROVIDER:NAME (agent/models/resolve.py)."""

    name: (
        str  # NAME as written ("" when there is none); a relative file anchored already, when the provider names files
    )
    settings: Any  # this model's Settings (a fallback entry: its own model, base_url and api_key_env)
    env: Mapping[str, str]  # the environment its key and endpoint are read from
    home: Path  # the home the cycle runs in
    secrets: Any  # the command's one Secrets: whatever the model logs or raises passes through it


class Provider(Protocol):
    """An `agent.models` entry point: a ModelChoice in, a Model out, checked (UsageError, exit 2, names
    what is wrong); the expensive part (weights, clients) waits for `Model.start`. A provider whose
    NAME is a file says so with `names_a_file = True`: a relative path is then found in the home
    (or, on the command line, in the current directory)."""

    def __call__(self, choice: ModelChoice) -> Model: ...


class ModelError(Exception):
    """The model could not produce a reply (a refused request, a malformed response, ...). `kind`: the
    failure kind (agent/common/outcomes.py `FailureKind`, or `http_kind`'s text) where it raised it
    knows it; None: the cycle classifies it by its class. `endpoint`: where the request went (an
    endpoint's host and port, no credentials), for the incident's key; None: no endpoint (the
    embedded model, a script). The message says what happened in words, once: it is what a person reads."""

    def __init__(self, message: str = "", kind: str | None = None, endpoint: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.endpoint = endpoint


class ModelUnavailable(ModelError):
    """The model cannot be reached or loaded: connection refused, retries exhausted, a broken file."""


class ModelTimeout(ModelError):
    """The request ran out of the time the cycle gave it (`Request.timeout`), or failed with too
    little of that time left to be retried."""


class ModelCrashed(ModelError):
    """The model's own process died (a signal such as SIGSEGV or SIGKILL, or an exit) mid-call."""


class ScriptEnded(ModelError):
    """A scripted model was asked for more replies than its script holds."""
