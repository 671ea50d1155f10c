"""Greedy decoding under a grammar (agent/models/local/sampling.py): the same tokens as
llama-cpp-python's own sampler chain, whether the grammar allows the likeliest token or not."""

from __future__ import annotations

import pytest

from agent.models.local.runtime import bundled_model_path
from agent.models.local.sampling import GreedyGrammarSampler, install

pytestmark = pytest.mark.embedded_model  # skipped without the [local] extra, failed under CI (conftest.py)

PROMPTS = [
    # the likeliest token is allowed at some steps and not at others
    ('Reply with JSON. {"tool": "echo", "args": {"message": "', r'root ::= [a-z ]{1,12} "\"}}"', False),
    # the likeliest token (" Paris") is not allowed: the whole vocabulary is asked
    ("The capital of France is", r'root ::= " " ("yes" | "no" | "maybe") "."', True),
]


@pytest.fixture(scope="module")
def two_models():
    from llama_cpp import Llama

    def load():
        return Llama(model_path=str(bundled_model_path()), n_ctx=512, n_threads=1, verbose=False)

    usual, ours = load(), load()
    install(ours)
    return usual, ours


@pytest.mark.parametrize("prompt, grammar, refused", PROMPTS)
def test_the_tokens_are_the_ones_the_usual_chain_picks(two_models, monkeypatch, prompt, grammar, refused):
    from llama_cpp import LlamaGrammar

    usual, ours = two_models
    asked = []
    apply = GreedyGrammarSampler._apply
    monkeypatch.setattr(
        GreedyGrammarSampler, "_apply", lambda self, data, size: (asked.append(size), apply(self, data, size))
    )
    grammars = [LlamaGrammar.from_string(grammar, verbose=False) for _ in range(2)]
    usual_reply, our_reply = (
        model.create_completion(prompt, max_tokens=16, temperature=0.0, grammar=g)
        for model, g in zip((usual, ours), grammars)
    )

    assert usual_reply["choices"][0]["text"] == our_reply["choices"][0]["text"] != ""
    # one question about the likeliest token per token sampled (the reply's, and the end's)
    assert asked.count(1) - our_reply["usage"]["completion_tokens"] in (0, 1) and asked[0] == 1
    if refused:  # " Paris" first: refused, so the whole vocabulary was asked, and the same token came out
        assert asked[1] == ours.n_vocab()


def test_only_plain_greedy_decoding_under_a_grammar_gets_it(two_models):
    from llama_cpp import LlamaGrammar

    _, ours = two_models
    grammar = LlamaGrammar.from_string('root ::= "a"', verbose=False)
    assert isinstance(ours._init_sampler(temp=0.0, grammar=grammar), GreedyGrammarSampler)
    for options in ({"temp": 0.7}, {"repeat_penalty": 1.1}, {"logits_processor": [lambda ids, logits: logits]}):
        chain = ours._init_sampler(**{"temp": 0.0, "grammar": grammar, **options})
        assert not isinstance(chain, GreedyGrammarSampler), options
    assert not isinstance(ours._init_sampler(temp=0.0, grammar=None), GreedyGrammarSampler)
