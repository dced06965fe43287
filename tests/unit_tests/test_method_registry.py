"""A method is registered once: everything that lists methods derives from the registry.

The registry is ``catalogue.METHODS``; a method owns its state channels
(``Policy.state_schema``, ``Policy.fresh_channels``); the shared state holds only what
every method has.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_adaptive_rag import catalogue, langgraph_app
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import (
    AVAILABLE_METHODS,
    config_class,
    create_adaptive_rag_graph,
    policy_class,
)
from langchain_adaptive_rag.graphs.policy import Policy
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_tool_calls import SearchToolCalls
from langchain_adaptive_rag.graphs.tool_agent import ToolAgentConfig
from langchain_adaptive_rag.state import AdaptiveRAGState
from langchain_adaptive_rag.testing import FakeTraceModel
from langchain_adaptive_rag.toyworld.comparison import (
    TOY_CONFIGS,
    TOY_METHODS,
    TOY_SEARCH_BUDGET,
    toy_config,
)
from langchain_adaptive_rag.toyworld.prompts import TOY_SEARCH_PROTOCOL
from tests.helpers.agent_model import ScriptedAgentModel
from tests.helpers.scripted import RecordingRetriever

ROOT = Path(__file__).resolve().parents[2]
SHARED = AdaptiveRAGState.__required_keys__ | AdaptiveRAGState.__optional_keys__


def _keys(schema: type) -> frozenset[str]:
    return frozenset(schema.__required_keys__ | schema.__optional_keys__)  # type: ignore[attr-defined]


def test_the_builder_the_command_line_and_the_server_read_the_registry() -> None:
    assert tuple(catalogue.METHODS) == AVAILABLE_METHODS == catalogue.METHOD_NAMES
    for method, where in catalogue.METHODS.items():
        module, _, name = where.partition(":")
        facts = policy_class(method)
        assert (facts.__module__, facts.__name__, facts.name) == (module, name, method)
    assert langgraph_app.__all__ == list(AVAILABLE_METHODS)
    for method in AVAILABLE_METHODS:  # in the module's dict, where LangGraph's server looks
        assert callable(vars(langgraph_app)[method])
        assert vars(langgraph_app)[method].__name__ == method
    with pytest.raises(AttributeError):
        _ = langgraph_app.not_a_method  # type: ignore[attr-defined]


def test_langgraph_json_serves_registered_methods_by_their_factories() -> None:
    graphs = json.loads((ROOT / "langgraph.json").read_text())["graphs"]
    assert set(graphs) <= set(TOY_METHODS), "langgraph.json serves methods the toy model runs"
    for method, where in graphs.items():
        assert where == f"./langchain_adaptive_rag/langgraph_app.py:{method}"
    # the methods served today; a new method is served by adding its line
    assert set(TOY_METHODS) - set(graphs) <= set(TOY_METHODS) - set(_SERVED_TODAY)


_SERVED_TODAY = (
    "no_retrieval",
    "single_round",
    "fix_length",
    "fix_sentence",
    "ircot",
    "adaptive_rag",
    "flare",
    "dragin",
    "seakr",
    "vanilla",
    "ta_are",
    "search_agent",
    "tool_agent",
)


def test_every_toy_method_has_a_toy_config_of_its_class() -> None:
    assert set(TOY_CONFIGS) <= set(TOY_METHODS)
    for method in TOY_METHODS:
        chosen = toy_config(method)
        assert isinstance(chosen, config_class(method))
        if isinstance(chosen, SearchAgentConfig):  # 48 a turn, over several turns
            assert chosen.search_protocol == TOY_SEARCH_PROTOCOL
            assert chosen.search_protocol.turn_max_tokens == 48
            assert chosen.generate_max_length == TOY_SEARCH_BUDGET
        elif isinstance(chosen, ToolAgentConfig):  # the same turns, read as tool calls
            assert chosen.tool_format == SearchToolCalls(TOY_SEARCH_PROTOCOL)
            assert chosen.generate_max_length == 48
        else:
            assert chosen.generate_max_length == 48


def test_a_registry_line_for_another_class_is_refused() -> None:
    from langchain_adaptive_rag import graphs

    with pytest.raises(AdaptiveRAGError, match="not that method's policy class"):
        graphs._load_facts("dragin", "langchain_adaptive_rag.graphs.flare:FLAREPolicy")


def test_every_method_builds_by_name_on_its_own_state() -> None:
    tokens = ["[Retrieval]", "[No Retrieval]", "[Relevant]", "[Irrelevant]"]
    tokens += ["[Fully supported]", "[Partially supported]", "[No support / Contradictory]"]
    tokens += [f"[Utility:{grade}]" for grade in range(1, 6)]
    model = FakeTraceModel(["x"], vocabulary={t: 100 + i for i, t in enumerate(tokens)})
    for method in AVAILABLE_METHODS:
        facts = policy_class(method)
        chosen = ScriptedAgentModel(replies=[]) if method == "tool_agent" else model
        graph = create_adaptive_rag_graph(chosen, RecordingRetriever(), method)
        if not issubclass(facts, Policy):  # a graph of its own: a router, an agent
            assert set(graph.get_graph().nodes) > {"__start__", "__end__"}, method
            continue
        schema = facts.state_schema
        assert _keys(schema) >= SHARED, method
        assert _keys(graph.builder.state_schema) == _keys(schema), method
        own = _keys(schema) - SHARED
        assert set(facts(config_class(method)()).fresh_channels()) <= own, method


@pytest.mark.parametrize(
    ("method", "own"),
    [
        ("dragin", {"draft_attention", "draft_words", "draft_sentences", "draft_sentence_texts"}),
        ("seakr", {"draft_uncertainty", "kept_docs"}),
        ("ircot", {"kept_docs", "chain"}),
        ("self_rag", {"draft_token_ids", "reflection_logprobs", "segments"}),
    ],
)
def test_method_channels_live_with_their_method_not_in_the_shared_state(
    method: str, own: set[str]
) -> None:
    facts = policy_class(method)
    assert issubclass(facts, Policy)
    assert _keys(facts.state_schema) - SHARED == own
    assert not own & SHARED
