"""fallback_models: where a cycle goes on when its model is down or over its own budget.

`fallback_models` lists models after the primary (`model`): a name (`openai:gpt-4o-mini`,
`local`, ...) takes the primary's other settings (endpoint, key variable, extra_headers); a
mapping `{model, base_url, api_key_env}` sets its own endpoint and key. One with its own
`base_url` must name its own key variable or say `api_key_env: inherit` to be sent the primary's
key (the config check refuses it otherwise), and is never sent the primary's `extra_headers`:
headers go only to the endpoint they were configured for. `FallbackModel` sends each
request to the model in use, starting with the primary. It moves to the next model in the list,
for the rest of the cycle, when the one in use

- is unreachable or keeps failing: ModelUnavailable (connection refused, a timeout or a server
  error after the client's retries, weights that do not load);
- has spent a budget set for it in `model_budgets` (tokens or money per UTC day or month,
  counted from the index records that name it).

A request the model refused for another reason (a 400, a malformed body) or that the cycle's time
budget cut is not retried elsewhere: another model would not fix it. The last model's error ends
the cycle as it would without fallbacks. `name` is always the model in use, so the index
record, `status` and the metrics name the model that answered; each OpenAI-compatible model
remembers its own response format (openai/format_ladder.py keys it by endpoint and model).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from agent.common.outcomes import LimitReached, StopReason
from agent.config import INHERIT, Settings
from agent.models.base import Completion, Log, Model, ModelUnavailable, Request


def model_settings(settings: Settings) -> list[Settings]:
    """The settings of each model a cycle may use, primary first, each alone (no fallbacks, no budgets)."""
    out = [dataclasses.replace(settings, fallback_models=[], model_budgets={})]
    for entry in settings.fallback_models:
        if isinstance(entry, str):
            out.append(dataclasses.replace(settings, model=entry, fallback_models=[], model_budgets={}))
        else:
            changes = {k: entry[k] for k in ("model", "base_url", "api_key_env") if k in entry and entry[k] != INHERIT}
            if "base_url" in entry:
                changes["extra_headers"] = {}
            out.append(dataclasses.replace(settings, fallback_models=[], model_budgets={}, **changes))
    return out


class FallbackModel:
    """The primary model, then each fallback in turn (see the module's docstring)."""

    def __init__(self, models: list[Model], spent: Callable[[str], str | None] | None = None):
        self.models, self.spent = models, spent or (lambda name: None)
        self.current = 0
        self.started = False  # whether the model in use has been started this cycle
        self._log: Log = lambda _line: None

    @property
    def name(self) -> str:
        return self.models[self.current].name

    def start(self, log: Log) -> None:
        """Models are started when first asked (and a budget checked): one that is down costs its
        start only when the cycle gets to it."""
        self._log, self.current, self.started = log, 0, False

    def complete(self, request: Request) -> Completion:
        while True:
            over = self.spent(self.name)
            if over:  # the last one spent: nothing sent, the cycle stops as any spent budget stops it
                self._step(over, LimitReached(StopReason.BUDGET_EXHAUSTED, f"model {self.name} {over}"))
                continue
            try:
                if not self.started:
                    self.models[self.current].start(self._log)
                    self.started = True
                return self.models[self.current].complete(request)
            except ModelUnavailable as exc:
                self._step(f"failed: {exc}", exc)

    def _step(self, why: str, exc: Exception) -> None:
        if self.current + 1 >= len(self.models):
            raise exc
        following = self.models[self.current + 1].name
        self._log(f"model {self.name} {why}; the cycle continues on {following} (fallback_models)")
        self.current, self.started = self.current + 1, False
