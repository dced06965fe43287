"""A served model from the command line's ``provider:model`` spelling.

The spelling is LangChain's ``init_chat_model`` one: ``openai:MODEL`` is ``ChatOpenAI``
(an OpenAI-compatible server with ``base_url``: vLLM, SGLang, llama.cpp, Ollama's
``/v1``), ``ollama:MODEL`` is ``ChatOllama``. With ``endpoint="completions"`` an
OpenAI-compatible server is asked on ``/v1/completions`` (``langchain_openai.OpenAI``),
which is how a base model answers a completion prompt as written.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path
from typing import Any, Literal

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.served.model import ServedModel

__all__ = ["SERVED_PROVIDERS", "is_served_spelling", "load_served_model"]

SERVED_PROVIDERS = ("openai", "ollama")
"""The providers [`load_served_model`][] builds (any other model: the Python API)."""

_SPELLING = re.compile(r"^([A-Za-z][\w-]*):(.+)$")


def is_served_spelling(model: str) -> bool:
    """Whether ``model`` reads ``provider:model`` (and is not a local path)."""
    return bool(_SPELLING.match(model)) and not Path(model).expanduser().exists()


def _import(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        msg = (
            f"Serving through {module} needs that package, which is not installed. "
            f'Fix: pip install "langchain-adaptive-rag[{extra}]".'
        )
        raise AdaptiveRAGError(msg) from None


def load_served_model(
    spelling: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    endpoint: Literal["chat", "completions"] = "chat",
    top_logprobs: int = 5,
    timeout_s: float = 120.0,
    retries: int = 3,
    backoff_s: float = 1.0,
) -> ServedModel:
    """Build the served model that ``spelling`` names.

    Args:
        spelling: ``provider:model``, e.g. ``openai:gpt-4o-mini`` or, with
            ``base_url``, the model name a vLLM or llama.cpp server serves.
        base_url: The server's OpenAI-compatible root (``http://host:8000/v1``) or
            Ollama's address.
        api_key: The key (default: ``OPENAI_API_KEY``; ``"EMPTY"`` for a
            ``base_url`` without one).
        endpoint: ``chat`` (``/v1/chat/completions``) or ``completions``
            (``/v1/completions``, OpenAI-compatible servers only).
        top_logprobs: Alternatives asked per token.
        timeout_s: Time limit of one request.
        retries: Attempts after the first for a transient failure.
        backoff_s: Wait before the first retry, doubled after each.

    Returns:
        The served model (the OpenAI client's own retries are off; ``retries`` rules).

    Raises:
        AdaptiveRAGError: An unknown provider, a missing integration package, or a
            completions endpoint for a provider without one.
    """
    match = _SPELLING.match(spelling)
    if match is None or match.group(1) not in SERVED_PROVIDERS:
        msg = (
            f"Received --model {spelling!r}; a served model is spelt provider:model with a "
            f"provider in {list(SERVED_PROVIDERS)} (e.g. openai:Qwen/Qwen2.5-7B-Instruct "
            "with --base-url http://localhost:8000/v1 for vLLM). Fix: use that spelling, a "
            "model directory, or a hub id; other chat models run from Python "
            "(create_flare_graph(model=AnyChatModel(...), ...))."
        )
        raise AdaptiveRAGError(msg)
    provider, name = match.group(1), match.group(2)
    if provider == "ollama":
        if endpoint != "chat":
            msg = (
                f"Received --endpoint {endpoint} with ollama:{name}; ChatOllama has the chat "
                "endpoint only. Fix: for a base model on Ollama use its OpenAI API: "
                f"--model openai:{name} --base-url http://localhost:11434/v1 "
                "--endpoint completions."
            )
            raise AdaptiveRAGError(msg)
        module = _import("langchain_ollama", "ollama")
        options: dict[str, Any] = {"model": name}
        if base_url:
            options["base_url"] = base_url
        chat = module.ChatOllama(**options)
        return ServedModel(chat, top_logprobs=top_logprobs, retries=retries, backoff_s=backoff_s)
    module = _import("langchain_openai", "openai")
    key = api_key or os.environ.get("OPENAI_API_KEY") or ("EMPTY" if base_url else None)
    common: dict[str, Any] = {
        "model": name,
        "base_url": base_url,
        "api_key": key,
        "timeout": timeout_s,
        "max_retries": 0,
    }
    if endpoint == "completions":
        llm = module.OpenAI(**common, logprobs=max(1, top_logprobs))
    else:
        llm = module.ChatOpenAI(**common, logprobs=True, top_logprobs=top_logprobs or None)
    return ServedModel(llm, top_logprobs=top_logprobs, retries=retries, backoff_s=backoff_s)
