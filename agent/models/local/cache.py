"""The embedded model's prompt-prefix cache, kept on disk between cycles.

Speed on a small CPU is mostly prompt processing. Within a cycle llama.cpp keeps the evaluated
tokens in its KV cache and only evaluates what changed. Between cycles, the state after the
first call (system message, examples, ...) is saved here, keyed by the model file, the context
size, the llama.cpp version and the exact system text and example turns; the next cycle loads
it (a few milliseconds) instead of evaluating about 2,000 tokens again (several seconds on 2
cores). A file's name starts with the model's key, so whether this machine has run the model at
all is one look at the folder. Any problem with the cache is logged and the cycle goes on
without it.

llama.cpp offers no public API to restore a saved state into a `Llama` object, so `load` sets
the same private fields `Llama.load_state` sets (`input_ids`, `n_tokens`, `_requires_eval`).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent.models.base import Log

LOCAL_CACHE_ENV = "AGENT_LOCAL_CACHE"
LOCAL_CACHE_KEEP = 4  # prompt-prefix states kept in the cache folder (about 40 MB each)


def local_cache_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """Where the embedded model keeps evaluated prompt prefixes between cycles; None when off.

    AGENT_LOCAL_CACHE names the folder ("off" turns the cache off); else
    $XDG_CACHE_HOME/scratchpad-agent, else ~/.cache/scratchpad-agent.
    """
    env = os.environ if env is None else env
    chosen = env.get(LOCAL_CACHE_ENV, "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scratchpad-agent"


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items two sequences share (tokens a prefix cache can reuse)."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PrefixCache:
    """Saved KV states of one loaded model (`llm`, a llama_cpp.Llama) in `folder`."""

    def __init__(self, llm: Any, model_path: Path, folder: Path, log: Log):
        import llama_cpp  # only ever built for a model llama_cpp has loaded

        self.lib = llama_cpp
        self.llm = llm
        self.model_path = model_path
        self.folder = folder
        self.log = log

    def _model_key(self) -> str | None:
        """What the saved states of this model share: the file, the context size, llama.cpp's version."""
        try:
            stat = self.model_path.stat()
        except OSError:
            return None
        identity = (
            f"{self.model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{self.llm.n_ctx()}|"
            f"{getattr(self.lib, '__version__', '?')}"
        )
        return hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]

    def file_for(self, system: str, examples: Sequence[Sequence[str]] = ()) -> Path | None:
        """The cache file for a prompt that starts with `system` and the example turns; None when
        the model file is gone."""
        model = self._model_key()
        if model is None:
            return None
        prompt = json.dumps([system, [list(turn) for turn in examples]], ensure_ascii=False)
        return self.folder / f"prefix-{model}-{hashlib.sha256(prompt.encode('utf-8')).hexdigest()[:16]}.kv"

    def model_seen(self) -> bool:
        """Whether a state of this model was saved here before (for another prompt, or this one)."""
        model = self._model_key()
        return model is not None and any(self.folder.glob(f"prefix-{model}-*.kv"))

    def load(self, path: Path) -> bool:
        """Load a saved KV state and the tokens it holds; False (state reset) when it cannot be used."""
        llm, lib = self.llm, self.lib
        capacity = llm.n_ctx()
        tokens = (lib.llama_token * capacity)()
        count = ctypes.c_size_t(0)
        try:
            loaded = lib.llama_state_load_file(llm._ctx.ctx, str(path).encode(), tokens, capacity, ctypes.byref(count))
            if not loaded or not 0 < count.value <= capacity:
                raise ValueError("llama.cpp refused the file")
            llm.input_ids[: count.value] = tokens[: count.value]
            llm.n_tokens = count.value
            llm._requires_eval = True  # logits must come from a live decode, as after Llama.load_state
        except Exception as exc:
            llm.reset()
            self.log(f"prompt cache {path.name} not used: {exc}")
            return False
        self.log(f"prompt cache: loaded {count.value} evaluated tokens from {path}")
        return True

    def save(self, path: Path) -> None:
        """Save the evaluated tokens and their KV state; keep only the newest LOCAL_CACHE_KEEP files."""
        llm, lib = self.llm, self.lib
        n = llm.n_tokens
        if n <= 0:
            return
        tokens = (lib.llama_token * n)(*llm.input_ids[:n].tolist())
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not lib.llama_state_save_file(llm._ctx.ctx, str(temporary).encode(), tokens, n):
                raise OSError("llama.cpp could not write the state")
            os.replace(temporary, path)
            stale = sorted(path.parent.glob("prefix-*.kv"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in stale[LOCAL_CACHE_KEEP:]:
                old.unlink(missing_ok=True)
        except Exception as exc:
            self.log(f"prompt cache not saved to {path}: {exc}")
            with contextlib.suppress(OSError):
                temporary.unlink()
            return
        self.log(f"prompt cache: saved {n} evaluated tokens to {path}")
