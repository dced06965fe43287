"""Adaptive retrieval-augmented generation for LangChain and LangGraph.

The package's foundation is [`ChatTransformers`][], a LangChain chat model over a local
HuggingFace causal LM that reports per-token entropy, log-probabilities, attention rows and
hidden states: the signals the adaptive methods use to decide when and what to retrieve.
The methods that read only text or log-probabilities also run on any LangChain chat model
(``ChatOpenAI`` on vLLM, llama.cpp, Ollama or OpenAI) through [`ServedModel`][].
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_adaptive_rag.lazy_exports import (
    MOVED_MODULES,
    install_moved_modules,
    lazy_exports,
)

if TYPE_CHECKING:
    from langchain_adaptive_rag.chat_models import ChatTransformers
    from langchain_adaptive_rag.errors import (
        AdaptiveRAGError,
        AttentionUnavailableError,
        CallCancelledError,
        HiddenLayerError,
        ModelServerError,
        PromptTooLongError,
    )
    from langchain_adaptive_rag.exemplars import dataset_prompts, load_exemplars
    from langchain_adaptive_rag.graphs import (
        AVAILABLE_METHODS,
        create_adaptive_rag_graph,
        create_adaptive_rag_router_graph,
        create_dragin_graph,
        create_etc_graph,
        create_fix_length_graph,
        create_fix_sentence_graph,
        create_flare_graph,
        create_ircot_graph,
        create_no_retrieval_graph,
        create_seakr_graph,
        create_search_agent_graph,
        create_self_rag_graph,
        create_single_round_graph,
        create_ta_are_graph,
        create_tool_agent_graph,
        create_uncertainty_gate_graph,
        create_vanilla_graph,
    )
    from langchain_adaptive_rag.graphs.adaptive_rag import AdaptiveRAGConfig
    from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
    from langchain_adaptive_rag.graphs.etc import ETCConfig
    from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, FixSentenceConfig
    from langchain_adaptive_rag.graphs.flare import FLAREConfig
    from langchain_adaptive_rag.graphs.ircot import IRCoTConfig
    from langchain_adaptive_rag.graphs.policy import MethodConfig
    from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
    from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
    from langchain_adaptive_rag.graphs.search_protocol import SearchProtocol
    from langchain_adaptive_rag.graphs.self_rag import SelfRAGConfig
    from langchain_adaptive_rag.graphs.ta_are import TAAREConfig
    from langchain_adaptive_rag.graphs.tool import create_rag_tool
    from langchain_adaptive_rag.graphs.tool_agent import ToolAgentConfig
    from langchain_adaptive_rag.graphs.uncertainty_gate import UncertaintyGateConfig
    from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions, GenerationTrace
    from langchain_adaptive_rag.prompts import Exemplar, QAPrompts
    from langchain_adaptive_rag.retrievers import (
        BM25Retriever,
        create_bm25_retriever,
        load_bm25_retriever,
    )
    from langchain_adaptive_rag.retrieving import RetrieverOptions
    from langchain_adaptive_rag.served import ServedModel
    from langchain_adaptive_rag.token_signals import (
        AttentionMatrix,
        TokenSignals,
        get_token_signals,
    )

_EXPORTS: dict[str, str] = {
    "AdaptiveRAGConfig": "langchain_adaptive_rag.graphs.adaptive_rag",
    "AdaptiveRAGError": "langchain_adaptive_rag.errors",
    "AttentionMatrix": "langchain_adaptive_rag.token_signals",
    "AttentionUnavailableError": "langchain_adaptive_rag.errors",
    "AVAILABLE_METHODS": "langchain_adaptive_rag.graphs",
    "BM25Retriever": "langchain_adaptive_rag.retrievers",
    "CallCancelledError": "langchain_adaptive_rag.errors",
    "ChatTransformers": "langchain_adaptive_rag.chat_models",
    "create_adaptive_rag_graph": "langchain_adaptive_rag.graphs",
    "create_adaptive_rag_router_graph": "langchain_adaptive_rag.graphs",
    "create_bm25_retriever": "langchain_adaptive_rag.retrievers",
    "create_dragin_graph": "langchain_adaptive_rag.graphs",
    "create_etc_graph": "langchain_adaptive_rag.graphs",
    "create_uncertainty_gate_graph": "langchain_adaptive_rag.graphs",
    "create_fix_length_graph": "langchain_adaptive_rag.graphs",
    "create_fix_sentence_graph": "langchain_adaptive_rag.graphs",
    "create_flare_graph": "langchain_adaptive_rag.graphs",
    "create_ircot_graph": "langchain_adaptive_rag.graphs",
    "create_rag_tool": "langchain_adaptive_rag.graphs.tool",
    "create_no_retrieval_graph": "langchain_adaptive_rag.graphs",
    "create_seakr_graph": "langchain_adaptive_rag.graphs",
    "create_search_agent_graph": "langchain_adaptive_rag.graphs",
    "create_self_rag_graph": "langchain_adaptive_rag.graphs",
    "create_single_round_graph": "langchain_adaptive_rag.graphs",
    "create_ta_are_graph": "langchain_adaptive_rag.graphs",
    "create_tool_agent_graph": "langchain_adaptive_rag.graphs",
    "create_vanilla_graph": "langchain_adaptive_rag.graphs",
    "dataset_prompts": "langchain_adaptive_rag.exemplars",
    "DRAGINConfig": "langchain_adaptive_rag.graphs.dragin",
    "ETCConfig": "langchain_adaptive_rag.graphs.etc",
    "UncertaintyGateConfig": "langchain_adaptive_rag.graphs.uncertainty_gate",
    "Exemplar": "langchain_adaptive_rag.prompts",
    "FixLengthConfig": "langchain_adaptive_rag.graphs.fixed",
    "FixSentenceConfig": "langchain_adaptive_rag.graphs.fixed",
    "FLAREConfig": "langchain_adaptive_rag.graphs.flare",
    "IRCoTConfig": "langchain_adaptive_rag.graphs.ircot",
    "MethodConfig": "langchain_adaptive_rag.graphs.policy",
    "GenerationConfig": "langchain_adaptive_rag.graphs.policy",  # the old name: it warns
    "CaptureOptions": "langchain_adaptive_rag.options",
    "DecodingOptions": "langchain_adaptive_rag.options",
    "GenerationTrace": "langchain_adaptive_rag.options",
    "get_token_signals": "langchain_adaptive_rag.token_signals",
    "HiddenLayerError": "langchain_adaptive_rag.errors",
    "load_bm25_retriever": "langchain_adaptive_rag.retrievers",
    "load_exemplars": "langchain_adaptive_rag.exemplars",
    "ModelServerError": "langchain_adaptive_rag.errors",
    "PromptTooLongError": "langchain_adaptive_rag.errors",
    "QAPrompts": "langchain_adaptive_rag.prompts",
    "RetrieverOptions": "langchain_adaptive_rag.retrieving",
    "SeaKRConfig": "langchain_adaptive_rag.graphs.seakr",
    "SearchAgentConfig": "langchain_adaptive_rag.graphs.search_agent",
    "SearchProtocol": "langchain_adaptive_rag.graphs.search_protocol",
    "SelfRAGConfig": "langchain_adaptive_rag.graphs.self_rag",
    "ServedModel": "langchain_adaptive_rag.served",
    "TAAREConfig": "langchain_adaptive_rag.graphs.ta_are",
    "ToolAgentConfig": "langchain_adaptive_rag.graphs.tool_agent",
    "TokenSignals": "langchain_adaptive_rag.token_signals",
}
"""Where each public name lives; a name is imported on first use (PEP 562), so the
command line and light submodules start without loading torch and transformers."""

__all__ = [
    "AVAILABLE_METHODS",
    "AdaptiveRAGConfig",
    "AdaptiveRAGError",
    "AttentionMatrix",
    "AttentionUnavailableError",
    "BM25Retriever",
    "CallCancelledError",
    "CaptureOptions",
    "ChatTransformers",
    "DRAGINConfig",
    "DecodingOptions",
    "ETCConfig",
    "Exemplar",
    "FLAREConfig",
    "FixLengthConfig",
    "FixSentenceConfig",
    "GenerationTrace",
    "HiddenLayerError",
    "IRCoTConfig",
    "MethodConfig",
    "ModelServerError",
    "PromptTooLongError",
    "QAPrompts",
    "RetrieverOptions",
    "SeaKRConfig",
    "SearchAgentConfig",
    "SearchProtocol",
    "SelfRAGConfig",
    "ServedModel",
    "TAAREConfig",
    "TokenSignals",
    "ToolAgentConfig",
    "UncertaintyGateConfig",
    "create_adaptive_rag_graph",
    "create_adaptive_rag_router_graph",
    "create_bm25_retriever",
    "create_dragin_graph",
    "create_etc_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_ircot_graph",
    "create_no_retrieval_graph",
    "create_rag_tool",
    "create_seakr_graph",
    "create_search_agent_graph",
    "create_self_rag_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_tool_agent_graph",
    "create_uncertainty_gate_graph",
    "create_vanilla_graph",
    "dataset_prompts",
    "get_token_signals",
    "load_bm25_retriever",
    "load_exemplars",
]

__version__ = "0.1.0"


__getattr__, __dir__ = lazy_exports("langchain_adaptive_rag", _EXPORTS, globals(), __all__)
install_moved_modules(MOVED_MODULES)
