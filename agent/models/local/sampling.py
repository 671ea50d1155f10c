"""Greedy decoding under a grammar that asks the grammar about the likeliest token first.

llama-cpp-python's sampler chain applies the grammar to every one of the vocabulary's 49,152
tokens before it picks one: for the bundled model that is about a third of the CPU a reply's
token costs. Greedy decoding (temperature 0, this project's default) picks the likeliest token
the grammar allows, so it is enough to ask the grammar about the likeliest token of all: when
the grammar allows it (nearly always: the model follows the examples) it is the answer; when
not, the grammar is applied to the whole vocabulary and the likeliest token left is taken, as
the chain does. The tokens are the same ones; only the work differs. llama.cpp's own command
line samples this way.

`install` has a loaded llama_cpp.Llama build this sampler wherever its chain would be exactly
grammar then greedy (no temperature, no penalties, no logits processor), and the usual chain
otherwise. It replaces Llama._init_sampler, private in llama-cpp-python: the version is pinned
(pyproject.toml) and tests/models/local/test_sampling.py compares both on real replies.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

NEUTRAL = {"repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0}


class GreedyGrammarSampler:
    """What Llama.generate asks of its sampler: sample(ctx, idx) -> token, the token accepted."""

    def __init__(self, llm: Any, grammar: Any):
        import llama_cpp
        import numpy

        self.lib, self.np, self.grammar = llama_cpp, numpy, None
        self.grammar = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.grammar:
            raise ValueError("llama.cpp refused the grammar")
        self.n_vocab = llm.n_vocab()
        self.one = (llama_cpp.llama_token_data * 1)()
        self.every = (llama_cpp.llama_token_data * self.n_vocab)()
        self.every_view = numpy.ctypeslib.as_array(self.every)  # fields id, logit, p
        self.every_view["id"] = numpy.arange(self.n_vocab, dtype=numpy.int32)

    def _apply(self, data: Any, size: int) -> None:
        candidates = self.lib.llama_token_data_array(data=data, size=size, selected=-1, sorted=False)
        self.lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))

    def sample(self, ctx: Any, idx: int = -1) -> int:
        logits = self.np.ctypeslib.as_array(self.lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self.n_vocab,))
        token = int(logits.argmax())
        self.one[0].id, self.one[0].logit, self.one[0].p = token, float(logits[token]), 0.0
        self._apply(self.one, 1)
        if math.isinf(self.one[0].logit) and self.one[0].logit < 0:  # not allowed here: ask about every token
            self.every_view["logit"] = logits
            self._apply(self.every, self.n_vocab)
            token = int(self.every_view["logit"].argmax())
        self.lib.llama_sampler_accept(self.grammar, token)
        return token

    def close(self) -> None:
        if self.grammar:
            self.lib.llama_sampler_free(self.grammar)
            self.grammar = None

    def __del__(self) -> None:
        self.close()


def install(llm: Any) -> None:
    """Have `llm` decode greedily under a grammar with GreedyGrammarSampler (see the module's docstring)."""
    usual = getattr(llm, "_init_sampler", None)
    if usual is None:  # another llama-cpp-python: its own chain does it all
        return

    def init_sampler(**options: Any) -> Any:
        grammar = options.get("grammar")
        plain = all(options.get(name, value) == value for name, value in NEUTRAL.items())
        if grammar is None or options.get("temp") != 0.0 or options.get("logits_processor") or not plain:
            return usual(**options)
        try:
            return GreedyGrammarSampler(llm, grammar)
        except Exception:  # a grammar llama.cpp refuses, a changed internal: the chain says what is wrong
            return usual(**options)

    llm._init_sampler = init_sampler
