"""Compatibility shim: the providers moved to agent/providers/. Removed when every importer uses them."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from .config import Settings
from .providers.base import (Completion, Model, ModelError, ModelTimeout, ModelUnavailable, Request, ScriptEnded,
                             Usage)
from .providers.local import (BUNDLED_MODEL_FILE, BUNDLED_MODEL_PACKAGE, LOCAL_EXTRA_HINT, LOCAL_MAX_ITEMS,
                              LOCAL_MAX_STRING, LOCAL_MAX_TOKENS, LocalModel, bounded_schema, bundled_model_path,
                              local_runtime_installed)
from .providers.local_cache import LOCAL_CACHE_ENV, LOCAL_CACHE_KEEP, common_prefix, local_cache_dir
from .providers.openai_compat import RESPONSE_FORMATS, OpenAIModel, openai_response_schema
from .providers.resolve import PROVIDERS
from .providers.resolve import resolve_model as _resolve_model
from .providers.scripted import ScriptedModel

__all__ = ["BUNDLED_MODEL_FILE", "BUNDLED_MODEL_PACKAGE", "LOCAL_CACHE_ENV", "LOCAL_CACHE_KEEP", "LOCAL_EXTRA_HINT",
           "LOCAL_MAX_ITEMS", "LOCAL_MAX_STRING", "LOCAL_MAX_TOKENS", "PROVIDERS", "RESPONSE_FORMATS", "Completion",
           "LocalModel", "Model", "ModelError", "ModelTimeout", "ModelUnavailable", "OpenAIModel", "Request",
           "ScriptEnded", "ScriptedModel", "Usage", "bounded_schema", "bundled_model_path", "common_prefix",
           "local_cache_dir", "local_runtime_installed", "openai_response_schema", "resolve_model"]


def resolve_model(settings: Settings, env: Mapping[str, str] | None = None) -> Model:
    """The old signature, for callers not yet moved: relative model paths stay relative to the
    current directory, as before. New code calls providers.resolve_model(settings, home_root, env)."""
    return _resolve_model(settings, Path(), env)
