"""Served models: any LangChain chat model or LLM under the graphs.

See [`ServedModel`][]; [`load_served_model`][] builds one from the command line's
``provider:model`` spelling.
"""

from langchain_adaptive_rag.served.loading import load_served_model
from langchain_adaptive_rag.served.model import ServedModel, as_trace_model, is_transient
from langchain_adaptive_rag.served.requests import Provider, provider_of, request_arguments
from langchain_adaptive_rag.served.responses import (
    TokenLogprob,
    read_logprobs,
    trace_from_response,
    word_pieces,
)

__all__ = [
    "Provider",
    "ServedModel",
    "TokenLogprob",
    "as_trace_model",
    "is_transient",
    "load_served_model",
    "provider_of",
    "read_logprobs",
    "request_arguments",
    "trace_from_response",
    "word_pieces",
]
