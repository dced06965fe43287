"""Any LangChain chat model or LLM as the model the graphs read traces from.

[`ChatTransformers`][] decodes in-process and reads every signal exactly. A served model
(``ChatOpenAI`` on vLLM, SGLang, llama.cpp or OpenAI; the ``OpenAI`` completions LLM for
base models; any other ``BaseChatModel``) gives text, a finish reason and, when asked,
each token's log-probability with its top-k alternatives. [`ServedModel`][] turns
each response into a [`GenerationTrace`][], so the
methods that read only text or log-probabilities run on it unchanged; the methods that
read attention rows (DRAGIN) or hidden states (SeaKR's Gram estimator) are refused when
their graph is built.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from langchain_core.language_models import BaseChatModel, BaseLanguageModel, BaseLLM
from langchain_core.messages import HumanMessage
from langchain_core.outputs import ChatGeneration, Generation, LLMResult
from langchain_core.runnables import RunnableConfig, ensure_config

from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    ModelServerError,
)
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    FinishReason,
    GenerationTrace,
    HiddenSite,
    TokenEvent,
)
from langchain_adaptive_rag.served.requests import provider_of, request_arguments
from langchain_adaptive_rag.served.responses import read_logprobs, trace_from_response

if TYPE_CHECKING:
    from langchain_adaptive_rag.options import TraceModel

__all__ = ["ServedModel", "as_trace_model", "is_transient"]

_TRANSIENT = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "RateLimitError",
        "InternalServerError",
        "ConnectError",
        "ConnectTimeout",
        "ReadTimeout",
        "RemoteProtocolError",
        "TimeoutException",
    }
)
_SERVER_SIDE = frozenset({"APIError", "APIStatusError", "ResponseError"})

_NO_ATTENTION = (
    "this method reads attention rows of the generated tokens over the prompt (DRAGIN's "
    "RIND and QFS), and no serving engine (vLLM, SGLang, llama.cpp, Ollama, OpenAI) "
    "returns attention over its API"
)
_NO_ATTENTION_FIX = (
    "run DRAGIN on ChatTransformers(model=...) in-process (the same weights, on a GPU "
    "with device='cuda'), or use a method that reads log-probabilities on the server "
    "(create_flare_graph)"
)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request may succeed when sent again.

    Connection failures, timeouts, rate limits (429) and server errors (5xx) are; a
    rejected request (400, 401, 404, ...) is not.
    """
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if {cls.__name__ for cls in type(exc).__mro__} & _TRANSIENT:
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


class ServedModel:
    """A LangChain chat model or LLM as the graphs' model.

    Each generation is one request: the completion prompt as one human message (chat
    models) or as the prompt (LLMs, such as ``langchain_openai.OpenAI`` on a server's
    ``/v1/completions``: the way to serve a base model). The token budget goes as
    ``max_tokens``, stop strings as ``stop``, greedy decoding as ``temperature=0`` and
    sampling as ``temperature``, ``top_p``, ``top_k`` (self-hosted servers) and ``seed``
    (sample ``i`` of ``n`` gets ``seed + i``); ``n`` samples are ``n`` concurrent
    requests. Token log-probabilities and their top-k alternatives are asked of the
    OpenAI integrations; the entropies are top-k lower bounds
    (``top_k_entropy``).

    A failed request is sent again after ``backoff_s``, doubling, up to ``retries``
    times when it may succeed ([`is_transient`][]), then raises
    [`ModelServerError`][].

    Attributes:
        model: The LangChain model.
        top_logprobs: Alternatives asked per token (OpenAI allows up to 20; vLLM up to
            its ``--max-logprobs``).
        retries: Attempts after the first for a transient failure.
        backoff_s: Wait before the first retry, doubled after each.
        max_parallel_requests: Requests sent at once for the samples of one call.
    """

    def __init__(
        self,
        model: BaseLanguageModel[Any],
        *,
        decoding: DecodingOptions | None = None,
        top_logprobs: int = 5,
        retries: int = 3,
        backoff_s: float = 1.0,
        max_parallel_requests: int = 8,
    ) -> None:
        """Wrap ``model``.

        Args:
            model: A ``BaseChatModel`` or ``BaseLLM``.
            decoding: The model's default decoding (default: greedy, 256 tokens); the
                graphs set each call's budget and stop strings.
            top_logprobs: Alternatives asked per token, 0 to 20.
            retries: Attempts after the first for a transient failure (>= 0).
            backoff_s: Wait before the first retry in seconds (>= 0).
            max_parallel_requests: Concurrent requests of one call's samples (>= 1).

        Raises:
            AdaptiveRAGError: ``model`` is not a LangChain language model, or an
                argument is out of range.
        """
        if not isinstance(model, (BaseChatModel, BaseLLM)):
            msg = (
                f"ServedModel takes a LangChain chat model or LLM, got "
                f"{type(model).__name__}. Fix: pass a BaseChatModel such as "
                "ChatOpenAI(base_url=..., model=...), or a BaseLLM such as "
                "langchain_openai.OpenAI for a completions endpoint."
            )
            raise AdaptiveRAGError(msg)
        limits = {
            "top_logprobs": (top_logprobs, 0 <= top_logprobs <= 20, "an integer in [0, 20]"),
            "retries": (retries, retries >= 0, ">= 0"),
            "backoff_s": (backoff_s, backoff_s >= 0, ">= 0"),
            "max_parallel_requests": (max_parallel_requests, max_parallel_requests >= 1, ">= 1"),
        }
        for name, (value, ok, expected) in limits.items():
            if not ok:
                msg = f"ServedModel({name}=...) must be {expected}, got {value!r}."
                raise AdaptiveRAGError(msg)
        self.model = model
        self._decoding = decoding or DecodingOptions()
        self.top_logprobs = top_logprobs
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_parallel_requests = max_parallel_requests
        self._provider = provider_of(model)
        self._callers: ThreadPoolExecutor | None = None
        self._callers_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ServedModel({type(self.model).__name__}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str | None:
        """The server the model talks to, when it says (``None``: its provider's own)."""
        for name in ("openai_api_base", "base_url"):
            value = getattr(self.model, name, None)
            if isinstance(value, str) and value:
                return value
        return None

    @property
    def decoding(self) -> DecodingOptions:
        """The default decoding settings (greedy; the graphs set budget and stops)."""
        return self._decoding

    @property
    def attention_available(self) -> bool:
        """Always false: no server returns attention."""
        return False

    def check_attention(self, layer: int) -> None:
        """Refuse: a served model gives no attention rows.

        Raises:
            AttentionUnavailableError: Always, naming why and the fix.
        """
        raise AttentionUnavailableError(
            None,
            f"{_NO_ATTENTION} (layer {layer} was asked)",
            fix=_NO_ATTENTION_FIX,
            served=repr(self),
        )

    def check_hidden(self, layer: int, site: HiddenSite) -> None:
        """Refuse: a served model gives no hidden states.

        Raises:
            AdaptiveRAGError: Always, naming why and the fix.
        """
        msg = (
            f"The model is served ({self!r}), and this method reads the {site} hidden "
            f"state of layer {layer} at each step's end (SeaKR's Gram estimator); no "
            "serving engine returns hidden states over its API. Fix: run SeaKR on "
            "ChatTransformers(model=...) in-process, or choose an estimator that reads "
            "only samples and log-probabilities: SeaKRConfig(estimator='ln_entropy'), "
            "'multi_sample_perplexity' or 'perplexity'."
        )
        raise AdaptiveRAGError(msg)

    @property
    def async_executor(self) -> ThreadPoolExecutor:
        """The threads async graph runs wait in: 64, so that a batch's requests all go out.

        asyncio's default executor has ``cpu_count + 4`` threads, which would bound how
        many requests the server gets at once (6 on two cores).
        """
        with self._callers_lock:
            if self._callers is None:
                self._callers = ThreadPoolExecutor(
                    max_workers=64, thread_name_prefix="adaptive-rag-request"
                )
            return self._callers

    def generate_trace(
        self,
        prompt: str,
        *,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
        n: int = 1,
        include_greedy: bool = False,
        on_token: Callable[[TokenEvent], None] | None = None,
    ) -> list[GenerationTrace]:
        """Generate ``n`` samples (and a greedy one first with ``include_greedy``).

        Args:
            prompt: The completion prompt.
            decoding: Budget, stops and sampling (default: ``decoding``).
            capture: The signals the caller reads: ``logprobs`` must come back;
                attention and hidden states cannot.
            n: Samples.
            include_greedy: Put a greedy sample first.
            on_token: Called with each token of the first sample once its response
                arrived (a served call is not streamed).

        Returns:
            One trace per sample.

        Raises:
            AdaptiveRAGError: The call asks for attention or hidden states, or reads
                log-probabilities the server did not return.
            ModelServerError: The server failed, after the retries.
        """
        options = decoding if decoding is not None else self._decoding
        wanted = capture if capture is not None else CaptureOptions()
        if wanted.attention:
            self.check_attention(wanted.attention_layer)
        if wanted.hidden:
            self.check_hidden(wanted.hidden_layer, wanted.hidden_site)
        plans: list[tuple[DecodingOptions, int | None]] = []
        if include_greedy:
            plans.append((replace(options, do_sample=False), None))
        for i in range(n):
            seed = None if options.seed is None or not options.sampling else options.seed + i
            plans.append((options, seed))
        if len(plans) == 1:
            traces = [self._generate(prompt, *plans[0])]
        else:
            workers = min(len(plans), self.max_parallel_requests)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                context = ensure_config()
                traces = list(
                    pool.map(lambda plan: self._generate(prompt, *plan, config=context), plans)
                )
        if wanted.logprobs:
            for trace in traces:
                self._check_logprobs(trace)
        if on_token is not None and traces:
            _release(traces[0], on_token)
        return traces

    def _check_logprobs(self, trace: GenerationTrace) -> None:
        if trace.tokens and np.isnan(trace.logprobs).all():
            msg = (
                f"The model returned no token log-probabilities ({self!r}), and this method "
                "reads them (FLARE's token probabilities, SeaKR's sample estimators). Fix: "
                "ChatOpenAI(base_url=..., logprobs=True, top_logprobs=5), or "
                "langchain_openai.OpenAI(..., logprobs=5) for a completions endpoint; "
                "vLLM needs --max-logprobs of at least top_logprobs. A model that cannot "
                "return them runs the text methods only (wo-RAG, SR-RAG, FL-RAG, FS-RAG, "
                "Vanilla, TA-ARE)."
            )
            raise AdaptiveRAGError(msg)

    def _generate(
        self,
        prompt: str,
        options: DecodingOptions,
        seed: int | None,
        *,
        config: RunnableConfig | None = None,
    ) -> GenerationTrace:
        arguments = request_arguments(
            self._provider,
            options,
            seed=seed,
            top_logprobs=self.top_logprobs,
            self_hosted=self.base_url is not None,
        )
        stop = list(options.stop) or None
        callbacks = (config if config is not None else ensure_config()).get("callbacks")
        generation, (prompt_tokens, generated_tokens) = self._request(
            prompt, stop, callbacks, arguments
        )
        text = generation.text
        info = dict(generation.generation_info or {})
        if isinstance(generation, ChatGeneration):
            info = {**generation.message.response_metadata, **info}
        finish = str(info.get("finish_reason") or info.get("done_reason") or "stop")
        reason: FinishReason = "length" if finish == "length" else "stop"
        stop_string = options.stop[0] if reason == "stop" and len(options.stop) == 1 else None
        cut = _first_stop(text, options.stop)
        if cut is not None:  # a model that does not honour ``stop``
            text, stop_string, reason = text[: cut[0]], cut[1], "stop"
        return trace_from_response(
            text,
            reason,
            read_logprobs(info.get("logprobs")),
            stop_string=stop_string,
            max_new_tokens=options.max_new_tokens,
            generated_tokens=generated_tokens,
            prompt_tokens=prompt_tokens,
        )

    def _request(
        self,
        prompt: str,
        stop: list[str] | None,
        callbacks: Any,
        arguments: dict[str, Any],
    ) -> tuple[Generation, tuple[int | None, int | None]]:
        """The first generation of one request, and its token counts (prompt, generated)."""
        attempt = 0
        while True:
            try:
                if isinstance(self.model, BaseChatModel):
                    result = self.model.generate(
                        [[HumanMessage(prompt)]], stop=stop, callbacks=callbacks, **arguments
                    )
                else:
                    assert isinstance(self.model, BaseLLM)  # checked in __init__
                    result = self.model.generate(
                        [prompt], stop=stop, callbacks=callbacks, **arguments
                    )
                return result.generations[0][0], _token_counts(result)
            except Exception as exc:
                transient = is_transient(exc)
                if transient and attempt < self.retries:
                    time.sleep(self.backoff_s * 2**attempt)
                    attempt += 1
                    continue
                names = {cls.__name__ for cls in type(exc).__mro__}
                if transient or names & _SERVER_SIDE:
                    raise ModelServerError(exc, attempt + 1, self.base_url) from exc
                raise


def _token_counts(result: LLMResult) -> tuple[int | None, int | None]:
    """The prompt's and the completion's token counts (``None``: not reported).

    The message's usage, or else the completions endpoint's ``token_usage``.
    """
    generation = result.generations[0][0]
    if isinstance(generation, ChatGeneration):
        usage = getattr(generation.message, "usage_metadata", None)
        if usage and usage.get("output_tokens") is not None:
            read = usage.get("input_tokens")
            return (int(read) if read is not None else None), int(usage["output_tokens"])
    token_usage = (result.llm_output or {}).get("token_usage") or {}
    read, written = token_usage.get("prompt_tokens"), token_usage.get("completion_tokens")
    return (
        int(read) if isinstance(read, int) else None,
        int(written) if isinstance(written, int) else None,
    )


def _first_stop(text: str, stops: tuple[str, ...]) -> tuple[int, str] | None:
    """The earliest stop string in ``text`` and where it starts."""
    found = [(text.find(stop), stop) for stop in stops if stop in text]
    return min(found) if found else None


def _release(trace: GenerationTrace, on_token: Callable[[TokenEvent], None]) -> None:
    """Hand each token of ``trace`` to ``on_token`` (``nan``: no log-probability given)."""
    for index, piece in enumerate(trace.tokens):
        on_token(
            TokenEvent(
                sample=0,
                index=index,
                token_id=-1,
                piece=piece,
                logprob=float(trace.logprobs[index]),
                entropy=float(trace.entropies[index]),
            )
        )


def as_trace_model(model: object) -> TraceModel:
    """The graphs' model for ``model``: itself when it generates traces, else served.

    Args:
        model: [`ChatTransformers`][] (or any object with ``generate_trace``), or any
            LangChain chat model or LLM.

    Returns:
        ``model``, or ``ServedModel(model)``.

    Raises:
        AdaptiveRAGError: ``model`` is neither.
    """
    if callable(getattr(model, "generate_trace", None)):
        return cast("TraceModel", model)
    if isinstance(model, (BaseChatModel, BaseLLM)):
        return ServedModel(model)
    msg = (
        f"Received a model of type {type(model).__name__}; expected ChatTransformers, "
        "a LangChain chat model or LLM (ChatOpenAI, ChatOllama, langchain_openai.OpenAI, "
        "...) or a ServedModel. Fix: pass one of those."
    )
    raise AdaptiveRAGError(msg)
