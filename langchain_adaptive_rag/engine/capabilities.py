"""What a loaded model supports, computed once per model and read by the engine as data.

A model family differs from another, for the engine, only in what its cache holds and
where its layers keep attention and MLP: [`ModelCapabilities.of`][] reads that from the
model's config and modules (and one two-token probe of its attention kernel) the first
time a model decodes, and the runner and scheduler read the answer instead of probing
the model themselves. Tests build one with ``dataclasses.replace`` to run a model as
another kind would (``window=0``: the model's own cache).

The cache kinds:

- ``plain``: every layer keeps every key and value (Llama, Qwen2, GPT-2).
- ``windowed``: some layers keep only a sliding window (Mistral, Gemma 2 and 3, GPT-OSS):
  the loop's own cache keeps every key and hands each layer a mask by its window, counted
  in each row's positions ([`WindowMasks`][langchain_adaptive_rag.engine.window_masks.WindowMasks]),
  so it gives the model's results at any length; a kernel that reads no mask (flash
  attention) keeps the old rule: the loop's cache while every sequence fits in the
  smallest window, the model's own cache beyond it.
- ``latent``: every layer caches a compressed latent that each pass expands (DeepSeek-V2
  and V3): plain for joins and stored prefixes, but the samples of a call cannot read
  one shared copy of their prompt.
- ``recurrent``: no layer holds keys (Mamba): convolution and recurrent states only.
- ``hybrid``: recurrent and attention layers together (Nemotron-H, Granite 4, LFM2).
- ``other``: a layer kind the loop does not hold itself (chunked, quantized caches).

Whether torch may pick cuDNN's attention is not a capability: it depends on torch's
switches at call time, so ``kernels`` checks it at a model's first call.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

from langchain_adaptive_rag.engine.kv_cache import cache_keyword
from langchain_adaptive_rag.engine.layers import (
    attention_module,
    context_length,
    decoder_layers,
    has_attention,
    has_mlp,
)
from langchain_adaptive_rag.engine.shared_prompts import attends_its_cache
from langchain_adaptive_rag.engine.window_masks import WindowMasks, window_masks_of
from langchain_adaptive_rag.errors import AdaptiveRAGError

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel

__all__ = ["CacheKind", "ModelCapabilities", "cache_kind"]

CacheKind = Literal["plain", "windowed", "latent", "recurrent", "hybrid", "other"]
"""What the cache a model builds for itself holds (see the module's list)."""


@dataclass(frozen=True)
class ModelCapabilities:
    """What the engine may do with one loaded model.

    Every field is read from the model once ([`ModelCapabilities.of`][]); the engine's
    features follow from them (``joins``, ``prefix_cache``, ``shared_prompts``,
    ``masked_steps``).
    """

    family: str
    """The config's ``model_type`` (``llama``, ``mistral``, ``gemma3_text``...)."""
    num_layers: int
    """Decoder layers."""
    attention_layers: tuple[int, ...]
    """Layers with an attention sub-module (the ones DRAGIN's rows can be read from)."""
    mlp_layers: tuple[int, ...]
    """Layers with an MLP or mixture of experts (SeaKR's ``hidden_site='mlp'``)."""
    cache_kind: CacheKind
    """What the model's own cache holds."""
    window: int | None
    """The most positions a sequence may fill in the loop's own cache: ``None`` any,
    ``0`` never (the model's own cache is used), else the smallest sliding window."""
    attends_its_cache: bool
    """Whether every layer's attention knows its cache index and attends over the very
    keys and values it caches (not multi-head latent attention, not a recurrent layer)."""
    context_length: int | None
    """The most positions the config allows (``None``: it states none)."""
    cache_keyword: str
    """The forward argument that takes a cache (``cache`` or ``past_key_values``)."""
    window_masks: WindowMasks | None = None
    """For a windowed model whose kernel reads masks: how the loop masks each layer to
    its window (then ``window`` is ``None``: any length)."""

    @property
    def joins(self) -> bool:
        """Whether calls can join a running loop (the loop holds its own cache)."""
        return self.window != 0

    @property
    def prefix_cache(self) -> bool:
        """Whether prompts' keys and values can be stored and reused (same condition)."""
        return self.joins

    @property
    def shares_prompts(self) -> bool:
        """Whether a call's samples can read one shared copy of their prompt.

        Every layer must attend over what it caches, in the loop's own cache, under the
        causal mask alone (no window).
        """
        return self.attends_its_cache and self.window is None and self.window_masks is None

    @property
    def masked_steps(self) -> bool:
        """Whether decoding steps hand the model the rows' padding mask.

        Not a recurrent model's (Mamba): its layers would read a mask over the history as
        one over the pass's own tokens; its state absorbed no padding at the prefill.
        """
        return self.cache_kind != "recurrent"

    def fits(self, positions: int) -> bool:
        """Whether a sequence of ``positions`` may live in the loop's own cache."""
        return self.window is None or positions <= self.window

    @classmethod
    def of(cls, model: PreTrainedModel) -> ModelCapabilities:
        """The capabilities of ``model``, read once per model (kept while it lives)."""
        try:
            known = _KNOWN.get(model)
        except TypeError:  # not weakly referable (a stand-in model): read every time
            known = None
        if known is None:
            known = _read(model)
            with contextlib.suppress(TypeError):
                _KNOWN[model] = known
        return known


_KNOWN: weakref.WeakKeyDictionary[Any, ModelCapabilities] = weakref.WeakKeyDictionary()
"""Each model's capabilities (the model's config and modules decide them)."""


def _read(model: PreTrainedModel) -> ModelCapabilities:
    layers = decoder_layers(model)
    kind, window = cache_kind(model)
    masks = window_masks_of(model) if kind == "windowed" else None
    if masks is not None:
        window = None  # the loop masks each windowed layer itself
    attends = False
    if kind == "plain":
        modules = _indexed_attention(model)
        probed = attends_its_cache(model, modules[0]) if modules is not None else None
        attends = probed is True
        if probed is False:
            kind = "latent"  # its attention reads an expanded latent, not its cache
    return ModelCapabilities(
        family=str(getattr(model.config.get_text_config(), "model_type", "") or ""),
        num_layers=len(layers),
        attention_layers=tuple(i for i, layer in enumerate(layers) if has_attention(layer)),
        mlp_layers=tuple(i for i, layer in enumerate(layers) if has_mlp(layer)),
        cache_kind=kind,
        window=window,
        attends_its_cache=attends,
        context_length=context_length(model),
        cache_keyword=cache_keyword(model),
        window_masks=masks,
    )


def cache_kind(model: PreTrainedModel) -> tuple[CacheKind, int | None]:
    """The kind of the cache the model's config calls for, and the loop's window.

    Only the config is read (the model may be any object with a ``config``); the
    latent kind needs a probe of the model's attention ([`ModelCapabilities.of`][]).

    The loop's own cache keeps every column, so it gives what the model's own cache gives
    as long as no layer of that cache would drop one: always for plain growing layers;
    for sliding-window layers while a sequence holds at most the smallest window, since a
    window of ``w`` positions hides nothing from a query with ``w`` or fewer keys. Other
    kinds of layers (recurrent, chunked, quantized) never.
    """
    cache_layers = DynamicCache(config=model.config).layers
    keys = [isinstance(layer, DynamicLayer) for layer in cache_layers]
    if not any(keys):
        return "recurrent", 0
    windows = [
        int(layer.sliding_window)
        for layer in cache_layers
        if type(layer) is DynamicSlidingWindowLayer
    ]
    if any(type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer) for layer in cache_layers):
        return ("hybrid" if not all(keys) else "other"), 0
    if windows:
        return "windowed", min(windows)
    return "plain", None


def _indexed_attention(model: PreTrainedModel) -> list[nn.Module] | None:
    """Every layer's attention module, each knowing its cache index (``None``: not so)."""
    modules: list[nn.Module] = []
    for index in range(len(decoder_layers(model))):
        try:
            module = attention_module(model, index)
        except AdaptiveRAGError:
            return None
        if getattr(module, "layer_idx", None) != index:
            return None
        modules.append(module)
    return modules
