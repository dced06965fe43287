r"""Agentic search: the model writes its queries between tags, the graph searches.

Search-o1, Search-R1, ZeroSearch, R1-Searcher, ReSearch and AutoRefine share one loop;
their tags, prompts, documents and answers are a
[`SearchProtocol`][langchain_adaptive_rag.graphs.search_protocol.SearchProtocol] each
(the presets: [`search_presets`][langchain_adaptive_rag.graphs.search_presets]).

Algorithm (one run):

1. turn: the model continues the prompt and the text so far until a stop string (the
   query's closing tag, and the answer's where the protocol stops there), the end of
   sequence, or its turn budget;
2. read the turn: an answer ends the run; a query (the text after the opening tag) is
   searched, unless it is empty, repeated, over the search limit or asked in the last
   turn, which the protocol answers with a message or by ending the run; a turn with
   neither ends the run, or gets the protocol's "invalid action" message;
3. search: retrieve ``retrieve_topk`` documents with the query; Search-o1's
   Reason-in-Documents step may condense them first;
4. insert the documents (or the message) between the result tags and go to 1, until the
   turn limit or the token budget;
5. read the answer as the protocol does (``\boxed{}``, the answer tags); with
   ``force_answer``, a run that gave none is asked for one.

In graph terms: ``draft`` is one turn, ``score_need`` reads it, ``formulate_query`` is the
query between the tags, ``rerank`` formats the documents (Reason-in-Documents),
``continue_generation`` inserts the result block and ``finalize`` reads the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from langgraph.config import get_stream_writer
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
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.reason_in_documents import (
    extract_final_information,
    previous_steps,
    reason_in_documents_prompt,
)
from langchain_adaptive_rag.graphs.search_presets import SEARCH_PROTOCOLS, SearchProtocolName
from langchain_adaptive_rag.graphs.search_protocol import (
    SearchProtocol,
    format_documents,
    read_answer,
    read_turn,
)
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, format_turns, read_answer_as
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = [
    "SearchAgentConfig",
    "SearchAgentPolicy",
    "SearchAgentState",
    "create_search_agent_graph",
]


@dataclass(frozen=True)
class SearchAgentConfig(MethodConfig):
    """Search-agent settings; ``None`` takes the protocol's own value."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "max_searches": (1, 1000, "searches, each one retrieval"),
        "max_turns": (1, 1000, "turns, each one LLM call"),
        "turn_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
        "reason_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }
    token_budgets: ClassVar[tuple[str, ...]] = ("turn_max_tokens", "reason_max_tokens")

    protocol: SearchProtocolName | SearchProtocol = "search_o1"
    """A preset's name (``"search_o1"``, ``"search_o1_fewshot"``, ``"search_r1"``,
    ``"zerosearch"``, ``"r1_searcher"``, ``"research"``, ``"autorefine"``) or a
    [`SearchProtocol`][langchain_adaptive_rag.graphs.search_protocol.SearchProtocol] of
    one's own tags."""
    generate_max_length: int = 1024
    """Tokens the turns may generate in all (the documents inserted do not count)."""
    max_searches: int | None = None
    """Searches a run may make (Search-o1's ``MAX_SEARCH_LIMIT``: 10 for multi-hop QA)."""
    max_turns: int | None = None
    """Turns a run may make (Search-R1's ``max_turns`` + 1: its last turn only answers);
    ``None`` and no limit in the protocol: ``max_rounds``."""
    turn_max_tokens: int | None = None
    """Tokens one turn may generate (Search-R1: 500, R1-Searcher: 512), capped by what is
    left of ``generate_max_length``."""
    reason_in_documents: bool | None = None
    """Condense the documents with Search-o1's Reason-in-Documents step before they are
    inserted (``None``: as the protocol says; on for Search-o1)."""
    reason_max_tokens: int = 512
    """Tokens the Reason-in-Documents step may generate."""
    force_answer: bool = False
    """When the run gave no answer the protocol reads, write the answer's opening tag
    after the text and generate up to ``forced_answer_tokens`` more (the package's
    addition; the official loops score such runs as unanswered)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.protocol, SearchProtocol) and self.protocol not in SEARCH_PROTOCOLS:
            msg = (
                f"SearchAgentConfig.protocol must be a preset's name or a SearchProtocol, got "
                f"{self.protocol!r}. Expected one of {sorted(SEARCH_PROTOCOLS)}, or "
                "SearchProtocol(...) (dataclasses.replace(SEARCH_R1, ...) for a variant)."
            )
            raise AdaptiveRAGError(msg)
        for name in ("max_searches", "max_turns", "turn_max_tokens", "reason_max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"SearchAgentConfig.{name} must be >= 1, got {value}."
                raise AdaptiveRAGError(msg)

    @property
    def search_protocol(self) -> SearchProtocol:
        """The protocol itself (a preset's, when ``protocol`` names one)."""
        if isinstance(self.protocol, SearchProtocol):
            return self.protocol
        return SEARCH_PROTOCOLS[self.protocol]

    @property
    def search_limit(self) -> int | None:
        """Searches a run may make: ``max_searches``, else the protocol's."""
        return (
            self.max_searches
            if self.max_searches is not None
            else self.search_protocol.max_searches
        )

    @property
    def turn_limit(self) -> int:
        """Turns a run may make: ``max_turns``, else the protocol's, else ``max_rounds``."""
        for limit in (self.max_turns, self.search_protocol.max_turns):
            if limit is not None:
                return limit
        return self.max_rounds

    @property
    def turn_budget(self) -> int:
        """Tokens one turn may generate: ``turn_max_tokens``, else the protocol's."""
        if self.turn_max_tokens is not None:
            return self.turn_max_tokens
        return self.search_protocol.turn_max_tokens

    @property
    def reasons_in_documents(self) -> bool:
        """Whether the Reason-in-Documents step runs."""
        if self.reason_in_documents is not None:
            return self.reason_in_documents
        return self.search_protocol.reason_in_documents


class SearchAgentState(AdaptiveRAGState):
    """The graph state of a search agent: the shared channels and its own."""

    turn_stop: NotRequired[str | None]
    """The stop string the latest turn ended at (``None``: end of sequence or budget)."""
    search_query: NotRequired[str]
    """The query the latest turn asked for, cleaned as the protocol sends it."""
    searches: NotRequired[list[str]]
    """The queries searched so far, in order."""
    insertion: NotRequired[str]
    """What goes after the latest turn: the result block, or the protocol's message."""


def _own(state: AdaptiveRAGState) -> SearchAgentState:
    """``state`` read with the search agent's own channels."""
    return cast(SearchAgentState, state)


def _announce(step: int, action: str, query: str | None, turn: str, note: str) -> None:
    """Stream what a turn led to as a ``search_turn`` custom event (inside a run).

    ``action`` is ``search``, ``answer``, ``message`` (the protocol's message instead of
    documents) or ``end``; ``turn`` is the text that led to it.
    """
    try:
        writer = get_stream_writer()
    except RuntimeError:  # called outside a graph run
        return
    event = {"event": "search_turn", "step": step, "action": action, "query": query}
    writer({**event, "turn": turn, "note": note})


class SearchAgentPolicy(Policy):
    """An agentic searcher: turns of generation, each ending at a query or the answer."""

    name = "search_agent"
    display_name = "Search agent"
    config_class = SearchAgentConfig
    decision_rule = "the model writes a query between the protocol's tags"
    colour = "#ff7f0e"
    trained_model = (
        "a model that writes the protocol's search tags: one trained on them (Search-R1, "
        "R1-Searcher, ...) or an instruct model prompted with them (Search-o1)"
    )
    config: SearchAgentConfig
    state_schema = SearchAgentState

    @property
    def protocol(self) -> SearchProtocol:
        """The protocol this configuration follows."""
        return self.config.search_protocol

    @property
    def turn_stops(self) -> tuple[str, ...]:
        """A turn's stop strings: the protocol's, and with demonstrations one more.

        That one is the start of the prompt's question part: a base model that answered
        goes on with another question, where an instruct model would end its sequence.
        """
        protocol = self.protocol
        if protocol.demonstrations and protocol.case_start:
            return (*protocol.stop, protocol.case_start.strip())
        return protocol.stop

    def fresh_channels(self) -> dict[str, object]:
        """The search agent's own channels at a run's start."""
        return {"turn_stop": None, "search_query": "", "searches": [], "insertion": ""}

    def prompt(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The protocol's prompt for the question (earlier chat turns first)."""
        history = format_turns(ctx.prompts, state.get("history", []))
        question, limit = state["question"], self.config.search_limit
        condensed = self.config.reasons_in_documents
        return history + self.protocol.render_prompt(question, limit, condensed=condensed)

    # -- the steps ------------------------------------------------------------------------

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """One turn: generate until a stop string, the end of sequence or the turn budget."""
        prompt = self.prompt(ctx, state) + state.get("text", "")
        budget = self.fitting_budget(
            ctx, prompt, max(1, min(self.config.turn_budget, self.remaining(state)))
        )
        with token_stream(prompt, self.name) as sink:
            trace = ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, budget, self.turn_stops),
                capture=CaptureOptions(logprobs=self.reads_logprobs),
                on_token=sink,
            )[0]
        return {
            "draft": trace.text,
            "draft_ended": False,
            "draft_tokens": list(trace.tokens),
            "draft_logprobs": [float(x) for x in trace.logprobs],
            "draft_entropies": [float(x) for x in trace.entropies],
            "turn_stop": trace.stop_string,
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Read the turn: search its query, write a message, or end the run."""
        protocol, step = self.protocol, state.get("step", 0) + 1
        turn, stop = state.get("draft", ""), _own(state).get("turn_stop")
        action = read_turn(protocol, turn, stop)
        stripped = protocol.strip_turn and action.kind == "search"
        kept = stop if stop in protocol.stop else ""  # a tag stays; a new question does not
        written = (turn.strip() if stripped else turn) + kept
        used = state.get("answer_tokens", 0) + len(state.get("draft_tokens", []))
        update: dict[str, object] = {
            "text": state.get("text", "") + written,
            "last_accepted": written,
            "answer_tokens": used,
            "step": step,
        }
        turn_left = step < self.config.turn_limit and used < self.config.generate_max_length
        query = None if action.query is None else protocol.clean_query(action.query)
        searched = _own(state).get("searches", [])
        limit = self.config.search_limit
        message: str | None = None
        if action.kind == "answer":
            note = "answer"
        elif not turn_left:
            note = "no turn left: the run ends"
        elif action.kind == "none":
            if protocol.no_action == "retry":
                message, note = protocol.invalid_message, "neither a query nor an answer: retry"
            else:
                note = "neither a query nor an answer: the run ends"
        elif query == "" and protocol.empty_query != "search":
            if protocol.empty_query == "message":
                message = protocol.result_template.format(documents=protocol.empty_query_message)
            note = "empty query: " + ("message" if message is not None else "the run ends")
        elif limit is not None and len(searched) >= limit:
            message = protocol.limit_message
            note = f"search limit ({limit}) reached: " + (
                "message" if message is not None else "the run ends"
            )
        elif query in searched and protocol.repeat_message is not None:
            message, note = protocol.repeat_message, "repeated query: message"
        else:
            note = "search"
        searching = note == "search"
        decision = retrieval_decision(step, retrieve=searching, trigger_word=query, note=note)
        outcome = "search" if searching else "message" if message is not None else "end"
        _announce(step, "answer" if action.kind == "answer" else outcome, query, turn, note)
        if searching:
            update.update({"route": "formulate_query", "search_query": query, "finished": False})
        elif message is not None:
            update.update({"route": "continue_generation", "insertion": message, "finished": False})
        else:
            update.update({"route": "finalize", "finished": True})
        update["decision"] = decision
        return update

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The query the turn wrote between the tags (as the protocol cleans it)."""
        return _own(state).get("search_query", "")

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Write the documents as the protocol does; Reason-in-Documents condenses them first.

        Returns:
            The documents (``docs``, in retriever order), the result block to insert and
            the query added to the run's searches.
        """
        protocol, docs = self.protocol, list(state.get("docs", []))
        query = _own(state).get("search_query", "")
        documents = format_documents(protocol, docs)
        counts = state.get("counts")
        if self.config.reasons_in_documents:
            trace = self._reason_in_documents(ctx, state, query, documents)
            documents = extract_final_information(trace.text)
            counts = bump(counts, **model_call(trace))
        return {
            "docs": docs,
            "rerank_order": None,
            "insertion": protocol.result_template.format(documents=documents),
            "searches": [*_own(state).get("searches", []), query],
            "counts": bump(counts),
        }

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Insert the result block (or message) after the turn; the next turn follows."""
        insertion = _own(state).get("insertion", "")
        return {
            "text": state.get("text", "") + insertion,
            "last_accepted": insertion,
            "finished": False,
        }

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Read the answer as the protocol does; with ``force_answer``, ask for a missing one."""
        protocol, text = self.protocol, state.get("text", "")
        answer = read_answer(protocol, text, state.get("draft", ""), _own(state).get("turn_stop"))
        counts = state.get("counts")
        if answer is None and self.config.force_answer:
            text += protocol.answer_opener
            prompt = self.prompt(ctx, state) + text
            budget = self.fitting_budget(ctx, prompt, self.config.forced_answer_tokens)
            with token_stream(prompt, self.name) as sink:
                trace = ctx.model.generate_trace(
                    prompt,
                    decoding=self.decoding(ctx, budget, (protocol.answer_closer,)),
                    on_token=sink,
                )[0]
            text += trace.text + (trace.stop_string or "")
            answer = trace.text.strip()
            counts = bump(counts, **model_call(trace))
        found = protocol.no_answer if answer is None else answer
        if ctx.prompts.answer_kind == "yes_no":
            found = read_answer_as(found, "yes_no")
        return {"answer": found, "text": text, "counts": bump(counts)}

    def _reason_in_documents(
        self, ctx: RunContext, state: AdaptiveRAGState, query: str, documents: str
    ) -> GenerationTrace:
        """Search-o1's Reason-in-Documents generation over the formatted documents."""
        protocol = self.protocol
        previous = previous_steps(
            state.get("text", ""), protocol.query_tags[0], protocol.result_tags[0]
        )
        prompt = reason_in_documents_prompt(previous, query, documents)
        budget = self.fitting_budget(ctx, prompt, self.config.reason_max_tokens)
        with token_stream(prompt, self.name) as sink:
            return ctx.model.generate_trace(
                prompt, decoding=self.decoding(ctx, budget, ()), on_token=sink
            )[0]


def create_search_agent_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: SearchAgentConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """A search-agent graph (Search-o1 by default; ``config.protocol`` names another).

    Runs on any chat model that continues text with stop strings (it reads no token
    signals). ``prompts`` gives only the chat-history format and ``answer_kind``; the
    protocol gives the prompt.
    """
    policy = SearchAgentPolicy(config or SearchAgentConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
