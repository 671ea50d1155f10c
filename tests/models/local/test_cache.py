"""The prompt-prefix cache's file names (agent/models/local/cache.py): one per model and prompt,
the example turns included, and whether this machine has run the model at all."""

from __future__ import annotations

import pytest

from agent.models.local.cache import PrefixCache

TURNS = (("Task: say hi", '{"tool": "echo", "args": {"message": "hi"}}'),)


class _Loaded:
    """Stands in for a loaded llama_cpp.Llama: the cache's names read only its context size."""

    def __init__(self, n_ctx: int = 4096):
        self.context = n_ctx

    def n_ctx(self) -> int:
        return self.context


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


@pytest.mark.embedded_model
def test_each_prompt_and_its_example_turns_get_their_own_file_under_the_models_key(tmp_path, model_file):
    cache = PrefixCache(_Loaded(), model_file, tmp_path / "cache", lambda line: None)

    plain, with_turns = cache.file_for("rules", ()), cache.file_for("rules", TURNS)
    assert plain != with_turns != cache.file_for("other rules", TURNS)
    assert with_turns == cache.file_for("rules", [list(turn) for turn in TURNS])  # as the child receives them
    assert plain.name.split("-")[1] == with_turns.name.split("-")[1]  # the model's key comes first
    other_context = PrefixCache(_Loaded(2048), model_file, tmp_path / "cache", lambda line: None)
    assert other_context.file_for("rules", TURNS) != with_turns


@pytest.mark.embedded_model
def test_the_model_is_seen_once_any_of_its_prompts_was_saved(tmp_path, model_file):
    cache = PrefixCache(_Loaded(), model_file, tmp_path / "cache", lambda line: None)
    assert not cache.model_seen()  # no folder yet
    (tmp_path / "cache").mkdir()
    PrefixCache(_Loaded(2048), model_file, tmp_path / "cache", lambda line: None).file_for("x").write_bytes(b"")
    assert not cache.model_seen()  # another context size is another model here
    cache.file_for("rules", TURNS).write_bytes(b"")
    assert cache.model_seen()
    model_file.unlink()
    assert cache.file_for("rules") is None and not cache.model_seen()
