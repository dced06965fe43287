"""ETC: retrieval timed by the trend of token entropy (Li et al., AAAI 2026).

Algorithm, one round:

1. draft: generate one line without documents, capturing the last layer's attention;
   split it into the ETC code's words (a punctuation or whitespace token is a word of its
   own) and take each word's largest token entropy ``H``;
2. score_need: over content words, the first difference ``ΔH`` (to the previous content
   word) and the second ``Δ²H`` (to the previous non-zero ``ΔH``); smooth ``Δ²H`` with
   ``M_t = alpha Δ²H_t + (1 - alpha) M_{t-1}``, ``alpha = 0.9 + 0.1 w``,
   ``w = |M_{t-1} - E| / (|Δ²H_t - E| + |M_{t-1} - E|)`` (``E`` the running mean of
   ``Δ²H``); a word scores ``M`` times its largest attention to the draft's words,
   normalised to mean 1 in its sentence; the first word over ``θ`` triggers, and the text
   before that word is kept;
3. formulate_query: the triggering words' attention rows, summed, weigh the words of the
   question and of the text before the trigger; the ``top_n`` content words in text order
   form the query (DRAGIN's query formulation, QFS, from the draft's own rows);
4. retrieve; 5. continue_generation: regenerate from the kept text with the documents and
   keep the first new sentence;
6. repeat until a draft has no trigger or the budget is spent; finalize reads the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, TypedDict, cast

import numpy as np
from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.engine.token_text import token_pieces
from langchain_adaptive_rag.entropy_trend import (
    attention_to_columns,
    entropy_differences,
    etc_scores,
    etc_sentence_spans,
    etc_trigger,
    etc_words,
    max_attention_to_draft,
    select_query_words,
    smoothed_trend,
)
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.dragin import cut_for_evaluation, reference_token_count
from langchain_adaptive_rag.graphs.policy import (
    TOKENS_CAP,
    CountRange,
    MethodConfig,
    Policy,
    RunContext,
    TraceModel,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.pos import content_flags, load_pos_tagger, load_sentence_splitter
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import Word, aggregate_words, bare_word, folded_word
from langchain_adaptive_rag.state import AdaptiveRAGState, RetrievedDoc, ScoredWord

__all__ = ["ETCConfig", "ETCPolicy", "create_etc_graph"]


@dataclass(frozen=True)
class ETCConfig(MethodConfig):
    """ETC settings (the ETC code's names in brackets)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "query_top_n": (1, 100_000, "words, more than any draft and question hold"),
        "query_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }

    theta: float = 1.3
    """Threshold ``θ`` on a word's score [``hallucination_threshold``]: 1.3 in the
    released config."""
    absolute: bool = False
    """Compare the score's magnitude ``|score|`` with ``θ`` [``thres_abs``], so a sharp
    fall of entropy fires too (off in the released config)."""
    query_top_n: int = 35
    """The query keeps the ``n`` most attended content words [``retrieve_keep_top_k``]:
    35 in the released config."""
    query_max_tokens: int = 64
    """Paper mode: the query is cut to its last this-many model tokens, as DRAGIN's
    retriever cuts it (the ETC code sends the whole query)."""
    attention_layer: int = -1
    """Decoder layer whose attention is read (the last, as in the code)."""
    mode: Literal["reference", "paper"] = "reference"
    """``reference`` (default): the ETC code (``generate.py``), exactly where it decides
    differently from the paper's equations; ``paper``: those equations. The differences:

    - Smoothing memory: ``M_{t-1}`` is the previous raw ``Δ²H`` (reference: the code
      stores ``Mt_1 = entropies_s2[...]`` after each step) or the previous smoothed ``M``
      (paper: ``M_t = alpha Δ²H_t + (1 - alpha) M_{t-1}`` as a recursion). When the weight is
      ``0/0`` the code's ``M`` is ``nan`` (no trigger); paper mode takes ``Δ²H_t``.
    - Query: the code's ``generate_retrieve_qry``: every triggering word's row summed,
      no word excluded, the whole query sent (reference); DRAGIN's QFS: the triggering
      words' texts excluded, the query cut to ``query_max_tokens`` tokens, the question
      when no word is left (paper).
    - Loop: each draft and each regeneration may use the whole ``generate_max_length``,
      the text so far is joined by spaces, and the run ends after a draft with no
      trigger once the prompt and draft pass ``generate_max_length`` tokens, when the
      text passes it, when it did not grow, or on an end-of-sequence token (reference:
      the code's ``inference``, which never stops at the answer marker); the package's
      shared budget and answer marker (paper).

    Parts of speech and sentences come from ``spacy_model`` as in DRAGIN."""
    spacy_model: str | None = "en_core_web_sm"
    """spaCy pipeline for sentences and content words (the code's ``en_core_web_sm``);
    ``None``: the rule-based sentencizer and the stop-word list."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("query_top_n", "query_max_tokens"):
            if getattr(self, name) < 1:
                msg = f"ETCConfig.{name} must be >= 1, got {getattr(self, name)}."
                raise AdaptiveRAGError(msg)


class QueryColumn(TypedDict):
    """A word a query may take: from the question, the text so far or the draft."""

    text: str
    """The word, stripped."""
    region: Literal["question", "text", "draft"]
    """Where it stands."""
    word: int
    """Its index among the draft's words (``-1`` outside the draft)."""


class ETCState(AdaptiveRAGState):
    """The graph state of ETC: the shared channels and its own."""

    draft_words: NotRequired[list[ScoredWord]]
    """The draft's words with ETC's score (``content``: its content flag)."""
    draft_sentences: NotRequired[list[list[int]]]
    """Word ranges ``[start, end)`` of the draft's sentences."""
    draft_trend: NotRequired[list[list[float]]]
    """Per draft word: ``H``, ``ΔH``, ``Δ²H``, ``M`` and its largest attention."""
    draft_eos: NotRequired[bool]
    """Whether the draft ended on an end-of-sequence token."""
    draft_prompt_tokens: NotRequired[int]
    """Tokens of the draft's prompt."""
    query_columns: NotRequired[list[QueryColumn]]
    """The words a query may take (question, text so far, draft), in text order."""
    query_rows: NotRequired[list[list[float]]]
    """Each draft word's attention to each query column."""


def _own(state: AdaptiveRAGState) -> ETCState:
    return cast(ETCState, state)


class ETCPolicy(Policy):
    """The entropy trend decides when, the triggering words' attention decides what."""

    name = "etc"
    display_name = "ETC"
    config_class = ETCConfig
    threshold_field = "theta"
    threshold_signal = "rind"
    threshold_direction = "above"
    signal_names: ClassVar[dict[str, tuple[str, str]]] = {"rind": ("ETC score M·a", "ETC")}
    decision_rule = (
        "ETC retrieves at the first word whose smoothed second difference of entropy, "
        "times its sentence-normalised attention, passes θ"
    )
    colour = "#f7b6d2"
    needs_attention = True
    config: ETCConfig
    state_schema = ETCState

    def fresh_channels(self) -> dict[str, object]:
        """ETC's own channels at a run's start."""
        return {
            "draft_words": [],
            "draft_sentences": [],
            "draft_trend": [],
            "query_columns": [],
            "query_rows": [],
        }

    @property
    def attention_layer(self) -> int:
        """The layer whose attention is read (``attention_layer``)."""
        return self.config.attention_layer

    @property
    def _reference(self) -> bool:
        return self.config.mode == "reference"

    # -- 1. draft ------------------------------------------------------------------------

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate one line; score each word by its entropy trend and attention."""
        prompt, trace = self._generate_line(ctx, state, (), state.get("text", ""), attention=True)
        pieces = _pieces_with_stop(trace)
        words = etc_words(pieces)
        text = "".join(pieces)
        splitter = load_sentence_splitter(self.config.spacy_model)
        spans = etc_sentence_spans(splitter(text), pieces, words)
        tagger = load_pos_tagger(self.config.spacy_model)
        content = content_flags(["".join(pieces[w.start : w.end]) for w in words], text, tagger)
        entropy = aggregate_words(trace.entropies, words, "max") if words else np.zeros(0)
        first, second = entropy_differences(entropy, content)
        trend = smoothed_trend(second, "raw" if self._reference else "smoothed")
        rows = _rows(trace)
        attention = max_attention_to_draft(rows, words)
        scores = etc_scores(attention, trend, spans)
        columns, query_rows = self._query_columns(ctx, state, trace, rows, words)
        return {
            "draft": trace.text,
            "draft_ended": self.answer_ended(ctx, trace),
            "draft_eos": _ended_on_eos(trace),
            "draft_prompt_tokens": trace.num_prompt_tokens,
            "draft_tokens": list(trace.tokens),
            "draft_logprobs": [float(x) for x in trace.logprobs],
            "draft_entropies": [float(x) for x in trace.entropies],
            "draft_words": [
                {"start": w.start, "end": w.end, "text": w.text, "score": float(s), "content": c}
                for w, s, c in zip(words, scores, content, strict=True)
            ],
            "draft_sentences": [list(s) for s in spans],
            "draft_trend": [
                [float(v) for v in values]
                for values in zip(entropy, first, second, trend, attention, strict=True)
            ],
            "query_columns": columns,
            "query_rows": query_rows,
            "query_inputs": {"context": prompt + text},
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def _generate_line(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        docs: Sequence[RetrievedDoc],
        text: str,
        *,
        attention: bool = False,
    ) -> tuple[str, GenerationTrace]:
        """One line from ``text`` with ``docs``.

        Reference mode gives each call the whole ``generate_max_length`` (as each call of
        the code); paper mode what is left of it.
        """
        prompt = build_prompt(ctx.prompts, state["question"], text, docs, state.get("history", []))
        budget = (
            self.config.generate_max_length if self._reference else max(1, self.remaining(state))
        )
        with token_stream(prompt, self.name) as sink:
            trace = ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, budget, ctx.prompts.stop),
                capture=CaptureOptions(
                    attention=attention, attention_layer=self.config.attention_layer
                ),
                on_token=sink,
            )[0]
        return prompt, trace

    def _query_columns(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        trace: GenerationTrace,
        rows: np.ndarray,
        words: list[Word],
    ) -> tuple[list[QueryColumn], list[list[float]]]:
        """The words a query may take and each draft word's attention to them.

        The question's and the text's words are read from the prompt's columns when the
        model can name its prompt tokens (a local model's tokenizer); the draft's own
        columns are divided by the row's total, as the code divides them in place.
        """
        prompt_length = rows.shape[1] - rows.shape[0]
        columns: list[QueryColumn] = []
        spans: list[tuple[int, int]] = []
        for region, region_words in _prompt_regions(ctx, state, trace):
            for word in region_words:
                columns.append({"text": word.text, "region": region, "word": -1})
                spans.append((word.start, word.end))
        for index, word in enumerate(words):
            columns.append({"text": word.text, "region": "draft", "word": index})
            spans.append((prompt_length + word.start, prompt_length + word.end))
        draft = [c["region"] == "draft" for c in columns]
        weights = attention_to_columns(rows, words, spans, draft)
        return columns, [[float(v) for v in row] for row in weights]

    # -- 2. score_need -------------------------------------------------------------------

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The first word over θ triggers retrieval; the text before it is kept."""
        own = _own(state)
        words = own.get("draft_words", [])
        tokens = state.get("draft_tokens", [])
        spans = [(int(s[0]), int(s[1])) for s in own.get("draft_sentences", [])]
        scores = np.array([float(w["score"]) for w in words], dtype=np.float64)
        trigger = etc_trigger(scores, spans, self.config.theta, absolute=self.config.absolute)
        step = state.get("step", 0) + 1
        if trigger is None:
            finite = scores[np.isfinite(scores)]
            decision = retrieval_decision(
                step,
                retrieve=False,
                score=float(finite.max()) if finite.size else None,
                threshold=self.config.theta,
            )
            accepted = (
                self._accept_draft_reference(ctx, state)
                if self._reference
                else self.accept_draft(ctx, state)
            )
            return self.without_retrieval(accepted, step, decision)
        word = words[trigger.word]
        cut = int(word["start"])
        prefix = "".join(tokens[:cut])
        update: dict[str, object] = {}
        if not self._reference and cut:
            update = self.accept(ctx, state, prefix, cut)
        finished = bool(update.get("finished"))
        hot = [words[i] for i in trigger.hot]
        decision = retrieval_decision(
            step,
            retrieve=not finished,
            score=float(word["score"]),
            threshold=self.config.theta,
            trigger_position=cut,
            trigger_word=bare_word(str(word["text"])) or str(word["text"]),
            trigger_words=[w for h in hot if (w := bare_word(str(h["text"])))],
            note="the text before the trigger ended the run" if finished else "",
        )
        inputs = dict(state.get("query_inputs", {}))
        inputs.update({"hot": list(trigger.hot), "prefix": prefix})
        return self.with_retrieval(update, step, decision, inputs)

    def _accept_draft_reference(
        self, ctx: RunContext, state: AdaptiveRAGState
    ) -> dict[str, object]:
        """No trigger, as the code: the draft joins the text after a space.

        The run stops once the prompt and draft pass ``generate_max_length`` tokens (with
        a few-shot prompt, at once), on an end-of-sequence token, or when the text did not
        grow. A draft of at most one token (its stop or end token) is not joined: the code
        stops there.
        """
        own = _own(state)
        before = state.get("text", "")
        tokens = state.get("draft_tokens", [])
        eos = bool(own.get("draft_eos"))
        if len(tokens) + eos <= 1:
            return {"text": before, "last_accepted": "", "finished": True}
        text = _join(before, state.get("draft", "").strip())
        finished = (
            eos
            or int(own.get("draft_prompt_tokens", 0)) + len(tokens) + eos
            > self.config.generate_max_length
            or len(text) <= len(before)
            or state.get("step", 0) + 1 >= self.config.max_rounds
        )
        return {
            "text": text,
            "last_accepted": text[len(before) :],
            "answer_tokens": state.get("answer_tokens", 0) + len(tokens),
            "finished": finished,
        }

    # -- 3. formulate_query --------------------------------------------------------------

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The query: what the triggering words attend to most.

        The content words of the question and of the text before the trigger, the
        ``query_top_n`` with the largest summed attention from the triggering words'
        rows, in text order.
        """
        own = _own(state)
        inputs = state.get("query_inputs", {})
        hot = [int(i) for i in inputs.get("hot", [])]
        columns = own.get("query_columns", [])
        rows = np.asarray(own.get("query_rows", []), dtype=np.float64)
        trigger = hot[0] if hot else 0
        weights = rows[hot].sum(axis=0) if hot and rows.size else np.zeros(len(columns))
        candidates = [
            i for i, c in enumerate(columns) if c["region"] != "draft" or c["word"] < trigger
        ]
        tagger = load_pos_tagger(self.config.spacy_model)
        context = str(inputs.get("context", ""))
        content = content_flags([columns[i]["text"] for i in candidates], context, tagger)
        if not self._reference:  # DRAGIN's QFS: the triggering words' texts are not asked
            words = own.get("draft_words", [])
            excluded = {folded_word(str(words[i]["text"])) for i in hot if i < len(words)}
            content = [
                flag and folded_word(columns[i]["text"]) not in excluded
                for i, flag in zip(candidates, content, strict=True)
            ]
        chosen = select_query_words(weights, candidates, content, self.config.query_top_n)
        query = " ".join(columns[i]["text"] for i in chosen)
        if self._reference:
            return query
        query = self.cut_query(ctx, query, self.config.query_max_tokens)
        return query or self.retrieval_question(state)

    # -- 5. continue_generation ----------------------------------------------------------

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Regenerate from the text before the trigger; keep the first new sentence."""
        if not self._reference:
            return self.continue_first_sentence(ctx, state)
        before = state.get("text", "")
        kept = before + str(state.get("query_inputs", {}).get("prefix", ""))
        _, trace = self._generate_line(ctx, state, state.get("docs", []), kept)
        sentences = load_sentence_splitter(self.config.spacy_model)(trace.text)
        sentence = sentences[0] if sentences else ""
        text = _join(kept, sentence)
        whole = len(sentence) >= len(trace.text.strip())
        finished = (
            (_ended_on_eos(trace) and whole)
            or reference_token_count(ctx, text) > self.config.generate_max_length
            or len(text) <= len(before)
            or state.get("step", 0) + 1 >= self.config.max_rounds
        )
        return {
            "text": text,
            "last_accepted": text[len(before) :] if text.startswith(before) else text,
            "answer_tokens": state.get("answer_tokens", 0) + trace.num_tokens,
            "finished": finished,
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    # -- 6. finalize ---------------------------------------------------------------------

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Extract (or force) the answer.

        Reference mode first cuts the text where the code's evaluation does
        (``Question:``, ``#10000000``, ``Note:``).
        """
        if self._reference:
            state = {**state, "text": cut_for_evaluation(state.get("text", ""))}
        return super().finalize(ctx, state)


def _rows(trace: GenerationTrace) -> np.ndarray:
    """The draft's captured attention rows ``(T, P + T)``."""
    if trace.attention is None:
        msg = (
            "ETC needs the draft's attention rows; the model returned none. Expected a "
            "model that captures attention (ChatTransformers)."
        )
        raise AdaptiveRAGError(msg)
    return np.asarray(trace.attention, dtype=np.float64)


def _pieces_with_stop(trace: GenerationTrace) -> list[str]:
    """The draft's token pieces with the stop string given back to its last token.

    The code keeps the stop string's token (the newline) in the draft: it is a word of
    its own, with its entropy and attention row.
    """
    pieces = list(trace.tokens)
    if pieces and trace.stop_string:
        pieces[-1] += trace.stop_string
    return pieces


def _ended_on_eos(trace: GenerationTrace) -> bool:
    return trace.finish_reason == "stop" and trace.stop_string is None


def _prompt_regions(
    ctx: RunContext, state: AdaptiveRAGState, trace: GenerationTrace
) -> list[tuple[Literal["question", "text"], list[Word]]]:
    """The words of the question and of the text so far among the prompt's tokens.

    Each region's tokens are those overlapping its characters in the decoded prompt (the
    question's last occurrence before the text, the text at the end); ``[]`` when the
    model cannot decode its prompt tokens.
    """
    tokenizer = getattr(ctx.model, "hf_tokenizer", None)
    if tokenizer is None or not trace.num_prompt_tokens:
        return []
    pieces = token_pieces(tokenizer, [int(i) for i in trace.prompt_ids])
    ends = np.cumsum([len(p) for p in pieces])
    starts = ends - np.array([len(p) for p in pieces])
    decoded = "".join(pieces)
    text = state.get("text", "")
    text_start = len(decoded) - len(text) if text and decoded.endswith(text) else len(decoded)
    question = state["question"]
    question_start = decoded.rfind(question, 0, text_start)
    regions: list[tuple[Literal["question", "text"], list[Word]]] = []
    bounds: tuple[tuple[Literal["question", "text"], int, int], ...] = (
        ("question", question_start, question_start + len(question)),
        ("text", text_start, len(decoded)),
    )
    for region, first, last in bounds:
        if first < 0 or last <= first:
            continue
        inside = [k for k in range(len(pieces)) if ends[k] > first and starts[k] < last]
        if inside:
            offset = inside[0]
            local = etc_words(pieces[offset : inside[-1] + 1])
            regions.append(
                (region, [Word(w.start + offset, w.end + offset, w.text) for w in local])
            )
    return regions


def _join(text: str, addition: str) -> str:
    """The code's ``join_if_nonempty``: the non-empty of the two, joined by a space."""
    return " ".join(part for part in (text, addition) if part)


def create_etc_graph(
    model: TraceModel,
    retriever: Retriever,
    *,
    config: ETCConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """ETC graph: the entropy trend decides when to retrieve, attention what.

    The model must give attention rows over its prompt and draft: [`ChatTransformers`][]
    on any kernel does; a served model is refused when the graph is built.

    Args:
        model: [`ChatTransformers`][] or another model that captures attention.
        retriever: Any LangChain retriever.
        config: ETC settings (``theta``, ``query_top_n``, ``mode``, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.
    """
    return build_adaptive_rag_graph(
        ETCPolicy(config or ETCConfig()),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
