"""One model call outside the loop, offering one tool: what reflect and a consolidation ask.

The request offers exactly that tool (its action schema constrains a guided model's reply) and
runs within the time the caller gives it (the cycle's time left); the transcript records it (a
cycle's model is the transcript's recording wrapper); the reply is logged redacted before it is
clipped (never half a key); and the reply passes the dispatcher's own check of a reply
(`Registry.called`): a call of that tool with valid arguments, or ReplyError saying why not.
"""

from __future__ import annotations

from typing import Any, Callable

from agent.models.base import Completion, Request
from agent.models.replies import ReplyError
from agent.secrets import Secrets
from agent.tools import NotACall, Registry, Tool


def ask_once(model: Any, rules: str, prompt: str, tool: Tool, usage: Any, log: Callable[[str], None], **how) -> dict:
    """The arguments of the one call of `tool` the model replies with (`how`: as for `ask`);
    ReplyError when the reply is not one. An interrupt is not caught."""
    completion = ask(model, rules, prompt, tool, usage, log, **how)
    try:
        _, args, _ = Registry([tool]).called(completion.replies()[0])
    except NotACall as no:
        raise ReplyError(no.problem) from None
    return args


def ask(
    model: Any,
    rules: str,
    prompt: str,
    tool: Tool,
    usage: Any,
    log: Callable[[str], None],
    *,
    purpose: str,
    timeout: float | None = None,
    secrets: Secrets | None = None,
    max_output_tokens: int | None = None,
) -> Completion:
    """The model's completion of a request offering only `tool`, within `timeout` seconds; `usage`
    takes what it spent, the log its reply (redacted with `secrets`, then clipped). A caller with its
    own check of the reply (a consolidation's, which reverts rather than fails) reads it from here."""
    request = Request(
        rules,
        prompt,
        {"anyOf": [tool.action_schema()]},
        timeout=timeout,
        purpose=purpose,
        max_output_tokens=max_output_tokens,
    )
    completion = model.complete(request)
    usage.add(completion.usage)
    shown = secrets.redact_text(completion.shown) if secrets else completion.shown
    log(f"{purpose}: reply {shown[:2000]!r} usage {completion.usage}")
    return completion
