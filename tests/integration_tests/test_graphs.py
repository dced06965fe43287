"""Every available method end to end on a tiny real model: sync, async, checkpointed, streamed."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_adaptive_rag import (
    AVAILABLE_METHODS,
    AdaptiveRAGConfig,
    AttentionUnavailableError,
    ChatTransformers,
    DRAGINConfig,
    ETCConfig,
    FixLengthConfig,
    FLAREConfig,
    IRCoTConfig,
    MethodConfig,
    SeaKRConfig,
    SearchAgentConfig,
    TAAREConfig,
    UncertaintyGateConfig,
    create_adaptive_rag_graph,
    create_bm25_retriever,
)
from langchain_adaptive_rag.engine.layers import attention_module
from langchain_adaptive_rag.graphs import build_adaptive_rag_graph
from langchain_adaptive_rag.graphs.policy import Policy

SNAPSHOT = Path(__file__).parent / "snapshots" / "adaptive_rag_graph.mmd"
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
    "Maria Holm was born in 1899 in Bergen.",
]
CONFIGS: dict[str, MethodConfig] = {
    "no_retrieval": MethodConfig(generate_max_length=12),
    "single_round": MethodConfig(generate_max_length=12),
    "fix_length": FixLengthConfig(generate_max_length=12, fix_length=4),
    "fix_sentence": MethodConfig(generate_max_length=12),
    "flare": FLAREConfig(generate_max_length=12),
    "ircot": IRCoTConfig(step_max_tokens=12, max_steps=3, retrieve_topk=2),
    "adaptive_rag": AdaptiveRAGConfig(step_max_tokens=12, max_steps=3, retrieve_topk=2),
    "dragin": DRAGINConfig(generate_max_length=12, theta=0.5),
    "etc": ETCConfig(generate_max_length=12, theta=0.1),
    "uncertainty_gate": UncertaintyGateConfig(generate_max_length=12),
    "vanilla": TAAREConfig(generate_max_length=12),
    "seakr": SeaKRConfig(generate_max_length=12, num_samples=3, hidden_layer=1, delta=-100.0),
    "ta_are": TAAREConfig(generate_max_length=12, today="November 21, 2026"),
    # Search-R1's prompt: Search-o1's (1,203 tokens here) is longer than the tiny context
    "search_agent": SearchAgentConfig(
        protocol="search_r1", generate_max_length=24, turn_max_tokens=12, max_turns=3
    ),
}


@pytest.fixture(scope="module")
def chat(llama_dir: Path) -> ChatTransformers:
    return ChatTransformers(model=str(llama_dir), min_new_tokens=4, attn_implementation="eager")


@pytest.fixture(scope="module")
def retriever():
    return create_bm25_retriever(PASSAGES)


def _config(method: str) -> MethodConfig:
    config = CONFIGS[method]
    if method == "fix_sentence":
        from langchain_adaptive_rag import FixSentenceConfig

        return FixSentenceConfig(generate_max_length=config.generate_max_length)
    return config


def test_every_available_method_is_covered() -> None:
    # Self-RAG needs reflection tokens: test_self_rag_tiny_model.py runs it on a tiny model
    # whose tokenizer has them; the tool agent needs a chat model that calls tools
    # (tests/unit_tests/test_tool_agent.py runs it on scripted ones)
    assert set(AVAILABLE_METHODS) - {"self_rag", "tool_agent"} == set(CONFIGS)


@pytest.mark.parametrize("method", sorted(CONFIGS))
def test_method_end_to_end(method: str, chat: ChatTransformers, retriever, tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "runs.sqlite", check_same_thread=False) as connection:
        graph = create_adaptive_rag_graph(
            chat, retriever, method, config=_config(method), checkpointer=SqliteSaver(connection)
        )
        thread = {"configurable": {"thread_id": f"{method}-1"}}
        result = graph.invoke({"question": "When was the director of Blue Harbour born?"}, thread)
        routed = {"complexity"} if method == "adaptive_rag" else set()
        shared = {"messages", "answer", "text", "retrievals", "counts", "standalone_question"}
        assert set(result) == {*shared, *routed}
        assert result["standalone_question"] == ""  # no earlier turns: read as asked
        assert isinstance(result["answer"], str)
        counts = result["counts"]
        assert counts["retrievals"] == len(result["retrievals"])
        assert counts["llm_calls"] >= 1
        if method == "no_retrieval":
            assert counts["retrievals"] == 0
        if method in ("single_round", "fix_length", "fix_sentence"):
            assert result["retrievals"][0]["query"] == "When was the director of Blue Harbour born?"
            assert result["retrievals"][0]["doc_ids"][0] == "doc-0"
        # the checkpoint holds plain data and the finished run
        saved = graph.get_state(thread)
        assert saved.next == ()
        assert saved.values["answer"] == result["answer"]


@pytest.mark.parametrize("method", sorted(CONFIGS))
async def test_method_async(method: str, chat: ChatTransformers, retriever) -> None:
    graph = create_adaptive_rag_graph(chat, retriever, method, config=_config(method))
    result = await graph.ainvoke({"question": "Who was born first, Carl Lind or Maria Holm?"})
    assert isinstance(result["answer"], str)
    updates = [
        u async for u in graph.astream({"question": "Who is Anna Berg?"}, stream_mode="updates")
    ]
    first, last = ("classify", "tally") if method == "adaptive_rag" else ("draft", "finalize")
    assert list(updates[0]) == [first] and list(updates[-1]) == [last]


def test_stream_modes(chat: ChatTransformers, retriever) -> None:
    graph = create_adaptive_rag_graph(
        chat, retriever, "single_round", config=_config("single_round")
    )
    parts = list(graph.stream({"question": "Who is Anna Berg?"}, stream_mode=["updates", "custom"]))
    nodes = [next(iter(chunk)) for mode, chunk in parts if mode == "updates"]
    assert nodes[:5] == ["draft", "score_need", "formulate_query", "retrieve", "rerank"]
    decision, event, *later = [chunk for mode, chunk in parts if mode == "custom"]
    assert decision["event"] == "decision" and decision["retrieve"] is True
    assert event["event"] == "retrieval" and event["query"] == "Who is Anna Berg?"
    assert all(e["event"] == "decision" and not e["retrieve"] for e in later)
    assert nodes.index("retrieve") < nodes.index("rerank")


def test_mermaid_drawing_snapshot(chat: ChatTransformers, retriever) -> None:
    drawing = create_adaptive_rag_graph(chat, retriever, "flare").get_graph().draw_mermaid()
    assert drawing == SNAPSHOT.read_text()


def test_attention_method_builds_on_sdpa_and_fails_at_build_time_without_rows(
    llama_dir: Path, retriever
) -> None:
    class NeedsAttention(Policy):
        needs_attention = True

    sdpa = ChatTransformers(model=str(llama_dir), attn_implementation="sdpa")
    build_adaptive_rag_graph(NeedsAttention(MethodConfig()), sdpa, retriever)
    module = attention_module(sdpa.hf_model, -1)
    module.forward = lambda hidden_states, *a, **k: (hidden_states * 0, None)  # type: ignore[method-assign]
    bypassing = ChatTransformers(model=sdpa.hf_model, tokenizer=sdpa.hf_tokenizer)
    with pytest.raises(AttentionUnavailableError, match='attn_implementation="eager"'):
        build_adaptive_rag_graph(NeedsAttention(MethodConfig()), bypassing, retriever)


def test_method_errors(chat: ChatTransformers, retriever) -> None:
    from langchain_adaptive_rag import AdaptiveRAGError

    with pytest.raises(AdaptiveRAGError, match="'raptor' is unknown"):
        create_adaptive_rag_graph(chat, retriever, "raptor")  # type: ignore[arg-type]
    with pytest.raises(AdaptiveRAGError, match="takes a FLAREConfig, got MethodConfig"):
        create_adaptive_rag_graph(chat, retriever, "flare", config=MethodConfig())


def test_question_longer_than_the_context(tmp_path: Path, retriever) -> None:
    from langchain_adaptive_rag import PromptTooLongError
    from langchain_adaptive_rag.testing import create_tiny_model

    short = ChatTransformers(model=str(create_tiny_model(tmp_path / "m", max_positions=64)))
    graph = create_adaptive_rag_graph(short, retriever, "no_retrieval")
    with pytest.raises(PromptTooLongError, match="context holds 64 positions"):
        graph.invoke({"question": "Who? " * 50})


@pytest.mark.parametrize("mode", ["reference", "inline"])
def test_dragin_attention_modes_on_a_real_model(
    mode: str, chat: ChatTransformers, retriever
) -> None:
    config = DRAGINConfig(generate_max_length=16, theta=0.5, attention_mode=mode)  # type: ignore[arg-type]
    result = create_adaptive_rag_graph(chat, retriever, "dragin", config=config).invoke(
        {"question": "When was the director of Blue Harbour born?"}
    )
    # a random model is uncertain everywhere: RIND fires and QFS builds a query from words
    event = result["retrievals"][0]
    assert event["score"] > 0.5 and event["threshold"] == 0.5
    assert event["trigger_word"] and isinstance(event["query"], str) and event["query"]


def test_seakr_on_a_real_model(chat: ChatTransformers, retriever) -> None:
    config = SeaKRConfig(generate_max_length=16, num_samples=4, hidden_layer=0, delta=-100.0)
    result = create_adaptive_rag_graph(chat, retriever, "seakr", config=config).invoke(
        {"question": "When was the director of Blue Harbour born?"}
    )
    event = result["retrievals"][0]
    # U of 4 real EOS hidden states (mlp output of layer 0) is finite and above delta
    assert math.isfinite(event["score"]) and event["score"] > -100.0
    assert event["rerank_order"] is not None and len(event["rerank_order"]) == 1
    assert result["counts"]["llm_calls"] >= 5 * (1 + 4)


@pytest.mark.parametrize(
    "estimator", ["perplexity", "multi_sample_perplexity", "ln_entropy", "energy", "prompt"]
)
def test_seakr_ablation_estimators_on_a_real_model(
    chat: ChatTransformers, retriever, estimator: str
) -> None:
    config = SeaKRConfig(
        generate_max_length=8,
        num_samples=2,
        hidden_layer=0,
        delta=-100.0,
        estimator=estimator,  # type: ignore[arg-type]
    )
    result = create_adaptive_rag_graph(chat, retriever, "seakr", config=config).invoke(
        {"question": "When was the director of Blue Harbour born?"}
    )
    event = result["retrievals"][0]  # every finite U is above delta = -100
    assert math.isfinite(event["score"]) and event["score"] > -100.0
    if estimator == "prompt":  # a self-check probability
        assert 0.0 <= event["score"] <= 1.0


def test_messages_stream_mode_on_a_real_model(chat: ChatTransformers, retriever) -> None:
    graph = create_adaptive_rag_graph(chat, retriever, "flare", config=_config("flare"))
    parts = list(graph.stream({"question": "Who is Anna Berg?"}, stream_mode="messages"))
    assert parts, "no tokens were streamed"
    nodes = {meta["langgraph_node"] for _, meta in parts}
    assert "draft" in nodes
    by_message: dict[str, str] = {}
    for chunk, _ in parts:
        by_message[chunk.id] = by_message.get(chunk.id, "") + str(chunk.content)
    assert all(isinstance(text, str) for text in by_message.values())


def test_seakr_layer_is_checked_at_build_time(chat: ChatTransformers, retriever) -> None:
    from langchain_adaptive_rag import AdaptiveRAGError, create_seakr_graph

    bad = SeaKRConfig(hidden_layer=15)
    with pytest.raises(AdaptiveRAGError, match=r"hidden_layer=15 does not exist.*hidden_layer=0"):
        create_seakr_graph(chat, retriever, config=bad)
    with pytest.raises(AdaptiveRAGError, match=r"hidden_layer=15 does not exist"):
        create_adaptive_rag_graph(chat, retriever, "seakr", config=bad)


def test_seakr_defaults_read_the_models_middle_layer(chat: ChatTransformers, retriever) -> None:
    from langchain_adaptive_rag import create_seakr_graph
    from langchain_adaptive_rag.graphs.seakr import middle_layer

    assert (middle_layer(32), middle_layer(2), middle_layer(1)) == (15, 0, 0)
    seen: list[int] = []
    original = chat.generate_trace

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs["capture"].hidden_layer)
        return original(*args, **kwargs)

    object.__setattr__(chat, "generate_trace", spy)
    try:
        graph = create_seakr_graph(
            chat, retriever, config=SeaKRConfig(generate_max_length=8, num_samples=2)
        )
        graph.invoke({"question": "Who wrote it?"})
    finally:
        object.__delattr__(chat, "generate_trace")
    assert seen and set(seen) == {middle_layer(chat.num_layers)}
