"""Where things are in a decoder-only model: its layers, their attention and MLP sites.

transformers' causal LMs keep their decoder layers in one ``nn.ModuleList``; a layer's
attention is a ``self_attn``-like child (or an attention ``mixer`` in Nemotron-H) and
its MLP an ``mlp``-like child (or the experts plus shared MLP of Granite MoE). The
engine's hooks and the model's capabilities
([`ModelCapabilities`][langchain_adaptive_rag.engine.capabilities.ModelCapabilities])
read these functions; a family that names its parts otherwise is one entry here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torch import nn

from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    HiddenLayerError,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from langchain_adaptive_rag.options import HiddenSite

__all__ = [
    "attention_module",
    "attention_modules",
    "attn_implementation",
    "context_length",
    "decoder_layers",
    "has_attention",
    "has_mlp",
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


def attention_modules(model: PreTrainedModel) -> list[nn.Module]:
    """Every decoder layer's attention sub-module, in layer order.

    Raises:
        AttentionUnavailableError: If a layer has none (a state-space or hybrid model).
    """
    return [attention_module(model, index) for index in range(len(decoder_layers(model)))]


def attn_implementation(model: PreTrainedModel) -> str | None:
    """The attention kernel the model runs (``eager``, ``sdpa``, ``flash_attention_2``)."""
    value = getattr(model.config, "_attn_implementation", None)
    return value if isinstance(value, str) else None


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


def has_attention(layer: nn.Module) -> bool:
    """Whether a decoder layer has an attention sub-module."""
    return _attention_child(layer) is not None


def has_mlp(layer: nn.Module) -> bool:
    """Whether a decoder layer has an MLP (or mixture-of-experts) sub-module."""
    return bool(_mlp_parts(layer))
