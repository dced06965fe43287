"""DRAGIN: dynamic retrieval from the model's real-time information needs (Su et al., 2024).

Algorithm, one round:

1. draft: generate a look-ahead continuation without documents and score every word with
   RIND, ``s(w) = |S| * a_w / sum_{u in S} a_u * H_w * content(w)`` per sentence S, where
   ``H_w`` is the word's mean token entropy and ``a_w`` the attention its tokens receive
   from later tokens (``attention_mode="reference"``: a separate forward pass over the
   draft alone, max over rows then mean over heads, as the DRAGIN code;
   ``"inline"``: the rows captured while generating, head-averaged, max over later rows);
2. score_need: the first sentence with a word of ``s(w) > theta`` triggers retrieval; the
   text before it is accepted (``truncate_at="token"``: up to the triggering word);
3. formulate_query (QFS): one forward pass over question + answer so far + the
   triggering word; the attention rows that predict the trigger's tokens, averaged, weigh
   every earlier word; the ``top_n`` content words (trigger words excluded) in their
   original order, cut to the last ``query_max_tokens`` model tokens, form the query;
4. retrieve the top documents; 5. continue_generation: regenerate with them and accept
   the first new sentence (documents are not carried into the next draft);
6. repeat until the answer is given or the budget is spent; finalize extracts the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol, cast

import numpy as np
from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
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
from langchain_adaptive_rag.graphs.query_formulation import context_before_trigger, context_query
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import (
    RINDTrigger,
    Word,
    aggregate_words,
    attention_received,
    bare_word,
    folded_word,
    is_content_word,
    merge_tokens_into_words,
    qfs_select,
    reference_qfs_weights,
    reference_sentence_spans,
    rind_scores,
    rind_trigger,
    word_sentences,
)
from langchain_adaptive_rag.state import AdaptiveRAGState, QueryInput, RetrievedDoc, ScoredWord
from langchain_adaptive_rag.token_signals import AttentionMatrix

__all__ = [
    "EVALUATION_CUTS",
    "AttentionModel",
    "DRAGINConfig",
    "DRAGINPolicy",
    "create_dragin_graph",
    "cut_for_evaluation",
    "reference_token_count",
]

EVALUATION_CUTS = ("Question:", "#10000000", "Note:")
"""Where the DRAGIN code's evaluation cuts a prediction before reading its answer (the
first occurrence of each, unless at the very start): its unstopped drafts run on into the
next exemplar."""


class AttentionModel(TraceModel, Protocol):
    """A trace model that can also run one forward pass and return a layer's attention."""

    def forward_attention(self, text: str | list[int], *, layer: int = -1) -> AttentionMatrix:
        """Per-head attention of one layer over ``text``; see [`ChatTransformers`][]."""
        ...


@dataclass(frozen=True)
class DRAGINConfig(MethodConfig):
    """DRAGIN settings (the DRAGIN code's names in brackets)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "query_top_n": (1, 100_000, "words, more than any draft and question hold"),
        "query_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }

    theta: float = 1.0
    """RIND threshold ``theta`` [``hallucination_threshold``]. The DRAGIN repository's
    current configs for Llama-2-7b-chat: 2WikiMultihopQA 1.0, HotpotQA 1.3, IIRC 1.3,
    StrategyQA 0.75; Llama-2-13b-chat: 0.9, 1.2, 1.25, 1.0; Vicuna-13b-v1.5: 1.2, 1.2,
    1.3, 1.5 (its README's example, 1.2 with top-k 40, is an older config)."""
    query_top_n: int = 25
    """QFS keeps the ``n`` most attended content words [``retrieve_keep_top_k``]. Current
    configs: 25 (Llama-2-7b-chat 2WikiMultihopQA), 35 (its HotpotQA, IIRC, StrategyQA);
    25 or 35 for the 13B models."""
    query_max_tokens: int = 64
    """The query is cut to its last this-many model tokens (the DRAGIN code's retriever
    argument ``max_query_length=64``): in reference mode as that code does, tokenized
    without special tokens, the last tokens decoded (a word may be cut); in paper mode, and
    for a model without a tokenizer, whole words are kept."""
    query_formulation: Literal["qfs", "last_sentence", "last_n_tokens", "full_context"] = "qfs"
    """What a retrieval asks [``query_formulation``], the DRAGIN paper's Table 6: ``qfs``
    (QFS, the code's ``real_words``), or a query from the context before the triggering
    sentence (question, accepted text, the draft's earlier sentences; see
    [`ContextQuery`][langchain_adaptive_rag.graphs.query_formulation.ContextQuery]): its last
    sentence, its last ``query_top_n`` tokens (the code's ``retrieve_keep_top_k`` counts
    both), or all of it. RIND decides when, whichever query is asked."""
    attention_mode: Literal["reference", "inline"] = "reference"
    """``reference`` (default): a separate forward pass over the draft, as the DRAGIN code,
    whose thresholds were tuned under it; ``inline``: the rows captured while generating
    (in context, no extra pass for RIND)."""
    attention_layer: int = -1
    """Decoder layer whose attention is read (the last, as in the paper)."""
    truncate_at: Literal["sentence", "token"] = "sentence"
    """Accept the draft up to the triggering sentence (the DRAGIN code) or up to the
    triggering word (the paper's description)."""
    mode: Literal["reference", "paper"] = "reference"
    """``reference`` (default): the DRAGIN code, exactly where it decides differently from
    the paper's description; ``paper``: that description. The differences:

    - Words: a new word starts at a space-marked token, at the newline token or after an
      end-of-sequence token, so the token after a newline joins the newline's word
      (reference); the token after a newline also starts a word (paper).
    - RIND's content filter: every word is compared with ``theta`` and a sentence with any
      word over it triggers; only then are the non-content words among the triggering
      words dropped, by part of speech (reference: the sentence still triggers when none
      is left, and QFS then takes the candidates in text order); or non-content words
      score 0 before the comparison (paper).
    - QFS text: ``question + " " + text + " " + earlier sentences + " " +`` the whole
      triggering sentence's words joined by spaces (reference), or the question, the
      accepted text and the first triggering word, stripped and joined (paper).
    - QFS weights: for each of the triggering sentence's triggering words, the rows that
      predict its tokens, each cut to the columns before the word and renormalised, summed
      and divided by its token count; averaged over the triggering words (reference); or
      the raw rows of the first triggering word, averaged (paper).
    - QFS exclusion: the triggering words by position (reference; the same text elsewhere
      stays eligible), or every word with a triggering word's text (paper); content words
      by part of speech over the whole text (reference) or the stop-word list (paper).
    - An empty query is sent as it is, and nothing is retrieved (reference), or replaced
      by the question (paper).

    Parts of speech come from ``spacy_model`` when it is installed; otherwise spaCy's
    English stop-word list stands in (see ``langchain_adaptive_rag.graphs.pos``)."""
    spacy_model: str | None = "en_core_web_sm"
    """spaCy pipeline whose part-of-speech tags pick content words in reference mode (the
    DRAGIN code's ``en_core_web_sm``), used when installed; ``None``: the stop-word list."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.theta < 0:
            msg = f"DRAGINConfig.theta must be >= 0, got {self.theta}."
            raise AdaptiveRAGError(msg)
        for name in ("query_top_n", "query_max_tokens"):
            if getattr(self, name) < 1:
                msg = f"DRAGINConfig.{name} must be >= 1, got {getattr(self, name)}."
                raise AdaptiveRAGError(msg)


class DRAGINState(AdaptiveRAGState):
    """The graph state of DRAGIN: the shared channels and its own."""

    draft_attention: NotRequired[list[float]]
    """Attention each draft token received (DRAGIN's RIND attention, before word sums)."""
    draft_words: NotRequired[list[ScoredWord]]
    """Words of the draft with a method's score (DRAGIN: RIND ``s(w)``)."""
    draft_sentences: NotRequired[list[list[int]]]
    """Word ranges ``[start, end)`` of the draft's sentences."""
    draft_sentence_texts: NotRequired[list[str]]
    """The draft's sentences as text, where a method splits them so (DRAGIN's reference
    mode: spaCy's sentences, stripped)."""


def _own(state: AdaptiveRAGState) -> DRAGINState:
    """``state`` read with DRAGIN's own channels."""
    return cast(DRAGINState, state)


class DRAGINPolicy(Policy):
    """RIND decides when, QFS decides what."""

    name = "dragin"
    display_name = "DRAGIN"
    config_class = DRAGINConfig
    threshold_field = "theta"
    threshold_signal = "rind"
    threshold_direction = "above"
    decision_rule = (
        "DRAGIN retrieves at the first sentence that has a word with RIND s(w) over θ; "
        "the trigger is that sentence's first such word, and every word over θ there is "
        "outlined"
    )
    colour = "#d62728"
    needs_attention = True
    config: DRAGINConfig
    state_schema = DRAGINState

    def fresh_channels(self) -> dict[str, object]:
        """DRAGIN's own channels at a run's start."""
        return {"draft_words": [], "draft_sentences": [], "draft_sentence_texts": []}

    @property
    def attention_layer(self) -> int:
        """The layer RIND's and QFS's attention is read from (``attention_layer``)."""
        return self.config.attention_layer

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate a look-ahead and score each of its words with RIND."""
        if self.config.mode == "reference":
            return self._reference_draft(ctx, state)
        trace = self.generate(ctx, state, (), attention=self._inline)
        tokens = list(trace.tokens)
        words = merge_tokens_into_words(tokens)
        sentences = word_sentences(words, tokens)
        content = [is_content_word(w.text) for w in words]
        return self._scored_draft(ctx, state, trace, words, sentences, content, content, [])

    def _reference_draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The DRAGIN code's draft, its sentences and its content words.

        The whole budget, no stop string, its prompt spacing; spaCy's sentences, every
        word scored and content words chosen by part of speech afterwards (the answer's
        sentence is scored too: the marker only ends the loop).
        """
        trace = self._generate_unstopped(ctx, state, (), "", attention=self._inline)
        words = merge_tokens_into_words(list(trace.tokens), split_after_newline=False)
        sentence_texts = load_sentence_splitter(self.config.spacy_model)(trace.text)
        sentences = reference_sentence_spans(sentence_texts, [w.text for w in words])
        tagger = load_pos_tagger(self.config.spacy_model)
        content = [False] * len(words)
        for (start, end), text in zip(sentences, sentence_texts, strict=False):
            texts = [w.text for w in words[start:end]]
            content[start:end] = content_flags(texts, text, tagger)
        scored = [True] * len(words)  # filtered by content after the trigger is found
        return self._scored_draft(
            ctx, state, trace, words, sentences, scored, content, sentence_texts
        )

    @property
    def _inline(self) -> bool:
        """Whether attention is read during generation (``attention_mode="inline"``)."""
        return self.config.attention_mode == "inline"

    def _scored_draft(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        trace: GenerationTrace,
        words: list[Word],
        sentences: list[tuple[int, int]],
        scored: list[bool],
        content: list[bool],
        sentence_texts: list[str],
    ) -> dict[str, object]:
        """The draft's update: RIND ``s(w)`` of each word (``scored`` ones; others 0)."""
        received = self._attention_received(ctx, trace)
        scores = rind_scores(
            aggregate_words(trace.entropies, words, "mean") if words else np.zeros(0),
            aggregate_words(received, words, "sum") if words else np.zeros(0),
            scored,
            sentences,
        )
        return {
            "draft": trace.text,
            "draft_ended": self.answer_ended(ctx, trace),
            "draft_tokens": list(trace.tokens),
            "draft_logprobs": [float(x) for x in trace.logprobs],
            "draft_entropies": [float(x) for x in trace.entropies],
            "draft_attention": [float(x) for x in received],
            "draft_words": [
                {"start": w.start, "end": w.end, "text": w.text, "score": float(s), "content": c}
                for w, s, c in zip(words, scores, content, strict=True)
            ],
            "draft_sentences": [list(s) for s in sentences],
            "draft_sentence_texts": sentence_texts,
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def _attention_received(self, ctx: RunContext, trace: GenerationTrace) -> np.ndarray:
        """Attention each draft token received from the later ones (RIND's ``a``)."""
        if self._inline and trace.attention is not None:
            start = trace.num_prompt_tokens
            block = trace.attention[:, start : start + trace.num_tokens]
            return attention_received(block, "later_rows")
        if trace.num_tokens:
            matrix = self._model(ctx).forward_attention(
                [int(i) for i in trace.token_ids], layer=self.config.attention_layer
            )
            return attention_received(matrix.weights, "all_rows_head_mean")
        return np.zeros(0)

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Find the first sentence whose RIND exceeds theta; accept the text before it."""
        words = _own(state).get("draft_words", [])
        tokens = state.get("draft_tokens", [])
        sentences = [(int(s[0]), int(s[1])) for s in _own(state).get("draft_sentences", [])]
        scores = np.array([float(w["score"]) for w in words])
        trigger = rind_trigger(scores, sentences, self.config.theta)
        step = state.get("step", 0) + 1
        if trigger is None:
            decision = retrieval_decision(
                step,
                retrieve=False,
                score=float(scores.max()) if scores.size else None,
                threshold=self.config.theta,
            )
            return self.without_retrieval(self._accept_whole(ctx, state), step, decision)
        if self.config.mode == "reference":
            return self._reference_retrieval(ctx, state, trigger, sentences, step)
        sentence_start = int(words[trigger.sentence[0]]["start"])
        trigger_start = int(words[trigger.words[0]]["start"])
        cut = sentence_start if self.config.truncate_at == "sentence" else trigger_start
        update = self.accept(ctx, state, "".join(tokens[:cut]), cut) if cut else {}
        earlier = "".join(tokens[:sentence_start])
        hits = list(trigger.words)  # the non-content words were scored 0
        return self._retrieval(state, trigger, hits, cut, earlier, update, step)

    def _accept_whole(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """No trigger: the draft joins the text (the code: ``text.strip() + " " + draft``)."""
        if self.config.mode == "paper":
            return self.accept_draft(ctx, state)
        text = f"{state.get('text', '').strip()} {state.get('draft', '').strip()}"
        return self._accept_reference(ctx, state, text, len(state.get("draft_tokens", [])))

    def _reference_retrieval(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        trigger: RINDTrigger,
        sentences: list[tuple[int, int]],
        step: int,
    ) -> dict[str, object]:
        """The DRAGIN code's retrieval for the triggering sentence.

        The triggering words are the sentence's content words over theta; the text
        stays as it is until the regenerated sentence joins it, after the sentences
        before the trigger.
        """
        words = _own(state).get("draft_words", [])
        hits = [i for i in trigger.words if bool(words[i].get("content", True))]
        index = sentences.index(trigger.sentence)
        earlier = " ".join(_own(state).get("draft_sentence_texts", [])[:index])
        sentence_start = int(words[trigger.sentence[0]]["start"])
        trigger_start = int(words[trigger.words[0]]["start"])
        cut = sentence_start if self.config.truncate_at == "sentence" else trigger_start
        return self._retrieval(state, trigger, hits, cut, earlier, {}, step)

    def _retrieval(
        self,
        state: AdaptiveRAGState,
        trigger: RINDTrigger,
        hits: list[int],
        cut: int,
        earlier: str,
        update: dict[str, object],
        step: int,
    ) -> dict[str, object]:
        """Retrieve for the triggering sentence (unless the text before it ended the run)."""
        words = _own(state).get("draft_words", [])
        tokens = state.get("draft_tokens", [])
        trigger_start = int(words[trigger.words[0]]["start"])
        finished = bool(update.get("finished"))
        # the explanation names the trigger itself: the sentence's first triggering word
        # (reference: the first content word over theta), its own s(w), words bare
        shown = next((i for i in hits if bare_word(str(words[i]["text"]))), trigger.words[0])
        decision = retrieval_decision(
            step,
            retrieve=not finished,
            score=float(words[shown]["score"]),
            threshold=self.config.theta,
            trigger_position=int(words[shown]["start"]),
            trigger_word=bare_word(str(words[shown]["text"])) or str(words[shown]["text"]),
            trigger_words=[w for i in hits if (w := bare_word(str(words[i]["text"])))],
            note="the text before the trigger ended the run" if finished else "",
        )
        query_inputs: dict[str, QueryInput] = {
            "trigger": str(words[trigger.words[0]]["text"]),
            "trigger_words": [str(words[i]["text"]) for i in hits],
            "prefix": "".join(tokens[cut:trigger_start]),
            "earlier": earlier,
            "text_before": state.get("text", ""),
            "sentence_words": [str(words[i]["text"]) for i in range(*trigger.sentence)],
            "hit_offsets": [i - trigger.sentence[0] for i in hits],
        }
        return self.with_retrieval(update, step, decision, query_inputs)

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """QFS: the content words the triggering words attend to most.

        With another ``query_formulation``, that query of the context before the trigger
        (cut to ``query_max_tokens`` as every query).
        """
        if self.config.query_formulation != "qfs":
            return self._context_query(ctx, state)
        if self.config.mode == "reference":
            return self._reference_query(ctx, state)
        inputs = state.get("query_inputs", {})
        trigger_word = str(inputs.get("trigger", ""))
        excluded = {folded_word(str(w)) for w in inputs.get("trigger_words", [])}
        context = " ".join(
            part.strip()
            for part in (
                self.retrieval_question(state),
                state.get("text", ""),
                str(inputs.get("prefix", "")),
            )
            if part.strip()
        )
        matrix = self._model(ctx).forward_attention(
            f"{context} {trigger_word}", layer=self.config.attention_layer
        )
        words = merge_tokens_into_words(matrix.tokens)
        if len(words) < 2:
            return self.retrieval_question(state)
        target = words[-1]
        rows = matrix.mean[max(target.start - 1, 0) : max(target.end - 1, 1)].mean(axis=0)
        earlier = words[:-1]
        weights = aggregate_words(rows[: target.start], earlier, "sum")
        content = [is_content_word(w.text) for w in earlier]
        exclude = {i for i, w in enumerate(earlier) if folded_word(w.text) in excluded}
        chosen = qfs_select(weights, content, exclude, self.config.query_top_n)
        return self._truncate([earlier[i] for i in chosen]) or self.retrieval_question(state)

    def _context_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The configured query of the question, accepted text and draft before the trigger."""
        inputs = state.get("query_inputs", {})
        reference = self.config.mode == "reference"
        pending = str(inputs.get("earlier" if reference else "prefix", ""))
        context = context_before_trigger(
            self.retrieval_question(state), state.get("text", ""), pending
        )
        query = context_query(
            self.config.query_formulation,  # type: ignore[arg-type]
            context,
            ctx,
            last_n=self.config.query_top_n,
            reference=reference,
            spacy_model=self.config.spacy_model,
        )
        return self.cut_query(ctx, query, self.config.query_max_tokens)

    def _reference_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """QFS as the DRAGIN code.

        The whole triggering sentence in context, renormalised rows of every triggering
        word, exclusion by position, no fallback to the question.
        """
        inputs = state.get("query_inputs", {})
        sentence = [str(w) for w in inputs.get("sentence_words", [])]
        offsets = [int(i) for i in inputs.get("hit_offsets", [])]
        text = str(inputs.get("text_before", ""))
        earlier = str(inputs.get("earlier", ""))
        context = f"{self.retrieval_question(state)} {text} {earlier} {' '.join(sentence)}"
        matrix = self._model(ctx).forward_attention(context, layer=self.config.attention_layer)
        pieces = list(matrix.tokens)
        bos = [1] if len(pieces) > 1 and pieces[0] == "" else []  # a special first token
        words = merge_tokens_into_words(pieces, boundaries=bos, split_after_newline=False)
        first = len(words) - len(sentence)  # the sentence's words end the text
        targets = [first + i for i in offsets if 0 <= first + i < len(words)]
        weights = reference_qfs_weights(matrix.mean, words, targets)
        tagger = load_pos_tagger(self.config.spacy_model)
        content = content_flags([w.text for w in words], context, tagger)
        chosen = qfs_select(weights, content, set(targets), self.config.query_top_n)
        if getattr(ctx.model, "hf_tokenizer", None) is None:  # no tokenizer: whole words
            return self._truncate([words[i] for i in chosen])
        query = " ".join(words[i].text for i in chosen)
        return self.cut_query(ctx, query, self.config.query_max_tokens)  # the retriever's cut

    def _truncate(self, chosen: list[Word]) -> str:
        """The chosen words joined, cut to the last ``query_max_tokens`` model tokens."""
        kept: list[str] = []
        budget = self.config.query_max_tokens
        for word in reversed(chosen):
            size = word.end - word.start
            if size > budget:
                break
            budget -= size
            kept.append(word.text)
        return " ".join(reversed(kept))

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Regenerate with the documents and accept the first new sentence."""
        if self.config.mode == "paper":
            return self.continue_first_sentence(ctx, state)
        # the code: the sentences before the trigger follow the text in the prompt, the
        # first spaCy sentence of the unstopped continuation joins them
        earlier = str(state.get("query_inputs", {}).get("earlier", ""))
        trace = self._generate_unstopped(ctx, state, state.get("docs", []), earlier.strip())
        sentences = load_sentence_splitter(self.config.spacy_model)(trace.text)
        pieces = (state.get("text", "").strip(), earlier.strip(), sentences[0] if sentences else "")
        update = self._accept_reference(ctx, state, " ".join(p for p in pieces if p), 0)
        update["counts"] = bump(state.get("counts"), **model_call(trace), rounds=1)
        return update

    def _generate_unstopped(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        docs: Sequence[RetrievedDoc],
        earlier: str,
        *,
        attention: bool = False,
    ) -> GenerationTrace:
        """The DRAGIN code's generation: ``generate_max_length`` new tokens, no stop string.

        Its prompt ends with ``" ".join`` of the non-empty of the case, the text so far
        (as it stands: a text begun by an accepted whole draft starts with a space) and
        ``earlier`` (the sentences kept before a trigger).
        """
        prompt = build_prompt(ctx.prompts, state["question"], "", docs, state.get("history", []))
        tail = " ".join(part for part in (state.get("text", ""), earlier) if part)
        prompt = f"{prompt} {tail}" if tail else prompt
        with token_stream(prompt, self.name) as sink:
            return ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, self.config.generate_max_length, ()),
                capture=CaptureOptions(attention=attention),
                on_token=sink,
            )[0]

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Extract (or force) the answer.

        Reference mode first cuts the text as the DRAGIN code's evaluation does
        ([`EVALUATION_CUTS`][]), so an answer the model went on to give to a made-up
        next question is not read.
        """
        if self.config.mode == "reference":
            state = {**state, "text": cut_for_evaluation(state.get("text", ""))}
        return super().finalize(ctx, state)

    def _accept_reference(
        self, ctx: RunContext, state: AdaptiveRAGState, text: str, new_tokens: int
    ) -> dict[str, object]:
        """Replace the text; over as the DRAGIN code's loop ends.

        The loop ends when the text's token count (the tokenizer's ``encode``, special
        tokens included) exceeds ``generate_max_length``, when the text did not grow, or
        when it contains the answer marker (case-sensitive, as the code).
        """
        before = state.get("text", "")
        finished = (
            reference_token_count(ctx, text) > self.config.generate_max_length
            or len(text) <= len(before)
            or ctx.prompts.answer_marker in text
            or state.get("step", 0) + 1 >= self.config.max_rounds
        )
        return {
            "text": text,
            "last_accepted": text[len(before) :] if text.startswith(before) else text,
            "answer_tokens": state.get("answer_tokens", 0) + new_tokens,
            "finished": finished,
        }

    @staticmethod
    def _model(ctx: RunContext) -> AttentionModel:
        model = ctx.model
        if not hasattr(model, "forward_attention"):
            msg = (
                f"DRAGIN needs a model with forward_attention (ChatTransformers); got "
                f"{type(model).__name__}."
            )
            raise AdaptiveRAGError(msg)
        return model  # type: ignore[return-value]


def cut_for_evaluation(text: str) -> str:
    """``text`` before the first of [`EVALUATION_CUTS`][] found after its start."""
    for word in EVALUATION_CUTS:
        position = text.find(word)
        if position > 0:
            text = text[:position]
    return text


def reference_token_count(ctx: RunContext, text: str) -> int:
    """Tokens of ``text`` as the DRAGIN code counts them: ``len(tokenizer.encode(text))``.

    Special tokens are included; a model without a tokenizer counts whitespace-separated
    words.
    """
    tokenizer = getattr(ctx.model, "hf_tokenizer", None)
    if tokenizer is None:
        return len(text.split())
    return len(tokenizer.encode(text))


def create_dragin_graph(
    model: AttentionModel,
    retriever: Retriever,
    *,
    config: DRAGINConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """DRAGIN graph: RIND decides when to retrieve, QFS what to retrieve.

    The model must give attention rows: [`ChatTransformers`][] on any kernel does (eager
    returns them; on sdpa or flash attention the captured layer's rows are recomputed).

    Args:
        model: [`ChatTransformers`][] (any attention kernel) or another attention model.
        retriever: Any LangChain retriever.
        config: DRAGIN settings (``theta``, ``query_top_n``, attention mode, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.
    """
    policy = DRAGINPolicy(config or DRAGINConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
