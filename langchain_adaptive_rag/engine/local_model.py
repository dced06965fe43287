"""A loaded causal LM with what the engine keeps for it: lock, scheduler, caches, threads.

[`ChatTransformers`][] is the LangChain surface; it holds one [`LocalModel`][] and
hands it every request. The local model decodes a request alone behind its lock, or
through its [`Scheduler`][] (made at the first batched call) joined with concurrent
ones; it runs other uses of the model (probes, DRAGIN's out-of-context attention pass)
between decoding steps, and keeps the model's [`ModelCapabilities`][], its prefix
cache and the threads async callers wait in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import torch

from langchain_adaptive_rag.cancellation import check_not_cancelled, current_stop
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.hooks import AttentionCapture
from langchain_adaptive_rag.engine.kernels import cudnn_advice, cudnn_attention_may_run
from langchain_adaptive_rag.engine.layers import attn_implementation, decoder_layers, hidden_modules
from langchain_adaptive_rag.engine.prefix_cache import PrefixCache
from langchain_adaptive_rag.engine.runner import decode_together
from langchain_adaptive_rag.engine.scheduler import Scheduler
from langchain_adaptive_rag.errors import AttentionUnavailableError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from langchain_adaptive_rag.engine.request import DecodeRequest
    from langchain_adaptive_rag.options import HiddenSite, TokenEvent

__all__ = ["EngineSettings", "LocalModel"]

T = TypeVar("T")

_logger = logging.getLogger(__name__)


class EngineSettings(Protocol):
    """The settings a local model reads at each call (a [`ChatTransformers`][]'s fields)."""

    batch_concurrent_calls: bool | None
    """Join concurrent calls (``None``: on an accelerator only)."""
    max_batch_rows: int
    """Most sequences decoded in one batch."""
    share_prompts: bool
    """Let a call's samples read one copy of its prompt."""


class LocalModel:
    """A loaded causal LM and its tokenizer, decoded by the engine.

    Every call that may decode or run the model takes the caller's current
    [`EngineSettings`][] (a chat model's fields, which may change between calls).

    Args:
        model: The causal LM (put in eval mode).
        tokenizer: Its tokenizer.
        prefix_cache_mib: Memory for stored prompt prefixes (0: none).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        prefix_cache_mib: int,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.lock = threading.RLock()
        """Held while the model decodes or runs any other forward pass."""
        self.prefix_cache = PrefixCache(prefix_cache_mib * 2**20) if prefix_cache_mib else None
        """Stored prompt prefixes (``None``: turned off)."""
        self._capabilities: ModelCapabilities | None = None
        self._scheduler: Scheduler | None = None
        self._scheduler_lock = threading.Lock()  # not the model's: a loop holds that one
        self._callers: ThreadPoolExecutor | None = None
        self._attention_checked: dict[int, AttentionUnavailableError | None] = {}
        self._kernels_checked = False
        model.eval()

    # -- what the model supports ------------------------------------------------------

    @property
    def capabilities(self) -> ModelCapabilities:
        """What the engine may do with the model (read at the first use, then kept).

        Reading it runs a two-token probe of the attention behind the model's lock.
        """
        if self._capabilities is None:
            with self.lock:
                self._capabilities = ModelCapabilities.of(self.model)
        return self._capabilities

    @capabilities.setter
    def capabilities(self, value: ModelCapabilities) -> None:
        """Decode as a model of these capabilities (tests run a model as another kind)."""
        self._capabilities = value
        if self._scheduler is not None:
            self._scheduler.capabilities = value

    @property
    def num_layers(self) -> int:
        """Number of decoder layers (read from the model, without a probe)."""
        return len(decoder_layers(self.model))

    def check_attention(self, layer: int, settings: EngineSettings) -> None:
        """Fail unless the attention rows of decoder layer ``layer`` can be read.

        Checked once per layer with a two-token forward pass.

        Raises:
            AttentionUnavailableError: Naming why and the fix.
            HiddenLayerError: If the layer does not exist.
        """
        count = self.num_layers
        number = layer % count if -count <= layer < count else layer
        if number not in self._attention_checked:
            self._attention_checked[number] = self._probe_attention(layer, settings)
        problem = self._attention_checked[number]
        if problem is not None:
            raise problem.with_traceback(None)  # one stored error, raised afresh

    def check_hidden(self, layer: int, site: HiddenSite) -> None:
        """Fail unless decoder layer ``layer`` has the hidden-state ``site``.

        Raises:
            AdaptiveRAGError: Naming the layers that have an MLP and the fix.
            HiddenLayerError: If the layer does not exist.
        """
        hidden_modules(self.model, layer, site)

    def _probe_attention(
        self, layer: int, settings: EngineSettings
    ) -> AttentionUnavailableError | None:
        def probe() -> bool:
            capture = AttentionCapture(self.model, layer)
            with torch.inference_mode(), capture:
                ids = torch.tensor([[0, 1]], device=self.model.device)
                self.model(input_ids=ids, use_cache=False)
            return capture.weights is not None

        try:
            if self.exclusive(probe, settings):
                return None
        except AttentionUnavailableError as error:
            return error
        return AttentionUnavailableError(attn_implementation(self.model))

    # -- who runs the model -----------------------------------------------------------

    def batching(self, settings: EngineSettings) -> bool:
        """Whether concurrent calls decode together (``batch_concurrent_calls``)."""
        if settings.batch_concurrent_calls is not None:
            return settings.batch_concurrent_calls
        device: torch.device = self.model.device
        return device.type != "cpu"

    def scheduler(self, settings: EngineSettings) -> Scheduler:
        """The scheduler that joins concurrent calls (made at its first use)."""
        with self._scheduler_lock:
            if self._scheduler is None:
                self._scheduler = Scheduler(
                    self.model,
                    self.lock,
                    max_batch_rows=settings.max_batch_rows,
                    prefix_cache=self.prefix_cache,
                    share_prompts=settings.share_prompts,
                    capabilities=self._capabilities,
                )
            return self._scheduler

    @property
    def started_scheduler(self) -> Scheduler | None:
        """The scheduler, if a batched call has made it."""
        return self._scheduler

    def async_executor(self, settings: EngineSettings) -> ThreadPoolExecutor | None:
        """The threads async calls wait in while batching (``None``: asyncio's).

        asyncio's default executor has ``cpu_count + 4`` threads, which would bound how
        many async calls decode together; these are up to ``max_batch_rows``.
        """
        if not self.batching(settings):
            return None  # one call at a time: the default executor serves
        with self._scheduler_lock:
            if self._callers is None:
                self._callers = ThreadPoolExecutor(
                    max_workers=settings.max_batch_rows,
                    thread_name_prefix="adaptive-rag-call",
                )
            return self._callers

    def exclusive(self, run: Callable[[], T], settings: EngineSettings) -> T:
        """Run ``run`` with the model to itself, on the model's thread when batching."""
        if self.batching(settings):
            return self.scheduler(settings).exclusive(run)
        with self.lock:
            return run()

    # -- decoding -----------------------------------------------------------------------

    def decode(
        self, request: DecodeRequest, settings: EngineSettings, *, stream: bool = True
    ) -> Iterator[TokenEvent]:
        """Decode one request: joined with concurrent ones, or alone under the lock.

        Yields the first sample's token events (``stream=False``: none, the caller
        needs only the traces at the end).

        Raises:
            CallCancelledError: The async caller this thread works for was cancelled
                (before, while or after the call waited for the model or decoded).
        """
        self._check_kernels()
        stop = request.stop_event = current_stop()
        check_not_cancelled(stop)
        if not self.batching(settings):
            with self.lock:
                check_not_cancelled(stop)  # cancelled while it waited for the model
                for _, event in decode_together(
                    self.model,
                    [request],
                    prefix_cache=self.prefix_cache,
                    share_prompts=settings.share_prompts,
                    capabilities=self._capabilities,
                ):
                    if event is not None and stream and event.sample == 0:
                        yield event
        else:
            yield from self.scheduler(settings).decode(request, stream=stream)
        check_not_cancelled(stop)  # a cancelled call's traces are cut short: no result

    def _check_kernels(self) -> None:
        """At the first call, log once if torch may run cuDNN's attention (``kernels``)."""
        if self._kernels_checked:
            return
        self._kernels_checked = True
        if cudnn_attention_may_run(self.model):
            _logger.warning(cudnn_advice(self.model))

    def attention_weights(self, ids: list[int], layer: int, settings: EngineSettings) -> np.ndarray:
        """One layer's per-head attention over ``ids`` from one forward pass.

        While batching, concurrent passes at one layer share a batch between two
        decoding steps.

        Returns:
            ``(heads, S, S)`` weights.
        """
        check_not_cancelled(current_stop())
        if self.batching(settings):
            return self.scheduler(settings).exclusive_batched(
                lambda: self._attention_batch(layer, [ids])[0],
                key=("forward_attention", layer),
                inputs=ids,
                together=lambda batch: self._attention_batch(layer, batch),  # type: ignore[arg-type]
            )
        with self.lock:
            return self._attention_batch(layer, [ids])[0]

    def _attention_batch(self, layer: int, batch: list[list[int]]) -> list[np.ndarray]:
        """One forward pass over several token sequences; each one's ``(H, S, S)`` weights.

        Sequences of different lengths are left-padded, with an attention mask and
        per-row position ids, so each one's rows equal those of a pass over it alone.
        """
        device = self.model.device
        longest = max(len(ids) for ids in batch)
        pads = [longest - len(ids) for ids in batch]
        pad_id = int(getattr(self.tokenizer, "pad_token_id", None) or 0)
        inputs = torch.tensor(
            [[pad_id] * pad + ids for ids, pad in zip(batch, pads, strict=True)], device=device
        )
        extra: dict[str, torch.Tensor] = {}
        if any(pads):
            mask = torch.tensor([[0] * p + [1] * (longest - p) for p in pads], device=device)
            extra = {"attention_mask": mask, "position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}
        capture = AttentionCapture(self.model, layer, full=True)
        with torch.inference_mode(), capture:  # the output layer only at the last position
            self.model(input_ids=inputs, use_cache=False, logits_to_keep=1, **extra)
        assert capture.weights is not None  # the hook raised otherwise
        weights = capture.weights.cpu().numpy()
        return [weights[j][:, pad:, pad:] for j, pad in enumerate(pads)]
