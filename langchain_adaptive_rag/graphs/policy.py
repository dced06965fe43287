"""The contract between a method and the shared graph builder.

A method is a [`Policy`][]: what to draft, whether the draft needs retrieval, which
query to send, how to re-rank, how to continue with documents and how to finalize. The
builder wires the same seven nodes for every method; the policy fills them in.
"""

from __future__ import annotations

import copy
import math
import types
import typing
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, ClassVar, Literal

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    GenerationTrace,
    GraphModel,
    TraceModel,
)
from langchain_adaptive_rag.prompts import (
    QAPrompts,
    build_prompt,
    extract_answer,
    read_answer_as,
)
from langchain_adaptive_rag.retrieving import Retriever
from langchain_adaptive_rag.signals import first_sentence, tokens_covering
from langchain_adaptive_rag.state import (
    AdaptiveRAGState,
    Counts,
    QueryInput,
    RetrievalDecision,
    RetrievedDoc,
)

if TYPE_CHECKING:
    from langgraph.types import Checkpointer

    from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph
    from langchain_adaptive_rag.retrieving import RetrieverOptions

__all__ = [
    "NEED_ROUTES",
    "TOKENS_CAP",
    "CountRange",
    "GraphModel",
    "MethodConfig",
    "MethodFacts",
    "NeedRoute",
    "Policy",
    "RunContext",
    "TraceModel",
    "bump",
    "model_call",
    "retrieval_decision",
]

NeedRoute = Literal["formulate_query", "continue_generation", "draft", "finalize"]
"""The node score_need sends the run to: retrieve (``formulate_query``), continue
without new documents (``continue_generation``), draft again, or ``finalize``."""

NEED_ROUTES: tuple[str, ...] = ("formulate_query", "continue_generation", "draft", "finalize")
"""Every [`NeedRoute`][]."""


TOKENS_CAP = 1_048_576
"""The most tokens any token count of a config may name (2**20: past any model's context)."""

CountRange = tuple[int, int, str]
"""A count's lowest and highest value, and what the highest stands for (the error says)."""


@dataclass(frozen=True)
class MethodConfig:
    """Settings every method shares (the DRAGIN code's names in brackets).

    Each method's config extends it ([`DRAGINConfig`][], ...). It was called
    ``GenerationConfig``, which transformers' own class of that name shadowed; that name
    still works and warns.
    """

    generate_max_length: int = 64
    """Token budget of the whole answer [``generate_max_length``]: 64 / 100 / 128 by
    dataset in the DRAGIN configs."""
    retrieve_topk: int = 3
    """Documents per retrieval [``retrieve_topk``]."""
    max_rounds: int = 20
    """Upper bound on generation rounds (a safety net; the budget normally ends a run)."""
    forced_answer_tokens: int = 20
    """Tokens generated after the forced ``So the answer is`` when no answer was given."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "generate_max_length": (1, TOKENS_CAP, "tokens, more than any model's context"),
        "retrieve_topk": (1, 1000, "passages, more than any prompt holds"),
        "max_rounds": (1, 100_000, "rounds, a safety net the budget ends runs before"),
        "forced_answer_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }
    """The range of each count this class adds (its subclasses add theirs): every integer
    field that sizes work or memory. A value outside is refused when the config is made,
    for a per-call override too (``docs/methods.md`` lists them)."""
    token_budgets: ClassVar[tuple[str, ...]] = ("generate_max_length", "forced_answer_tokens")
    """The counts this class adds that are tokens one generation may take: each must also
    fit the model's context, checked when the graph is built and when a call overrides it."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for item in fields(self):
            _check_type(type(self).__name__, item.name, getattr(self, item.name), hints[item.name])
        for name, (low, high, unit) in self.all_count_ranges().items():
            value = getattr(self, name)
            if value is None:
                continue
            if value < low:
                msg = f"{type(self).__name__}.{name} must be >= {low}, got {value}."
                raise AdaptiveRAGError(msg)
            if value > high:
                msg = (
                    f"{type(self).__name__}.{name} must be at most {high} ({unit}), got "
                    f"{value}. Fix: set {name} to at most {high}."
                )
                raise AdaptiveRAGError(msg)

    @classmethod
    def all_count_ranges(cls) -> dict[str, CountRange]:
        """Every count's range: this class's and its bases' ``count_ranges``."""
        merged: dict[str, CountRange] = {}
        for klass in reversed(cls.__mro__):
            merged.update(vars(klass).get("count_ranges", {}))
        return merged

    @classmethod
    def all_token_budgets(cls) -> tuple[str, ...]:
        """Every count that is one generation's tokens: this class's and its bases'."""
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            names.extend(vars(klass).get("token_budgets", ()))
        return tuple(dict.fromkeys(names))

    def check_context(self, context_length: int | None) -> None:
        """Fail when a token budget cannot fit the model's context.

        Args:
            context_length: Positions the model's context holds (``None``: unknown, as for
                a served model; nothing is checked).

        Raises:
            AdaptiveRAGError: A token budget is larger than the context, naming the field,
                its value, the limit and the fix.
        """
        if context_length is None:
            return
        for name in self.all_token_budgets():
            value = getattr(self, name)
            if value is not None and value > context_length:
                msg = (
                    f"{type(self).__name__}.{name} must fit the model's context of "
                    f"{context_length} positions (no generation can take more tokens), got "
                    f"{value}. Fix: set {name} to at most {context_length}."
                )
                raise AdaptiveRAGError(msg)

    @property
    def rows_per_call(self) -> int:
        """Sequences one model call of the method decodes at most (1: one generation)."""
        return 1


def _check_type(owner: str, name: str, value: object, hint: object) -> None:
    """Fail unless ``value`` is of the annotated type ``hint``, naming the field.

    Integers must be ``int`` (not ``bool``), floats real numbers (not ``bool``, not NaN),
    ``Literal`` fields one of their values; ``X | None`` accepts ``None``.
    """
    if _fits(value, hint):
        return
    expected = _describe(hint)
    msg = (
        f"{owner}.{name} must be {expected}, got {value!r} ({type(value).__name__}). "
        f"Fix: {owner}({name}=...) with a value of that type."
    )
    raise AdaptiveRAGError(msg)


def _describe(hint: object) -> str:
    """A field type in words."""
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(option) for option in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(option) for option in typing.get_args(hint))
    words: dict[object, str] = {
        type(None): "None",
        bool: "True or False",
        int: "an integer (not a bool)",
        float: "a real number (not a bool, not NaN)",
        str: "a string",
        tuple: "a tuple",
    }
    return words.get(origin or hint, str(hint))


def _fits(value: object, hint: object) -> bool:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return any(
            value == option and type(value) is type(option) for option in typing.get_args(hint)
        )
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not math.isnan(value)
        )
    if hint is str:
        return isinstance(value, str)
    if origin is tuple or hint is tuple:
        return isinstance(value, tuple)
    return True  # other annotations (callables, nested configs) are the field's own check


@dataclass(frozen=True)
class RunContext:
    """The dependencies a policy works with."""

    model: TraceModel
    retriever: Retriever
    prompts: QAPrompts
    enclosing_fields: frozenset[str] = frozenset()
    """Context fields of the graph this one runs in as a subgraph (see
    ``call_overrides``)."""


def retrieval_decision(
    step: int,
    *,
    retrieve: bool,
    score: float | None = None,
    threshold: float | None = None,
    trigger_position: int | None = None,
    trigger_word: str | None = None,
    trigger_words: Sequence[str] = (),
    note: str = "",
) -> RetrievalDecision:
    """The record of one ``score_need`` decision (see [`RetrievalDecision`][]).

    Args:
        step: The generation round deciding (the ``step`` its update sets).
        retrieve: Whether it retrieves.
        score: The need score at the trigger, or nearest the threshold when none fired.
        threshold: The threshold it was compared with.
        trigger_position: Token index of the trigger in the draft.
        trigger_word: The triggering word (or sentence, or decision text).
        trigger_words: Every word over the threshold.
        note: What the run should know about the decision.

    Returns:
        The decision, plain data.
    """
    return {
        "step": step,
        "retrieve": retrieve,
        "trigger_position": trigger_position,
        "trigger_word": trigger_word,
        "trigger_words": list(trigger_words),
        "score": None if score is None else float(score),
        "threshold": None if threshold is None else float(threshold),
        "note": note,
    }


def bump(counts: Counts | None, **deltas: int) -> Counts:
    """Return ``counts`` with ``deltas`` added (missing counters start at 0)."""
    base: Counts = {
        "retrievals": 0,
        "llm_calls": 0,
        "generated_tokens": 0,
        "rounds": 0,
        "retrieval_errors": 0,
        "prompt_tokens": 0,
    }
    if counts:
        base.update(counts)
    for key, delta in deltas.items():
        base[key] += delta  # type: ignore[literal-required]
    return base


def model_call(*traces: GenerationTrace) -> dict[str, int]:
    """What the generations ``traces`` add to a run's counts (``bump(counts, **...)``).

    Each trace is one LLM call (each sample of a batched call is one), with its
    generated tokens and its prompt's tokens (a served model's reported prompt tokens;
    ``0`` where the server reports none).
    """
    return {
        "llm_calls": len(traces),
        "generated_tokens": sum(t.num_tokens for t in traces),
        "prompt_tokens": sum(t.num_prompt_tokens for t in traces),
    }


class MethodFacts:
    """What tables, plots and the harness know of a method, without building it.

    Every [`Policy`][] class carries these; so does Adaptive-RAG's router, which
    composes policies' graphs instead of being one.
    """

    name: ClassVar[str] = "no_retrieval"
    """The method's id (``create_adaptive_rag_graph(..., method)``, results files)."""
    display_name: ClassVar[str] = "wo-RAG"
    """The method's name in the papers, shown in every user-facing table."""
    config_class: ClassVar[type[MethodConfig]] = MethodConfig
    """The config class the method takes."""
    threshold_field: ClassVar[str | None] = None
    """The config field holding the retrieval threshold (``None``: no threshold)."""
    threshold_symbol: ClassVar[str] = "θ"
    """How pictures and reports write that threshold."""
    threshold_signal: ClassVar[str | None] = None
    """The per-token signal the threshold is compared with (``"rind"``,
    ``"probability"``, ``"uncertainty"``), or ``None``: no threshold, or one on a score
    that is no single token's signal."""
    threshold_direction: ClassVar[Literal["above", "below"]] = "above"
    """Whether a value ``"above"`` the threshold retrieves, or one ``"below"`` it."""
    signal_names: ClassVar[dict[str, tuple[str, str]]] = {}
    """The method's own label and short name of a signal the pictures and reports show,
    where it is not the default's: the ``"rind"`` channel holds each draft word's score
    (RIND for DRAGIN; ETC's score for ETC), ``"uncertainty"`` a draft's need score."""
    decision_rule: ClassVar[str] = ""
    """The retrieval rule in words, as the pictures and reports state it (``""``: none)."""
    colour: ClassVar[str] = "#7f7f7f"
    """The method's colour in plots."""
    trained_model: ClassVar[str | None] = None
    """The kind of model the method needs beyond any causal LM (Self-RAG: one trained to
    write its reflection tokens), or ``None``: it runs on any model."""

    @classmethod
    def create_graph(
        cls,
        model: GraphModel,
        retriever: Retriever,
        *,
        config: MethodConfig,
        prompts: QAPrompts | None = None,
        checkpointer: Checkpointer = None,
        retriever_options: RetrieverOptions | None = None,
        name: str | None = None,
    ) -> AdaptiveRAGGraph:
        """The graph of a method that is not one policy on the shared builder.

        Adaptive-RAG's router and the tool-calling agent build graphs of their own;
        ``create_adaptive_rag_graph`` calls this for them (a [`Policy`][]'s graph comes
        from the shared builder instead).

        Raises:
            AdaptiveRAGError: The method is a policy (build it with the shared builder).
        """
        msg = f"{cls.__name__} is built by the shared builder (build_adaptive_rag_graph)."
        raise AdaptiveRAGError(msg)


class Policy(MethodFacts):
    """Base policy: never retrieves, generates the whole answer in one draft.

    Subclasses override the steps their method changes. Every step takes the run
    context and the current state and returns a partial state update.
    """

    needs_attention: ClassVar[bool] = False
    state_schema: ClassVar[type[AdaptiveRAGState]] = AdaptiveRAGState
    """The graph's state: the channels every method shares, and a method's own in a
    subclass of [`AdaptiveRAGState`][] (as ``create_agent``'s ``state_schema``)."""

    def __init__(self, config: MethodConfig) -> None:
        """Keep the method's configuration.

        Args:
            config: The method's frozen configuration.
        """
        self.config = config

    def with_config(self, config: MethodConfig) -> Policy:
        """This method with another config: one run's per-call settings.

        Args:
            config: A config of the method's class (the build-time one with fields
                changed).

        Returns:
            ``self`` when the config is the same, else a shallow copy holding ``config``.
        """
        if config == self.config:
            return self
        clone = copy.copy(self)
        clone.config = config
        return clone

    def threshold_reading(self) -> tuple[str | None, Literal["above", "below"]]:
        """The signal this configuration's threshold is compared with, and its direction.

        The score-need node writes both into each decision that has a threshold, so the
        pictures and reports read which token values crossed it instead of guessing.

        Returns:
            ``(threshold_signal, threshold_direction)`` by default.
        """
        return self.threshold_signal, self.threshold_direction

    def fresh_channels(self) -> dict[str, object]:
        """The method's own channels at the start of a run on a thread that ran before.

        The shared channels start over in the graph's nodes; a method with channels of
        its own (``state_schema``) gives their empty values here.

        Returns:
            Each own channel's value at a run's start (none by default).
        """
        return {}

    def check_model(self, model: TraceModel) -> None:
        """Fail at build time when the model cannot serve this method.

        Raises:
            AttentionUnavailableError: The method needs attention and the model has none.
            AdaptiveRAGError: A token budget is larger than the model's context.
        """
        if self.needs_attention:
            model.check_attention(self.attention_layer)
        capabilities = getattr(model, "capabilities", None)
        limit = getattr(capabilities, "context_length", None)
        self.config.check_context(limit if isinstance(limit, int) else None)

    @property
    def reads_logprobs(self) -> bool:
        """Whether the method reads its drafts' token log-probabilities.

        A served model must then return them (``ChatOpenAI(logprobs=True)``); the text
        methods run on any chat model.
        """
        return False

    @property
    def attention_layer(self) -> int:
        """The decoder layer whose attention rows the method reads (-1: the last)."""
        return -1

    # -- shared helpers ------------------------------------------------------------------

    @staticmethod
    def retrieval_question(state: AdaptiveRAGState) -> str:
        """The question as this run's queries read it.

        A follow-up made to stand on its own from the chat's history
        (``QAPrompts.followup_query``), else the question as asked.
        """
        return state.get("standalone_question") or state["question"]

    @staticmethod
    def decoding(ctx: RunContext, max_new_tokens: int, stop: Sequence[str]) -> DecodingOptions:
        """The model's decoding settings with a node's token budget and stop strings.

        Sampling options stay the model's (greedy by default, as in the papers);
        ``min_new_tokens`` is capped at the budget.
        """
        base = ctx.model.decoding
        return replace(
            base,
            max_new_tokens=max_new_tokens,
            min_new_tokens=min(base.min_new_tokens, max_new_tokens),
            stop=tuple(stop),
        )

    @staticmethod
    def fitting_budget(ctx: RunContext, prompt: str, budget: int) -> int:
        """``budget``, capped at the positions the model's context leaves after ``prompt``.

        For a local model with a known context length (``capabilities.context_length``);
        a served model's budget is kept as it is. At least one token is asked for, so a
        prompt that fills the context alone still fails with its own clear error.
        """
        capabilities = getattr(ctx.model, "capabilities", None)
        limit = getattr(capabilities, "context_length", None)
        encode = getattr(ctx.model, "encode", None)
        if not isinstance(limit, int) or encode is None:
            return budget
        room = limit - len(encode(prompt)) - 1  # the engine feeds one position past the end
        return max(1, min(budget, room))

    def remaining(self, state: AdaptiveRAGState) -> int:
        """Tokens left in the answer budget."""
        return self.config.generate_max_length - state.get("answer_tokens", 0)

    def generate(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        docs: Sequence[RetrievedDoc] = (),
        *,
        max_new_tokens: int | None = None,
        attention: bool = False,
    ) -> GenerationTrace:
        """Continue the answer from the accepted text, with ``docs`` in the prompt."""
        prompt = build_prompt(
            ctx.prompts,
            state["question"],
            state.get("text", ""),
            docs,
            state.get("history", []),
        )
        budget = max(1, max_new_tokens or self.remaining(state))
        with token_stream(prompt, self.name) as sink:
            return ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, budget, ctx.prompts.stop),
                capture=CaptureOptions(attention=attention, logprobs=self.reads_logprobs),
                on_token=sink,
            )[0]

    @staticmethod
    def answer_ended(ctx: RunContext, trace: GenerationTrace) -> bool:
        """Whether ``trace`` stopped at one of the prompts' stop strings (``QAPrompts.stop``).

        The case's answer is one line, so a generation that stopped at its end has
        nothing more to say: drafting again would start a new line. A stop at a method's
        own sentence end (SeaKR's steps) or at the token budget has not ended it; an
        end-of-sequence token leaves the next call nothing to generate, which ends the
        run then.
        """
        return trace.finish_reason == "stop" and trace.stop_string in ctx.prompts.stop

    def accept(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        new_text: str,
        new_tokens: int,
        *,
        ended: bool = False,
    ) -> dict[str, object]:
        """State update that appends ``new_text`` and says whether generation is over.

        Generation is over when the text gives the answer (``answer_marker``), the budget
        is spent, nothing was generated, the round limit is reached, or ``ended``: the
        accepted text runs to the end of a generation that ended the answer
        (``answer_ended``; drafting again would only start a new line).
        """
        text = state.get("text", "") + new_text
        used = state.get("answer_tokens", 0) + new_tokens
        finished = (
            ended
            or ctx.prompts.answer_marker in text.lower()
            or used >= self.config.generate_max_length
            or new_tokens == 0
            or state.get("step", 0) + 1 >= self.config.max_rounds
        )
        return {
            "text": text,
            "last_accepted": new_text,
            "answer_tokens": used,
            "finished": finished,
        }

    def accept_draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """``accept`` of the whole draft (over when the draft ended the answer)."""
        return self.accept(
            ctx,
            state,
            state.get("draft", ""),
            len(state.get("draft_tokens", [])),
            ended=state.get("draft_ended", False),
        )

    @staticmethod
    def cut_query(ctx: RunContext, query: str, max_tokens: int) -> str:
        """The query as the DRAGIN and SeaKR code's retrievers send it.

        Tokenized by the model's tokenizer without special tokens, truncated on the left
        to ``max_tokens`` (``max_query_length``) and decoded: the last tokens are kept and
        a word may be cut. A model without a tokenizer keeps the last ``max_tokens``
        whitespace-separated words.

        Args:
            ctx: The run context (its model's ``hf_tokenizer``, when it has one).
            query: The query text.
            max_tokens: Tokens kept.

        Returns:
            The query to send.
        """
        tokenizer = getattr(ctx.model, "hf_tokenizer", None)
        if tokenizer is None:
            return " ".join(query.split()[-max_tokens:])
        ids = tokenizer(query, add_special_tokens=False)["input_ids"]
        return str(tokenizer.decode(ids[-max_tokens:], skip_special_tokens=True))

    # -- the seven steps ------------------------------------------------------------------

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate a look-ahead continuation (no new documents)."""
        trace = self.generate(ctx, state)
        return {
            "draft": trace.text,
            "draft_ended": self.answer_ended(ctx, trace),
            "draft_tokens": list(trace.tokens),
            "draft_logprobs": [float(x) for x in trace.logprobs],
            "draft_entropies": [float(x) for x in trace.entropies],
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    @staticmethod
    def without_retrieval(
        update: dict[str, object], step: int, decision: RetrievalDecision
    ) -> dict[str, object]:
        """A decision not to retrieve: the text ``update`` accepted stands.

        Args:
            update: An [`accept`][langchain_adaptive_rag.graphs.policy.Policy.accept] update.
            step: The deciding round.
            decision: The decision's record.

        Returns:
            ``update``, routed to ``finalize`` when the text finished the run, else to
            ``draft``.
        """
        route = "finalize" if update["finished"] else "draft"
        update.update({"route": route, "step": step, "decision": decision})
        return update

    @staticmethod
    def with_retrieval(
        update: dict[str, object],
        step: int,
        decision: RetrievalDecision,
        query_inputs: dict[str, QueryInput] | None = None,
    ) -> dict[str, object]:
        """A decision to retrieve here, after the text ``update`` accepted (may be none).

        Args:
            update: An [`accept`][langchain_adaptive_rag.graphs.policy.Policy.accept]
                update of the text before the trigger, or ``{}``.
            step: The deciding round.
            decision: The decision's record.
            query_inputs: What ``formulate_query`` reads (``None``: nothing).

        Returns:
            ``update`` routed to ``formulate_query``; to ``finalize`` instead when the
            text before the trigger finished the run.
        """
        if update.get("finished"):
            update.update({"route": "finalize", "step": step, "decision": decision})
            return update
        update.update({"route": "formulate_query", "step": step, "decision": decision})
        if query_inputs is not None:
            update.update({"finished": False, "query_inputs": query_inputs})
        return update

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Decide whether the draft needs retrieval; by default accept it whole."""
        step = state.get("step", 0) + 1
        decision = retrieval_decision(step, retrieve=False)
        return self.without_retrieval(self.accept_draft(ctx, state), step, decision)

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The retrieval query; by default the question."""
        return self.retrieval_question(state)

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Order or filter the retrieved ``docs``; by default keep the retriever's order.

        Returns:
            An update with the documents to use (``docs``) and the retriever ranks kept
            (``rerank_order``, ``None`` when not re-ranked).
        """
        return {"docs": list(state.get("docs", [])), "rerank_order": None}

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate with the retrieved documents and accept the whole continuation."""
        trace = self.generate(ctx, state, state.get("docs", []))
        update = self.accept(
            ctx, state, trace.text, trace.num_tokens, ended=self.answer_ended(ctx, trace)
        )
        update["counts"] = bump(state.get("counts"), **model_call(trace), rounds=1)
        update["step"] = state.get("step", 0) + 1
        return update

    def continue_first_sentence(
        self, ctx: RunContext, state: AdaptiveRAGState
    ) -> dict[str, object]:
        """Generate with the documents and accept only the first new sentence.

        The continuation of FS-RAG, FLARE and DRAGIN (the DRAGIN code keeps one sentence
        per retrieval); every generated token is counted.
        """
        trace = self.generate(ctx, state, state.get("docs", []))
        sentence = first_sentence(trace.text)
        whole = not trace.text[len(sentence) :].strip()  # the sentence is all it said
        update = self.accept(
            ctx,
            state,
            sentence,
            tokens_covering(trace.tokens, len(sentence)),
            ended=whole and self.answer_ended(ctx, trace),
        )
        update["counts"] = bump(state.get("counts"), **model_call(trace), rounds=1)
        return update

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Extract the answer; force one with ``So the answer is`` when it is missing.

        A text that ends with the marker and nothing after it (the budget ran out there)
        is continued as it is, without a second marker.
        """
        text = state.get("text", "")
        answer = extract_answer(text, ctx.prompts.answer_marker, ctx.prompts.answer_kind)
        counts = state.get("counts")
        if answer is None:
            stem, forced = text.rstrip(), ctx.prompts.forced_answer
            if stem.lower().endswith(ctx.prompts.answer_marker.lower()):
                text = stem + forced[len(forced.rstrip()) :]  # the marker's own spacing
            else:
                text = text + forced
            prompt = build_prompt(
                ctx.prompts, state["question"], text, history=state.get("history", [])
            )
            with token_stream(prompt, self.name) as sink:
                trace = ctx.model.generate_trace(
                    prompt,
                    decoding=self.decoding(ctx, self.config.forced_answer_tokens, ctx.prompts.stop),
                    on_token=sink,
                )[0]
            answer = read_answer_as(trace.text, ctx.prompts.answer_kind)
            text = text + trace.text
            counts = bump(counts, **model_call(trace))
        return {"answer": answer, "text": text, "counts": bump(counts)}


def __getattr__(name: str) -> object:
    """``GenerationConfig``, the old name of [`MethodConfig`][], with a deprecation warning."""
    if name == "GenerationConfig":
        warnings.warn(
            "GenerationConfig is now MethodConfig (transformers has a GenerationConfig of "
            "its own); the old name will be removed. Fix: import MethodConfig.",
            DeprecationWarning,
            stacklevel=2,
        )
        return MethodConfig
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
