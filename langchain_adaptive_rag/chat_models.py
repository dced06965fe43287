"""ChatTransformers: a LangChain chat model over a local HuggingFace causal LM."""

from __future__ import annotations

import asyncio
import functools
import json
import numbers
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from typing_extensions import Self

from langchain_adaptive_rag.cancellation import (
    run_in_thread,
    stoppable_context,
)
from langchain_adaptive_rag.chat_messages import chat_dict, message_text
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.loading import load_pretrained
from langchain_adaptive_rag.engine.local_model import LocalModel
from langchain_adaptive_rag.engine.prefix_cache import PrefixCache
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.scheduler import Scheduler
from langchain_adaptive_rag.engine.token_text import token_pieces
from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    GenerationTrace,
    HiddenSite,
    SignalDistribution,
    TokenEvent,
)
from langchain_adaptive_rag.token_signals import SIGNALS_KEY, AttentionMatrix
from langchain_adaptive_rag.tool_calling import (
    HERMES,
    BoundTools,
    ToolCallFormat,
    ToolPrompt,
    ToolReply,
)

__all__ = ["AttentionKernel", "ChatTransformers"]

T = TypeVar("T")

AttentionKernel = Literal[
    "eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"
]
"""The attention kernels [`ChatTransformers`][] loads a model with (transformers' names)."""


_CALL_OPTIONS = frozenset(
    {
        "max_new_tokens",
        "max_tokens",
        "min_new_tokens",
        "do_sample",
        "temperature",
        "top_k",
        "top_p",
        "seed",
        "signal_distribution",
        "logprobs",
        "top_logprobs",
    }
)


class ChatTransformers(BaseChatModel):
    """Chat model over a local HuggingFace causal LM that reports per-token signals.

    Every generation carries, per token, its id, text piece, log-probability and the
    entropy of the next-token distribution in ``response_metadata["token_signals"]``
    (lists, so streamed chunks add up). ``generate_trace`` additionally returns
    attention rows and hidden states as numpy arrays for the adaptive-RAG graphs.

    Setup:
        ```bash
        pip install langchain-adaptive-rag
        ```

    Instantiate:
        ```python
        from langchain_adaptive_rag import ChatTransformers

        llm = ChatTransformers(
            model="meta-llama/Llama-2-7b-chat-hf",  # hub id or local directory
            dtype="bfloat16",
            device="cuda",
            max_new_tokens=128,
            prefix_cache_mib=512,  # recent prompts' keys and values, reused
        )
        # or wrap objects already loaded:
        llm = ChatTransformers(model=hf_model, tokenizer=hf_tokenizer)
        ```

    Invoke:
        ```python
        msg = llm.invoke([("system", "Be brief."), ("human", "Who wrote Hamlet?")])
        msg.content
        ```

    Stream:
        ```python
        for chunk in llm.stream("Tell me a story"):
            print(chunk.content, end="")
        ```

    Async:
        ```python
        msg = await llm.ainvoke("Hello")
        async for chunk in llm.astream("Hello"):
            ...
        ```

    Response metadata:
        ```python
        from langchain_adaptive_rag import get_token_signals

        signals = get_token_signals(msg)
        signals.entropies  # numpy array, one entry per generated token
        msg.response_metadata["finish_reason"]  # "stop" or "length"
        msg.usage_metadata  # input, output and total tokens
        ```

    Tool calling (a model trained to call tools; ``create_agent`` works the same way):
        ```python
        reply = llm.bind_tools([search]).invoke("When was Anna Berg born?")
        reply.tool_calls  # [{"name": "search", "args": {"query": "Anna Berg"}, ...}]
        ```

    Token logprobs (OpenAI format, as ``ChatOpenAI(logprobs=True)``):
        ```python
        llm = ChatTransformers(model=..., logprobs=True, top_logprobs=3)
        llm.invoke("Hi").response_metadata["logprobs"]["content"][0]
        # {"token": ..., "logprob": ..., "bytes": [...], "top_logprobs": [...]}
        ```

    """

    model_config = ConfigDict(
        arbitrary_types_allowed=True,
        extra="forbid",
        populate_by_name=True,
        protected_namespaces=(),
    )

    model: str | PreTrainedModel
    """Hub id or local path to load, or an already loaded ``PreTrainedModel``."""
    tokenizer: PreTrainedTokenizerBase | None = None
    """Tokenizer for a loaded ``model``; loaded with ``AutoTokenizer`` when ``model`` is a path."""
    attn_implementation: AttentionKernel | None = None
    """Attention kernel. Every kernel gives attention signals: eager returns the weights,
    and on sdpa, flash or flex attention the captured layer's rows are recomputed from its
    query and key states (equal to eager's) while every layer runs the fast kernel. ``None``
    keeps transformers' default (sdpa) or, for a loaded model, its current one."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] | None = None
    """Weight dtype when loading (transformers' ``dtype=``); ``None`` means float32."""
    device: str | None = None
    """Device to put a loaded-by-path model on (``"cpu"``, ``"cuda"``, ``"cuda:1"``...)."""
    revision: str | None = None
    """Hub revision (branch, tag or commit) when loading by id."""
    local_files_only: bool = False
    """Load from the local cache or directory only, never from the hub."""
    show_loading_progress: bool = False
    """Let transformers print its "Loading weights" bars while loading by path. Off by
    default: scripts, server logs and notebooks stay clean; the process-wide setting is
    restored after the load."""
    hf_token: SecretStr | None = Field(default=None, alias="api_key")
    """Hugging Face access token for gated or private hub models (Llama-2, Llama-3), also
    accepted as ``api_key``. ``None``: the token transformers finds itself (``HF_TOKEN``
    or a saved ``hf auth login``)."""
    max_new_tokens: int = Field(default=256, alias="max_tokens", ge=1)
    """Maximum number of generated tokens (also accepted as ``max_tokens``)."""
    min_new_tokens: int = Field(default=0, ge=0)
    """End-of-sequence tokens are masked until this many tokens were generated."""
    do_sample: bool = False
    """Sample instead of greedy decoding (greedy is the papers' default)."""
    temperature: float | None = None
    """Sampling temperature; ``0`` forces greedy decoding even with ``do_sample``."""
    top_k: int | None = None
    """Top-k filter when sampling."""
    top_p: float | None = None
    """Nucleus (top-p) filter when sampling."""
    seed: int | None = None
    """Seed for sampling; sample ``i`` of an ``n``-sample trace uses ``seed + i``."""
    stop: list[str] | None = None
    """Stop strings (may span several tokens); cut from the returned text."""
    signal_distribution: SignalDistribution = "raw"
    """Distribution behind logprobs and entropies: the model's ``raw`` softmax, or the
    ``processed`` one sampled from (after temperature, top-k and top-p)."""
    logprobs: bool = False
    """Also put OpenAI-format logprobs in ``response_metadata["logprobs"]``."""
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    """Number of alternatives per token in the OpenAI-format logprobs."""
    streaming: bool = False
    """Serve ``invoke`` through the streaming path (LangChain's ``streaming`` flag)."""
    use_chat_template: bool = True
    """Format messages with the tokenizer's chat template. When ``False`` the message
    contents are joined with newlines and used as a plain completion prompt."""
    batch_concurrent_calls: bool | None = None
    """Decode calls that arrive together from several threads or async tasks (graph
    ``batch``/``abatch``, ``eval --concurrency N``, several users) in one batched loop;
    each keeps its own options, signals and callbacks, and greedy outputs equal a call
    made alone. The model's forward passes then all run on one thread of its own.
    ``None`` (default): on when the model is on an accelerator, off on a CPU, where
    torch's intra-op (OpenMP) threads run 2-3x slower once a second live thread uses them
    (set ``True`` there for concurrent runs that do no other torch work meanwhile).
    ``False``: one call at a time, in the caller's thread, behind a lock."""
    max_batch_rows: int = Field(default=64, ge=1)
    """Most sequences (samples of all joined calls) decoded in one batch."""
    prefix_cache_mib: int = Field(default=512, ge=0)
    """Memory (MiB) for the keys and values of recent prompts: a prompt that starts like
    a stored one (few-shot exemplars, a continuation of the previous call) prefills only
    the tokens after the shared prefix (see ``prefix_cache``). ``0`` turns it off."""
    share_prompts: bool = True
    """Let the samples of one call (SeaKR's greedy step and its ``k`` samples) attend to
    one copy of their prompt's keys and values instead of a copy each: ``k + 1`` times
    less memory for the prompt and less attention time. Outputs equal those of copies
    (greedy tokens identical, signals within 1e-4); loops that capture attention rows and
    models with sliding-window or hybrid caches keep a copy per sample. Set it before
    the first call."""
    timeout: float | None = Field(default=None, alias="request_timeout")
    """Accepted for LangChain's standard chat-model parameters and ignored: a local model
    makes no network request to time out (a generation is bounded by ``max_new_tokens``)."""
    max_retries: int | None = None
    """Accepted for LangChain's standard chat-model parameters and ignored: a local model
    has no transient network failure to retry."""

    _local: LocalModel = PrivateAttr()

    @field_validator("model", mode="before")
    @classmethod
    def _check_model(cls, value: object) -> object:
        if not isinstance(value, (str, PreTrainedModel)):
            msg = (
                f"model must be a hub id, a local path or a loaded PreTrainedModel; got "
                f"{type(value).__name__}."
            )
            raise AdaptiveRAGError(msg)
        return value

    @model_validator(mode="after")
    def _load(self) -> Self:
        if isinstance(self.model, str):
            model, tokenizer = load_pretrained(
                self.model,
                dtype=self.dtype,
                attn_implementation=self.attn_implementation,
                revision=self.revision,
                local_files_only=self.local_files_only,
                token=self._token(),
                device=self.device,
                show_progress=self.show_loading_progress,
                tokenizer=self.tokenizer,
            )
        else:
            if self.tokenizer is None:
                msg = (
                    f"ChatTransformers got a loaded {type(self.model).__name__} without a "
                    "tokenizer. Expected tokenizer=<its PreTrainedTokenizer>; or pass the "
                    "model's hub id or directory as model=... to load both."
                )
                raise AdaptiveRAGError(msg)
            model, tokenizer = self.model, self.tokenizer
            if self.attn_implementation is not None:
                model.set_attn_implementation(self.attn_implementation)
            if self.device is not None:
                model.to(self.device)
        self._local = LocalModel(model, tokenizer, prefix_cache_mib=self.prefix_cache_mib)
        if self.use_chat_template and not getattr(tokenizer, "chat_template", None):
            msg = (
                f"The tokenizer of {self.model_name!r} has no chat template. Expected a "
                "chat model's tokenizer; for a base model pass use_chat_template=False to "
                "use message contents as a plain completion prompt."
            )
            raise AdaptiveRAGError(msg)
        return self

    def _token(self) -> str | None:
        return self.hf_token.get_secret_value() if self.hf_token is not None else None

    @property
    def lc_secrets(self) -> dict[str, str]:
        """The hub token is a secret: serialised as a reference to ``HF_TOKEN``."""
        return {"hf_token": "HF_TOKEN"}

    @classmethod
    def from_model_id(
        cls,
        model_id: str,
        *,
        attn_implementation: AttentionKernel | None = None,
        dtype: Literal["auto", "float32", "float16", "bfloat16"] | None = None,
        device: str | None = None,
        max_new_tokens: int = 256,
    ) -> ChatTransformers:
        """Load a model and its tokenizer by hub id or local path.

        Same as ``ChatTransformers(model=model_id, ...)``; set further fields with
        ``model_copy(update=...)`` or construct the class directly.

        Args:
            model_id: Hub id (``"org/name"``) or local directory.
            attn_implementation: ``"eager"`` for attention signals.
            dtype: Weight dtype.
            device: Device to move the model to.
            max_new_tokens: Generation budget.

        Returns:
            The chat model.
        """
        return cls(
            model=model_id,
            attn_implementation=attn_implementation,
            dtype=dtype,
            device=device,
            max_new_tokens=max_new_tokens,
        )

    # -- identity -------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The hub id or path, or the loaded model's ``name_or_path``."""
        if isinstance(self.model, str):
            return self.model
        return str(getattr(self.model, "name_or_path", "") or type(self.model).__name__)

    @property
    def hf_model(self) -> PreTrainedModel:
        """The underlying ``PreTrainedModel``."""
        return self._local.model

    @property
    def hf_tokenizer(self) -> PreTrainedTokenizerBase:
        """The underlying tokenizer."""
        return self._local.tokenizer

    @property
    def local_model(self) -> LocalModel:
        """The engine's side of this chat model: lock, scheduler, caches, capabilities."""
        return self._local

    @property
    def capabilities(self) -> ModelCapabilities:
        """What the engine supports for this model (cache kind, joins, shared prompts)."""
        return self._local.capabilities

    @property
    def attention_available(self) -> bool:
        """Whether the last layer's attention rows can be read, on this model's kernel.

        See ``check_attention``.
        """
        try:
            self.check_attention(-1)
        except AttentionUnavailableError:
            return False
        return True

    def check_attention(self, layer: int) -> None:
        """Fail unless the attention rows of decoder layer ``layer`` can be read.

        Checked once per layer with a two-token forward pass: eager models return
        weights, and on any other kernel a layer that calls transformers'
        ``AttentionInterface`` has them recomputed from its query and key states.

        Raises:
            AttentionUnavailableError: Naming why and the fix (another kernel, another
                layer of a hybrid model, or a method without attention).
            HiddenLayerError: If the layer does not exist.
        """
        self._local.check_attention(layer, self)

    def check_hidden(self, layer: int, site: HiddenSite) -> None:
        """Fail unless decoder layer ``layer`` has the hidden-state ``site``.

        A layer's ``residual`` output always exists; its ``mlp`` output needs an MLP (or
        mixture-of-experts) sub-module, which a state-space model's layers and a hybrid
        model's Mamba or attention layers lack.

        Raises:
            AdaptiveRAGError: Naming the layers that have an MLP and the fix.
            HiddenLayerError: If the layer does not exist.
        """
        self._local.check_hidden(layer, site)

    @property
    def async_executor(self) -> ThreadPoolExecutor | None:
        """The threads async calls and async graph runs wait in (``None``: asyncio's).

        An async call waits for its tokens in a thread. asyncio's default executor has
        ``cpu_count + 4`` threads, which would bound how many async calls decode together
        (6 on two cores); while batching, these are up to ``max_batch_rows``, the most a
        batch takes. The graphs built on this model run their nodes here under
        ``ainvoke``/``abatch``/``astream``.
        """
        return self._local.async_executor(self)

    async def _in_caller_thread(self, call: Callable[[], T]) -> T:
        """Run ``call`` in a caller thread with this context (callbacks, run config).

        Cancelling the wait stops the call at its next step (it leaves the batch).
        """
        return await run_in_thread(self.async_executor, call)

    @property
    def prefix_cache(self) -> PrefixCache | None:
        """The stored prompt prefixes (``None`` when ``prefix_cache_mib`` is 0).

        Its ``stats`` tell how many prompt tokens were taken from it; call
        ``clear_prefix_cache`` after changing the model's weights or dtype.
        """
        return self._local.prefix_cache

    def clear_prefix_cache(self) -> None:
        """Forget the stored prompt prefixes (call after changing the model's weights or dtype)."""
        if self._local.prefix_cache is not None:
            self._local.prefix_cache.clear()

    @property
    def num_layers(self) -> int:
        """Number of decoder layers."""
        return self._local.num_layers

    @property
    def _llm_type(self) -> str:
        return "chat-transformers"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.do_sample,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "seed": self.seed,
            "signal_distribution": self.signal_distribution,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "transformers"
        override = kwargs.get("model")
        params["ls_model_name"] = override if isinstance(override, str) else self.model_name
        return params

    # -- prompts --------------------------------------------------------------------

    def encode(self, prompt: str | Sequence[BaseMessage] | Sequence[int]) -> list[int]:
        """Token ids of a prompt.

        Args:
            prompt: Plain text (a completion prompt, tokenized with the tokenizer's special
                tokens such as BOS), chat messages (formatted with the chat template,
                or joined as plain text when ``use_chat_template`` is false), or token ids
                (used as they are).

        Returns:
            The prompt's token ids.
        """
        tokenizer = self.hf_tokenizer
        if isinstance(prompt, str):
            ids: list[int] = tokenizer(prompt)["input_ids"]
            return ids
        if prompt and all(isinstance(i, numbers.Integral) for i in prompt):
            return [int(i) for i in prompt]  # type: ignore[arg-type]
        messages = [m for m in prompt if isinstance(m, BaseMessage)]
        if len(messages) != len(prompt):
            kinds = sorted({type(m).__name__ for m in prompt})
            msg = (
                f"Received a prompt of {kinds}. Expected text, a sequence of messages, or a "
                "sequence of token ids."
            )
            raise AdaptiveRAGError(msg)
        if not messages:
            msg = "Received no messages. Expected at least one message or a text prompt."
            raise AdaptiveRAGError(msg)
        if not self.use_chat_template:
            text = "\n".join(message_text(m) for m in messages)
            return list(tokenizer(text)["input_ids"])
        continue_last = isinstance(messages[-1], AIMessage)
        rendered: str = tokenizer.apply_chat_template(
            [chat_dict(m) for m in messages],
            tokenize=False,
            add_generation_prompt=not continue_last,
            continue_final_message=continue_last,
        )
        return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])

    # -- options --------------------------------------------------------------------

    def _decoding(self, stop: Sequence[str] | None, options: Mapping[str, Any]) -> DecodingOptions:
        unknown = sorted(set(options) - _CALL_OPTIONS)
        if unknown:
            msg = (
                f"Unknown generation option(s) {unknown} for ChatTransformers. Expected any "
                f"of {sorted(_CALL_OPTIONS)}, or stop=[...]."
            )
            raise TypeError(msg)

        def pick(name: str, default: Any) -> Any:
            value = options.get(name)
            return default if value is None else value

        max_new = options.get("max_new_tokens", options.get("max_tokens")) or self.max_new_tokens
        temperature = pick("temperature", self.temperature)
        want_logprobs = bool(pick("logprobs", self.logprobs))
        top_logprobs = int(pick("top_logprobs", self.top_logprobs) or 0)
        stops = tuple(stop) if stop is not None else tuple(self.stop or ())
        return DecodingOptions(
            max_new_tokens=int(max_new),
            min_new_tokens=min(int(pick("min_new_tokens", self.min_new_tokens)), int(max_new)),
            do_sample=bool(pick("do_sample", self.do_sample)),
            temperature=1.0 if temperature is None else float(temperature),
            top_k=pick("top_k", self.top_k),
            top_p=pick("top_p", self.top_p),
            seed=pick("seed", self.seed),
            stop=stops,
            signal_distribution=pick("signal_distribution", self.signal_distribution),
            top_logprobs=top_logprobs if want_logprobs else 0,
        )

    def _wants_logprobs(self, options: Mapping[str, Any]) -> bool:
        value = options.get("logprobs")
        return bool(self.logprobs if value is None else value)

    @property
    def batching(self) -> bool:
        """Whether concurrent calls decode together (see ``batch_concurrent_calls``)."""
        return self._local.batching(self)

    def _decode(self, request: DecodeRequest, *, stream: bool = True) -> Iterator[TokenEvent]:
        """Decode one request with this model's current settings (see ``LocalModel.decode``)."""
        return self._local.decode(request, self, stream=stream)

    @property
    def scheduler(self) -> Scheduler | None:
        """The scheduler joining concurrent calls (made by the first batched call)."""
        return self._local.started_scheduler

    @property
    def engine(self) -> Scheduler | None:
        """The old name of ``scheduler``: it warns, and goes in a later release."""
        warnings.warn(
            "ChatTransformers.engine is now ChatTransformers.scheduler; the old name will "
            "be removed in a later release. Fix: read llm.scheduler.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.scheduler

    # -- LangChain chat model API -----------------------------------------------------

    def bind_tools(  # type: ignore[override]
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | bool | None = None,
        tool_format: ToolCallFormat | None = None,
        max_tokens: int | None = None,
        ls_structured_output_format: dict[str, Any] | None = None,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools: the model is shown them and its calls are read from its text.

        The model must have been trained to call tools in ``tool_format``: the default,
        [`HermesToolCalls`][langchain_adaptive_rag.tool_calling.HermesToolCalls], shows the
        tools through the model's chat template and reads ``<tool_call>`` JSON (Qwen2.5,
        Qwen3, Hermes); ``SearchToolCalls(protocol)`` makes a searcher's query tags calls of
        one search tool. ``create_agent`` calls this itself (a ``tool_format`` in its
        ``model_settings`` is passed on).

        Args:
            tools: Tools, functions, pydantic models or OpenAI tool dictionaries.
            tool_choice: ``None`` or ``"auto"``: the model decides; ``"none"``: it answers
                without calling; ``"required"``, ``"any"`` or ``True``: it calls one (the
                call's opening is written for it); a tool's name: it calls that tool.
            tool_format: How the tools are shown and the calls written (default: hermes).
            max_tokens: Tokens each call may generate (``None``: ``max_new_tokens``); a
                ``create_agent`` middleware's ``model_settings`` pass it here.
            ls_structured_output_format: LangChain's tracing record of a structured-output
                call (``with_structured_output`` passes it).

        Returns:
            The model with the tools bound (LangChain's ``Runnable`` of messages).

        Raises:
            AdaptiveRAGError: ``tool_choice`` names no bound tool.
        """
        converted = tuple(convert_to_openai_tool(tool) for tool in tools)
        names = [str(tool["function"]["name"]) for tool in converted]
        if tool_choice in (None, "auto"):
            choice = "auto"
        elif tool_choice in (True, "any", "required"):
            choice = "required"
        elif tool_choice == "none" or tool_choice is False:
            choice = "none"
        elif isinstance(tool_choice, str) and tool_choice in names:
            choice = tool_choice
        else:
            msg = (
                f"Received tool_choice={tool_choice!r}; expected 'auto', 'none', 'required', "
                f"'any', True or a bound tool's name {names}."
            )
            raise AdaptiveRAGError(msg)
        options: dict[str, Any] = {"tools": BoundTools(converted, choice, tool_format or HERMES)}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if ls_structured_output_format is not None:
            options["ls_structured_output_format"] = ls_structured_output_format
        return self.bind(**options)

    def _split_tools(self, options: dict[str, Any]) -> tuple[BoundTools | None, dict[str, Any]]:
        """The bound tools of a call (``bind_tools``) and its other options."""
        rest = dict(options)
        bound = rest.pop("tools", None)
        if bound is None or isinstance(bound, BoundTools):
            return bound, rest
        msg = (
            f"ChatTransformers received tools={type(bound).__name__}; expected tools bound "
            "with bind_tools. Fix: llm.bind_tools([...]).invoke(...)."
        )
        raise AdaptiveRAGError(msg)

    def _prepare(
        self, messages: list[BaseMessage], stop: list[str] | None, options: dict[str, Any]
    ) -> tuple[DecodeRequest, BoundTools | None, ToolPrompt | None]:
        """A call's decode request, its bound tools and, with tools, its prompt."""
        bound, rest = self._split_tools(options)
        if bound is None:
            decoding = self._decoding(stop, rest)
            prompt_ids = self.encode(messages)
            return self._request(prompt_ids, decoding), None, None
        stops = tuple(stop) if stop is not None else tuple(self.stop or ())
        extra = [s for s in bound.format.stop_strings(bound) if s not in stops]
        decoding = self._decoding([*stops, *extra], rest)
        prompt = bound.format.render(messages, bound, self.hf_tokenizer)
        tokenized = self.hf_tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)
        return self._request(list(tokenized["input_ids"]), decoding), bound, prompt

    def _request(self, prompt_ids: list[int], decoding: DecodingOptions) -> DecodeRequest:
        return DecodeRequest(self.hf_model, self.hf_tokenizer, prompt_ids, decoding=decoding)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        request, bound, prompt = self._prepare(messages, stop, kwargs)
        for _ in self._decode(request, stream=False):
            pass
        trace = request.traces[0]
        events = [
            TokenEvent(
                sample=0,
                index=i,
                token_id=int(trace.token_ids[i]),
                piece=trace.tokens[i],
                logprob=float(trace.logprobs[i]),
                entropy=float(trace.entropies[i]),
                top_token_ids=tuple(int(x) for x in trace.top_token_ids[i])
                if trace.top_token_ids is not None
                else (),
                top_logprobs=tuple(float(x) for x in trace.top_logprobs[i])
                if trace.top_logprobs is not None
                else (),
            )
            for i in range(trace.num_tokens)
        ]
        metadata = self._token_metadata(events, self._wants_logprobs(kwargs))
        metadata.update(self._final_metadata(trace))
        usage = _usage(len(request.prompt_ids), trace.num_tokens)
        if bound is None or prompt is None:
            message = AIMessage(
                content=trace.text, response_metadata=metadata, usage_metadata=usage
            )
        else:
            reply = bound.format.parse(prompt.prefill + trace.text, trace.stop_string, bound)
            message = AIMessage(
                content=reply.content,
                tool_calls=reply.tool_calls,
                invalid_tool_calls=reply.invalid_tool_calls,
                response_metadata=metadata,
                usage_metadata=usage,
            )
        return ChatResult(
            generations=[
                ChatGeneration(
                    message=message, generation_info={"finish_reason": trace.finish_reason}
                )
            ]
        )

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        want_logprobs = self._wants_logprobs(kwargs)
        request, bound, prompt = self._prepare(messages, stop, kwargs)
        release = _Release(
            bound.format.held_from if bound else None, prompt.prefill if prompt else ""
        )
        for event in self._decode(request):
            piece = release.feed(event.piece)
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(
                    content=piece,
                    response_metadata=self._token_metadata([event], want_logprobs),
                )
            )
            if run_manager is not None and piece:
                run_manager.on_llm_new_token(piece, chunk=chunk)
            yield chunk
        trace = request.traces[0]
        rest, calls = "", []
        if bound is not None and prompt is not None:
            reply = bound.format.parse(prompt.prefill + trace.text, trace.stop_string, bound)
            rest, calls = release.rest(reply), _call_chunks(reply)
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=rest,
                tool_call_chunks=calls,
                response_metadata=self._final_metadata(trace),
                usage_metadata=_usage(len(request.prompt_ids), trace.num_tokens),
                chunk_position="last",
            ),
            generation_info={"finish_reason": trace.finish_reason},
        )

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # LangChain's default runs _generate in asyncio's default executor; the caller
        # threads let as many async calls wait for the engine as a batch can take.
        sync_manager = run_manager.get_sync() if run_manager is not None else None
        call = functools.partial(self._generate, messages, stop, sync_manager, **kwargs)
        return await self._in_caller_thread(call)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        # The sync stream is read in one executor thread (decoding runs in the model's
        # engine, joined with other calls); chunks cross to the event loop through a queue.
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[ChatGenerationChunk | BaseException | None] = asyncio.Queue()
        cancelled = threading.Event()

        def produce() -> None:
            try:
                for chunk in self._stream(messages, stop, None, **kwargs):
                    if cancelled.is_set():
                        break
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            except BaseException as error:  # re-raised in the consumer
                loop.call_soon_threadsafe(queue.put_nowait, error)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        # Set when the reader stops (closes the stream, or is cancelled): the call then
        # leaves the batch at its next step, even while no chunk comes.
        context = stoppable_context(cancelled)
        worker = loop.run_in_executor(self.async_executor, context.run, produce)
        try:
            while (item := await queue.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                if run_manager is not None and item.message.content:
                    await run_manager.on_llm_new_token(item.text, chunk=item)
                yield item
        finally:
            cancelled.set()
            await worker

    def _token_metadata(self, events: Sequence[TokenEvent], want_logprobs: bool) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            SIGNALS_KEY: {
                "token_ids": [e.token_id for e in events],
                "tokens": [e.piece for e in events],
                "logprobs": [e.logprob for e in events],
                "entropies": [e.entropy for e in events],
            }
        }
        if want_logprobs:
            metadata["logprobs"] = {"content": [self._openai_logprob(e) for e in events]}
        return metadata

    def _openai_logprob(self, event: TokenEvent) -> dict[str, Any]:
        tokenizer = self.hf_tokenizer
        alternatives = [
            {
                "token": tokenizer.decode([tid]),
                "logprob": lp,
                "bytes": list(tokenizer.decode([tid]).encode("utf-8")),
            }
            for tid, lp in zip(event.top_token_ids, event.top_logprobs, strict=True)
        ]
        return {
            "token": event.piece,
            "logprob": event.logprob,
            "bytes": list(event.piece.encode("utf-8")),
            "top_logprobs": alternatives,
        }

    def _final_metadata(self, trace: GenerationTrace) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "model_name": self.model_name,
            "finish_reason": trace.finish_reason,
        }
        if trace.stop_string is not None:
            metadata["stop_string"] = trace.stop_string
        return metadata

    # -- lower-level calls for the graphs ----------------------------------------------

    @property
    def decoding(self) -> DecodingOptions:
        """This model's decoding settings as one object (its fields; greedy by default).

        ``dataclasses.replace(model.decoding, max_new_tokens=32, stop=(".",))`` changes
        some of them for one ``generate_trace`` call.
        """
        return self._decoding(None, {})

    def generate_trace(
        self,
        prompt: str | Sequence[BaseMessage] | Sequence[int],
        *,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
        n: int = 1,
        include_greedy: bool = False,
        on_token: Callable[[TokenEvent], None] | None = None,
    ) -> list[GenerationTrace]:
        """Generate ``n`` samples in one batched decoding loop and return their traces.

        Args:
            prompt: Plain text (completion), chat messages (chat template) or token ids.
            decoding: How tokens are chosen and when decoding stops (budget, sampling,
                seed, stop strings, signal distribution, alternatives recorded).
                Default: ``decoding``, this model's own fields.
            capture: Which internal signals to record beyond logprobs and entropies
                (attention rows, a hidden state). Default: none.
            n: Number of samples decoded together.
            include_greedy: Prepend a greedy sample (SeaKR's greedy step plus k samples).
            on_token: Called with each token of the first sample as soon as it is final
                (after stop-string hold-back), for streaming.

        Returns:
            One trace per sample (the greedy one first when ``include_greedy``).
        """
        prompt_ids = self.encode(prompt)
        request = DecodeRequest(
            self.hf_model,
            self.hf_tokenizer,
            prompt_ids,
            n=n,
            include_greedy=include_greedy,
            decoding=decoding if decoding is not None else self.decoding,
            capture=capture if capture is not None else CaptureOptions(),
        )
        for event in self._decode(request, stream=on_token is not None):
            if on_token is not None:
                on_token(event)
        return request.traces

    async def agenerate_trace(
        self,
        prompt: str | Sequence[BaseMessage] | Sequence[int],
        *,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
        n: int = 1,
        include_greedy: bool = False,
    ) -> list[GenerationTrace]:
        """Async ``generate_trace``: the same arguments, run in a caller thread."""
        call = functools.partial(
            self.generate_trace,
            prompt,
            decoding=decoding,
            capture=capture,
            n=n,
            include_greedy=include_greedy,
        )
        return await self._in_caller_thread(call)

    def forward_attention(self, text: str | Sequence[int], *, layer: int = -1) -> AttentionMatrix:
        """Run one forward pass over ``text`` and return one layer's attention.

        This is the DRAGIN reference code's out-of-context pass over the generated text.
        On a non-eager kernel the weights are recomputed for that layer alone from its
        query and key states (equal to eager's).

        Args:
            text: Text (tokenized with the tokenizer's special tokens) or token ids.
            layer: Decoder layer (negative counts from the last).

        Returns:
            The per-head attention matrix of that layer.
        """
        ids = self.encode(text) if isinstance(text, str) else [int(i) for i in text]
        if not ids:
            msg = "forward_attention received an empty text. Expected at least one token."
            raise AdaptiveRAGError(msg)
        weights = self._local.attention_weights(ids, layer, self)
        return AttentionMatrix(
            token_ids=np.asarray(ids, dtype=np.int64),
            tokens=token_pieces(self.hf_tokenizer, ids),
            weights=weights,
        )


class _Release:
    """The streamed content of a reply with tools bound.

    Text up to a call is released as it comes (less any end that may start the call's
    opening); a call is held back.
    """

    def __init__(self, held_from: str | None, prefill: str) -> None:
        self._held_from = held_from
        self._text = prefill
        self._sent = 0

    def feed(self, piece: str) -> str:
        """The content that ``piece`` releases."""
        self._text += piece
        limit = len(self._text)
        if self._held_from is not None:
            at = self._text.find(self._held_from)
            limit = at if at >= 0 else limit - _partial_opening(self._text, self._held_from)
        limit = max(limit, self._sent)
        released = self._text[self._sent : limit]
        self._sent = limit
        return released

    def rest(self, reply: ToolReply) -> str:
        """The content not yet released, once the reply is read."""
        sent = self._text[: self._sent]
        return reply.content[len(sent) :] if reply.content.startswith(sent) else ""


def _partial_opening(text: str, opening: str) -> int:
    """The length of the longest end of ``text`` that ``opening`` starts with."""
    for size in range(min(len(text), len(opening) - 1), 0, -1):
        if opening.startswith(text[-size:]):
            return size
    return 0


def _call_chunks(reply: ToolReply) -> list[Any]:
    """A reply's calls as the stream's last chunk carries them (arguments as JSON)."""
    chunks = [
        tool_call_chunk(name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i)
        for i, c in enumerate(reply.tool_calls)
    ]
    chunks += [
        tool_call_chunk(name=c["name"], args=c["args"], id=c["id"], index=len(chunks) + i)
        for i, c in enumerate(reply.invalid_tool_calls)
    ]
    return chunks


def _usage(input_tokens: int, output_tokens: int) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
