"""Forward hooks that read one decoder layer's attention rows and hidden state.

Only the layer a method needs is hooked, so no other layer's attentions are ever
materialised. On an eager model the row is the layer's own weights; on any other kernel
(sdpa, flash attention) that layer alone is routed through
[`langchain_adaptive_rag.attention_rows`][], which recomputes the row from the layer's
query and key states while the kernel computes its output. What the hooks read stays on
the model's device until the decoding step reads it back with the step's logits.
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

from langchain_adaptive_rag.attention_rows import PendingRows, RowSink, route_to_capture
from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    HiddenLayerError,
)
from langchain_adaptive_rag.step_logits import StepLogits

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from langchain_adaptive_rag.generation import CaptureOptions, HiddenSite

__all__ = [
    "AttentionCapture",
    "CaptureHooks",
    "Captured",
    "attention_module",
    "attn_implementation",
    "context_length",
    "decoder_layers",
    "hidden_modules",
]


_ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
_MLP_NAMES = ("mlp", "feed_forward", "ffn")


def decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    """Return the model's stack of decoder layers.

    Args:
        model: A HuggingFace causal LM.

    Returns:
        The ``nn.ModuleList`` whose length is the config's number of hidden layers.

    Raises:
        AdaptiveRAGError: If no such list exists.
    """
    config = model.config.get_text_config()
    num_layers = int(config.num_hidden_layers)
    for _, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == num_layers:
            return module
    msg = (
        f"Could not find the {num_layers} decoder layers of {type(model).__name__}. "
        "Expected a causal LM whose layers form one nn.ModuleList (Llama, Qwen2, GPT-2, "
        "Mistral, ...)."
    )
    raise AdaptiveRAGError(msg)


def _named_child(
    layer: nn.Module, names: Sequence[str], mixer_kinds: tuple[str, ...]
) -> nn.Module | None:
    """A layer's sub-module by name, or its ``mixer`` when the mixer's class is of a kind.

    Nemotron-H's layers each hold one ``mixer``: a Mamba-2 block, an attention, an MLP or
    a mixture of experts.
    """
    for name in names:
        child = getattr(layer, name, None)
        if isinstance(child, nn.Module):
            return child
    mixer = getattr(layer, "mixer", None)
    if isinstance(mixer, nn.Module) and type(mixer).__name__.endswith(mixer_kinds):
        return mixer
    return None


_SUMMED_MLP_NAMES = ("block_sparse_moe", "shared_mlp")
"""Granite MoE's MLP output: its experts' output plus its shared MLP's, each present or
``None``, called in this order."""


def _mlp_parts(layer: nn.Module) -> tuple[nn.Module, ...]:
    """The sub-modules whose outputs sum to a decoder layer's MLP output (none: no MLP).

    One MLP or mixture of experts (by name, or Nemotron-H's MLP or MoE ``mixer``), or
    Granite MoE's experts and shared MLP, in the order the layer calls them.
    """
    found = _named_child(layer, _MLP_NAMES, ("MLP", "MoE"))
    if found is not None:
        return (found,)
    return tuple(
        child
        for child in (getattr(layer, name, None) for name in _SUMMED_MLP_NAMES)
        if isinstance(child, nn.Module)
    )


def _layer_index(layer: int, num_layers: int, what: str) -> int:
    if not -num_layers <= layer < num_layers:
        raise HiddenLayerError(what, layer, num_layers)
    return layer % num_layers


def context_length(model: PreTrainedModel) -> int | None:
    """Return the model's maximum number of positions, if its config states one."""
    config = model.config.get_text_config()
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _attention_child(layer: nn.Module) -> nn.Module | None:
    """A decoder layer's attention sub-module (by name, or an attention ``mixer``)."""
    return _named_child(layer, _ATTENTION_NAMES, ("Attention",))


def attention_module(model: PreTrainedModel, layer: int) -> nn.Module:
    """The attention sub-module of one decoder layer.

    Args:
        model: A HuggingFace causal LM.
        layer: Decoder layer index (negative counts from the last).

    Returns:
        The module whose forward output is ``(attn_output, attn_weights)``.

    Raises:
        AttentionUnavailableError: If the layer has no attention sub-module.
        HiddenLayerError: If the layer does not exist.
    """
    layers = decoder_layers(model)
    index = _layer_index(layer, len(layers), "Attention")
    found = _attention_child(layers[index])
    if found is not None:
        return found
    kind = type(layers[index]).__name__
    with_attention = [i for i, each in enumerate(layers) if _attention_child(each) is not None]
    if with_attention:  # a hybrid model: other layers have attention
        raise AttentionUnavailableError(
            attn_implementation(model),
            f"decoder layer {index} ({kind}) has no attention sub-module (looked for "
            f"{_ATTENTION_NAMES} and an attention mixer); its layers with attention are "
            f"{with_attention}",
            fix=f"read one of those (DRAGINConfig(attention_layer={with_attention[-1]}))",
        )
    has_mlp = any(_mlp_parts(each) for each in layers)
    seakr = "SeaKR" if has_mlp else "SeaKR with SeaKRConfig(hidden_site='residual'): no MLP here"
    raise AttentionUnavailableError(
        attn_implementation(model),
        f"no decoder layer has an attention sub-module ({kind}: a state-space model)",
        fix=f"use a method that needs no attention (FLARE, the fixed schedules, {seakr})",
    )


def attn_implementation(model: PreTrainedModel) -> str | None:
    """The attention kernel the model runs (``eager``, ``sdpa``, ``flash_attention_2``)."""
    value = getattr(model.config, "_attn_implementation", None)
    return value if isinstance(value, str) else None


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


def hidden_modules(model: PreTrainedModel, layer: int, site: HiddenSite) -> tuple[nn.Module, ...]:
    """The modules whose outputs sum to the hidden state at ``layer`` and ``site``.

    One module (the layer, or its MLP) but for Granite MoE's ``mlp`` site: its experts'
    output plus its shared MLP's, called in that order.

    Args:
        model: A HuggingFace causal LM.
        layer: Decoder layer index (negative counts from the last).
        site: ``residual`` (the layer's output) or ``mlp`` (its MLP's output).

    Returns:
        The modules to hook, in the order a forward pass calls them.

    Raises:
        HiddenLayerError: If the layer does not exist.
        AdaptiveRAGError: If ``site`` is ``mlp`` and the layer has no MLP (a state-space
            or hybrid model's layer), naming the layers that have one and the fix.
    """
    layers = decoder_layers(model)
    index = _layer_index(layer, len(layers), "Hidden-state")
    chosen = layers[index]
    if site == "residual":
        return (chosen,)
    found = _mlp_parts(chosen)
    if found:
        return found
    with_mlp = [i for i, each in enumerate(layers) if _mlp_parts(each)]
    mlp_fix = f", or hidden_layer={with_mlp[-1]} reads an MLP's output" if with_mlp else ""
    msg = (
        f"The MLP output of decoder layer {index} ({type(chosen).__name__}) was requested "
        f"(hidden_site='mlp'), but that layer has no MLP sub-module (looked for "
        f"{_MLP_NAMES + _SUMMED_MLP_NAMES} and an MLP or mixture-of-experts mixer). "
        f"Expected a layer with an MLP; this model's layers with one: {with_mlp}. Fix: "
        "hidden_site='residual' (SeaKRConfig or CaptureOptions) reads the layer's output"
        f"{mlp_fix}."
    )
    raise AdaptiveRAGError(msg)


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
