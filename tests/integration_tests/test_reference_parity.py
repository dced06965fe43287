"""Reference mode on inputs recorded from the shipped toy model, against the official code.

Each test runs a method's graph on toy questions with the toy model, records what the
model gave the graph (draft traces, attention matrices, sampled hidden states), and
recomputes the decision from those recordings with the official code's definitions,
written out here step by step (independently of the package's signal functions). The
toy tokenizer is byte-level: its space and newline markers are ``Ġ`` and ``Ċ`` where
Llama-2's are ``▁`` and ``<0x0A>``, and its first word carries no space marker, so the
beginning-of-sequence token is taken as a word of its own (as it is under Llama-2).
Where the official code depends on spaCy (sentences, parts of speech) the package's
documented stand-ins are used: sentences end at ``.!?`` and content words are those
outside spaCy's stop-word list.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.chat_models import AttentionMatrix
from langchain_adaptive_rag.generation import GenerationTrace
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig, SeaKRPolicy
from langchain_adaptive_rag.toyworld import (
    TOY_PROMPTS,
    load_toy_model,
    toy_questions,
    toy_retriever,
)

STOP_WORDS: frozenset[str]
try:
    from spacy.lang.en.stop_words import STOP_WORDS as _SPACY_STOP_WORDS

    STOP_WORDS = frozenset(_SPACY_STOP_WORDS)
except ImportError:  # pragma: no cover - spaCy is a dependency
    STOP_WORDS = frozenset()


@pytest.fixture(scope="module")
def model() -> ChatTransformers:
    return load_toy_model()


@pytest.fixture(scope="module")
def questions() -> list[str]:
    every = toy_questions()
    return [q.question for q in every[:: max(1, len(every) // 16)]][:16]


class Recorder:
    """Wraps a model's calls, keeping every trace and attention matrix in call order."""

    def __init__(self, model: ChatTransformers) -> None:
        self.model = model
        self.calls: list[tuple[str, Any, Any]] = []
        self._originals: dict[str, Callable[..., Any]] = {}

    def __enter__(self) -> Recorder:
        for name in ("generate_trace", "forward_attention"):
            original = getattr(self.model, name)
            self._originals[name] = original

            def spy(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any):
                result = _original(*args, **kwargs)
                self.calls.append((_name, args[0] if args else kwargs.get("text"), result))
                return result

            object.__setattr__(self.model, name, spy)
        return self

    def __exit__(self, *exc: object) -> None:
        for name in self._originals:
            object.__delattr__(self.model, name)


def first_round(graph: Any, question: str) -> dict[str, Any]:
    """Run the graph up to its first decision: the first draft's updates, and the query
    when that draft triggers a retrieval (the run is stopped there)."""
    seen: dict[str, Any] = {}
    for update in graph.stream({"question": question}, stream_mode="updates"):
        for node, values in update.items():
            seen[node] = values
            if node == "score_need" and values.get("route") != "retrieve":
                return seen
            if node == "formulate_query":
                return seen
    return seen


# -- the DRAGIN code's RIND and QFS, from its definitions --------------------------------


def official_words(pieces: list[str], space: str, newline: str, eos: str) -> list[list[int]]:
    """Token indexes of each word: a word starts at the first token, a space-marked
    token, the newline token, or the token after an end-of-sequence token."""
    words: list[list[int]] = []
    for i, piece in enumerate(pieces):
        starts = (
            i == 0
            or piece.startswith(space)
            or piece == newline
            or pieces[i - 1] == eos
            or pieces[i - 1] == "<s>"  # BOS is a word of its own (as under Llama-2)
        )
        if starts:
            words.append([i])
        else:
            words[-1].append(i)
    return words


def content(word: str) -> bool:
    core = re.sub(r"^\W+|\W+$", "", word).lower()
    return bool(core) and any(c.isalnum() for c in core) and core not in STOP_WORDS


@functools.cache
def _sentencizer() -> Any:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def sentences_of(text: str) -> list[str]:
    """spaCy's sentences, stripped (the code's ``en_core_web_sm`` is not installed here: its
    rule-based sentencizer stands in)."""
    return [s.text.strip() for s in _sentencizer()(text).sents if s.text.strip()]


def official_rind(
    tokenizer: Any, ids: list[int], entropies: np.ndarray, attention: np.ndarray, theta: float
) -> tuple[int, list[str], list[int]] | None:
    """The triggering sentence: (index, its words, offsets of its content hit words)."""
    pieces = tokenizer.convert_ids_to_tokens(ids)
    space, newline = (
        tokenizer.tokenize(" ")[0],
        tokenizer.convert_ids_to_tokens(tokenizer("\n", add_special_tokens=False)["input_ids"])[0],
    )
    groups = official_words(pieces, space, newline, tokenizer.eos_token)
    texts = [tokenizer.convert_tokens_to_string([pieces[i] for i in g]).strip() for g in groups]
    per_token = attention.max(axis=1).mean(axis=0)  # max over query rows, mean over heads
    word_attention = [float(per_token[g].sum()) for g in groups]
    word_entropy = [float(np.mean(entropies[g])) for g in groups]
    draft = tokenizer.decode(ids)
    sentences = sentences_of(draft)
    tid = 0
    for index, sentence in enumerate(sentences):
        if "the answer is" in sentence.lower():
            return None  # the code checks the sentences before the answer only
        # the code's word range: the last sentence takes the rest; another ends at the
        # first i (below the last word) whose space-joined words from tid contain it
        start, end = tid, tid
        if index == len(sentences) - 1:
            end = len(texts)
        else:
            for i in range(tid + 1, len(texts)):
                if sentence in " ".join(texts[start:i]):
                    end = i
                    break
            tid = end
        span = range(start, end)
        total = sum(word_attention[i] for i in span)
        n = len(span)
        values = [n * word_attention[i] / total * word_entropy[i] if total else 0.0 for i in span]
        hits = [j for j, v in enumerate(values) if v > theta]
        if hits:
            words = [texts[i] for i in span]
            return index, words, [j for j in hits if content(words[j])]
    return None


def official_qfs(
    tokenizer: Any, matrix: AttentionMatrix, sentence: list[str], hits: list[int], top_n: int
) -> str:
    pieces = tokenizer.convert_ids_to_tokens([int(i) for i in matrix.token_ids])
    space = tokenizer.tokenize(" ")[0]
    newline = tokenizer.convert_ids_to_tokens(
        tokenizer("\n", add_special_tokens=False)["input_ids"]
    )[0]
    groups = official_words(pieces, space, newline, "\x00")  # no EOS rule in QFS
    texts = [tokenizer.convert_tokens_to_string([pieces[i] for i in g]).strip() for g in groups]
    heads_mean = matrix.weights.mean(axis=0)
    first = len(groups) - len(sentence)
    forward = np.zeros(len(groups))
    for j in hits:
        group = groups[first + j]
        s = group[0]
        att = np.zeros(s)
        for i in group:
            if i == 0:
                continue
            row = heads_mean[i - 1, :s]
            att += row / row.sum()
        att /= len(group)
        forward += np.array([att[[t for t in g if t < s]].sum() for g in groups])
    specials = set(tokenizer.all_special_tokens)  # "<s>" has no part of speech
    candidates = [
        k
        for k, text in enumerate(texts)
        if text not in specials and content(text) and not (k >= first and (k - first) in hits)
    ]
    if hits:
        forward /= len(hits)
        ranked = sorted(candidates, key=lambda k: -forward[k])[:top_n]  # stable
    else:
        ranked = candidates[:top_n]
    return " ".join(texts[k] for k in sorted(ranked))


@pytest.mark.parametrize(("top_n", "max_tokens"), [(6, 64), (25, 6)])
def test_dragin_reference_matches_the_official_definitions(
    model: ChatTransformers, questions: list[str], top_n: int, max_tokens: int
) -> None:
    config = DRAGINConfig(
        generate_max_length=48,
        theta=0.25,
        query_top_n=top_n,
        query_max_tokens=max_tokens,
        mode="reference",
    )
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "dragin", config=config, prompts=TOY_PROMPTS
    )
    tokenizer = model.hf_tokenizer
    checked = triggered = 0
    for question in questions:
        with Recorder(model) as recorder:
            seen = first_round(graph, question)
        (_, _, traces), (kind, _, rind), *rest = recorder.calls
        assert kind == "forward_attention"
        draft: GenerationTrace = traces[0]
        expected = official_rind(
            tokenizer, [int(i) for i in draft.token_ids], draft.entropies, rind.weights, 0.25
        )
        fired = bool(rest) and rest[0][0] == "forward_attention"
        assert fired == (expected is not None), question
        checked += 1
        if expected is None:
            continue
        triggered += 1
        index, sentence, hits = expected
        earlier = " ".join(sentences_of(draft.text)[:index])
        assert rest[0][1] == f"{question}  {earlier} {' '.join(sentence)}"
        query = official_qfs(tokenizer, rest[0][2], sentence, hits, config.query_top_n)
        # the code's retriever keeps the query's last max_query_length tokens
        ids = tokenizer(query, add_special_tokens=False)["input_ids"][-max_tokens:]
        query = tokenizer.decode(ids, skip_special_tokens=True)
        assert seen["formulate_query"]["query"] == query, question
    assert checked == len(questions) and triggered >= 3


# -- the DRAGIN code's FLARE (TokenRAG) windows and masked query ---------------------------


def test_flare_mean_reference_matches_the_official_definitions(
    model: ChatTransformers, questions: list[str]
) -> None:
    theta = 0.03
    config = FLAREConfig(generate_max_length=48, theta=theta, trigger="mean", mode="reference")
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "flare", config=config, prompts=TOY_PROMPTS
    )
    triggered = 0
    for question in questions:
        with Recorder(model) as recorder:
            seen = first_round(graph, question)
        draft: GenerationTrace = recorder.calls[0][2][0]
        tokens = [t.lstrip(" ") for t in draft.tokens]  # a lone Llama-2 token: no space
        probs = np.exp(draft.logprobs.astype(np.float64))
        sentences = sentences_of("".join(draft.tokens))
        expected_query = None
        start = 0
        for sentence in sentences:
            pos, end = 0, start
            while end < len(tokens):
                found = sentence[pos:].find(tokens[end])
                if found == -1:
                    break
                pos = found + len(tokens[end])
                end += 1
            window = range(start, min(end + 1, len(tokens)))
            start = end + 1
            if len(window) and float(np.mean([1 - probs[i] for i in window])) > theta:
                current, pos = sentence, 0
                for i in window:
                    at = current[pos:].find(tokens[i]) + pos
                    if 1 - probs[i] > theta:
                        current = current[:at] + "[xxx]" + current[at + len(tokens[i]) :]
                        pos = at + len("[xxx]")
                    else:
                        pos = at + len(tokens[i])
                expected_query = current.replace("[xxx]", "")
                break
        if expected_query is None:
            assert "formulate_query" not in seen, question
            continue
        triggered += 1
        assert seen["formulate_query"]["query"] == expected_query, question
    assert triggered >= 3


# -- SeaKR's U over recorded hidden states ---------------------------------------------


def official_u(states: list[np.ndarray], alpha: float = 1e-3) -> float:
    if not states:
        return 0.0
    z = torch.tensor(np.stack(states), dtype=torch.float32)
    k, d = z.shape
    centring = torch.eye(d) - (1 / d) * torch.ones(d, d)
    sigma = torch.einsum("ij,jk,kl->il", z, centring, z.t())
    return float((1 / k) * torch.logdet(sigma + alpha * torch.eye(k)))


def test_seakr_reference_uncertainty_matches_the_official_definition(
    model: ChatTransformers, questions: list[str]
) -> None:
    config = SeaKRConfig(
        generate_max_length=48, num_samples=8, hidden_layer=1, delta=-8.0, mode="reference"
    )
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "seakr", config=config, prompts=TOY_PROMPTS
    )
    compared = 0
    for question in questions[:6]:
        with Recorder(model) as recorder:
            seen = first_round(graph, question)
        traces = recorder.calls[0][2]
        samples = traces[1:]
        assert all(t.hidden is not None for t in samples)
        expected = official_u([t.hidden for t in samples if t.text.strip()])
        assert not math.isnan(expected)
        # the toy model's samples mostly agree (rank one), where float32 rounding rivals
        # alpha: only the code's own operations reproduce its value
        assert SeaKRPolicy(config)._uncertainty(traces[0], samples) == expected
        assert seen["draft"]["draft_uncertainty"] == expected
        compared += 1
    assert compared == 6
