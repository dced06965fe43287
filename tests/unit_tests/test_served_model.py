"""Served models: responses read as traces, requests, refusals, retries, and every text
and log-probability method on a chat model that answers like an OpenAI-compatible server."""

from __future__ import annotations

import math

import numpy as np
import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    ModelServerError,
)
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.flare import create_flare_graph
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig, create_seakr_graph
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.served import (
    ServedModel,
    TokenLogprob,
    is_transient,
    read_logprobs,
    request_arguments,
    trace_from_response,
    word_pieces,
)
from langchain_adaptive_rag.signals import top_k_entropy
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.outputs import comparable
from tests.helpers.scripted import QUESTION, RecordingRetriever
from tests.helpers.served_chat import ServerLikeChatModel

NO_SHOTS = QAPrompts(exemplars=())
ANSWER = " Blue Harbour was directed by Anna Berg. So the answer is 1931.\nQuestion: next?"


# -- the entropy of a top-k distribution, by hand ------------------------------------------


def test_top_k_entropy_is_exact_when_the_top_k_hold_all_the_mass() -> None:
    estimate, outside = top_k_entropy([math.log(0.5), math.log(0.5)])
    assert estimate == pytest.approx(math.log(2)) and outside == 0.0


def test_top_k_entropy_is_the_lower_bound_with_the_outside_mass_at_the_smallest_top() -> None:
    # top 2: 0.6 and 0.2; m = 0.2 outside, each unseen token at most 0.2
    estimate, outside = top_k_entropy([math.log(0.6), math.log(0.2)])
    by_hand = -0.6 * math.log(0.6) - 0.2 * math.log(0.2) + 0.2 * -math.log(0.2)
    assert estimate == pytest.approx(by_hand) and outside == pytest.approx(0.2)
    # any distribution with that top 2 has at least this entropy: 0.2 split in 0.1 + 0.1
    spread = -0.6 * math.log(0.6) - 0.2 * math.log(0.2) - 2 * 0.1 * math.log(0.1)
    assert spread > estimate
    concentrated = -0.6 * math.log(0.6) - 2 * 0.2 * math.log(0.2)  # 0.2 in one token
    assert concentrated == pytest.approx(estimate)


def test_top_k_entropy_adds_a_sampled_token_outside_the_top_k() -> None:
    # top 1: 0.7; the sampled token had 0.1: m = 0.2, unseen tokens at most 0.2
    estimate, outside = top_k_entropy([math.log(0.7)], math.log(0.1))
    by_hand = -0.7 * math.log(0.7) - 0.1 * math.log(0.1) + 0.2 * -math.log(0.2)
    assert estimate == pytest.approx(by_hand) and outside == pytest.approx(0.2)


def test_top_k_entropy_of_the_chosen_token_alone_is_the_binary_entropy() -> None:
    estimate, outside = top_k_entropy([], math.log(0.75))
    assert estimate == pytest.approx(-0.75 * math.log(0.75) - 0.25 * math.log(0.25))
    assert outside == pytest.approx(0.25)


# -- responses ----------------------------------------------------------------------------


def test_read_logprobs_of_the_chat_and_the_completions_shapes() -> None:
    chat = {
        "content": [
            {
                "token": " Paris",
                "logprob": -0.1,
                "top_logprobs": [{"token": " Paris", "logprob": -0.1}],
            }
        ]
    }
    paris = TokenLogprob(" Paris", -0.1, (-0.1,), (" Paris",))
    assert read_logprobs(chat) == [paris]
    assert read_logprobs(chat["content"]) == [paris]  # Ollama
    completions = {
        "tokens": [" Par", "is"],
        "token_logprobs": [-0.5, -0.01],
        "top_logprobs": [{" Par": -0.5, " Lyon": -1.5}, {"is": -0.01}],
    }
    assert read_logprobs(completions) == [
        TokenLogprob(" Par", -0.5, (-0.5, -1.5), (" Par", " Lyon")),
        TokenLogprob("is", -0.01, (-0.01,), ("is",)),
    ]
    assert read_logprobs(None) is None and read_logprobs({"content": None}) is None


def test_trace_keeps_the_tokens_that_spell_the_text() -> None:
    entries = [
        TokenLogprob(" Paris", math.log(0.9), (math.log(0.9),)),
        TokenLogprob(".", math.log(0.8), (math.log(0.8),)),
        TokenLogprob("\n", math.log(0.7), ()),  # the stop string the server cut
    ]
    trace = trace_from_response(" Paris.", "stop", entries, stop_string="\n", max_new_tokens=8)
    assert trace.tokens == [" Paris", "."] and trace.text == " Paris."
    np.testing.assert_allclose(np.exp(trace.logprobs), [0.9, 0.8])
    assert trace.stop_string == "\n" and trace.finish_reason == "stop"
    assert trace.entropy_outside_mass is not None
    np.testing.assert_allclose(trace.entropy_outside_mass, [0.1, 0.2])
    assert (trace.token_ids == -1).all() and trace.num_prompt_tokens == 0
    assert trace.top_tokens is None  # no alternatives' text was given


def test_trace_keeps_the_alternatives_text_beside_their_log_probabilities() -> None:
    entries = [
        TokenLogprob(" Paris", math.log(0.9), (math.log(0.05), math.log(0.9)), (" Lyon", " Paris"))
    ]
    trace = trace_from_response(" Paris", "stop", entries, stop_string=None, max_new_tokens=8)
    assert trace.top_tokens == [(" Paris", " Lyon")]  # most likely first, as top_logprobs
    assert trace.top_logprobs is not None
    np.testing.assert_allclose(np.exp(trace.top_logprobs[0]), [0.9, 0.05])


def test_trace_cuts_a_token_that_runs_past_the_text_and_adds_text_no_token_spells() -> None:
    entries = [TokenLogprob(" Par", -0.5, ()), TokenLogprob("is.\n", -0.1, ())]
    trace = trace_from_response(" Paris", "stop", entries, stop_string=None, max_new_tokens=8)
    assert trace.tokens == [" Par", "is"]
    trace = trace_from_response(" Paris!", "stop", entries[:1], stop_string=None, max_new_tokens=8)
    assert trace.tokens == [" Par", "is!"] and math.isnan(trace.logprobs[1])


def test_trace_without_logprobs_has_words_for_tokens_and_a_budget() -> None:
    trace = trace_from_response(" one two  three", "stop", None, stop_string=None, max_new_tokens=2)
    assert trace.tokens == [" one", " two"] and trace.text == " one two"
    assert trace.finish_reason == "length" and trace.stop_string is None
    assert np.isnan(trace.logprobs).all() and np.isnan(trace.entropies).all()
    assert word_pieces(" a  b\n") == [" a", "  b", "\n"]


# -- requests -----------------------------------------------------------------------------


def test_request_arguments_of_the_openai_integrations() -> None:
    greedy = DecodingOptions(max_new_tokens=32, stop=("\n",))
    assert request_arguments(
        "openai-chat", greedy, seed=None, top_logprobs=5, self_hosted=True
    ) == {
        "max_tokens": 32,
        "temperature": 0.0,
        "extra_body": {"max_tokens": 32},
        "logprobs": True,
        "top_logprobs": 5,
    }
    sampling = DecodingOptions(
        max_new_tokens=8, do_sample=True, temperature=0.7, top_k=50, top_p=0.9
    )
    assert request_arguments(
        "openai-completions", sampling, seed=3, top_logprobs=0, self_hosted=True
    ) == {
        "max_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 3,
        "extra_body": {"top_k": 50},
        "logprobs": 1,
    }
    chat = request_arguments("openai-chat", sampling, seed=3, top_logprobs=0, self_hosted=False)
    assert "extra_body" not in chat and "top_logprobs" not in chat  # OpenAI has no top_k
    assert request_arguments("other", sampling, seed=3, top_logprobs=5, self_hosted=True) == {}


def test_the_model_sends_budget_stops_and_sample_seeds() -> None:
    chat = ServerLikeChatModel(replies=[" a b c"])
    model = ServedModel(chat)
    options = DecodingOptions(
        max_new_tokens=2, do_sample=True, temperature=0.5, seed=10, stop=("\n",)
    )
    traces = model.generate_trace("Q", decoding=options, n=3, include_greedy=True)
    assert [t.text for t in traces] == [" a b"] * 4
    assert all(t.finish_reason == "length" for t in traces)
    requests = sorted(chat.requests, key=lambda r: (r["temperature"], r.get("seed", -1)))
    assert [(r["temperature"], r.get("seed")) for r in requests] == [
        (0.0, None),
        (0.5, 10),
        (0.5, 11),
        (0.5, 12),
    ]
    assert all(r["max_tokens"] == 2 and r["stop"] == ["\n"] for r in requests)


# -- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["dragin", "etc"])
def test_attention_methods_are_refused_at_build_time_on_a_served_model(method: str) -> None:
    with pytest.raises(AttentionUnavailableError, match="no serving engine") as caught:
        create_adaptive_rag_graph(
            ServerLikeChatModel(replies=[ANSWER]), RecordingRetriever(), method
        )
    assert "ChatTransformers" in str(caught.value) and "is served" in str(caught.value)


def test_seakr_gram_is_refused_at_build_time_and_its_sample_estimators_run() -> None:
    chat = ServerLikeChatModel(replies=[ANSWER])
    with pytest.raises(AdaptiveRAGError, match=r"hidden state.*estimator='ln_entropy'"):
        create_seakr_graph(chat, RecordingRetriever())
    graph = create_seakr_graph(
        chat,
        RecordingRetriever(),
        config=SeaKRConfig(estimator="ln_entropy", num_samples=3),
        prompts=NO_SHOTS,
    )
    result = graph.invoke({"question": QUESTION})
    assert result["answer"] == "1931"
    assert any(r["temperature"] > 0 for r in chat.requests)  # the samples were drawn


def test_flare_fails_at_the_first_call_on_a_model_without_logprobs() -> None:
    chat = ServerLikeChatModel(replies=[ANSWER], return_logprobs=False)
    graph = create_flare_graph(chat, RecordingRetriever(), prompts=NO_SHOTS)  # builds
    with pytest.raises(AdaptiveRAGError, match=r"no token log-probabilities.*logprobs=True"):
        graph.invoke({"question": QUESTION})
    assert len(chat.requests) == 1


def test_an_object_that_is_no_model_is_refused() -> None:
    with pytest.raises(AdaptiveRAGError, match="Received a model of type str"):
        create_flare_graph("gpt-4o", RecordingRetriever())  # type: ignore[arg-type]


# -- retries ------------------------------------------------------------------------------


def test_a_transient_failure_is_retried_with_backoff() -> None:
    chat = ServerLikeChatModel(replies=[" yes"], failures=2)
    trace = ServedModel(chat, retries=2, backoff_s=0.0).generate_trace("Q")[0]
    assert trace.text == " yes" and len(chat.requests) == 3


def test_a_server_that_stays_down_ends_in_a_model_server_error() -> None:
    chat = ServerLikeChatModel(replies=[" yes"], failures=10)
    with pytest.raises(ModelServerError, match=r"failed after 3 attempt\(s\).*--retry-errors"):
        ServedModel(chat, retries=2, backoff_s=0.0).generate_trace("Q")
    assert len(chat.requests) == 3


def test_a_bug_is_not_retried() -> None:
    chat = ServerLikeChatModel(replies=[" yes"], failures=1, error=KeyError)
    with pytest.raises(KeyError):
        ServedModel(chat, retries=2, backoff_s=0.0).generate_trace("Q")
    assert len(chat.requests) == 1
    assert is_transient(TimeoutError()) and not is_transient(ValueError())


def test_served_model_arguments_are_checked() -> None:
    with pytest.raises(
        AdaptiveRAGError, match=r"top_logprobs=\.\.\.\) must be an integer in \[0, 20\], got 30"
    ):
        ServedModel(ServerLikeChatModel(replies=[""]), top_logprobs=30)
    with pytest.raises(AdaptiveRAGError, match="takes a LangChain chat model or LLM, got int"):
        ServedModel(3)  # type: ignore[arg-type]


# -- every text method on langchain-core's fake chat model --------------------------------


ONE_SENTENCE = " Anna Berg was born in 1931, so the answer is 1931.\nQuestion: next?"
"""One sentence that answers: FS-RAG accepts a sentence a round of a fixed reply."""


@pytest.mark.parametrize(
    ("method", "replies"),
    [
        ("no_retrieval", [ONE_SENTENCE]),
        ("single_round", [ONE_SENTENCE]),
        ("fix_length", [ONE_SENTENCE]),
        ("fix_sentence", [ONE_SENTENCE]),
        ("ircot", [ONE_SENTENCE]),
        ("adaptive_rag", [ONE_SENTENCE]),  # the rule: multi-step (IRCoT)
        ("vanilla", [" [Yes]\nmore", " 1931\nQuestion: next?"]),
        ("ta_are", [" [No]\nmore", " 1931\nQuestion: next?"]),
    ],
)
def test_text_methods_run_on_a_generic_chat_model(method: str, replies: list[str]) -> None:
    chat = GenericFakeChatModel(messages=iter([AIMessage(r) for r in replies] * 10))
    graph = create_adaptive_rag_graph(chat, RecordingRetriever(), method, prompts=NO_SHOTS)  # type: ignore[arg-type]
    result = graph.invoke({"question": QUESTION})
    assert result["answer"] == "1931"
    assert "Question:" not in result["text"]  # the stop string is cut on our side
    assert result["counts"]["llm_calls"] <= 2
    expected = 0 if method in ("no_retrieval", "ta_are") else 1
    assert result["counts"]["retrievals"] == expected


# -- the same behaviour as the in-process model on the same tokens ------------------------


def _probability(word: str) -> float:
    return 0.1 if "1931" in word else 0.9


@pytest.mark.parametrize("method", ["flare", "fix_sentence", "single_round"])
def test_a_served_model_runs_a_method_as_the_in_process_model_on_the_same_tokens(
    method: str,
) -> None:
    # each reply ends at the stop string: a server does not say whether a stop string or
    # the end-of-sequence token ended a generation, and reads both as the stop string
    replies = [
        " It was directed by Anna Berg. She was born in 1931.\nQuestion:",
        " Anna Berg was born in 1930.\n",
        " So the answer is 1930.\nQuestion:",
    ]
    chat = ServerLikeChatModel(replies=replies, probability=_probability)
    scripted = [
        ScriptedResponse(
            reply,
            tokens=tuple(word_pieces(reply)),
            logprobs=tuple(math.log(_probability(w)) for w in word_pieces(reply)),
        )
        for reply in replies
    ]
    served = create_adaptive_rag_graph(chat, RecordingRetriever(), method, prompts=NO_SHOTS)  # type: ignore[arg-type]
    fake = FakeTraceModel(scripted + scripted[-1:] * 3)
    local = create_adaptive_rag_graph(fake, RecordingRetriever(), method, prompts=NO_SHOTS)
    served_output, local_output = (
        served.invoke({"question": QUESTION}),
        local.invoke({"question": QUESTION}),
    )
    # the server reports each prompt's tokens (here its words); the fake's prompts have none
    served_read = served_output["counts"].pop("prompt_tokens")
    assert local_output["counts"].pop("prompt_tokens") == 0
    assert served_read == sum(len(prompt.split()) for prompt in fake.prompts) > 0
    assert _rounded(served_output) == _rounded(local_output)


def _rounded(value: object) -> object:
    """``value`` with its floats to 6 places (the in-process traces are float32)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in comparable(value).items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_flare_reads_the_servers_logprobs() -> None:
    chat = ServerLikeChatModel(
        replies=[
            " It was directed by Anna Berg. She was born in 1931.",
            " Anna Berg was born in 1930.",
            " So the answer is 1930.",
        ],
        probability=_probability,
    )
    retriever = RecordingRetriever()
    result = create_flare_graph(chat, retriever, prompts=NO_SHOTS).invoke({"question": QUESTION})
    assert retriever.queries == ["She was born in"]  # "1931." masked
    assert result["retrievals"][0]["trigger_word"] == "1931"  # bare of its period
    assert chat.requests[0]["logprobs"] is True


def test_capture_asks_only_what_a_server_has() -> None:
    model = ServedModel(ServerLikeChatModel(replies=[" x"]))
    with pytest.raises(AttentionUnavailableError):
        model.generate_trace("Q", capture=CaptureOptions(attention=True))
    with pytest.raises(AdaptiveRAGError, match="hidden state"):
        model.generate_trace("Q", capture=CaptureOptions(hidden=True))


def test_an_empty_reply_that_stopped_at_once_needs_no_logprobs() -> None:
    # the server generated only the stop string: no piece, nothing to read
    chat = ServerLikeChatModel(replies=["\nQuestion:"])
    (trace,) = ServedModel(chat).generate_trace(
        "Q", decoding=DecodingOptions(stop=("\n",)), capture=CaptureOptions(logprobs=True)
    )
    assert trace.text == "" and trace.tokens == [] and trace.num_tokens == 1
