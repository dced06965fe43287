"""How a token budget, stop strings, sampling and log-probabilities are asked of a server.

LangChain's standard per-call argument is ``stop``; the rest goes by each integration's
own names. The OpenAI integrations (``ChatOpenAI``, and ``OpenAI`` for the completions
endpoint), which also reach vLLM, SGLang, llama.cpp's server and Ollama's OpenAI API,
take ``max_tokens``, ``temperature``, ``top_p``, ``seed`` and ``logprobs``; a
self-hosted server also gets ``top_k`` in the request body (OpenAI's own API has none),
and, from ``ChatOpenAI`` (which sends ``max_completion_tokens``), ``max_tokens`` there too.
Any other chat model gets ``stop`` only: its budget is enforced on the returned tokens.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseLanguageModel

from langchain_adaptive_rag.options import DecodingOptions

__all__ = ["Provider", "provider_of", "request_arguments"]

Provider = Literal["openai-chat", "openai-completions", "other"]
"""``openai-chat``: ``ChatOpenAI`` and Azure's; ``openai-completions``: the ``OpenAI``
LLM (``/v1/completions``, for base models); ``other``: any other model."""

_PROVIDERS: dict[str, Provider] = {
    "openai-chat": "openai-chat",
    "azure-openai-chat": "openai-chat",
    "openai": "openai-completions",
    "azure": "openai-completions",
}


def provider_of(model: BaseLanguageModel[Any]) -> Provider:
    """Which request spelling ``model`` takes (by its LangChain ``_llm_type``)."""
    return _PROVIDERS.get(str(getattr(model, "_llm_type", "")), "other")


def request_arguments(
    provider: Provider,
    decoding: DecodingOptions,
    *,
    seed: int | None,
    top_logprobs: int,
    self_hosted: bool,
) -> dict[str, Any]:
    """Keyword arguments of one request (``stop`` goes separately).

    Args:
        provider: The model's request spelling.
        decoding: Budget and sampling of the call.
        seed: This sample's seed (``None``: the server's own).
        top_logprobs: Alternatives asked per token (0: the chosen token's only).
        self_hosted: The model has a ``base_url`` of its own (``top_k`` is sent).

    Returns:
        The arguments; empty for ``other``.
    """
    if provider == "other":
        return {}
    sampling = decoding.sampling
    arguments: dict[str, Any] = {
        "max_tokens": decoding.max_new_tokens,
        "temperature": decoding.temperature if sampling else 0.0,
    }
    if sampling and decoding.top_p is not None:
        arguments["top_p"] = decoding.top_p
    if seed is not None:
        arguments["seed"] = seed
    extra: dict[str, Any] = {}
    if sampling and decoding.top_k is not None and self_hosted:
        extra["top_k"] = decoding.top_k
    if provider == "openai-chat" and self_hosted:
        # ChatOpenAI sends the budget as max_completion_tokens, which llama.cpp's
        # Python server ignores: the body also carries the older max_tokens
        extra["max_tokens"] = decoding.max_new_tokens
    if extra:
        arguments["extra_body"] = extra
    if provider == "openai-chat":
        arguments["logprobs"] = True
        if top_logprobs:
            arguments["top_logprobs"] = top_logprobs
    else:  # the completions endpoint: the count of alternatives, the chosen token always
        arguments["logprobs"] = max(1, top_logprobs)
    return arguments
