"""IRCoT: interleaving retrieval with chain-of-thought reasoning (Trivedi et al., ACL 2023).

Algorithm (the paper's retriever, then its reader):

1. retrieve ``K`` paragraphs with the question; they start the collection;
2. reason: generate the next chain-of-thought sentence from the question, every collected
   paragraph and the chain so far, keeping the first new sentence only;
3. stop when that sentence gives the answer ("So the answer is") or after
   ``max_steps`` reasoning steps;
4. otherwise retrieve ``K`` paragraphs with that sentence as the query, add the ones not
   collected yet (at most ``max_paragraphs`` in all) and go to 2;
5. read: answer the question over the collected paragraphs (``reader="cot"``: a fresh
   chain of thought; ``"direct"``: the answer alone; ``"none"``: the chain's own answer).

In graph terms: no look-ahead draft; ``score_need`` retrieves every round while steps are
left; ``formulate_query`` is the question, then the latest sentence; ``rerank`` adds the
new paragraphs to the collection; ``continue_generation`` keeps one sentence;
``finalize`` runs the reader. Unlike FS-RAG, which reads only the latest retrieval's
documents, every step reads the whole collection.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, cast

from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.fixed import RetrieveEveryRound
from langchain_adaptive_rag.graphs.policy import (
    GraphModel,
    MethodConfig,
    RunContext,
    bump,
    model_call,
)
from langchain_adaptive_rag.options import GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt, extract_answer, read_answer_as
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
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

    retrieve_topk: int = 4
    """Paragraphs per retrieval (``K``; the paper picks K from {2, 4, 6, 8} on dev data)."""
    max_steps: int = 8
    """Reasoning steps at most (the paper stops after 8)."""
    max_paragraphs: int = 15
    """Paragraphs collected at most (the paper: 15); later ones are not added."""
    reader: IRCoTReader = "cot"
    """The answer step (see [`IRCoTReader`][]); the paper chooses CoT or direct reading
    on dev data."""
    mode: Literal["reference", "paper"] = "reference"
    """How a query is made from a step: ``reference``, as the official code's retriever
    (``commaqa/inference/ircot.py``): the latest generated sentence that is not a
    reasoning sentence ("Thus ...", "So ...", an arithmetic step), else the question,
    with the wh-words and the auxiliaries "is" and "does" removed; ``paper``: the latest
    sentence (the question first) as written."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("max_steps", "max_paragraphs"):
            value = getattr(self, name)
            if value < 1:
                msg = f"IRCoTConfig.{name} must be >= 1, got {value}."
                raise AdaptiveRAGError(msg)


class IRCoTState(AdaptiveRAGState):
    """The graph state of IRCoT: the shared channels and its own."""

    kept_docs: NotRequired[list[RetrievedDoc]]
    """The paragraphs collected so far (at most ``max_paragraphs``)."""
    chain: NotRequired[list[str]]
    """The chain's sentences, one per step (the sources of its queries)."""


QUERY_STOP_WORDS = frozenset({"who", "what", "when", "where", "why", "which", "how", "does", "is"})
"""The words the official IRCoT retriever removes from every query (``remove_wh_words``)."""

_REASONING_STARTS = ("thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence")
_ARITHMETIC_STEP = re.compile(
    r"(.*)(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)(.*)"
)


def is_reasoning_sentence(sentence: str) -> bool:
    """Whether a chain sentence only reasons over earlier ones (no query source).

    As the official IRCoT code: a sentence that starts with "Thus", "So", "That is,",
    "Therefore" or "Hence" (any case), or that holds an addition or subtraction
    ``a + b = c``.
    """
    lowered = sentence.lower()
    return lowered.startswith(_REASONING_STARTS) or _ARITHMETIC_STEP.match(sentence) is not None


def without_question_words(query: str) -> str:
    """``query`` without its wh-words and the auxiliaries "is" and "does".

    Words are split on single spaces and compared stripped and lower-cased, as the
    official IRCoT retriever does, so "Who" goes and "born?" stays.
    """
    return " ".join(w for w in query.split(" ") if w.strip().lower() not in QUERY_STOP_WORDS)


def _own(state: AdaptiveRAGState) -> IRCoTState:
    """``state`` read with IRCoT's own channels."""
    return cast(IRCoTState, state)


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

        Returns:
            The whole collection as ``docs`` (and ``kept_docs``), and the retriever
            ranks of the paragraphs this retrieval added as ``rerank_order``.
        """
        collected = list(_own(state).get("kept_docs", []))
        known = {doc["id"] for doc in collected}
        added: list[int] = []
        for rank, doc in enumerate(state.get("docs", [])):
            if len(collected) >= self.config.max_paragraphs:
                break
            if doc["id"] not in known:
                collected.append(doc)
                known.add(doc["id"])
                added.append(rank)
        return {"docs": collected, "kept_docs": collected, "rerank_order": added}

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate over the collection and keep the first sentence; stop at ``max_steps``."""
        update = self.continue_first_sentence(ctx, state)
        sentence = str(update.get("last_accepted", "")).strip()
        if sentence:
            update["chain"] = [*_own(state).get("chain", []), sentence]
        step = state.get("step", 0) + 1
        update["step"] = step
        update["finished"] = bool(update["finished"]) or step >= self.config.max_steps
        return update

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Read the answer over the collected paragraphs (the configured reader).

        ``cot``: a fresh chain of thought over them; when it gives no answer, it is read on
        from the forced "So the answer is", with the paragraphs still in the prompt.
        ``direct``: the reader's text starts at that marker. ``none``: the chain's own
        answer, as every other method's.
        """
        if self.config.reader == "none":
            return super().finalize(ctx, state)
        collected: list[RetrievedDoc] = list(_own(state).get("kept_docs", []))
        counts = state.get("counts")
        text = ""
        if self.config.reader == "cot":
            trace = self._generate(ctx, state, collected, "", self.config.generate_max_length)
            text = trace.text
            counts = bump(counts, **model_call(trace))
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

    def _generate(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        collected: list[RetrievedDoc],
        text: str,
        budget: int,
    ) -> GenerationTrace:
        prompt = build_prompt(
            ctx.prompts, state["question"], text, collected, state.get("history", [])
        )
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
