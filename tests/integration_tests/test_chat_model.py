"""ChatTransformers as a LangChain chat model on a tiny local Llama."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.retrievers import BaseRetriever
from pydantic import Field, ValidationError

from langchain_adaptive_rag import AdaptiveRAGError, ChatTransformers, get_token_signals
from tests.conftest import boundary_stop

RTOL = 1e-5
"""A prompt sent again prefills from the prefix cache (all but its last token stored):
its signals equal the first call's to float rounding, not bit for bit."""


@pytest.fixture(scope="module")
def chat(llama_dir: Path) -> ChatTransformers:
    return ChatTransformers(model=str(llama_dir), max_new_tokens=16, min_new_tokens=4)


def _sum(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


def test_invoke_reports_signals_that_match_the_trace(chat: ChatTransformers) -> None:
    message = chat.invoke("Who directed Blue Harbour?")
    trace = chat.generate_trace([HumanMessage("Who directed Blue Harbour?")])[0]
    signals = get_token_signals(message)
    assert message.content == trace.text
    np.testing.assert_array_equal(signals.token_ids, trace.token_ids)
    np.testing.assert_allclose(signals.entropies, trace.entropies, rtol=RTOL)
    np.testing.assert_allclose(signals.logprobs, trace.logprobs, rtol=RTOL)
    assert signals.tokens == trace.tokens
    assert message.response_metadata["finish_reason"] == trace.finish_reason
    assert message.response_metadata["model_name"] == str(chat.model)
    assert message.usage_metadata == {
        "input_tokens": trace.num_prompt_tokens,
        "output_tokens": trace.num_tokens,
        "total_tokens": trace.num_prompt_tokens + trace.num_tokens,
    }


def test_stream_adds_up_to_invoke(chat: ChatTransformers) -> None:
    message = chat.invoke("Tell me about Paris.")
    chunks = list(chat.stream("Tell me about Paris."))
    total = _sum(chunks)
    assert total.content == message.content
    streamed, invoked = get_token_signals(total), get_token_signals(message)
    np.testing.assert_array_equal(streamed.token_ids, invoked.token_ids)
    np.testing.assert_allclose(streamed.entropies, invoked.entropies, rtol=RTOL)
    assert streamed.tokens == invoked.tokens
    assert total.usage_metadata == message.usage_metadata
    assert total.response_metadata["finish_reason"] == message.response_metadata["finish_reason"]
    assert chunks[-1].chunk_position == "last"


def test_stop_string_in_invoke_and_stream(chat: ChatTransformers) -> None:
    free = chat.invoke("Count: 1 2 3", max_new_tokens=16)
    text = str(free.content)
    tokens = get_token_signals(free).tokens
    stop = boundary_stop(tokens, text)  # spans two tokens
    cut = text.index(stop)
    stopped = chat.invoke("Count: 1 2 3", stop=[stop])
    assert stopped.content == text[:cut]
    assert stopped.response_metadata["stop_string"] == stop
    streamed = _sum(list(chat.stream("Count: 1 2 3", stop=[stop])))
    assert streamed.content == stopped.content


async def test_async_invoke_stream_and_batch(chat: ChatTransformers) -> None:
    message = chat.invoke("Hello")
    amessage = await chat.ainvoke("Hello")
    assert amessage.content == message.content
    chunks = [chunk async for chunk in chat.astream("Hello")]
    assert _sum(chunks).content == message.content
    batch = await chat.abatch(["Hello", "Bonjour"])
    assert batch[0].content == message.content
    assert [m.content for m in chat.batch(["Hello", "Bonjour"])] == [m.content for m in batch]
    traces = await chat.agenerate_trace(
        "Hello", decoding=replace(chat.decoding, max_new_tokens=4, min_new_tokens=4)
    )
    assert traces[0].num_tokens <= 4


def test_any_message_order_and_trailing_ai_message_is_continued(chat: ChatTransformers) -> None:
    ids = chat.encode(
        [AIMessage("I start."), SystemMessage("Be brief."), HumanMessage("Hi"), AIMessage("Well,")]
    )
    text = chat.hf_tokenizer.decode(ids)
    assert text.startswith("<|im_start|>assistant\nI start.<|im_end|>")
    assert text.endswith("<|im_start|>assistant\nWell,")  # continued, no new turn opened
    message = chat.invoke([SystemMessage("Be brief."), AIMessage("Sure.")])
    assert isinstance(message.content, str)


def test_plain_completion_prompts(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), use_chat_template=False, max_new_tokens=4)
    expected = chat.hf_tokenizer("Question: a?\nAnswer:")["input_ids"]
    assert chat.encode([HumanMessage("Question: a?"), HumanMessage("Answer:")]) == expected
    assert chat.encode("Question: a?\nAnswer:") == expected  # text prompts never use the template
    assert expected[0] == chat.hf_tokenizer.bos_token_id


def test_loading_conventions(llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    by_path = ChatTransformers.from_model_id(str(llama_dir), attn_implementation="eager")
    assert by_path.attention_available and by_path.num_layers == 2
    model = AutoModelForCausalLM.from_pretrained(llama_dir)
    wrapped = ChatTransformers(
        model=model, tokenizer=AutoTokenizer.from_pretrained(llama_dir), attn_implementation="eager"
    )
    assert wrapped.attention_available
    assert (
        wrapped.invoke("Hi", max_new_tokens=3).content
        == by_path.invoke("Hi", max_new_tokens=3).content
    )
    with pytest.raises(ValueError, match="without a tokenizer"):
        ChatTransformers(model=model)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ChatTransformers(model=str(llama_dir), model_kwargs={"x": 1})
    with pytest.raises(ValueError, match="model must be a hub id"):
        ChatTransformers(model=42)


def test_standard_chat_model_parameters(llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """timeout and max_retries are accepted and change nothing; api_key is the hub token."""
    import transformers

    plain = ChatTransformers(model=str(llama_dir))
    tokens: list[object] = []
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoTokenizer):
        original = auto.from_pretrained

        def recording(*args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            tokens.append(kwargs.get("token"))
            return _original(*args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", recording)
    chat = ChatTransformers(model=str(llama_dir), timeout=60, max_retries=2, api_key="hf_secret")
    assert (chat.timeout, chat.max_retries) == (60, 2)
    assert tokens == ["hf_secret", "hf_secret"]
    assert "hf_secret" not in repr(chat)
    assert (
        chat.invoke("Hi", max_new_tokens=3).content == plain.invoke("Hi", max_new_tokens=3).content
    )
    tokens.clear()
    ChatTransformers(model=str(llama_dir), request_timeout=5.0)
    assert tokens == [None, None]


def test_max_tokens_alias(llama_dir: Path) -> None:
    assert ChatTransformers(model=str(llama_dir), max_tokens=7).max_new_tokens == 7
    assert ChatTransformers(model=str(llama_dir), max_new_tokens=9).max_new_tokens == 9


def test_unknown_call_option_is_explained(chat: ChatTransformers) -> None:
    with pytest.raises(TypeError, match=r"Unknown generation option\(s\) \['beam_width'\]"):
        chat.invoke("Hi", beam_width=3)


def test_non_text_content_is_explained(chat: ChatTransformers) -> None:
    image = {"type": "image", "url": "https://example.com/a.png"}
    with pytest.raises(AdaptiveRAGError, match="'image' content block"):
        chat.invoke([HumanMessage(content=[image])])


def test_tokenizer_without_chat_template(llama_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(llama_dir)
    tokenizer.chat_template = None
    model = AutoModelForCausalLM.from_pretrained(llama_dir)
    with pytest.raises(ValueError, match="use_chat_template=False"):
        ChatTransformers(model=model, tokenizer=tokenizer)


def test_get_token_signals_on_a_foreign_message() -> None:
    with pytest.raises(AdaptiveRAGError, match="Expected a message generated by ChatTransformers"):
        get_token_signals(AIMessage("hi"))


def test_sampling_is_seeded(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), do_sample=True, seed=5, max_new_tokens=8)
    assert chat.invoke("Hi").content == chat.invoke("Hi").content
    other = chat.invoke("Hi", seed=6)
    greedy = chat.invoke("Hi", temperature=0)
    assert (
        get_token_signals(other).token_ids.tolist() != get_token_signals(greedy).token_ids.tolist()
    )


def test_openai_format_logprobs(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), logprobs=True, top_logprobs=3, max_new_tokens=5)
    message = chat.invoke("Hi")
    content = message.response_metadata["logprobs"]["content"]
    signals = get_token_signals(message)
    assert [c["token"] for c in content] == signals.tokens
    np.testing.assert_allclose([c["logprob"] for c in content], signals.logprobs)
    for entry in content:
        alternatives = [alt["logprob"] for alt in entry["top_logprobs"]]
        assert len(alternatives) == 3 and alternatives == sorted(alternatives, reverse=True)
        assert entry["logprob"] <= alternatives[0] + 1e-6  # greedy picks the best
        assert entry["bytes"] == list(entry["token"].encode("utf-8"))
    again = _sum(list(chat.stream("Hi"))).response_metadata["logprobs"]["content"]
    assert [c["token"] for c in again] == [c["token"] for c in content]
    np.testing.assert_allclose(
        [[a["logprob"] for a in c["top_logprobs"]] for c in again],
        [[a["logprob"] for a in c["top_logprobs"]] for c in content],
        rtol=RTOL,
    )
    plain = ChatTransformers(model=str(llama_dir), max_new_tokens=3).invoke("Hi")
    assert "logprobs" not in plain.response_metadata
    assert (
        "logprobs"
        in ChatTransformers(model=str(llama_dir), max_new_tokens=3)
        .invoke("Hi", logprobs=True)
        .response_metadata
    )


class _RecordingRetriever(BaseRetriever):
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        return [Document(page_content="Anna Berg was born in 1931.")]


def test_langchain_flare_chain_runs_unchanged(llama_dir: Path) -> None:
    from langchain_classic.chains.flare.base import FlareChain
    from langchain_classic.chains.flare.prompts import PROMPT, QUESTION_GENERATOR_PROMPT

    llm = ChatTransformers(
        model=str(llama_dir), logprobs=True, max_new_tokens=12, min_new_tokens=12
    )
    retriever = _RecordingRetriever()
    chain = FlareChain(
        question_generator_chain=QUESTION_GENERATOR_PROMPT | llm | StrOutputParser(),
        response_chain=PROMPT | llm,
        retriever=retriever,
        max_iter=2,
        min_prob=0.2,
    )
    result = chain.invoke({"user_input": "When was Anna Berg born?"})
    assert isinstance(result["response"], str) and result["response"]
    # a random model is unsure of every token, so FLARE asked questions and retrieved
    assert retriever.queries


def test_langgraph_messages_stream_carries_signals(llama_dir: Path) -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    chat = ChatTransformers(model=str(llama_dir), max_new_tokens=6, min_new_tokens=6)

    def answer(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [chat.invoke(state["messages"])]}

    graph = StateGraph(MessagesState).add_node("answer", answer)
    graph.add_edge(START, "answer")
    chunks = [
        chunk
        for chunk, _meta in graph.compile().stream(
            {"messages": [HumanMessage("Hi")]}, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk)
    ]
    assert len(get_token_signals(_sum(chunks)).token_ids) == 6


def test_token_id_prompts(chat: ChatTransformers) -> None:
    ids = chat.encode("Question: a?")
    as_numpy = np.asarray(ids, dtype=np.int64)
    assert chat.encode(list(as_numpy)) == ids
    trace = chat.generate_trace(
        list(as_numpy), decoding=replace(chat.decoding, max_new_tokens=3, min_new_tokens=3)
    )[0]
    assert trace.prompt_ids.tolist() == ids
    with pytest.raises(AdaptiveRAGError, match="Expected text, a sequence of messages"):
        chat.encode([1.5, 2.5])  # type: ignore[list-item]
