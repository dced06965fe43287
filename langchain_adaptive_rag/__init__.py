"""Adaptive retrieval-augmented generation for LangChain and LangGraph.

The package's foundation is :class:`ChatTransformers`, a LangChain chat model over a local
HuggingFace causal LM that reports per-token entropy, log-probabilities, attention rows and
hidden states: the signals the adaptive methods use to decide when and what to retrieve.
"""

from langchain_adaptive_rag.chat_models import (
    AttentionMatrix,
    ChatTransformers,
    TokenSignals,
    get_token_signals,
)
from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    HiddenLayerError,
    PromptTooLongError,
)
from langchain_adaptive_rag.exemplars import dataset_prompts, load_exemplars
from langchain_adaptive_rag.generation import GenerationTrace
from langchain_adaptive_rag.graphs import (
    AVAILABLE_METHODS,
    create_adaptive_rag_graph,
    create_dragin_graph,
    create_fix_length_graph,
    create_fix_sentence_graph,
    create_flare_graph,
    create_no_retrieval_graph,
    create_seakr_graph,
    create_single_round_graph,
    create_ta_are_graph,
    create_vanilla_graph,
)
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, FixSentenceConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.graphs.ta_are import TAAREConfig
from langchain_adaptive_rag.policy import GenerationConfig
from langchain_adaptive_rag.prompts import Exemplar, QAPrompts
from langchain_adaptive_rag.retrievers import (
    BM25Retriever,
    create_bm25_retriever,
    load_bm25_retriever,
)
from langchain_adaptive_rag.retrieving import RetrieverOptions

__all__ = [
    "AVAILABLE_METHODS",
    "AdaptiveRAGError",
    "AttentionMatrix",
    "AttentionUnavailableError",
    "BM25Retriever",
    "ChatTransformers",
    "DRAGINConfig",
    "Exemplar",
    "FLAREConfig",
    "FixLengthConfig",
    "FixSentenceConfig",
    "GenerationConfig",
    "GenerationTrace",
    "HiddenLayerError",
    "PromptTooLongError",
    "QAPrompts",
    "RetrieverOptions",
    "SeaKRConfig",
    "TAAREConfig",
    "TokenSignals",
    "create_adaptive_rag_graph",
    "create_bm25_retriever",
    "create_dragin_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_no_retrieval_graph",
    "create_seakr_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_vanilla_graph",
    "dataset_prompts",
    "get_token_signals",
    "load_bm25_retriever",
    "load_exemplars",
]

__version__ = "0.1.0"
