"""A stand-in for llama_cpp whose decode really crashes the process (a read at address 0: SIGSEGV),
as a llama-cpp-python built for another CPU does. Tests put this folder first on PYTHONPATH so
the embedded model's child process imports it (the parent never imports llama_cpp).

CRASHING_RUNTIME=off makes it decode without crashing: every chat reply is CRASHING_RUNTIME_REPLY;
CRASHING_RUNTIME=hang makes every decode wait forever.
"""

import ctypes
import os
import threading

__version__ = "0-crashing-test-runtime"


def _decode() -> None:
    if os.environ.get("CRASHING_RUNTIME") == "hang":
        threading.Event().wait()
    if os.environ.get("CRASHING_RUNTIME") != "off":
        ctypes.string_at(0)


class Llama:
    def __init__(self, model_path: str, **options):
        self.input_ids, self.n_tokens = [], 0

    def n_ctx(self) -> int:
        return 512

    def create_chat_completion(self, messages, **options) -> dict:
        _decode()
        text = os.environ.get("CRASHING_RUNTIME_REPLY", '{"tool": "done", "args": {"summary": "decoded"}}')
        return {
            "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
        }

    def create_completion(self, prompt: str, max_tokens: int = 16, **options) -> dict:
        _decode()
        return {"choices": [{"text": " Paris"}], "usage": {"completion_tokens": max_tokens}}


class LlamaGrammar:
    @classmethod
    def from_json_schema(cls, schema: str, verbose: bool = True) -> "LlamaGrammar":
        return cls()
