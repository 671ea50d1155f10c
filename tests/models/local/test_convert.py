"""The bundled model's Q8_0 copy (agent/models/local/convert.py): made once, atomically, in the
cache folder; a copy that cannot be made or loaded costs nothing but the speed."""

from __future__ import annotations

import pytest

from agent.config import Settings
from agent.models.local.cache import LOCAL_CACHE_ENV
from agent.models.local.convert import SUFFIX, converted, converted_path
from agent.models.local.runtime import LocalRuntime, bundled_model_path

needs_embedded_model = pytest.mark.embedded_model  # skipped without the [local] extra, failed under CI (conftest.py)


@needs_embedded_model
def test_the_bundled_model_is_converted_once_and_then_reused(tmp_path):
    lines = []
    first = converted(bundled_model_path(), tmp_path / "cache", 1, lines.append)

    assert first == converted_path(bundled_model_path(), tmp_path / "cache") and first.name.endswith(SUFFIX)
    assert any("converted" in line for line in lines)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]  # no temporary left
    made = first.stat().st_mtime_ns

    lines.clear()
    assert converted(bundled_model_path(), tmp_path / "cache", 1, lines.append) == first
    assert lines == [] and first.stat().st_mtime_ns == made  # untouched: the prompt cache is keyed by its time


def test_a_copy_that_cannot_be_made_is_logged_and_the_model_stays_as_shipped(tmp_path):
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF")
    (tmp_path / "not-a-folder").write_text("a file where the cache folder should be\n")
    lines = []

    assert converted(source, tmp_path / "not-a-folder" / "cache", 1, lines.append) is None
    assert len(lines) == 1 and "the model stays as shipped" in lines[0]
    assert converted(tmp_path / "gone.gguf", tmp_path / "cache", 1, lines.append) is None  # no source: nothing


@needs_embedded_model
def test_a_copy_llama_cpp_will_not_load_is_removed_and_the_shipped_file_is_loaded(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(LOCAL_CACHE_ENV, str(cache))
    broken = converted_path(bundled_model_path(), cache)
    cache.mkdir()
    broken.write_bytes(b"GGUF cut short by a power failure")
    lines = []

    runtime = LocalRuntime(bundled_model_path(), Settings(local_threads=1))
    runtime.start(lines.append)

    assert runtime.loaded == bundled_model_path() and not broken.exists()
    assert any("would not load" in line for line in lines)
    assert any(line.startswith(f"loaded {bundled_model_path().name} ") for line in lines)


@needs_embedded_model
def test_with_the_cache_off_nothing_is_converted(monkeypatch):
    monkeypatch.setenv(LOCAL_CACHE_ENV, "off")
    runtime = LocalRuntime(bundled_model_path(), Settings(local_threads=1))
    runtime.start(lambda line: None)
    assert runtime.loaded == bundled_model_path()


@needs_embedded_model
def test_a_model_file_llama_cpp_cannot_read_leaves_no_copy_and_no_temporary(tmp_path):
    source = tmp_path / "model.gguf"
    source.write_bytes(b"GGUF, then nothing a model holds")
    lines = []

    assert converted(source, tmp_path / "cache", 1, lines.append) is None
    assert "could not convert it" in lines[0] and list((tmp_path / "cache").iterdir()) == []
