"""Models: scripted replies, any OpenAI-compatible endpoint, or an embedded GGUF model; more from
any installed package that declares an `agent.models` entry point.

- base.py      Request, Completion, Usage, the Model and Provider protocols, the ModelError kinds
- resolve.py   resolve_model: settings.model -> a checked Model (UsageError otherwise), by entry point
- fallback.py  fallback_models: going on with the next model
- replies.py   finding the action in a reply's text
- scripted.py  replies from a file (scripted:FILE) or from memory (tests)
- openai/      any OpenAI-compatible chat endpoint (openai:NAME)
- local/       the embedded GGUF model (local, local:FILE), in a child process, with a small model's help

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
