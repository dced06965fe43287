"""Tool-calling agentic RAG: LangChain v1's ``create_agent`` with the retriever as its tool.

The pattern LangChain's documentation recommends for RAG apps: a chat model that calls
tools decides when to search, by calling a search tool over the retriever, and answers
when it has read enough. Here it is a method like the others: the same retriever calls
(retries, time limits), the same counts (LLM calls, tokens, retrievals), the same
retrieval events and output, so the evaluation harness runs it beside DRAGIN and SeaKR.

Algorithm (one run):

1. the model reads the system prompt, the earlier turns and the question, and either
   calls the search tool with a query or answers;
2. the tool retrieves ``retrieve_topk`` documents and returns them numbered, with their
   titles; the model goes on (1), until it answers, its ``max_searches`` searches are
   spent (a further call is refused with LangChain's "Tool call limit exceeded" and the
   model goes on) or ``max_rounds`` model calls are made;
3. a run that ended without an answer asks the model once more, without tools, for the
   answer alone (``forced_answer_tokens``).

In graph terms: an ``agent`` node runs the ``create_agent`` graph (its ``model`` and
``tools`` nodes, with LangChain's ``ModelCallLimitMiddleware`` and
``ToolCallLimitMiddleware``) and ``finalize`` reads the answer. ``langchain`` (the
``agents`` extra) must be installed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import LLMResult
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.config import get_config, get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import get_runtime
from langgraph.types import Checkpointer, Overwrite, StreamWriter

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import graph_node
from langchain_adaptive_rag.graphs._nodes import (
    retrieved_docs,
    start_of_run,
    turn_messages,
)
from langchain_adaptive_rag.graphs.call_config import call_overrides, context_schema
from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph
from langchain_adaptive_rag.graphs.policy import (
    CountRange,
    MethodConfig,
    MethodFacts,
    bump,
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.search_presets import SEARCH_PROTOCOLS
from langchain_adaptive_rag.graphs.search_protocol import read_answer
from langchain_adaptive_rag.graphs.search_tool_calls import SearchToolCalls
from langchain_adaptive_rag.options import GraphModel
from langchain_adaptive_rag.prompts import QAPrompts, extract_answer, read_answer_as
from langchain_adaptive_rag.retrieving import QuestionRetriever, Retriever, RetrieverOptions
from langchain_adaptive_rag.served.model import ServedModel
from langchain_adaptive_rag.served.requests import provider_of
from langchain_adaptive_rag.state import (
    AdaptiveRAGInput,
    AdaptiveRAGOutput,
    AdaptiveRAGState,
    RetrievalEvent,
)
from langchain_adaptive_rag.tool_calling import HERMES, HermesToolCalls, ToolCallFormat

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

__all__ = ["ToolAgent", "ToolAgentConfig", "create_tool_agent_graph"]

DEFAULT_SYSTEM_PROMPT = (
    "You answer questions. Use the search tool to look up facts you do not know; you may "
    "search several times, one fact at a time. When you know the answer, reply with the "
    "answer alone: a name, a date, a number, yes or no, or a short phrase."
)
"""The package's system prompt (LangChain's RAG tutorial gives its agent one line; this
one also asks for a short answer, which exact match reads)."""

ANSWER_NOW = "Answer the question now, with the answer alone."
"""The instruction of the forced answer, after a run that ended without one."""


def tool_call_format(config: ToolAgentConfig) -> ToolCallFormat | None:
    """The tool-call format a config names (``None``: the model's own)."""
    if config.tool_format is None or config.tool_format == "hermes":
        return HERMES if config.tool_format else None
    if isinstance(config.tool_format, str):
        return SearchToolCalls(SEARCH_PROTOCOLS[config.tool_format])
    return config.tool_format


@dataclass(frozen=True)
class ToolAgentConfig(MethodConfig):
    """Tool-calling agent settings (``create_agent``'s limits and the tool)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "max_searches": (0, 1000, "searches, each one retrieval"),
    }

    generate_max_length: int = 256
    """Tokens each model call may generate, sent as ``max_tokens`` to OpenAI-compatible
    chat models (``ChatOpenAI``: vLLM, llama.cpp, Ollama, OpenAI; with ``temperature=0``,
    greedy as every method's calls); other models keep their own limit and sampling."""
    max_rounds: int = 8
    """Model calls a run may make (``ModelCallLimitMiddleware(run_limit=...)``)."""
    max_searches: int = 4
    """Searches a run may make (``ToolCallLimitMiddleware(run_limit=...)``; a further
    call is answered "Tool call limit exceeded" and the model goes on)."""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    """The agent's system prompt."""
    tool_name: str = "search"
    """The search tool's name."""
    tool_description: str = (
        "Search an encyclopedia. Input: a short query naming what you need to know. "
        "Returns the most relevant passages, numbered, with their titles."
    )
    """The search tool's description, as the model reads it."""
    tool_format: str | HermesToolCalls | SearchToolCalls | None = None
    """How a [`ChatTransformers`][langchain_adaptive_rag.ChatTransformers] model is shown
    the tool and writes its calls: ``None`` or ``"hermes"``, JSON between
    ``<tool_call>`` tags (Qwen2.5, Qwen3, Hermes); a search preset's name
    (``"search_r1"``) or a ``SearchToolCalls(protocol)``: a trained searcher's query tags,
    and its answer read as its protocol reads it (another ``ToolCallFormat`` works the
    same way). Served models call tools as their server parses them (leave ``None``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.max_searches < 0:
            msg = f"ToolAgentConfig.max_searches must be >= 0, got {self.max_searches}."
            raise AdaptiveRAGError(msg)
        named = {"hermes", *SEARCH_PROTOCOLS}
        if isinstance(self.tool_format, str) and self.tool_format not in named:
            msg = (
                f"ToolAgentConfig.tool_format must be 'hermes', a search preset's name or "
                f"a ToolCallFormat, got {self.tool_format!r}. Expected one of "
                f"{sorted(named)}."
            )
            raise AdaptiveRAGError(msg)
        if not self.tool_name.isidentifier():
            msg = (
                f"ToolAgentConfig.tool_name must be a tool name (letters, digits, "
                f"underscores), got {self.tool_name!r}. Fix: tool_name='search'."
            )
            raise AdaptiveRAGError(msg)


class ToolAgentState(AdaptiveRAGInput, AdaptiveRAGOutput):
    """The outer graph's channels: the shared input and output, and the run's own."""

    history: list[BaseMessage]
    """The earlier turns the agent reads."""


class _Usage(BaseCallbackHandler):
    """Counts one run's chat-model calls and the tokens they report; keeps the last text."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0
        self.prompt_tokens = 0
        self.generated_tokens = 0
        self.last_text = ""

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        """Count a call (``**kwargs``: LangChain's callback interface)."""
        with self._lock:
            self.calls += 1

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        """Add the tokens the call's message reports (``**kwargs``: LangChain's interface)."""
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                usage = getattr(message, "usage_metadata", None)
                with self._lock:
                    self.last_text = str(message.text) if message is not None else ""
                    if usage:
                        self.prompt_tokens += int(usage.get("input_tokens", 0))
                        self.generated_tokens += int(usage.get("output_tokens", 0))


@dataclass
class _AgentRun:
    """One run's context inside the agent: what the tool reads and writes."""

    writer: StreamWriter
    top_k: int
    usage: _Usage
    events: list[RetrievalEvent] = field(default_factory=list)
    errors: int = 0


def _format(docs: list[dict[str, Any]]) -> str:
    """The documents as the model reads them: ``[i] title: text``, one a paragraph."""
    if not docs:
        return "No results."
    lines = []
    for index, doc in enumerate(docs, start=1):
        title = doc["metadata"].get("title")
        head = f"[{index}] {title}: " if isinstance(title, str) and title else f"[{index}] "
        lines.append(head + doc["text"])
    return "\n\n".join(lines)


def _search_tool(
    retriever: Retriever, options: RetrieverOptions, config: ToolAgentConfig
) -> BaseTool:
    """The retriever as the agent's tool, emitting the graphs' decision and retrieval events."""
    searcher = QuestionRetriever(retriever, options)

    def search(query: str) -> tuple[str, list[dict[str, Any]]]:
        run = get_runtime(_AgentRun).context
        step = len(run.events) + 1
        reason = run.usage.last_text  # the model's text with this call
        decision = retrieval_decision(step, retrieve=True, trigger_word=query, note=reason)
        run.writer({"event": "decision", **decision})
        found = searcher.retrieve(query, run.top_k, run.errors)
        run.errors += int(found.failed)
        note = found.note
        docs = retrieved_docs(found.documents, (step - 1) * run.top_k)
        event: RetrievalEvent = {
            "step": step,
            "trigger_position": None,
            "trigger_word": query,
            "score": None,
            "threshold": None,
            "query": query,
            "doc_ids": [d["id"] for d in docs],
            "doc_texts": [d["text"] for d in docs],
            "doc_metadata": [dict(d["metadata"]) for d in docs],
            "rerank_order": None,
            "note": note,
        }
        run.events.append(event)
        shown = {key: value for key, value in event.items() if key in _EVENT_KEYS}
        run.writer({"event": "retrieval", **shown})
        return _format([dict(d) for d in docs]), [dict(d) for d in docs]

    return StructuredTool.from_function(
        search,
        name=config.tool_name,
        description=config.tool_description,
        response_format="content_and_artifact",
    )


_EVENT_KEYS = ("query", "doc_ids", "doc_texts", "doc_metadata", "note")
_LOCAL = "chat-transformers"
"""``ChatTransformers._llm_type``: a local model, which takes ``tool_format``."""


def _model_settings(model: BaseChatModel, config: ToolAgentConfig, budget: int) -> dict[str, Any]:
    """The settings each model call sends: budget, greedy decoding, a local model's format.

    An OpenAI-compatible server gets ``temperature=0`` as every method's served calls do
    (its own default samples).
    """
    if provider_of(model) == "openai-chat":
        return {"max_tokens": budget, "temperature": 0.0}
    if model._llm_type != _LOCAL:
        return {}
    chosen = tool_call_format(config)
    return {"max_tokens": budget, **({"tool_format": chosen} if chosen else {})}


def _chat_model(model: GraphModel) -> BaseChatModel:
    """The LangChain chat model behind ``model``, checked to call tools."""
    chat = model.model if isinstance(model, ServedModel) else model
    if not isinstance(chat, BaseChatModel):
        msg = (
            f"The tool-calling agent needs a LangChain chat model that calls tools, got "
            f"{type(chat).__name__}. Fix: ChatOpenAI(base_url=..., model=...) against a "
            "server whose model calls tools, or the search agent (method 'search_agent'), "
            "which runs on any model that continues text."
        )
        raise AdaptiveRAGError(msg)
    if type(chat).bind_tools is BaseChatModel.bind_tools:
        msg = (
            f"The tool-calling agent needs a chat model that calls tools; "
            f"{type(chat).__name__} has no bind_tools. Fix: a served chat model that calls "
            "tools (ChatOpenAI against vLLM or llama.cpp with a tool-calling model), or the "
            "search agent (method 'search_agent'), which runs on any model that continues "
            "text with stop strings."
        )
        raise AdaptiveRAGError(msg)
    return chat


class ToolAgent(MethodFacts):
    """Tool-calling agentic RAG: what the ``agent`` and ``finalize`` nodes do."""

    name = "tool_agent"
    display_name = "Tool agent"
    config_class = ToolAgentConfig
    decision_rule = "the model calls the search tool"
    colour = "#aec7e8"
    trained_model: ClassVar[str | None] = "a chat model that calls tools"

    def __init__(
        self,
        config: ToolAgentConfig,
        model: BaseChatModel,
        retriever: Retriever,
        options: RetrieverOptions,
    ) -> None:
        """Keep the build-time settings, the chat model and the retriever.

        Args:
            config: The build-time settings.
            model: A chat model that calls tools.
            retriever: The retriever the tool searches.
            options: Retries and time limits of the retriever calls.
        """
        self.config = config
        self.model = model
        self.retriever = retriever
        self.options = options
        self._agents: dict[ToolAgentConfig, CompiledStateGraph[Any, Any, Any, Any]] = {}
        self._lock = threading.Lock()

    def agent(self, config: ToolAgentConfig) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The ``create_agent`` graph of one run's settings (built once for each settings).

        Raises:
            AdaptiveRAGError: ``langchain`` (the ``agents`` extra) is not installed.
        """
        with self._lock:
            if config not in self._agents:
                self._agents[config] = self._build_agent(config)
            return self._agents[config]

    def _build_agent(self, config: ToolAgentConfig) -> CompiledStateGraph[Any, Any, Any, Any]:
        """A ``create_agent`` graph with the settings' limits, prompt and tool."""
        try:
            from langchain.agents import create_agent
            from langchain.agents.middleware import (
                ModelCallLimitMiddleware,
                ToolCallLimitMiddleware,
                wrap_model_call,
            )
        except ImportError as error:  # pragma: no cover - the agents extra is a test dependency
            msg = (
                "The tool-calling agent runs LangChain's create_agent, from the package "
                "langchain. Fix: pip install 'langchain-adaptive-rag[agents]'."
            )
            raise AdaptiveRAGError(msg) from error
        middleware: list[Any] = [
            ModelCallLimitMiddleware(run_limit=config.max_rounds, exit_behavior="end"),
            ToolCallLimitMiddleware(run_limit=config.max_searches, exit_behavior="continue"),
        ]
        extra = _model_settings(self.model, config, config.generate_max_length)
        if extra:

            @wrap_model_call
            def settings(request: Any, handler: Any) -> Any:
                return handler(request.override(model_settings={**request.model_settings, **extra}))

            middleware.append(settings)
        return create_agent(
            self.model,
            [_search_tool(self.retriever, self.options, config)],
            system_prompt=config.system_prompt,
            middleware=middleware,
            context_schema=_AgentRun,
            checkpointer=False,
            name="agent",
        )

    def run(self, config: ToolAgentConfig, state: ToolAgentState) -> dict[str, Any]:
        """Run the agent on the question; its reply, counts and retrieval events.

        A run that ended without a reply (the model-call limit, or a last tool call),
        or a searcher's run whose last reply holds no answer, asks the model once more
        without tools for the answer alone.
        """
        usage = _Usage()
        run = _AgentRun(writer=_writer(), top_k=config.retrieve_topk, usage=usage)
        asked = [*state.get("history", []), HumanMessage(state["question"])]
        settings = merge_configs(_config(), {"callbacks": [usage]})
        result = self.agent(config).invoke({"messages": asked}, settings, context=run)
        new = result["messages"][len(asked) :]
        replies = [m for m in new if isinstance(m, AIMessage)]
        notice = len(replies) > usage.calls  # ModelCallLimitMiddleware's closing message
        last = new[-1] if new else None
        if (
            isinstance(last, AIMessage)
            and not last.tool_calls
            and not notice
            and self._answered(config, str(last.text))
        ):
            reply = str(last.text)
        else:
            kept = new[:-1] if notice else new
            reply = self._forced_answer(config, [*asked, *kept], settings)
        return {
            "text": reply,
            "retrievals": Overwrite(run.events),
            "counts": bump(
                None,
                retrievals=len(run.events),
                retrieval_errors=run.errors,
                llm_calls=usage.calls,
                generated_tokens=usage.generated_tokens,
                prompt_tokens=usage.prompt_tokens,
                rounds=usage.calls,
            ),
        }

    def _forced_answer(
        self, config: ToolAgentConfig, messages: list[BaseMessage], settings: RunnableConfig
    ) -> str:
        """The model's answer without tools, asked after the run's messages."""
        model: Runnable[Any, BaseMessage] = self.model
        extra = _model_settings(self.model, config, config.forced_answer_tokens)
        if self.model._llm_type == _LOCAL:  # shown the tool, told not to call it
            tool = _search_tool(self.retriever, self.options, config)
            model = self.model.bind_tools([tool], tool_choice="none", **extra)
        elif extra:
            model = self.model.bind(**extra)
        # a searcher is asked in its protocol's form: the answer's opening tag is written
        asking = [] if isinstance(tool_call_format(config), SearchToolCalls) else [ANSWER_NOW]
        prompt = [SystemMessage(config.system_prompt), *messages, *map(HumanMessage, asking)]
        return str(model.invoke(prompt, settings).text)

    @staticmethod
    def _answered(config: ToolAgentConfig, reply: str) -> bool:
        """Whether a reply without calls ends the run: a searcher's holds its answer."""
        chosen = tool_call_format(config)
        return (
            not isinstance(chosen, SearchToolCalls) or _protocol_answer(chosen, reply) is not None
        )

    @staticmethod
    def answer(prompts: QAPrompts, reply: str, config: ToolAgentConfig | None = None) -> str:
        """The short answer in ``reply``.

        A searcher's (``tool_format`` a search protocol): as its protocol reads it; else
        after the prompts' marker when it has one, else the reply.
        """
        chosen = tool_call_format(config) if config is not None else None
        if isinstance(chosen, SearchToolCalls):
            found = _protocol_answer(chosen, reply)
            return chosen.protocol.no_answer if found is None else found
        found = extract_answer(reply, prompts.answer_marker, prompts.answer_kind)
        return found if found is not None else read_answer_as(reply.strip(), prompts.answer_kind)

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
        """The method's graph by name (``create_adaptive_rag_graph(..., "tool_agent")``)."""
        if not isinstance(config, ToolAgentConfig):
            msg = f"tool_agent takes a ToolAgentConfig, got {type(config).__name__}."
            raise AdaptiveRAGError(msg)
        return create_tool_agent_graph(
            model,
            retriever,
            config=config,
            prompts=prompts,
            checkpointer=checkpointer,
            retriever_options=retriever_options,
            name=name,
        )


def _protocol_answer(chosen: SearchToolCalls, reply: str) -> str | None:
    """The answer a searcher's reply holds, read as its protocol reads it."""
    protocol, closer = chosen.protocol, chosen.protocol.answer_closer
    ended = reply.endswith(closer)
    last = reply.removesuffix(closer) if ended else reply
    return read_answer(protocol, reply, last, closer if ended else None)


def _writer() -> StreamWriter:
    """The run's custom-event writer (a no-op outside a graph run)."""
    try:
        return get_stream_writer()
    except RuntimeError:
        return lambda _chunk: None


def _config() -> RunnableConfig:
    """The node's config (callbacks, tags), passed on to the agent's run."""
    try:
        return get_config()
    except RuntimeError:
        return {}


def create_tool_agent_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: ToolAgentConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Tool-calling agentic RAG: ``create_agent`` with the retriever as its search tool.

    Args:
        model: A LangChain chat model that calls tools (``ChatOpenAI`` against a server
            whose model does), or a [`ServedModel`][] of one.
        retriever: Any LangChain retriever.
        config: The agent's limits, prompt and tool (default: [`ToolAgentConfig`][]).
        prompts: Only ``answer_marker``, ``answer_kind`` and ``history_turns`` are read
            (the agent has its own system prompt).
        checkpointer: Passed to ``compile`` (the agent's own run keeps no checkpoints: a
            run stopped inside it starts the agent over).
        retriever_options: Retries, time limits and failure handling of the searches.
        name: Graph name (default: ``"tool_agent"``).

    Returns:
        The compiled graph, with input ``{"question"}`` or ``{"messages"}`` and as output
        ``answer``, ``text`` (the model's last reply), ``retrievals``, ``counts`` and
        ``messages``.

    Raises:
        AdaptiveRAGError: The model does not call tools, or ``langchain`` is missing.
    """
    chosen = config or ToolAgentConfig()
    facts = ToolAgent(
        chosen, _chat_model(model), retriever, retriever_options or RetrieverOptions()
    )
    facts.agent(chosen)  # fail now, not at the first question, without langchain
    shown = prompts or QAPrompts()
    graph = StateGraph(
        ToolAgentState,
        context_schema=context_schema(ToolAgentConfig),
        input_schema=AdaptiveRAGInput,
        output_schema=AdaptiveRAGOutput,
    )

    def agent(state: ToolAgentState) -> dict[str, Any]:
        start = start_of_run(cast("AdaptiveRAGState", state), shown)
        settings = replace(chosen, **call_overrides(chosen))  # type: ignore[arg-type]
        asked: ToolAgentState = {**state, **start}  # type: ignore[typeddict-item]
        return {**start, "standalone_question": "", **facts.run(settings, asked)}

    def finalize(state: ToolAgentState) -> dict[str, Any]:
        settings = replace(chosen, **call_overrides(chosen))  # type: ignore[arg-type]
        answer = ToolAgent.answer(shown, state.get("text", ""), settings)
        final = {**state, "answer": answer}
        step = len(state.get("retrievals", [])) + 1
        _writer()({"event": "decision", **retrieval_decision(step, retrieve=False, note="answer")})
        return {
            "answer": answer,
            "messages": turn_messages(cast("AdaptiveRAGState", final)),
            "question": "",
        }

    executor = getattr(model, "async_executor", None)
    graph.add_node("agent", graph_node("agent", agent, executor))  # type: ignore[arg-type]
    graph.add_node("finalize", graph_node("finalize", finalize, executor))  # type: ignore[arg-type]
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "finalize")
    graph.add_edge("finalize", END)
    compiled: Any = graph.compile(checkpointer=checkpointer, name=name or ToolAgent.name)
    compiled.__class__ = AdaptiveRAGGraph  # LangGraph's compiled graph, with its tool
    return cast("AdaptiveRAGGraph", compiled)
