"""Forward hooks that read one decoder layer's attention rows and hidden state.

Only the layer a method needs is hooked, so no other layer's attentions are ever
materialised. On an eager model the row is the layer's own weights; on any other kernel
(sdpa, flash attention) that layer alone is routed through
[`langchain_adaptive_rag.engine.attention_rows`][], which recomputes the row from the
layer's query and key states while the kernel computes its output. What the hooks read
stays on the model's device until the decoding step reads it back with the step's logits.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from langchain_adaptive_rag.engine.attention_rows import PendingRows, RowSink, route_to_capture
from langchain_adaptive_rag.engine.layers import (
    attention_module,
    attn_implementation,
    hidden_modules,
)
from langchain_adaptive_rag.engine.step_logits import StepLogits
from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from langchain_adaptive_rag.options import CaptureOptions

__all__ = ["AttentionCapture", "CaptureHooks", "Captured"]


class AttentionCapture:
    """Reads one layer's attention weights on every forward pass while it is entered.

    On an eager model a forward hook reads the layer's own weights; on another kernel the
    layer is routed through [`route_to_capture`][].
    After each forward pass ``weights`` holds ``(batch, heads, queries, keys)`` float32
    weights: the newest query row, or every row with ``full=True``.
    """

    def __init__(self, model: PreTrainedModel, layer: int, *, full: bool = False) -> None:
        self.module = attention_module(model, layer)
        self.implementation = attn_implementation(model)
        self.full = full
        self.weights: torch.Tensor | None = None
        self.paused = False
        """While set, forward passes are not read (another use of the model between steps)."""
        self._route: route_to_capture | None = None
        self._calls = 0
        """The routed layer's calls seen (a pass that did not call it gave no weights)."""
        self._handle: torch.utils.hooks.RemovableHandle | None = None

    def __enter__(self) -> AttentionCapture:
        if self.implementation not in (None, "eager"):
            self._route = route_to_capture(self.module, self.implementation, full=self.full)
            self._route.__enter__()
        self._handle = self.module.register_forward_hook(self._on_forward)
        return self

    def _on_forward(self, module: nn.Module, args: object, output: object) -> None:
        if self.paused:
            return
        if self._route is not None:
            sink = self._route.sink
            called, self._calls = sink.calls != self._calls, sink.calls
            if called and sink.pending is not None:
                self.weights = None  # the pass kept its query: its row is computed later
                return
            rows = sink.rows
            sink.rows = None
        else:
            rows = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if rows is not None and not self.full:
                rows = rows[:, :, -1:, :]
        if rows is None:
            raise AttentionUnavailableError(
                self.implementation,
                f"{type(module).__name__} gave no weights (it does not call transformers' "
                "AttentionInterface)",
            )
        self.weights = rows.float()

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if self._route is not None:
            self._route.__exit__(*exc)
            self._route = None


@dataclass(frozen=True)
class Captured:
    """Host copies of what one forward pass captured (``None``: not captured)."""

    hidden: np.ndarray | None
    """``(batch, hidden size)`` each row's hidden state at its last position."""
    rows: np.ndarray | None
    """``(batch, keys)`` each row's newest attention row, averaged over heads."""
    head_max: np.ndarray | None
    """``(batch, keys)`` its maximum over heads."""


class CaptureHooks:
    """Forward hooks on one layer that keep the latest attention rows and hidden state.

    They stay on the model's device (float32) until ``read`` reads them back with a
    step's logits: hooks that copied them to the host would wait for the device in the
    middle of each forward pass. Over a cache that only appends, the attention rows of
    successive steps can be deferred (``deferring_rows``) and computed together
    (``take_rows``).
    """

    def __init__(self, model: PreTrainedModel, capture: CaptureOptions) -> None:
        self.capture = capture
        self.rows: torch.Tensor | None = None
        """``(batch, keys)`` the newest query's attention weights, averaged over heads."""
        self.head_max: torch.Tensor | None = None
        """``(batch, keys)`` the same weights' maximum over heads."""
        self.hidden: torch.Tensor | None = None
        """``(batch, hidden size)`` the hidden state of each row's last position."""
        self.paused = False
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._pending = PendingRows()
        self._deferrable: RowSink | None = None
        """The routed layer's sink (an eager layer computes its weights anyway)."""
        self._attention: AttentionCapture | None = None
        if capture.attention:
            self._attention = AttentionCapture(model, capture.attention_layer).__enter__()
            module = self._attention.module
            self._handles.append(module.register_forward_hook(self._on_attention))
            if self._attention._route is not None:
                self._deferrable = self._attention._route.sink
        if capture.hidden:
            parts = hidden_modules(model, capture.hidden_layer, capture.hidden_site)
            for index, module in enumerate(parts):  # the first sets, the others add
                hook = functools.partial(self._on_hidden, first=index == 0)
                self._handles.append(module.register_forward_hook(hook))

    @contextmanager
    def deferring_rows(self, enabled: bool) -> Iterator[bool]:
        """Keep the forward passes' newest queries instead of computing their rows.

        Only on a routed layer (an eager layer computes its weights anyway), and only for
        a cache that appends: the caller promises each pass appends one key column to
        every row and nothing else changes the keys until ``take_rows`` (a
        ``RoomyCache``, which holds a sliding-window
        layer only while no window hides a key: a pass past it fails).

        Args:
            enabled: Whether the caller's cache allows it.

        Yields:
            Whether the passes inside defer their rows (then ``read`` reads none).
        """
        sink = self._deferrable
        if not enabled or sink is None:
            yield False
            return
        sink.pending = self._pending
        try:
            yield True
        finally:
            sink.pending = None

    def take_rows(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """The deferred steps' rows, averaged (and maxed) over heads; then none are kept.

        Returns:
            ``(batch, steps, keys)`` host arrays of the head mean and, when asked for, the
            head maximum, over the last deferred step's keys (see
            ``weights``);
            ``None`` when no step was deferred.
        """
        key = self._pending.key
        if key is None:
            return None
        keys, reduced = key.shape[2], []
        for weights in self._pending.weights():  # (batch, heads, steps, seen)
            heads = [weights.mean(dim=1)]
            if self.capture.attention_head_max:
                heads.append(weights.amax(dim=1))
            padding = (0, keys - weights.shape[-1])
            reduced.append(torch.nn.functional.pad(torch.stack(heads), padding))
        host = torch.cat(reduced, dim=2).cpu().numpy()  # one read-back for all steps
        return host[0], host[1] if len(host) > 1 else None

    def read(
        self, logits: torch.Tensor, eos_ids: Sequence[int], *, rows: bool = True
    ) -> tuple[StepLogits, Captured]:
        """The step's values of ``logits`` and the last forward pass's captures.

        Both come back in one read-back (one wait for the device).

        Args:
            logits: ``(rows, vocab)`` the pass's next-token logits.
            eos_ids: End-of-sequence ids greedy rows may have to leave out this step
                (see ``read``).
            rows: Read the attention rows too (a prefill keeps only hidden states).
        """
        wanted = (self.hidden, self.rows if rows else None, self.head_max if rows else None)
        step, host = StepLogits.read(logits, [t for t in wanted if t is not None], eos_ids)
        arrays = iter(host)
        hidden, attention, head_max = (next(arrays) if t is not None else None for t in wanted)
        return step, Captured(hidden=hidden, rows=attention, head_max=head_max)

    def pause(self, paused: bool) -> None:
        """Stop (or resume) reading forward passes: the model is used for something else."""
        self.paused = paused
        if self._attention is not None:
            self._attention.paused = paused
            if self._attention._route is not None:
                self._attention._route.pause(paused)

    def _on_attention(self, module: nn.Module, args: object, output: object) -> None:
        deferred = self._deferrable is not None and self._deferrable.pending is not None
        if self.paused or deferred:
            return  # paused, or the pass kept its query: its row comes later
        assert self._attention is not None and self._attention.weights is not None
        last = self._attention.weights[:, :, -1, :]  # (batch, heads, kv): the newest row
        self.rows = last.mean(dim=1)
        if self.capture.attention_head_max:
            self.head_max = last.amax(dim=1)

    def _on_hidden(self, module: nn.Module, args: object, output: object, *, first: bool) -> None:
        if self.paused:
            return
        states = output[0] if isinstance(output, tuple) else output
        if not isinstance(states, torch.Tensor):
            msg = f"Expected a tensor from {type(module).__name__}, got {type(states).__name__}."
            raise AdaptiveRAGError(msg)
        inputs = args[0] if isinstance(args, tuple) and args else None
        if states.ndim == 2 and isinstance(inputs, torch.Tensor) and inputs.ndim == 3:
            states = states.view(inputs.shape[0], -1, states.shape[-1])  # an MoE block's
            # tokens, flattened (Llama 4): back to (batch, positions, hidden)
        last = states[:, -1, :].to(torch.float32, copy=True)  # later layers may write
        # into their input in place
        if first:
            self.hidden = last
        else:  # a summed site's later part (Granite MoE's shared MLP), after the first
            assert self.hidden is not None
            self.hidden += last

    def remove(self) -> None:
        """Take the hooks off the model (and give a routed layer back its kernel)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._attention is not None:
            self._attention.__exit__()
            self._attention = None
