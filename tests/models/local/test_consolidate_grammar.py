"""The embedded model's grammar for a consolidation: built from the consolidate tool's own bounds
(each section's limit and entry_chars), it admits a reply giving back a whole full section, which
the step's default bounds (8 items per array) could never express. Checked token by token through
llama.cpp's own grammar sampler, with the bundled model's vocabulary."""

from __future__ import annotations

import copy
import ctypes
import json

import pytest

from agent.memory.consolidation import consolidate_tool
from agent.models.local.runtime import LOCAL_MAX_ITEMS, bounded_schema
from agent.setting_checks import section_specs
from agent.state import taken_keys

pytestmark = pytest.mark.embedded_model

SPECS = section_specs({"known": {"kind": "list", "limit": 20, "entry_chars": 200}}, taken_keys())


@pytest.fixture(scope="module")
def admits():
    import llama_cpp
    from llama_cpp import Llama, LlamaGrammar

    from agent.models.local.model import bundled_model_path

    llm = Llama(model_path=str(bundled_model_path()), vocab_only=True, verbose=False)

    def check(schema: dict, text: str) -> bool:
        """Whether llama.cpp's grammar for `schema` lets the model write `text`, token by token."""
        grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
        sampler = llama_cpp.llama_sampler_init_grammar(
            llm._model.vocab, grammar._grammar.encode(), grammar._root.encode()
        )
        assert sampler, "llama.cpp refused the grammar"
        try:
            for token in llm.tokenize(text.encode(), add_bos=False, special=False):
                data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
                candidates = llama_cpp.llama_token_data_array(data, 1, -1, False)
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if data[0].logit == float("-inf"):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)

    return check


def full_section(state_ids: int = 20) -> dict:
    return {"known": [{"id": f"known-{n}", "text": "x"} for n in range(1, state_ids + 1)]}


def without_bounds(node):
    """The schema as a step's would be, with none of the consolidate tool's own bounds."""
    if isinstance(node, dict):
        return {k: without_bounds(v) for k, v in node.items() if k not in ("maxItems", "maxLength")}
    return [without_bounds(v) for v in node] if isinstance(node, list) else node


def test_the_grammar_admits_a_whole_full_section_kept(admits):
    schema = bounded_schema(consolidate_tool(SPECS, full_section()).action_schema())
    reply = {"tool": "consolidate", "args": {"sections": {"known": [{"id": f"known-{n}"} for n in range(1, 21)]}}}
    assert admits(schema, json.dumps(reply))
    assert not admits(bounded_schema(without_bounds(schema)), json.dumps(reply))  # 8 items: the step's default
    assert LOCAL_MAX_ITEMS < 20


def test_the_grammar_admits_successors_at_entry_chars_citing_many(admits):
    schema = bounded_schema(consolidate_tool(SPECS, full_section()).action_schema())
    successor = {"text": "y" * 200, "cites": [f"known-{n}" for n in range(1, 11)]}
    reply = {
        "tool": "consolidate",
        "args": {"sections": {"known": [successor, *({"id": f"known-{n}"} for n in range(11, 21))]}, "archive": []},
    }
    assert admits(schema, json.dumps(reply))
    longer = copy.deepcopy(reply)
    longer["args"]["sections"]["known"][0]["text"] = "y" * 201
    assert not admits(schema, json.dumps(longer))  # entry_chars is the grammar's bound too
