"""Self-RAG on a tiny real model whose tokenizer has the reflection tokens.

The reference side is computed here from transformers alone: ``model.generate`` with its
raw logits, a log-softmax, and the paper's formulas written out again, so the decision,
every segment's scores and the chosen answer are checked against numbers our code did
not produce.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from langchain_adaptive_rag import (
    ChatTransformers,
    SelfRAGConfig,
    create_bm25_retriever,
    create_self_rag_graph,
)
from langchain_adaptive_rag.graphs.reflection import CONTROL_TOKENS
from langchain_adaptive_rag.testing import create_tiny_model

QUESTION = "When was the director of Blue Harbour born?"
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
]
BUDGET = 10


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokens = list(dict.fromkeys([*CONTROL_TOKENS, "[Continue to Use Evidence]"]))
    path = create_tiny_model(
        tmp_path_factory.mktemp("self-rag") / "llama", seed=11, extra_tokens=tokens
    )
    # Random weights never write a support or utility token; these rows are scaled copies
    # of two tokens the model writes in its segments, so each is written somewhere and
    # its neighbour has a share of its own.
    model = AutoModelForCausalLM.from_pretrained(path)
    tid = AutoTokenizer.from_pretrained(path).convert_tokens_to_ids
    rows = model.lm_head.weight.data
    for name, source, scale in (
        ("[Fully supported]", 305, 1.5),
        ("[Partially supported]", 305, 1.4),
        ("[Utility:5]", 187, 1.5),
        ("[Utility:4]", 187, 1.4),
    ):
        rows[tid(name)] = scale * rows[source]
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(model_dir)


def _generate(reference: tuple[Any, Any], prompt: str) -> tuple[list[int], np.ndarray]:
    """transformers' greedy tokens and each position's raw log-softmax."""
    model, tokenizer = reference
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model.generate(
            ids,
            do_sample=False,
            max_new_tokens=BUDGET,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=3,
        )
    tokens = out.sequences[0, ids.shape[1] :].tolist()
    logp = torch.log_softmax(torch.stack(out.logits)[:, 0].float(), dim=-1).numpy()
    eos = {2, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    if tokens and tokens[-1] in eos:  # the end-of-sequence token is not part of a trace
        tokens, logp = tokens[:-1], logp[:-1]
    return tokens, logp


def _expected_segment(tokenizer: Any, tokens: list[int], logp: np.ndarray) -> dict[str, float]:
    """The paper's score of one segment, from transformers' numbers."""
    tid = tokenizer.convert_tokens_to_ids

    def shares(position: int, names: list[str]) -> list[float]:
        values = [math.exp(float(logp[position, tid(n)])) for n in names]
        return [v / sum(values) for v in values]

    chosen = [float(logp[i, t]) for i, t in enumerate(tokens)]
    sequence = math.exp(sum(chosen) / max(len(chosen), 1))
    relevance = shares(0, ["[Relevant]", "[Irrelevant]"])[0]
    support_names = ["[Fully supported]", "[Partially supported]", "[No support / Contradictory]"]
    utility_names = [f"[Utility:{i}]" for i in range(1, 6)]
    support = utility = 0.0
    for i, token in enumerate(tokens):
        if token in [tid(n) for n in support_names]:
            full, partial, _ = shares(i, support_names)
            support = full + 0.5 * partial
            break
    for i, token in enumerate(tokens):
        if token in [tid(n) for n in utility_names]:
            weights = [-1.0, -0.5, 0.0, 0.5, 1.0]
            utility = sum(w * p for w, p in zip(weights, shares(i, utility_names), strict=True))
            break
    total = sequence + relevance + support + 0.5 * utility
    return {"score": total, "relevance": relevance, "support": support, "utility": utility}


def test_decision_scores_and_answer_match_transformers(
    model_dir: Path, reference: tuple[Any, Any]
) -> None:
    chat = ChatTransformers(model=str(model_dir))
    config = SelfRAGConfig(generate_max_length=BUDGET, retrieve_topk=2, threshold=0.0)
    graph = create_self_rag_graph(chat, create_bm25_retriever(PASSAGES), config=config)
    updates = {
        node: update
        for part in graph.stream({"question": QUESTION}, stream_mode="updates")
        for node, update in part.items()
    }
    _, tokenizer = reference
    prompt = f"### Instruction:\n{QUESTION}\n\n### Response:\n"
    # the decision: log p([Retrieval]) and log p([No Retrieval]) at the first position
    tokens, logp = _generate(reference, prompt)
    assert updates["draft"]["draft_token_ids"] == tokens
    first = updates["draft"]["reflection_logprobs"]
    for name in ("[Retrieval]", "[No Retrieval]"):
        assert first[name] == pytest.approx(
            float(logp[0, tokenizer.convert_tokens_to_ids(name)]), abs=1e-4
        )
    p_retrieve = math.exp(first["[Retrieval]"])
    p_skip = math.exp(first["[No Retrieval]"])
    assert updates["score_need"]["decision"]["score"] == pytest.approx(
        p_retrieve / (p_retrieve + p_skip), abs=1e-5
    )
    # every segment, scored from transformers' own distributions
    segments = updates["rerank"]["segments"]
    assert len(segments) == 2
    for segment, doc in zip(segments, updates["retrieve"]["docs"], strict=True):
        seg_prompt = f"{prompt}[Retrieval]<paragraph>\n{doc['text']}</paragraph>"
        seg_tokens, seg_logp = _generate(reference, seg_prompt)
        expected = _expected_segment(tokenizer, seg_tokens, seg_logp)
        for key, value in expected.items():
            assert segment[key] == pytest.approx(value, abs=1e-4), (key, segment)
        assert 0.0 < segment["relevance"] < 1.0  # read from the model, not a default
    assert any(s["support"] > 0 for s in segments)  # both token groups were read
    assert any(s["utility"] != 0 for s in segments)
    best = max(range(2), key=lambda i: segments[i]["score"])
    text = segments[best]["text"]
    for token in CONTROL_TOKENS:
        text = text.replace(token, "")
    assert updates["finalize"]["answer"] == text.removeprefix(" ").strip()


def test_token_logprobs_are_exact_at_every_position(
    model_dir: Path, reference: tuple[Any, Any]
) -> None:
    from langchain_adaptive_rag.options import DecodingOptions

    _, tokenizer = reference
    watched = tuple(tokenizer.convert_tokens_to_ids(t) for t in ("[Relevant]", "[Utility:5]", "a"))
    chat = ChatTransformers(model=str(model_dir))
    prompt = "### Instruction:\nWho is Anna Berg?\n\n### Response:\n"
    trace = chat.generate_trace(
        prompt, decoding=DecodingOptions(max_new_tokens=BUDGET, token_logprobs=watched)
    )[0]
    tokens, logp = _generate(reference, prompt)
    assert trace.token_ids.tolist() == tokens
    assert trace.token_logprobs is not None
    np.testing.assert_allclose(trace.token_logprobs, logp[:, list(watched)], atol=1e-4)
