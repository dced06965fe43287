"""SeaKR: self-aware knowledge retrieval (Yao et al., 2024).

Algorithm, one reasoning step (= one sentence):

1. draft: generate the step greedily plus ``k`` samples in one batched call, read each
   sample's hidden state at an end-of-sequence token (layer ``L/2``, MLP output), and
   measure the self-aware uncertainty ``U = (1/k) logdet(Z J_d Z^T + alpha I)``;
2. score_need: retrieve if ``U > delta`` (and fewer than ``max_docs`` documents are kept),
   else accept the greedy step;
3. formulate_query: the greedy step's content words that are confident (every token
   ``p >= 0.9``) or already in the question or the previous step;
4. retrieve the BM25 top documents; 5. rerank (self-aware re-ranking): for each new
   document, regenerate the step with it and measure ``U``; keep the single document of
   lowest ``U``, the retriever's order breaking ties within ``rerank_margin``
   (documents accumulate, at most ``max_docs``);
6. continue_generation: accept the step generated with the kept document;
7. finalize (self-aware reasoning): read the rationale's steps as passages, and read the
   kept documents, each time generating a whole answer; the answer of lower ``U`` wins
   (empty or "unknown" answers lose).

A step that gives the answer ends the reasoning without retrieval, whatever its ``U``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, cast

import numpy as np
from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.policy import (
    TOKENS_CAP,
    CountRange,
    GraphModel,
    MethodConfig,
    Policy,
    RunContext,
    TraceModel,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import (
    QAPrompts,
    build_prompt,
    extract_answer,
    read_answer_as,
)
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import (
    energy_score,
    gram_uncertainty,
    is_content_word,
    length_normalised_entropy,
    merge_tokens_into_words,
    multi_sample_perplexity,
    perplexity,
    split_sentences,
    tokens_covering,
)
from langchain_adaptive_rag.state import AdaptiveRAGState, RetrievedDoc

__all__ = [
    "SeaKRConfig",
    "SeaKRPolicy",
    "calibrate_delta",
    "create_seakr_graph",
    "reference_uncertainty",
    "rerank_choice",
    "self_check_uncertainty",
]

STEP_STOP = (". ", "\n")
"""A reasoning step ends at a sentence end or a line end."""

NOT_QUERY_WORDS = frozenset({"thus", "answer", "is", "so"})
"""Words a SeaKR query never carries (the reference code drops them after its
part-of-speech filter: an answer sentence's "So the answer is" is not a search term)."""


def middle_layer(num_layers: int) -> int:
    """SeaKR's layer of a ``num_layers``-layer model: ``L/2 - 1`` from 0 (15 of 32)."""
    return max(0, num_layers // 2 - 1)


@dataclass(frozen=True)
class SeaKRConfig(MethodConfig):
    """SeaKR settings (the paper's symbols)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "num_samples": (1, 256, "samples, decoded with the greedy step in one call"),
        "max_docs": (1, 1000, "documents, more than any prompt holds"),
        "query_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }

    delta: float = -6.0
    """Retrieval threshold ``delta`` on ``U`` (Llama-2-7B, layer 15). ``U`` is not
    scale-invariant: calibrate it for another model with [`calibrate_delta`][]."""
    num_samples: int = 20
    """``k`` sampled generations per step, besides the greedy one."""
    temperature: float = 1.0
    """Sampling temperature of the ``k`` samples."""
    top_k: int = 50
    """Top-k of the samples."""
    top_p: float = 0.9
    """Top-p of the samples."""
    seed: int = 0
    """Seed of the first sample (sample ``i`` uses ``seed + i``)."""
    hidden_layer: int | None = None
    """Layer whose hidden state is read, counted from 0 (negative: from the end).
    ``None``: the given model's middle layer ``L/2 - 1``, as SeaKR reads it (15 of
    Llama-2-7B's 32); a model that does not say its depth reads layer 15."""
    hidden_site: Literal["residual", "mlp"] = "mlp"
    """``mlp`` output (SeaKR's vLLM patch) or the layer's ``residual`` output."""
    alpha: float = 1e-3
    """Ridge ``alpha`` of the Gram log-determinant."""
    estimator: Literal[
        "gram", "perplexity", "multi_sample_perplexity", "ln_entropy", "energy", "prompt"
    ] = "gram"
    """Uncertainty estimator: SeaKR's ``gram`` (default) or one of the paper's ablations:
    the greedy step's [`perplexity`][], the [`multi_sample_perplexity`][] and length-normalised
    entropy (``ln_entropy``) of the samples, or the greedy step's ``energy`` (minus the
    mean logsumexp of its logits), or ``prompt``: the model is asked whether the step is
    correct (``self_check_template``) and ``U`` is its probability of answering "No" (the
    first answer token's probability; 1.0 when the reply is neither yes nor no; one more
    LLM call per step). Each lives on its own scale: calibrate ``delta``."""
    self_check_template: str = (
        "\nIs the last sentence of this answer correct? Answer Yes or No.\nReply:"
    )
    """Appended to the step prompt and the step by the ``prompt`` estimator."""
    confident_p: float = 0.9
    """A query word's tokens must all have at least this probability (or occur in the
    question or the previous step)."""
    max_docs: int = 5
    """Documents kept at most (they accumulate across steps)."""
    query_max_tokens: int = 64
    """Reference mode: the query is cut to its last this-many model tokens, as SeaKR's
    retriever call does (``max_query_length=64``)."""
    rerank_margin: float = 0.0
    """Re-ranking ties: candidates whose ``U`` is within this margin of the lowest count as
    tied, and the retriever's order breaks the tie. ``0`` is the reference code (a stable
    sort on ``U``: only exact ties keep the retriever's order). When every sample of a
    candidate agrees, the Gram matrix has rank one and ``U`` is
    ``((k-1)/k) log alpha + (1/k) log(k |z_c|^2 + alpha)`` (``z_c`` the centred state):
    candidates at that floor differ only by the norm of one hidden state, so a margin a
    little above that spread keeps the retriever's order among them. Calibrate it like
    ``delta`` (``benchmarks/toy_seakr_rerank.py`` does so for the toy model)."""

    mode: Literal["reference", "paper"] = "reference"
    """``reference`` (default): SeaKR's code, exactly where it decides differently from the
    plainest reading of the paper; ``paper``: that reading. The differences:

    - ``U`` precision: float32 with a dense ``J_d``, as the code's torch operations
      (reference, [`reference_uncertainty`][]) or float64 (paper); near the rank-one
      floor the two differ by a few hundredths and a decision at ``delta`` can flip.
      There float32 rounding (about ``1e-7 |z|^2``) rivals ``alpha``, so the reference
      ``U`` follows the last bits of the hidden states: decoding the same step alone or
      batched with other requests (``--concurrency``, ``graph.batch``; the hidden states
      then differ by about 1e-5) can move it by 0.1 and change a re-ranking. The float64
      ``U`` of paper mode moves by about 1e-5 and gives the same decisions both ways.
    - End-of-sequence state: the last token of every sample is replaced by EOS, a length
      ending's too (reference), or a length ending gets EOS appended (paper).
    - Samples: those whose text is blank (empty or whitespace once the stop string is cut)
      are dropped, and ``U = 0`` when none remain (reference); samples with no token are
      dropped and ``U = inf`` (uncertain) when none remain (paper).
    - Self-aware reasoning: the rationale's ``U`` is that of its unforced generation even
      when its answer had to be forced, the documents' that of the forced one (reference),
      or both that of the generation that gave the answer (paper); an answer is unknown
      when it contains "unknown" in any case (reference) or is empty, "unknown" or "I
      don't know" (paper); the rationale wins only with a strictly lower ``U``, ties go to
      the documents' answer (reference), or the rationale wins ties (paper)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in ("reference", "paper"):
            msg = f"SeaKRConfig.mode must be 'reference' or 'paper', got {self.mode!r}."
            raise AdaptiveRAGError(msg)
        for name in ("num_samples", "max_docs", "query_max_tokens"):
            if getattr(self, name) < 1:
                msg = f"SeaKRConfig.{name} must be >= 1, got {getattr(self, name)}."
                raise AdaptiveRAGError(msg)
        if not self.rerank_margin >= 0.0:
            msg = (
                f"SeaKRConfig.rerank_margin must be >= 0 (a tolerance on U), got "
                f"{self.rerank_margin}."
            )
            raise AdaptiveRAGError(msg)

    @property
    def rows_per_call(self) -> int:
        """A step's call decodes the greedy step and its ``k`` samples together."""
        return self.num_samples + 1


@dataclass(frozen=True)
class _Reading:
    answer: str
    uncertainty: float
    """``U`` of the generation that gave the answer (the forced one when forced)."""
    unforced_uncertainty: float
    """``U`` of the first, unforced generation."""
    text: str
    usage: dict[str, int]
    """What its model calls add to the run's counts (``model_call``)."""


@dataclass(frozen=True)
class _Step:
    text: str
    tokens: list[str]
    logprobs: list[float]
    entropies: list[float]
    uncertainty: float
    usage: dict[str, int]
    """What its model calls add to the run's counts (``model_call``)."""
    ended: bool
    """Whether the greedy step ended the answer (``Policy.answer_ended``)."""


class SeaKRState(AdaptiveRAGState):
    """The graph state of SeaKR: the shared channels and its own."""

    draft_uncertainty: NotRequired[float]
    """The draft's uncertainty ``U``, measured while drafting."""
    kept_docs: NotRequired[list[RetrievedDoc]]
    """The documents kept across rounds (up to ``max_docs``)."""


def _own(state: AdaptiveRAGState) -> SeaKRState:
    """``state`` read with SeaKR's own channels."""
    return cast(SeaKRState, state)


class SeaKRPolicy(Policy):
    """Self-aware uncertainty decides when; self-aware re-ranking and reasoning decide how."""

    name = "seakr"
    display_name = "SeaKR"
    config_class = SeaKRConfig
    threshold_field = "delta"
    threshold_signal = "uncertainty"
    threshold_direction = "above"
    decision_rule = (
        "SeaKR retrieves when a step's uncertainty U is over δ (while fewer than max_docs "
        "documents are kept)"
    )
    threshold_symbol = "δ"
    colour = "#2ca02c"
    config: SeaKRConfig
    state_schema = SeaKRState

    def fresh_channels(self) -> dict[str, object]:
        """SeaKR's own channels at a run's start."""
        return {"kept_docs": []}

    def check_model(self, model: TraceModel) -> None:
        """Fail at build time unless the hidden layer exists and has the configured site.

        The layer's range is checked when the model says its depth; ``hidden_site="mlp"``
        needs an MLP in that layer (a state-space model's layers have none).
        """
        super().check_model(model)
        if self.config.estimator != "gram":
            return  # the other estimators read samples, log-probabilities or logits only
        layers = getattr(model, "num_layers", None)
        layer = self.config.hidden_layer
        if layer is not None and isinstance(layers, int) and not -layers <= layer < layers:
            msg = (
                f"SeaKRConfig.hidden_layer={layer} does not exist: the model has {layers} "
                f"decoder layers. Fix: SeaKRConfig(hidden_layer={middle_layer(layers)}) reads "
                "the middle layer, as SeaKR does (15 of Llama-2-7B's 32), and so does the "
                "default hidden_layer=None."
            )
            raise AdaptiveRAGError(msg)
        model.check_hidden(self._hidden_layer(model), self.config.hidden_site)

    @property
    def reads_logprobs(self) -> bool:
        """Whether the estimator reads log-probabilities (or logits).

        The perplexity, sample and energy estimators do; ``prompt`` reads its reply's
        first token.
        """
        return self.config.estimator in (
            "perplexity",
            "multi_sample_perplexity",
            "ln_entropy",
            "energy",
            "prompt",
        )

    def _hidden_layer(self, model: TraceModel) -> int:
        """The configured layer, or the model's middle one."""
        if self.config.hidden_layer is not None:
            return self.config.hidden_layer
        layers = getattr(model, "num_layers", None)
        return middle_layer(layers) if isinstance(layers, int) else 15

    def _sample(
        self,
        ctx: RunContext,
        prompt: str,
        max_new_tokens: int,
        stop: Sequence[str] = STEP_STOP,
    ) -> _Step:
        """Greedy step plus ``k`` samples; ``U`` over the non-empty samples.

        ``stop`` ends a step at its sentence (the default) or, for a whole answer, at the
        prompts' stop strings.
        """
        config = self.config
        sampling = replace(
            self.decoding(ctx, max(1, max_new_tokens), stop),
            do_sample=True,
            temperature=config.temperature,
            top_k=config.top_k,
            top_p=config.top_p,
            seed=config.seed,
        )
        capture = CaptureOptions(
            logprobs=self.reads_logprobs,
            hidden=config.estimator == "gram",
            hidden_layer=self._hidden_layer(ctx.model),
            hidden_site=config.hidden_site,
            hidden_at="eos_replacing_last" if self.reference else "eos",
        )
        with token_stream(prompt, self.name) as sink:  # streams the greedy sample
            traces = ctx.model.generate_trace(
                prompt,
                decoding=sampling,
                capture=capture,
                n=config.num_samples,
                include_greedy=True,
                on_token=sink,
            )
        greedy, samples = traces[0], traces[1:]
        text = greedy.text + ("." if greedy.stop_string == ". " else "")
        kept = tokens_covering(greedy.tokens, len(text))
        calls = list(traces)
        if config.estimator == "prompt":
            check = ctx.model.generate_trace(
                prompt + text + config.self_check_template,
                decoding=self.decoding(ctx, 2, ("\n",)),
                capture=CaptureOptions(logprobs=True),
            )[0]
            uncertainty = self_check_uncertainty(check)
            calls.append(check)
        else:
            uncertainty = self._uncertainty(greedy, samples)
        return _Step(
            text=text,
            tokens=list(greedy.tokens[:kept]),
            logprobs=[float(x) for x in greedy.logprobs[:kept]],
            entropies=[float(x) for x in greedy.entropies[:kept]],
            uncertainty=uncertainty,
            usage=model_call(*calls),
            ended=self.answer_ended(ctx, greedy),
        )

    def _uncertainty(self, greedy: GenerationTrace, samples: Sequence[GenerationTrace]) -> float:
        """The configured estimator over the step's greedy trace and samples."""
        estimator = self.config.estimator
        if estimator == "perplexity":
            return perplexity(greedy.logprobs)
        if estimator == "multi_sample_perplexity":
            return multi_sample_perplexity([t.logprobs for t in samples])
        if estimator == "ln_entropy":
            return length_normalised_entropy([t.logprobs for t in samples])
        if estimator == "energy":
            if greedy.logsumexp is None:
                msg = (
                    "SeaKRConfig(estimator='energy') reads the logsumexp of the model's raw "
                    "logits, which a served model does not return (its log-probabilities "
                    "are normalised). Fix: run it on ChatTransformers, or choose "
                    "estimator='ln_entropy', 'multi_sample_perplexity' or 'perplexity'."
                )
                raise AdaptiveRAGError(msg)
            return energy_score(greedy.logsumexp)
        if self.reference:  # blank samples dropped; none left: U = 0
            states = [t.hidden for t in samples if t.text.strip() and t.hidden is not None]
            if not states:
                return 0.0
            return reference_uncertainty(np.stack(states), self.config.alpha)
        states = [t.hidden for t in samples if t.num_tokens > 0 and t.hidden is not None]
        return gram_uncertainty(np.stack(states), self.config.alpha) if states else math.inf

    @property
    def reference(self) -> bool:
        """Whether SeaKR's code is followed where it differs (``SeaKRConfig.mode``)."""
        return self.config.mode == "reference"

    def _step_prompt(
        self, ctx: RunContext, state: AdaptiveRAGState, docs: Sequence[RetrievedDoc]
    ) -> str:
        return build_prompt(
            ctx.prompts,
            state["question"],
            state.get("text", ""),
            docs,
            state.get("history", []),
        )

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate the next step with the kept documents and measure its uncertainty."""
        step = self._sample(
            ctx, self._step_prompt(ctx, state, state.get("docs", [])), self.remaining(state)
        )
        return {
            "draft": step.text,
            "draft_ended": step.ended,
            "draft_tokens": step.tokens,
            "draft_logprobs": step.logprobs,
            "draft_entropies": step.entropies,
            "draft_uncertainty": step.uncertainty,
            "counts": bump(
                state.get("counts"),
                **step.usage,
                rounds=1,
            ),
        }

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Retrieve when ``U > delta``; otherwise accept the greedy step.

        A step that gives the answer ("So the answer is ...") is accepted whatever its
        ``U``, as in the reference code: the final answer's uncertainty is weighed by
        self-aware reasoning in ``finalize``, not by another retrieval.
        """
        score = _own(state).get("draft_uncertainty")
        uncertainty = float(score) if isinstance(score, (int, float)) else math.inf
        step = state.get("step", 0) + 1
        kept_docs = len(_own(state).get("kept_docs", []))
        answers = ctx.prompts.answer_marker in state.get("draft", "").lower()
        if uncertainty > self.config.delta and kept_docs < self.config.max_docs and not answers:
            decision = retrieval_decision(
                step,
                retrieve=True,
                score=uncertainty,
                threshold=self.config.delta,
                trigger_position=0,
                trigger_word=state.get("draft", "").strip(),
            )
            return self.with_retrieval({}, step, decision)
        update = self.without_retrieval(
            self.accept_draft(ctx, state),
            step,
            retrieval_decision(
                step, retrieve=False, score=uncertainty, threshold=self.config.delta
            ),
        )
        return update

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """Confident or already-known content words of the greedy step."""
        tokens = state.get("draft_tokens", [])
        probs = [math.exp(lp) for lp in state.get("draft_logprobs", [])]
        known = {
            w.strip(".,;:!?").lower()
            for w in (self.retrieval_question(state) + " " + state.get("last_accepted", "")).split()
        }
        chosen = []
        for word in merge_tokens_into_words(tokens):
            confident = all(p >= self.config.confident_p for p in probs[word.start : word.end])
            core = word.text.strip(".,;:!?").lower()
            if (
                is_content_word(word.text)
                and core not in NOT_QUERY_WORDS
                and (confident or core in known)
            ):
                chosen.append(word.text)
        query = " ".join(chosen) or self.retrieval_question(state)
        if self.reference:  # the retriever's cut to the last query_max_tokens tokens
            return self.cut_query(ctx, query, self.config.query_max_tokens)
        return query

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Keep the retrieved document whose step is generated with the lowest ``U``.

        Candidates within ``rerank_margin`` of the lowest ``U`` are tied, and the first of
        them in the retriever's order is kept (see [`rerank_choice`][]).
        """
        kept = list(_own(state).get("kept_docs", []))
        known = {d["id"] for d in kept}
        candidates = [
            (rank, d) for rank, d in enumerate(state.get("docs", [])) if d["id"] not in known
        ]
        counts = state.get("counts")
        read: list[tuple[float, int, RetrievedDoc, _Step]] = []
        for rank, doc in candidates:
            step = self._sample(
                ctx, self._step_prompt(ctx, state, [*kept, doc]), self.remaining(state)
            )
            counts = bump(counts, **step.usage)
            # an empty greedy step ranks last, as in the reference code
            read.append((step.uncertainty if step.text.strip() else math.inf, rank, doc, step))
        if not read:
            return {"docs": kept, "kept_docs": kept, "rerank_order": [], "counts": bump(counts)}
        _, rank, doc, step = read[rerank_choice([r[0] for r in read], self.config.rerank_margin)]
        kept = [*kept, doc][-self.config.max_docs :]
        return {
            "docs": kept,
            "kept_docs": kept,
            "rerank_order": [rank],
            "draft": step.text,
            "draft_ended": step.ended,
            "draft_tokens": step.tokens,
            "draft_logprobs": step.logprobs,
            "draft_entropies": step.entropies,
            "counts": counts,
        }

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Accept the step generated with the kept document (or generate one without)."""
        if state.get("rerank_order"):
            return self.accept_draft(ctx, state)
        step = self._sample(
            ctx, self._step_prompt(ctx, state, state.get("docs", [])), self.remaining(state)
        )
        update = self.accept(ctx, state, step.text, len(step.tokens), ended=step.ended)
        update["counts"] = bump(
            state.get("counts"),
            **step.usage,
        )
        return update

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Self-aware reasoning: the rationale's answer or the documents' answer, lower ``U``.

        Both are read the same way, as in the reference code: the rationale's steps
        (without its answer sentence), or the kept documents, are the prompt's context
        passages, and a whole answer is generated from them (see ``_read``).
        """
        counts = state.get("counts")
        rationale = self._rationale(ctx, state.get("text", ""))
        steps = [s.strip() for s in split_sentences(rationale) if s.strip()]
        sources: list[Sequence[RetrievedDoc]] = [
            [{"id": f"step-{i}", "text": step, "metadata": {}} for i, step in enumerate(steps, 1)]
        ]
        if _own(state).get("kept_docs"):
            sources.append(_own(state).get("kept_docs", []))
        readings: list[_Reading] = []
        for docs in sources:  # the rationale first
            reading = self._read(ctx, state, docs)
            counts = bump(counts, **reading.usage)
            readings.append(reading)
        chosen = self._choose_reading(readings[0], readings[1] if len(readings) > 1 else None)
        answer, text = chosen.answer.strip().rstrip(".").strip(), chosen.text
        return {
            "answer": read_answer_as(answer, ctx.prompts.answer_kind),
            "text": text,
            "counts": bump(counts),
        }

    def _choose_reading(self, rationale: _Reading, documents: _Reading | None) -> _Reading:
        """Self-aware reasoning's pick between the rationale's and the documents' answer."""
        if self.reference:
            if documents is None:
                return rationale
            if "unknown" in rationale.answer.lower():
                return documents
            if "unknown" in documents.answer.lower():
                return rationale
            # the rationale's U is its unforced call's; a tie goes to the documents
            if rationale.unforced_uncertainty < documents.uncertainty:
                return rationale
            return documents
        best: tuple[float, _Reading] | None = None
        for reading in (rationale, documents):  # the rationale first: it wins ties
            if reading is None:
                continue
            answer = reading.answer.strip().rstrip(".").strip()
            unknown = not answer or answer.lower() in {"unknown", "i don't know"}
            score = math.inf if unknown else reading.uncertainty
            if best is None or score < best[0]:
                best = (score, reading)
        assert best is not None
        return best[1]

    def _read(
        self, ctx: RunContext, state: AdaptiveRAGState, docs: Sequence[RetrievedDoc]
    ) -> _Reading:
        """A whole answer generated from ``docs``; forced when it has no answer.

        The answer's ``U`` is that of the generation that gave it (the forced one when
        the whole answer had none).
        """
        prompts = ctx.prompts
        read = self._sample(
            ctx,
            build_prompt(prompts, state["question"], "", docs, state.get("history", [])),
            self.config.generate_max_length,
            stop=prompts.stop,
        )
        answer = extract_answer(read.text, prompts.answer_marker)
        if answer is not None:
            return _Reading(answer, read.uncertainty, read.uncertainty, read.text, read.usage)
        forced = self._sample(
            ctx,
            build_prompt(
                prompts,
                state["question"],
                read.text + prompts.forced_answer,
                docs,
                state.get("history", []),
            ),
            self.config.forced_answer_tokens,
        )
        return _Reading(
            forced.text,
            forced.uncertainty,
            read.uncertainty,
            read.text + prompts.forced_answer + forced.text,
            {key: read.usage[key] + forced.usage[key] for key in read.usage},
        )

    def _rationale(self, ctx: RunContext, text: str) -> str:
        """The accepted steps without their own answer sentence."""
        marker = ctx.prompts.answer_marker
        forced = ctx.prompts.forced_answer
        cut = text.lower().rfind(marker)
        rationale = text[:cut].rstrip() if cut >= 0 else text
        # The words the forced answer puts before the marker ("So") leave the rationale
        # too, or the prompt would read "... So So the answer is".
        lead = forced[: max(0, forced.lower().find(marker))].strip()
        if cut >= 0 and lead and rationale.lower().endswith(lead.lower()):
            rationale = rationale[: len(rationale) - len(lead)].rstrip()
        return rationale


def reference_uncertainty(states: np.ndarray, alpha: float = 1e-3) -> float:
    """``U`` as SeaKR's code computes it: float32 torch on the CPU, operation for operation.

    ``Z`` cast to float32, the dense ``d x d`` centring matrix ``J_d`` built, ``Z J_d Z^T``
    by ``einsum``, the ridge added, ``logdet`` taken and divided by ``k``, all in float32
    (``nan`` for a negative determinant, as ``logdet`` gives). When the samples agree the
    Gram matrix is near rank one and float32 rounding (about ``1e-7 |z|^2``) rivals
    ``alpha``: ``U`` then differs from the float64
    [`gram_uncertainty`][] by up to a few hundredths,
    enough to flip a decision near ``delta``, and from a float32 computation by another
    library (numpy's BLAS) by as much; following the code's own operations reproduces its
    values.

    Args:
        states: Shape ``(k, d)``, one row per non-blank sample.
        alpha: The ridge ``alpha``.

    Returns:
        ``U`` (``+inf`` for no samples).
    """
    import torch

    array = np.asarray(states, dtype=np.float32)
    if array.ndim != 2:
        msg = f"Expected hidden states of shape (k, d), got shape {array.shape}."
        raise ValueError(msg)
    k, d = array.shape
    if k == 0:
        return math.inf
    z = torch.from_numpy(array)
    centring = torch.eye(d) - (1 / d) * torch.ones(d, d)
    sigma = torch.einsum("ij,jk,kl->il", z, centring, z.t())
    return float((1 / k) * torch.logdet(sigma + alpha * torch.eye(k)))


def rerank_choice(uncertainties: Sequence[float], margin: float = 0.0) -> int:
    """Which candidate self-aware re-ranking keeps.

    Args:
        uncertainties: ``U`` of the step generated with each candidate document, in the
            retriever's order (``inf`` for a candidate whose step is empty).
        margin: Candidates within ``margin`` of the lowest ``U`` count as tied (see
            ``SeaKRConfig.rerank_margin``).

    Returns:
        With ``margin`` 0, the first candidate of the reference code's stable sort on
        ``U``. A ``nan`` ``U`` (reference mode's float32 determinant, made negative by
        rounding when the samples agree) stays where that sort leaves it, since every
        comparison with ``nan`` is false. With a ``margin``, the first candidate, in the
        retriever's order, whose ``U`` is at most the lowest non-``nan`` ``U`` plus
        ``margin``; a ``nan`` is never tied. The first candidate when no ``U`` qualifies.
    """
    if not uncertainties:
        msg = "rerank_choice needs at least one candidate's uncertainty, got none."
        raise AdaptiveRAGError(msg)
    if margin == 0:
        return sorted(range(len(uncertainties)), key=uncertainties.__getitem__)[0]
    comparable = [u for u in uncertainties if not math.isnan(u)]
    if not comparable:
        return 0
    bound = min(comparable) + margin
    return next(i for i, u in enumerate(uncertainties) if u <= bound)


def self_check_uncertainty(reply: GenerationTrace) -> float:
    """``U`` of the ``prompt`` estimator: the probability that the self-check says "No".

    Args:
        reply: The greedy reply to the self-check question.

    Returns:
        ``1 - p`` when the reply starts with "yes" and ``p`` when it starts with "no",
        where ``p`` is the probability of the reply's first token; 1.0 otherwise.
    """
    word = reply.text.strip().lstrip("[*").lower()
    if reply.num_tokens == 0:
        return 1.0
    p = math.exp(float(reply.logprobs[0]))
    if word.startswith("yes"):
        return 1.0 - p
    if word.startswith("no"):
        return p
    return 1.0


def calibrate_delta(uncertainties: Sequence[float], retrieve_fraction: float) -> float:
    """A ``delta`` under which about ``retrieve_fraction`` of the given steps would retrieve.

    Run a graph (or ``SeaKRPolicy.draft``) on held-out questions, collect the ``U``
    of their steps (``draft_uncertainty``), and pick the quantile that matches how often
    retrieval should fire.

    Args:
        uncertainties: ``U`` values measured on the model at hand.
        retrieve_fraction: Desired share of steps with ``U > delta``, in ``[0, 1]``.

    Returns:
        The threshold.
    """
    values = np.asarray([u for u in uncertainties if math.isfinite(u)], dtype=np.float64)
    if values.size == 0 or not 0.0 <= retrieve_fraction <= 1.0:
        msg = (
            f"calibrate_delta needs finite uncertainties and a fraction in [0, 1]; got "
            f"{values.size} values and {retrieve_fraction}."
        )
        raise AdaptiveRAGError(msg)
    return float(np.quantile(values, 1.0 - retrieve_fraction))


def create_seakr_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: SeaKRConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """SeaKR graph: retrieve when the model's sampled hidden states disagree.

    Args:
        model: [`ChatTransformers`][] (any attention kernel).
        retriever: Any LangChain retriever.
        config: SeaKR settings (``delta``, ``k``, layer, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.
    """
    policy = SeaKRPolicy(config or SeaKRConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
