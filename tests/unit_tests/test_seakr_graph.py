"""SeaKR on scripted samples: uncertainty, query, self-aware re-ranking and reasoning."""

from __future__ import annotations

import math

import numpy as np
import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.seakr import (
    SeaKRConfig,
    SeaKRPolicy,
    calibrate_delta,
    create_seakr_graph,
    reference_uncertainty,
    rerank_choice,
    self_check_uncertainty,
)
from langchain_adaptive_rag.options import GenerationTrace
from langchain_adaptive_rag.signals import gram_uncertainty
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.scripted import NO_SHOTS, PASSAGES, QUESTION, RecordingRetriever
from tests.helpers.seakr_script import APART, CONFIG, RATIONALE, SAME, U_APART, U_SAME, step


def test_uncertainties_by_hand() -> None:
    # consistent: det = alpha (alpha + 2 * 0.75); apart: det = (0.75 + alpha)^2 - 0.25^2
    assert pytest.approx((math.log(1e-3) + math.log(1e-3 + 1.5)) / 2) == U_SAME
    assert pytest.approx(math.log((0.751) ** 2 - 0.0625) / 2) == U_APART
    assert U_SAME < CONFIG.delta < U_APART


def test_seakr_full_run() -> None:
    rationale = " The film was directed by Anna Berg. So the answer is 1931."
    script = [
        *step(" Blue Harbour was directed by Anna Berg. She", APART),  # uncertain: retrieve
        *step(" The film is by Carl Lind. X", APART),  # rerank, doc p0
        *step(" The film was directed by Anna Berg. X", SAME),  # rerank, doc p1: lowest U
        *step(" It is a film. X", APART),  # rerank, doc p2
        *step(" So the answer is 1931.", SAME),  # next step: certain, answered
        *step(rationale, SAME),  # finalize: reading the rationale
        *step(" The film is by Anna Berg. So the answer is 1930.", APART),  # documents
    ]
    model = FakeTraceModel(script)
    retriever = RecordingRetriever()
    result = create_seakr_graph(model, retriever, config=CONFIG, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    # the greedy step's confident content words form the query
    assert retriever.queries == ["Blue Harbour directed Anna Berg"]
    (event,) = result["retrievals"]
    assert event["score"] == pytest.approx(U_APART) and event["threshold"] == -2.0
    assert event["doc_ids"] == ["p0", "p1", "p2"] and event["rerank_order"] == [1]
    # each candidate step is generated with that document in the prompt
    rerank_prompts = [call["prompt"] for call in model.calls[1:4]]
    for passage, prompt in zip(PASSAGES, rerank_prompts, strict=True):
        assert f"[1] {passage}" in str(prompt)
    # the kept document stays in the prompt of the next step
    assert f"[1] {PASSAGES[1]}" in str(model.calls[4]["prompt"])
    # samples are drawn in one batched call with EOS hidden states of the chosen layer
    assert model.calls[0]["n"] == 2 and model.calls[0]["include_greedy"] is True
    assert (
        model.calls[0]["hidden_at"] == "eos_replacing_last" and model.calls[0]["hidden_layer"] == 1
    )
    assert model.calls[0]["hidden_site"] == "mlp"
    # self-aware reasoning: the rationale's answer (lower U) beats the documents' answer
    assert result["answer"] == "1931"
    assert result["text"] == rationale
    # the rationale's steps, without the answer sentence, are read as passages
    rationale_prompt = str(model.calls[-2]["prompt"])
    assert rationale_prompt.startswith("Context:\n[1] The film was directed by Anna Berg.\n")
    assert "[2]" not in rationale_prompt and "So the answer" not in rationale_prompt
    # the kept documents are read anew; both readings generate a whole answer, ended by
    # the prompts' stop strings, not at a sentence
    documents_prompt = str(model.calls[-1]["prompt"])
    assert documents_prompt.startswith("Context:\n[1] " + PASSAGES[1])
    for prompt in (rationale_prompt, documents_prompt):
        assert prompt.endswith("Answer:")
    assert model.calls[-1]["stop"] == model.calls[-2]["stop"] == ("\n",)
    assert model.calls[0]["stop"] == (". ", "\n")
    assert result["counts"]["llm_calls"] == 7 * 3


SMALL = ((0.1, 0.0, 0.0, 0.0), (0.1, 0.0, 0.0, 0.0))  # consistent, and lower U than SAME


def _retrieving_script(documents: list[ScriptedResponse]) -> list[ScriptedResponse]:
    """One retrieval (document p1 kept), an answered step, the rationale's reading
    (answer 1931, consistent samples), then ``documents``: the kept documents' reading."""
    return [
        *step(" Blue Harbour was directed by Anna Berg. She", APART),
        *step(" The film is by Carl Lind. X", APART),  # rerank, doc p0
        *step(" The film was directed by Anna Berg. X", SAME),  # rerank, doc p1
        *step(" It is a film. X", APART),  # rerank, doc p2
        *step(" So the answer is 1931.", SAME),
        *step(RATIONALE, SAME),
        *documents,
    ]


def test_documents_answer_wins_when_more_certain() -> None:
    assert gram_uncertainty(np.array(SMALL)) < U_SAME
    reading = " Anna Berg was born in 1930. So the answer is 1930."
    model = FakeTraceModel(_retrieving_script(step(reading, SMALL)))
    result = create_seakr_graph(
        model, RecordingRetriever(), config=CONFIG, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["answer"] == "1930"
    assert result["text"] == reading


def test_a_reading_without_an_answer_is_forced() -> None:
    documents = [
        *step(" Anna Berg was born in 1930.", SMALL),  # no answer: forced once more
        *step(" unknown", SMALL),  # the forced answer is unknown: it loses
    ]
    model = FakeTraceModel(_retrieving_script(documents))
    result = create_seakr_graph(
        model, RecordingRetriever(), config=CONFIG, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    forced_prompt = str(model.calls[-1]["prompt"])
    assert forced_prompt.startswith("Context:\n[1] " + PASSAGES[1])
    assert forced_prompt.endswith("Answer: Anna Berg was born in 1930. So the answer is")
    assert result["answer"] == "1931"
    assert result["counts"]["llm_calls"] == 8 * 3


def test_an_uncertain_answer_step_ends_without_retrieval() -> None:
    script = [
        *step(" So the answer is 1931.", APART),  # uncertain, but it answers
        *step(" So the answer is unknown.", SAME),  # reading the (empty) rationale
    ]
    retriever = RecordingRetriever()
    model = FakeTraceModel(script)
    result = create_seakr_graph(model, retriever, config=CONFIG, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [] and result["retrievals"] == []
    # no step is left once the answer sentence is cut: the rationale is read closed-book
    assert "Context:" not in str(model.calls[-1]["prompt"])
    assert result["answer"] == "unknown"  # the only candidate, so it stands


def test_query_leaves_out_the_answer_phrase() -> None:
    script = [
        *step(" The answer was Anna Berg. X", APART),  # uncertain: retrieve
        *[r for _ in range(3) for r in step(" So the answer is 1931.", SAME)],
        *step(RATIONALE, SAME),
        *step(" So the answer is 1931.", SAME),
    ]
    retriever = RecordingRetriever()
    result = create_seakr_graph(
        FakeTraceModel(script), retriever, config=CONFIG, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert retriever.queries == ["Anna Berg"]
    assert result["answer"] == "1931"


@pytest.mark.parametrize(("mode", "query"), [("reference", "Berg"), ("paper", "Anna Berg")])
def test_reference_query_is_cut_as_seakrs_retriever_cuts_it(mode: str, query: str) -> None:
    # SeaKR's retriever call keeps the query's last max_query_length tokens (a model
    # without a tokenizer: whitespace-separated words); the paper reading sends it whole
    script = [
        *step(" The answer was Anna Berg. X", APART),
        *[r for _ in range(3) for r in step(" So the answer is 1931.", SAME)],
        *step(RATIONALE, SAME),
        *step(" So the answer is 1931.", SAME),
    ]
    retriever = RecordingRetriever()
    config = SeaKRConfig(
        num_samples=2,
        delta=-2.0,
        hidden_layer=1,
        query_max_tokens=1,
        mode=mode,  # type: ignore[arg-type]
    )
    create_seakr_graph(FakeTraceModel(script), retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [query]


def test_an_empty_candidate_step_ranks_last() -> None:
    script = [
        *step(" Blue Harbour was directed by Anna Berg. She", APART),
        *step("", SMALL),  # doc p0: no step at all, however certain its samples
        *step(" It is a film. X", APART),  # doc p1: kept
        *step(" It was made. X", APART),  # doc p2: same U, later rank
        *step(" So the answer is 1931.", SAME),
        *step(RATIONALE, SAME),
        *step(" So the answer is 1931.", APART),
    ]
    result = create_seakr_graph(
        FakeTraceModel(script), RecordingRetriever(), config=CONFIG, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"][0]["rerank_order"] == [1]
    assert result["answer"] == "1931"


def test_rerank_choice_by_hand() -> None:
    floor = [-4.70, -4.76, -4.73]  # retriever order
    assert rerank_choice(floor) == 1  # the reference code: lowest U
    assert rerank_choice(floor, 0.05) == 1  # bound -4.71: p0 is out, p1 comes first
    assert rerank_choice(floor, 0.1) == 0  # all three tied: the retriever's first
    assert rerank_choice([-3.0, -3.0]) == 0  # exact ties keep the retriever's order
    assert rerank_choice([math.inf, -3.0], 100.0) == 1  # an empty step is never tied
    assert rerank_choice([math.inf, math.inf]) == 0
    # nan (a float32 determinant below zero): Python's sort leaves it where it stands
    assert rerank_choice([math.nan, -3.1]) == 0
    assert rerank_choice([-3.1, math.nan]) == 0
    assert rerank_choice([-2.0, math.nan, -3.1]) == 0  # the nan even hides -3.1 from the sort
    assert rerank_choice([math.nan, -3.1], 0.3) == 1  # with a margin nan is never tied
    assert rerank_choice([math.nan, math.nan], 0.3) == 0
    with pytest.raises(AdaptiveRAGError, match="got none"):
        rerank_choice([])


# Every sample agrees (Gram of rank one, eigenvalue k |z|^2 = 1.5 for SAME), but p0's
# hidden state is twice as long as p1's: U differs by (ln(6 + a) - ln(1.5 + a)) / 2 = 0.69
# through the norm alone.
SAME_LONG = tuple(tuple(2 * x for x in row) for row in SAME)
U_SAME_LONG = gram_uncertainty(np.array(SAME_LONG))


@pytest.mark.parametrize(("margin", "kept"), [(0.0, 1), (0.5, 1), (1.0, 0)])
def test_rerank_margin_keeps_the_retriever_order_among_near_ties(margin: float, kept: int) -> None:
    assert pytest.approx((math.log(6.001) - math.log(1.501)) / 2) == U_SAME_LONG - U_SAME
    script = [
        *step(" Blue Harbour was directed by Anna Berg. She", APART),
        *step(" The film was directed by Anna Berg. X", SAME_LONG),  # p0
        *step(" The film was directed by Carl Lind. X", SAME),  # p1: lowest U
        *step(" It is a film. X", APART),  # p2
        *step(" So the answer is 1931.", SAME),
        *step(RATIONALE, SAME),
        *step(" So the answer is 1931.", APART),
    ]
    config = SeaKRConfig(num_samples=2, delta=-2.0, hidden_layer=1, rerank_margin=margin)
    model = FakeTraceModel(script)
    result = create_seakr_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    (event,) = result["retrievals"]
    assert event["rerank_order"] == [kept]
    # the kept document is the one the next step reads
    assert f"[1] {PASSAGES[kept]}" in str(model.calls[4]["prompt"])


def test_calibrate_delta() -> None:
    values = [-8.0, -7.0, -6.0, -5.0, -4.0]
    assert calibrate_delta(values, 0.4) == pytest.approx(-5.6)
    assert sum(v > calibrate_delta(values, 0.4) for v in values) == 2
    with pytest.raises(AdaptiveRAGError, match="fraction in"):
        calibrate_delta(values, 1.5)


def test_config_is_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="num_samples must be >= 1, got 0"):
        SeaKRConfig(num_samples=0)
    for margin, message in ((-0.1, "must be >= 0"), (math.nan, "must be a real number")):
        with pytest.raises(AdaptiveRAGError, match=f"rerank_margin {message}"):
            SeaKRConfig(rerank_margin=margin)


@pytest.mark.parametrize(
    ("estimator", "delta", "expected"),
    [
        ("perplexity", 1.5, 4.0),
        ("multi_sample_perplexity", 1.5, 4.0),
        ("ln_entropy", 0.5, math.log(4.0)),
        ("energy", -1.0, 0.0),
    ],
)
def test_ablation_estimators_drive_the_decision(
    estimator: str, delta: float, expected: float
) -> None:
    # every token of the first step has p = 0.25 and logsumexp 0: perplexity 4, LN-entropy
    # ln 4, energy 0; every later step is certain (p = 1) and answers
    unsure = ScriptedResponse(" Anna Berg directed it. X", logprobs=(math.log(0.25),) * 5)
    sure = ScriptedResponse(" So the answer is 1931.")
    config = SeaKRConfig(num_samples=2, delta=delta, hidden_layer=0, estimator=estimator)  # type: ignore[arg-type]
    retriever = RecordingRetriever()
    # the step, three re-ranking candidates, the rationale's and the documents' readings
    script = [unsure] * 3 + [sure] * 15
    result = create_seakr_graph(
        FakeTraceModel(script), retriever, config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    (event,) = result["retrievals"]  # the first step was uncertain by this estimator
    assert event["score"] == pytest.approx(expected)
    assert result["answer"] == "1931"


def test_self_check_uncertainty_by_hand() -> None:
    yes = ScriptedResponse(" Yes", logprobs=(math.log(0.9),))
    no = ScriptedResponse(" No.", logprobs=(math.log(0.8),))
    model = FakeTraceModel([yes, no, ScriptedResponse(" Maybe"), ScriptedResponse("")])
    replies = [model.generate_trace("q")[0] for _ in range(4)]
    assert [self_check_uncertainty(r) for r in replies] == pytest.approx([0.1, 0.8, 1.0, 1.0])


@pytest.mark.parametrize(("reply", "p", "retrieves"), [(" Yes", 0.9, False), (" No", 0.7, True)])
def test_prompt_estimator_asks_the_model(reply: str, p: float, retrieves: bool) -> None:
    config = SeaKRConfig(num_samples=2, delta=0.5, hidden_layer=0, estimator="prompt")
    check = ScriptedResponse(reply, logprobs=(math.log(p),))
    confident = ScriptedResponse(" Yes", logprobs=(0.0,))
    answered = [*step(" So the answer is 1931.", SAME), confident]
    script = [
        *step(" Anna Berg directed it. X", SAME),
        check,
        # with retrieval: three re-ranking candidates (the kept one answers), then the
        # rationale's and the documents' readings; else the answer step, then the
        # rationale's reading
        *answered * (3 if retrieves else 1),
        *answered * (2 if retrieves else 1),
    ]
    model = FakeTraceModel(script)
    result = create_seakr_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    # the self-check sees the step prompt, the step and the question of the template
    assert str(model.calls[1]["prompt"]).endswith(
        " Anna Berg directed it." + config.self_check_template
    )
    assert len(result["retrievals"]) == int(retrieves)
    if retrieves:
        assert result["retrievals"][0]["score"] == pytest.approx(0.7)
        assert result["retrievals"][0]["threshold"] == 0.5
    assert result["answer"] == "1931"
    # each generation is 1 greedy + 2 samples + 1 self-check: the step, 3 candidates and
    # 2 readings, or 2 steps and 1 reading
    assert result["counts"]["llm_calls"] == 4 * (6 if retrieves else 3)


# -- reference mode (SeaKR's code) against the paper reading ---------------------------------

PAPER = SeaKRConfig(num_samples=2, delta=-2.0, hidden_layer=1, mode="paper")
MIDDLE = ((0.5, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))  # U between U_SAME and U_APART


def _final(
    config: SeaKRConfig, rationale: list[ScriptedResponse], documents: list[ScriptedResponse]
):
    """One retrieval (document p1 kept), an answered step, then the two final readings."""
    script = [
        *step(" Blue Harbour was directed by Anna Berg. She", APART),
        *step(" The film is by Carl Lind. X", APART),
        *step(" The film was directed by Anna Berg. X", SAME),
        *step(" It is a film. X", APART),
        *step(" So the answer is 1931.", SAME),
        *rationale,
        *documents,
    ]
    graph = create_seakr_graph(
        FakeTraceModel(script), RecordingRetriever(), config=config, prompts=NO_SHOTS
    )
    return graph.invoke({"question": QUESTION})["answer"]


def test_reference_ties_go_to_the_documents_answer() -> None:
    rationale = step(RATIONALE, SAME)
    documents = step(" Anna Berg was born in 1930. So the answer is 1930.", SAME)
    assert _final(CONFIG, rationale, documents) == "1930"  # equal U: the documents' answer
    assert _final(PAPER, rationale, documents) == "1931"  # equal U: the rationale's


def test_reference_rationale_uncertainty_is_its_unforced_calls() -> None:
    u_middle = gram_uncertainty(np.array(MIDDLE))
    assert gram_uncertainty(np.array(SMALL)) < u_middle < U_APART
    rationale = [
        *step(" The film was directed by Anna Berg.", APART),  # no answer: U_APART
        *step(" 1931", SMALL),  # forced: the lowest U
    ]
    documents = step(" Anna Berg was born in 1930. So the answer is 1930.", MIDDLE)
    # reference: the rationale is weighed by U_APART and loses; paper: by U_SMALL and wins
    assert _final(CONFIG, rationale, documents) == "1930"
    assert _final(PAPER, rationale, documents) == "1931"


def test_reference_unknown_is_a_substring_in_any_case() -> None:
    rationale = step(" Nothing is said. So the answer is Unknown person.", SMALL)
    documents = step(" Anna Berg was born in 1930. So the answer is 1930.", SAME)
    assert _final(CONFIG, rationale, documents) == "1930"  # "Unknown person" is unknown
    assert _final(PAPER, rationale, documents) == "Unknown person"  # lower U, not unknown


def _trace(text: str, hidden: tuple[float, ...]) -> GenerationTrace:
    count = len(text.split()) or (1 if text else 0)
    return GenerationTrace(
        prompt_ids=np.zeros(0, dtype=np.int64),
        token_ids=np.arange(count, dtype=np.int64),
        tokens=[text] if count else [],
        text=text,
        logprobs=np.zeros(count, dtype=np.float32),
        entropies=np.zeros(count, dtype=np.float32),
        finish_reason="stop",
        hidden=np.asarray(hidden, dtype=np.float32),
    )


def test_reference_drops_blank_samples_and_none_left_is_zero() -> None:
    reference, paper = SeaKRPolicy(CONFIG), SeaKRPolicy(PAPER)
    greedy = _trace(" Anna Berg.", SAME[0])
    blank = [_trace(" ", SAME[0]), _trace("\n", APART[1])]
    assert reference._uncertainty(greedy, blank) == 0.0
    assert paper._uncertainty(greedy, blank) == pytest.approx(U_APART)
    mixed = [_trace(" Anna", APART[0]), _trace("  ", SAME[0]), _trace(" Berg", APART[1])]
    assert reference._uncertainty(greedy, mixed) == pytest.approx(U_APART, abs=1e-6)
    assert paper._uncertainty(greedy, [_trace("", SAME[0])]) == math.inf


def test_reference_uncertainty_is_seakrs_computation() -> None:
    """Against the official expression: torch float32, dense J_d, einsum, logdet."""
    import torch

    def official(z: np.ndarray, alpha: float = 1e-3) -> float:
        states = torch.tensor(z, dtype=torch.float32)
        k, d = states.shape
        centring = torch.eye(d) - (1 / d) * torch.ones(d, d)
        sigma = torch.einsum("ij,jk,kl->il", states, centring, states.t())
        return float((1 / k) * torch.logdet(sigma + alpha * torch.eye(k)))

    well = np.array([[1, 2, 3, 4], [2, 0, 1, 3], [0, 1, 0, 2]], dtype=np.float64)
    # by hand: centred rows (-1.5,-.5,.5,1.5), (.5,-1.5,-.5,1.5), (-.75,.25,-.75,1.25);
    # det(Gram + 1e-3 I) = 30.29001..., U = ln(det) / 3
    assert reference_uncertainty(well) == pytest.approx(1.136939, abs=1e-6)
    assert gram_uncertainty(well) == pytest.approx(1.136939, abs=1e-6)
    rng = np.random.default_rng(0)
    spread = rng.standard_normal((6, 64))
    assert reference_uncertainty(spread) == official(spread)
    # identical rows: rank one, where float32 rounding shows (closed form in float64)
    same = np.array([[1.0, 2.0, 3.0, 4.0]] * 3)
    closed = (2 * math.log(1e-3) + math.log(3 * 5.0 + 1e-3)) / 3
    assert gram_uncertainty(same) == pytest.approx(closed, abs=1e-9)
    assert reference_uncertainty(same) == official(same)
    assert reference_uncertainty(same) != gram_uncertainty(same)
    wide = np.tile(rng.standard_normal(512).astype(np.float32) * 3, (8, 1))
    assert reference_uncertainty(wide) == official(wide)
    assert abs(reference_uncertainty(wide) - gram_uncertainty(wide)) > 1e-4
    assert reference_uncertainty(np.zeros((0, 4))) == math.inf
