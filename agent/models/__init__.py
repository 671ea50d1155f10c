"""Models: scripted replies, any OpenAI-compatible endpoint, or an embedded GGUF model.

    base.py           Request, Completion, Usage, the Model protocol, the ModelError kinds
    resolve.py        resolve_model: settings.model -> a checked Model (UsageError otherwise)
    scripted.py       replies from a file (scripted:FILE) or from memory (tests)
    openai_compat.py  any OpenAI-compatible chat endpoint (openai:NAME)
    local.py          a GGUF file run by llama-cpp-python (local, local:FILE), in a child process
    local_worker.py   the child process the embedded model runs in, and how its death becomes ModelCrashed
    local_child.py    what runs in that child
    local_cache.py    the embedded model's prompt-prefix cache between cycles
    guidance.py       per-step narrowing of the grammar for a small local model

Heavy libraries (openai, llama_cpp) are imported only by the model that uses them, when a
cycle starts it; `resolve_model` and `ScriptedModel` load on first use, so importing base.py
(as nearly every module does) never brings in the model front door or the scripted reader.
"""

from typing import Any

from agent.models.base import (
    Completion,
    Model,
    ModelCrashed,
    ModelError,
    ModelTimeout,
    ModelUnavailable,
    Request,
    ScriptEnded,
    Usage,
)

__all__ = [
    "Completion",
    "Model",
    "ModelCrashed",
    "ModelError",
    "ModelTimeout",
    "ModelUnavailable",
    "Request",
    "ScriptEnded",
    "ScriptedModel",
    "Usage",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    if name == "resolve_model":
        from agent.models.resolve import resolve_model

        return resolve_model
    if name == "ScriptedModel":
        from agent.models.scripted import ScriptedModel

        return ScriptedModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
