"""Token-by-token decoding that records what the adaptive methods need.

The decoder runs its own KV-cache loop over a HuggingFace causal LM: one prefill, then
one forward step per token. Forward hooks on a single decoder layer read the attention
row of each fed position and the hidden state at the final position, so no other layer's
attentions are ever materialised. On an eager model the row is the layer's own weights;
on any other kernel (sdpa, flash attention) that layer alone is routed through
:mod:`langchain_adaptive_rag.attention_rows`, which recomputes the row from the layer's
query and key states while the kernel computes its output. Each sample of a batch has its
own seeded generator, so sample ``i`` of an ``n``-sample call with seed ``s`` draws the
same tokens as a single-sample call with seed ``s + i``.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

from langchain_adaptive_rag.attention_rows import route_to_capture
from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    HiddenLayerError,
    PromptTooLongError,
)
from langchain_adaptive_rag.kv_cache import (
    RoomyCache,
    is_roomy,
    join_rows,
    plain_model_cache,
)
from langchain_adaptive_rag.prefix_cache import LayerStates, PrefixCache, StoredPrefix
from langchain_adaptive_rag.shared_prompts import SharedPrompts

__all__ = [
    "AttentionCapture",
    "CaptureOptions",
    "DecodingOptions",
    "FinishReason",
    "GenerationTrace",
    "HiddenPosition",
    "HiddenSite",
    "SignalDistribution",
    "TokenEvent",
    "TraceDecoder",
    "attention_module",
    "attn_implementation",
    "capture_covers",
    "capture_union",
    "context_length",
    "decode_together",
    "decoder_layers",
    "draw_tokens",
    "hidden_module",
    "next_piece",
    "prefill_groups",
    "sharing_modules",
    "token_pieces",
]

HiddenSite = Literal["residual", "mlp"]
"""Where a hidden state is read: the decoder layer's output (``residual`` stream) or
the output of its MLP sub-block (``mlp``, the site SeaKR's vLLM patch reads)."""
HiddenPosition = Literal["last", "eos", "eos_replacing_last"]
"""``last``: the final generated token's position. ``eos``: an end-of-sequence token
fed at the end (SeaKR): it replaces the final token when generation stopped on EOS or a
stop string, and is appended after it when the token budget ran out."""
SignalDistribution = Literal["raw", "processed"]
"""``raw``: softmax of the model's logits. ``processed``: the distribution actually
sampled from, after the EOS mask of ``min_new_tokens``, temperature, top-k and top-p."""
FinishReason = Literal["stop", "length"]
"""``stop``: an end-of-sequence token or a stop string; ``length``: the token budget."""

_ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
_MLP_NAMES = ("mlp", "feed_forward", "ffn")


@dataclass(frozen=True)
class DecodingOptions:
    """How tokens are chosen and when decoding stops.

    Decoding is greedy unless ``do_sample`` is true and ``temperature`` is above zero.
    """

    max_new_tokens: int = 256
    """Upper bound on generated tokens."""
    min_new_tokens: int = 0
    """End-of-sequence tokens are masked until this many tokens exist."""
    do_sample: bool = False
    """Sample from the processed distribution instead of taking its argmax."""
    temperature: float = 1.0
    """Softmax temperature for sampling (0 means greedy)."""
    top_k: int | None = None
    """Keep only the ``top_k`` most likely tokens when sampling."""
    top_p: float | None = None
    """Keep the smallest set of tokens whose probability reaches ``top_p`` when sampling."""
    seed: int | None = None
    """Seed of sample 0; sample ``i`` uses ``seed + i``. ``None`` draws fresh seeds."""
    stop: tuple[str, ...] = ()
    """Stop strings; they may span several tokens and are cut from the text."""
    signal_distribution: SignalDistribution = "raw"
    """Distribution that logprobs and entropies are computed from."""
    top_logprobs: int = 0
    """How many alternatives (token, logprob) to record per position."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            msg = f"max_new_tokens must be >= 1, got {self.max_new_tokens}."
            raise AdaptiveRAGError(msg)
        if not 0 <= self.min_new_tokens <= self.max_new_tokens:
            msg = (
                f"min_new_tokens must be in [0, max_new_tokens={self.max_new_tokens}], "
                f"got {self.min_new_tokens}."
            )
            raise AdaptiveRAGError(msg)
        if self.temperature < 0:
            msg = f"temperature must be >= 0, got {self.temperature}."
            raise AdaptiveRAGError(msg)
        if self.top_k is not None and self.top_k < 1:
            msg = f"top_k must be >= 1 or None, got {self.top_k}."
            raise AdaptiveRAGError(msg)
        if self.top_p is not None and not 0 < self.top_p <= 1:
            msg = f"top_p must be in (0, 1] or None, got {self.top_p}."
            raise AdaptiveRAGError(msg)
        if any(not s for s in self.stop):
            msg = f"stop strings must be non-empty, got {list(self.stop)!r}."
            raise AdaptiveRAGError(msg)
        if not 0 <= self.top_logprobs <= 20:
            msg = f"top_logprobs must be in [0, 20], got {self.top_logprobs}."
            raise AdaptiveRAGError(msg)

    @property
    def sampling(self) -> bool:
        """Whether tokens are sampled (``do_sample`` and a positive temperature)."""
        return self.do_sample and self.temperature > 0


@dataclass(frozen=True)
class CaptureOptions:
    """Which internal signals to read while decoding, beyond logprobs and entropies."""

    attention: bool = False
    """Record each generated token's head-averaged attention row (any kernel)."""
    attention_layer: int = -1
    """Decoder layer whose attention is read (negative counts from the last)."""
    attention_head_max: bool = False
    """Also record the per-position maximum over heads."""
    hidden: bool = False
    """Record one hidden state at the end of each sample."""
    hidden_layer: int = -1
    """Decoder layer whose hidden state is read (negative counts from the last)."""
    hidden_site: HiddenSite = "residual"
    """Read the layer's output or its MLP sub-block's output."""
    hidden_at: HiddenPosition = "last"
    """Where the hidden state is read: ``last``, the final generated token; ``eos``, an
    end-of-sequence token fed in place of a stop string's last token or after a length
    ending's last token; ``eos_replacing_last``, an end-of-sequence token fed in place of
    the last token for every ending (SeaKR's vLLM patch; a length ending's last token is
    then not fed, so its attention row, if captured, is the EOS's)."""


def capture_covers(loop: CaptureOptions, request: CaptureOptions) -> bool:
    """Whether hooks set for ``loop`` read every signal ``request`` asks for.

    Only the hooked layers matter: ``hidden_at`` is each request's own (it decides which
    tokens that request feeds at its end).
    """
    if request.attention and not (
        loop.attention
        and loop.attention_layer == request.attention_layer
        and (loop.attention_head_max or not request.attention_head_max)
    ):
        return False
    return not request.hidden or (
        loop.hidden
        and loop.hidden_layer == request.hidden_layer
        and loop.hidden_site == request.hidden_site
    )


def capture_union(a: CaptureOptions, b: CaptureOptions) -> CaptureOptions | None:
    """Hooks serving both ``a`` and ``b``, or ``None`` when they need different layers."""
    attention = a if a.attention else b
    hidden = a if a.hidden else b
    union = CaptureOptions(
        attention=a.attention or b.attention,
        attention_layer=attention.attention_layer,
        attention_head_max=a.attention_head_max or b.attention_head_max,
        hidden=a.hidden or b.hidden,
        hidden_layer=hidden.hidden_layer,
        hidden_site=hidden.hidden_site,
        hidden_at=hidden.hidden_at,
    )
    return union if capture_covers(union, a) and capture_covers(union, b) else None


@dataclass
class GenerationTrace:
    """One generated sample and its per-token signals (numpy only, no tensors).

    ``T`` is the number of generated tokens (end-of-sequence excluded) and ``P`` the
    number of prompt tokens.
    """

    prompt_ids: np.ndarray
    """Prompt token ids, shape ``(P,)``."""
    token_ids: np.ndarray
    """Generated token ids, shape ``(T,)``; tokens of a stop string are kept."""
    tokens: list[str]
    """Text piece of each token; ``"".join(tokens) == text`` (stop strings cut)."""
    text: str
    """The generated text, without a stop string or special tokens."""
    logprobs: np.ndarray
    """Log-probability of each chosen token, shape ``(T,)``."""
    entropies: np.ndarray
    """Entropy (nats) of each next-token distribution, shape ``(T,)``."""
    finish_reason: FinishReason
    """Why decoding stopped."""
    logsumexp: np.ndarray | None = None
    """``logsumexp`` of the raw logits at each position, shape ``(T,)`` (energy score)."""
    stop_string: str | None = None
    """The stop string that ended decoding, if any."""
    seed: int | None = None
    """Seed this sample was drawn with (``None`` for greedy samples)."""
    attention: np.ndarray | None = None
    """Shape ``(T, P + T)``: row ``t`` is the head-averaged attention of the position of
    token ``t`` over positions ``0 .. P + t`` (zeros after)."""
    attention_head_max: np.ndarray | None = None
    """Like ``attention`` with the maximum over heads instead of the mean."""
    hidden: np.ndarray | None = None
    """Hidden state at the requested layer, site and position, shape ``(d,)``."""
    top_token_ids: np.ndarray | None = None
    """Most likely token ids at each position, shape ``(T, top_logprobs)``."""
    top_logprobs: np.ndarray | None = None
    """Their log-probabilities, shape ``(T, top_logprobs)``."""

    @property
    def num_prompt_tokens(self) -> int:
        """``P``, the prompt length in tokens."""
        return int(self.prompt_ids.shape[0])

    @property
    def num_tokens(self) -> int:
        """``T``, the number of generated tokens."""
        return int(self.token_ids.shape[0])


@dataclass(frozen=True)
class TokenEvent:
    """A generated token released by the decoder (after stop-string hold-back)."""

    sample: int
    index: int
    token_id: int
    piece: str
    logprob: float
    entropy: float
    top_token_ids: tuple[int, ...] = ()
    top_logprobs: tuple[float, ...] = ()


@dataclass
class _Sample:
    """Mutable per-sample decoding state."""

    greedy: bool
    seed: int | None
    generator: torch.Generator | None
    ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    entropies: list[float] = field(default_factory=list)
    logsumexps: list[float] = field(default_factory=list)
    top_ids: list[tuple[int, ...]] = field(default_factory=list)
    top_lps: list[tuple[float, ...]] = field(default_factory=list)
    text: str = ""
    released: int = 0
    finish_reason: FinishReason | None = None
    stop_string: str | None = None
    tail: list[int] = field(default_factory=list)
    done: bool = False
    rows: list[np.ndarray] = field(default_factory=list)
    head_max_rows: list[np.ndarray] = field(default_factory=list)
    hidden: np.ndarray | None = None

    @property
    def active(self) -> bool:
        return self.finish_reason is None


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


def _child(layer: nn.Module, names: Sequence[str], what: str) -> nn.Module:
    for name in names:
        child = getattr(layer, name, None)
        if isinstance(child, nn.Module):
            return child
    msg = f"Decoder layer {type(layer).__name__} has no {what} sub-module (looked for {names})."
    raise AdaptiveRAGError(msg)


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
    try:
        return _child(layers[index], _ATTENTION_NAMES, "attention")
    except AdaptiveRAGError as error:
        raise AttentionUnavailableError(attn_implementation(model), str(error)) from error


def attn_implementation(model: PreTrainedModel) -> str | None:
    """The attention kernel the model runs (``eager``, ``sdpa``, ``flash_attention_2``)."""
    value = getattr(model.config, "_attn_implementation", None)
    return value if isinstance(value, str) else None


class AttentionCapture:
    """Reads one layer's attention weights on every forward pass while it is entered.

    On an eager model a forward hook reads the layer's own weights; on another kernel the
    layer is routed through :func:`~langchain_adaptive_rag.attention_rows.route_to_capture`.
    After each forward pass :attr:`weights` holds ``(batch, heads, queries, keys)`` float32
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
            rows = self._route.sink.rows
            self._route.sink.rows = None
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


def hidden_module(model: PreTrainedModel, layer: int, site: HiddenSite) -> nn.Module:
    """The module whose output is the hidden state at ``layer`` and ``site``.

    Args:
        model: A HuggingFace causal LM.
        layer: Decoder layer index (negative counts from the last).
        site: ``residual`` (the layer's output) or ``mlp`` (its MLP's output).

    Returns:
        The module to hook.

    Raises:
        HiddenLayerError: If the layer does not exist.
    """
    layers = decoder_layers(model)
    chosen = layers[_layer_index(layer, len(layers), "Hidden-state")]
    return chosen if site == "residual" else _child(chosen, _MLP_NAMES, "MLP")


@dataclass(frozen=True)
class _Captured:
    """Host copies of what one forward pass captured (``None``: not captured)."""

    hidden: np.ndarray | None
    """``(batch, hidden size)`` each row's hidden state at its last position."""
    rows: np.ndarray | None
    """``(batch, keys)`` each row's newest attention row, averaged over heads."""
    head_max: np.ndarray | None
    """``(batch, keys)`` its maximum over heads."""


class _Hooks:
    """Forward hooks on one layer that keep the latest attention rows and hidden state.

    They stay on the model's device (float32) until :meth:`read` reads them back with a
    step's logits: hooks that copied them to the host would wait for the device in the
    middle of each forward pass.
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
        self._attention: AttentionCapture | None = None
        if capture.attention:
            self._attention = AttentionCapture(model, capture.attention_layer).__enter__()
            module = self._attention.module
            self._handles.append(module.register_forward_hook(self._on_attention))
        if capture.hidden:
            module = hidden_module(model, capture.hidden_layer, capture.hidden_site)
            self._handles.append(module.register_forward_hook(self._on_hidden))

    def read(
        self, logits: torch.Tensor, eos_ids: Sequence[int], *, rows: bool = True
    ) -> tuple[StepLogits, _Captured]:
        """The step's values of ``logits`` and the last forward pass's captures.

        Both come back in one read-back (one wait for the device).

        Args:
            logits: ``(rows, vocab)`` the pass's next-token logits.
            eos_ids: End-of-sequence ids greedy rows may have to leave out this step
                (see :meth:`StepLogits.read`).
            rows: Read the attention rows too (a prefill keeps only hidden states).
        """
        wanted = (self.hidden, self.rows if rows else None, self.head_max if rows else None)
        step, host = StepLogits.read(logits, [t for t in wanted if t is not None], eos_ids)
        arrays = iter(host)
        hidden, attention, head_max = (next(arrays) if t is not None else None for t in wanted)
        return step, _Captured(hidden=hidden, rows=attention, head_max=head_max)

    def pause(self, paused: bool) -> None:
        """Stop (or resume) reading forward passes: the model is used for something else."""
        self.paused = paused
        if self._attention is not None:
            self._attention.paused = paused
            if self._attention._route is not None:
                self._attention._route.pause(paused)

    def _on_attention(self, module: nn.Module, args: object, output: object) -> None:
        if self.paused:
            return
        assert self._attention is not None and self._attention.weights is not None
        last = self._attention.weights[:, :, -1, :]  # (batch, heads, kv): the newest row
        self.rows = last.mean(dim=1)
        if self.capture.attention_head_max:
            self.head_max = last.amax(dim=1)

    def _on_hidden(self, module: nn.Module, args: object, output: object) -> None:
        if self.paused:
            return
        states = output[0] if isinstance(output, tuple) else output
        if not isinstance(states, torch.Tensor):
            msg = f"Expected a tensor from {type(module).__name__}, got {type(states).__name__}."
            raise AdaptiveRAGError(msg)
        self.hidden = states[:, -1, :].to(torch.float32, copy=True)  # later layers may
        # write into their input in place

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._attention is not None:
            self._attention.__exit__()
            self._attention = None


def _longest_stop_prefix(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of a stop string."""
    best = 0
    for stop in stops:
        for size in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:size]):
                best = size
                break
    return best


def _clip_pieces(pieces: list[str], length: int) -> list[str]:
    """Cut ``pieces`` so that their concatenation has ``length`` characters."""
    clipped: list[str] = []
    used = 0
    for piece in pieces:
        keep = max(0, min(len(piece), length - used))
        clipped.append(piece[:keep])
        used += keep
    return clipped


@dataclass(frozen=True)
class StepLogits:
    """One decoding step's next-token logits, with what every row's signals share."""

    logits: torch.Tensor
    """``(rows, vocab)`` float32 logits."""
    raw: torch.Tensor
    """Their log-softmax (the raw distribution)."""
    entropy: list[float]
    """Entropy of each row's raw distribution."""
    logsumexp: list[float]
    """Each row's log-sum-exp of the logits (the energy score's input)."""
    argmax: list[int]
    """Each row's most likely token."""
    argmax_logprob: list[float]
    """Its log-probability under the raw distribution."""
    masked_for: tuple[int, ...] = ()
    """The end-of-sequence ids :attr:`masked_argmax` excludes (empty: not computed)."""
    masked_argmax: list[int] = field(default_factory=list)
    """Each row's most likely token other than :attr:`masked_for` (a greedy sample
    short of ``min_new_tokens``)."""
    masked_argmax_logprob: list[float] = field(default_factory=list)
    """Its log-probability under the raw distribution."""

    def rows_of(self, rows: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The logits and raw log-softmax of ``rows``.

        The step's own tensors when ``rows`` are every row in order; else gathered with one
        index (one copy to the device).
        """
        if len(rows) == len(self.argmax) and all(r == i for i, r in enumerate(rows)):
            return self.logits, self.raw
        index = torch.tensor(list(rows), device=self.logits.device)
        return self.logits.index_select(0, index), self.raw.index_select(0, index)

    def of_rows(self, rows: Sequence[int]) -> tuple[list[float], list[int], list[float]]:
        """The raw entropies, most likely tokens and their logprobs of ``rows``."""
        return (
            [self.entropy[i] for i in rows],
            [self.argmax[i] for i in rows],
            [self.argmax_logprob[i] for i in rows],
        )

    @classmethod
    def of(cls, logits: torch.Tensor) -> StepLogits:
        """Compute the shared values for a ``(rows, vocab)`` logits tensor at once."""
        return cls.read(logits, [])[0]

    @classmethod
    def read(
        cls,
        logits: torch.Tensor,
        captured: Sequence[torch.Tensor],
        eos_ids: Sequence[int] = (),
    ) -> tuple[StepLogits, list[np.ndarray]]:
        """The shared values, and host copies of ``captured``, in one read-back.

        Args:
            logits: ``(rows, vocab)`` logits.
            captured: Tensors the forward pass captured (attention rows, hidden states);
                on an accelerator, reading them with the step's values waits for the
                device once instead of once each.
            eos_ids: End-of-sequence ids to leave out of a second argmax per row (the
                greedy choice while ``min_new_tokens`` masks them); empty: none.

        Returns:
            The step's values, and each captured tensor as a host array of its shape.
        """
        raw = torch.log_softmax(logits, dim=-1)
        argmax = logits.argmax(dim=-1, keepdim=True)
        values = [_entropy(raw), torch.logsumexp(logits, dim=-1), raw.gather(-1, argmax)[:, 0]]
        ids = [argmax[:, 0]]
        if eos_ids:
            masked = _without_eos(logits, eos_ids).argmax(dim=-1, keepdim=True)
            values.append(raw.gather(-1, masked)[:, 0])
            ids.append(masked[:, 0])
        read, id_lists, host = _read_back(values, ids, logits.shape[-1], captured)
        step = cls(
            logits=logits,
            raw=raw,
            entropy=read[0],
            logsumexp=read[1],
            argmax=id_lists[0],
            argmax_logprob=read[2],
            masked_for=tuple(eos_ids),
            masked_argmax=id_lists[1] if eos_ids else [],
            masked_argmax_logprob=read[3] if eos_ids else [],
        )
        return step, host

    def greedy(self, row: int, masked: bool) -> tuple[int, float]:
        """Row ``row``'s greedy token and its raw logprob (``masked``: without EOS)."""
        if masked:
            return self.masked_argmax[row], self.masked_argmax_logprob[row]
        return self.argmax[row], self.argmax_logprob[row]

    def joined(self, other: StepLogits) -> StepLogits:
        """This step's rows followed by ``other``'s (rows that joined the batch).

        The masked argmax is kept when both computed it for the same ids.
        """
        masked = self.masked_for == other.masked_for
        return StepLogits(
            logits=torch.cat([self.logits, other.logits]),
            raw=torch.cat([self.raw, other.raw]),
            entropy=self.entropy + other.entropy,
            logsumexp=self.logsumexp + other.logsumexp,
            argmax=self.argmax + other.argmax,
            argmax_logprob=self.argmax_logprob + other.argmax_logprob,
            masked_for=self.masked_for if masked else (),
            masked_argmax=self.masked_argmax + other.masked_argmax if masked else [],
            masked_argmax_logprob=(
                self.masked_argmax_logprob + other.masked_argmax_logprob if masked else []
            ),
        )


def _without_eos(
    logits: torch.Tensor, eos_ids: Sequence[int], rows: Sequence[int] | None = None
) -> torch.Tensor:
    """A copy of ``logits`` with the ``eos_ids`` columns of ``rows`` (default: all) at -inf.

    Written entry by entry with ints: an index tensor made from a list is copied to the
    device, a copy that waits for it.
    """
    without = logits.clone()
    for eos in eos_ids:
        if rows is None:
            without[:, eos] = -math.inf
        else:
            for row in rows:
                without[row, eos] = -math.inf
    return without


_EXACT_INDEX = 2**24
"""Vocabulary sizes whose token ids a float32 holds exactly (every integer up to 2**24)."""


def _read_back(
    values: list[torch.Tensor],
    ids: Sequence[torch.Tensor],
    vocab: int,
    captured: Sequence[torch.Tensor] = (),
) -> tuple[list[list[float]], list[list[int]], list[np.ndarray]]:
    """Per-row float ``values``, token ``ids`` (below ``vocab``) and ``captured`` tensors.

    On an accelerator each read-back waits for the device, so everything travels in one
    float32 buffer where that is exact: float32 values and captures, and ``vocab`` at
    most :data:`_EXACT_INDEX` (the ids ride along as floats). Otherwise the values, the
    ids and each capture are read back apart.

    Returns:
        The values as lists per row, each id tensor as a list, each capture as a host
        array.
    """
    float32 = torch.float32
    exact = (
        values[0].dtype == float32
        and vocab <= _EXACT_INDEX
        and all(t.dtype == float32 for t in captured)
    )
    if not exact:
        host = [t.cpu().numpy() for t in captured]
        id_lists = [[int(i) for i in row] for row in torch.stack(list(ids)).tolist()]
        return torch.stack(values).tolist(), id_lists, host
    device = values[0].device
    parts = [torch.stack([*values, *(i.to(float32) for i in ids)]).reshape(-1)]
    parts += [t.to(device).reshape(-1) for t in captured]
    flat = (torch.cat(parts) if len(parts) > 1 else parts[0]).cpu().numpy()
    rows, count = len(ids[0]), len(values) + len(ids)
    read = flat[: count * rows].reshape(count, rows).tolist()
    host, start = [], count * rows
    for t in captured:
        host.append(flat[start : start + t.numel()].reshape(t.shape))
        start += t.numel()
    id_lists = [[int(i) for i in row] for row in read[len(values) :]]
    return read[: len(values)], id_lists, host


@dataclass(frozen=True)
class _Distribution:
    """A request's own next-token distribution over its rows (when not the raw greedy one).

    Every value is computed row by row, so rows computed together with other requests'
    rows equal rows computed alone.
    """

    probs: torch.Tensor
    """``(rows, vocab)`` probabilities samples are drawn from (after temperature, top-k/p)."""
    signal_logp: torch.Tensor
    """The distribution the signals read: raw, or the processed one."""
    entropies: list[float]
    """Entropy of each row's ``signal_logp``."""
    greedy: list[int]
    """Each row's most likely token (after the EOS mask, before temperature)."""
    greedy_logprob: list[float]
    """Its log-probability under ``signal_logp``."""

    @classmethod
    def of(
        cls,
        logits: torch.Tensor,
        raw: torch.Tensor,
        options: DecodingOptions,
        step: tuple[list[float], list[int], list[float]] | None = None,
    ) -> _Distribution:
        """The distribution of ``logits`` (EOS mask applied), with their raw log-softmax.

        ``step``: the rows' raw entropies, most likely tokens and their raw logprobs, when
        the step computed them for these very logits (no EOS mask): with the raw signal
        they are not computed again; otherwise every value is read back at once.
        """
        sampled = _warp(logits, options) if options.sampling else logits
        signal_logp = raw
        if options.signal_distribution == "raw" and step is not None:
            entropies, greedy, greedy_logprob = step
        else:
            if options.signal_distribution == "processed":
                signal_logp = torch.log_softmax(sampled, dim=-1)
            ids = logits.argmax(dim=-1)
            picked = signal_logp.gather(-1, ids[:, None])[:, 0]
            (entropies, greedy_logprob), (greedy,), _ = _read_back(
                [_entropy(signal_logp), picked], [ids], logits.shape[-1]
            )
        return cls(
            probs=torch.softmax(sampled, dim=-1),
            signal_logp=signal_logp,
            entropies=entropies,
            greedy=greedy,
            greedy_logprob=greedy_logprob,
        )

    def draw(
        self, positions: list[int], generators: Sequence[torch.Generator]
    ) -> tuple[list[int], list[bool], list[float]]:
        """Draw rows ``positions``, each with its generator (see :func:`_draw`).

        Returns:
            Each row's token, whether it could draw, and the token's logprob under
            :attr:`signal_logp`; one index gathers both tensors' rows.
        """
        index = torch.tensor(positions, device=self.probs.device)
        return _draw(
            self.probs.index_select(0, index), generators, self.signal_logp.index_select(0, index)
        )

    def part(self, start: int, stop: int) -> _Distribution:
        """Rows ``start..stop`` of a distribution computed for several requests."""
        return _Distribution(
            probs=self.probs[start:stop],
            signal_logp=self.signal_logp[start:stop],
            entropies=self.entropies[start:stop],
            greedy=self.greedy[start:stop],
            greedy_logprob=self.greedy_logprob[start:stop],
        )


_Drawn = dict[int, tuple[int, float]]
"""Tokens drawn for a request's samples: position among its rows -> (token, logprob)."""


class TraceDecoder:
    """Decode ``n`` samples of one prompt and record their signals.

    Iterating yields a :class:`TokenEvent` per generated token, in order per sample;
    a token is released once no stop string can still start in its text. After the
    iteration, :attr:`traces` holds one :class:`GenerationTrace` per sample.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: object,
        prompt_ids: Sequence[int],
        *,
        n: int = 1,
        include_greedy: bool = False,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
    ) -> None:
        """Validate the request; nothing runs until iteration.

        Args:
            model: A HuggingFace causal LM.
            tokenizer: Its tokenizer (used to decode pieces and find EOS).
            prompt_ids: The prompt's token ids, shape ``(P,)``.
            n: Number of samples, decoded together in one batch.
            include_greedy: Prepend one greedy sample to the ``n`` samples.
            decoding: Decoding options.
            capture: Attention and hidden-state capture options.
        """
        if n < 1:
            msg = f"n must be >= 1, got {n}."
            raise AdaptiveRAGError(msg)
        if len(prompt_ids) == 0:
            msg = "The prompt is empty (0 tokens). Expected at least one token of text."
            raise AdaptiveRAGError(msg)
        self.model = model
        self.tokenizer = tokenizer
        self.prompt_ids = list(prompt_ids)
        self.decoding = decoding or DecodingOptions()
        self.capture = capture or CaptureOptions()
        limit = context_length(model)
        needed = len(self.prompt_ids) + self.decoding.max_new_tokens + 1
        if limit is not None and needed > limit:
            raise PromptTooLongError(len(self.prompt_ids), self.decoding.max_new_tokens, limit)
        self.eos_ids = _eos_ids(model, tokenizer)
        self._decode_text = _text_decoder(tokenizer)
        self.pad_id = self.eos_ids[0] if self.eos_ids else 0
        self.samples = self._make_samples(n, include_greedy)
        self.traces: list[GenerationTrace] = []
        self.error: Exception | None = None
        """What failed this request while it was decoded with others (it left the batch)."""
        self.stop_requested = False
        """Set from any thread to stop this request at the next step."""

    def _make_samples(self, n: int, include_greedy: bool) -> list[_Sample]:
        device = self.model.device
        samples: list[_Sample] = []
        if include_greedy:
            samples.append(_Sample(greedy=True, seed=None, generator=None))
        base = self.decoding.seed
        if self.decoding.sampling and base is None:
            base = int(torch.randint(0, 2**31 - 1, (1,)).item())
        for i in range(n):
            if not self.decoding.sampling:
                samples.append(_Sample(greedy=True, seed=None, generator=None))
                continue
            assert base is not None
            generator = torch.Generator(device=device)
            generator.manual_seed(base + i)
            samples.append(_Sample(greedy=False, seed=base + i, generator=generator))
        return samples

    # -- the loop ---------------------------------------------------------------------

    def __iter__(self) -> Iterator[TokenEvent]:
        for _, event in decode_together(self.model, [self]):
            if event is not None:
                yield event

    def run(self) -> list[GenerationTrace]:
        """Decode to the end and return the traces."""
        for _ in self:
            pass
        return self.traces

    def cancel(self) -> None:
        """Stop every sample now (a caller stopped reading); its rows leave the batch."""
        for sample in self.samples:
            if sample.active:
                sample.finish_reason = "stop"
            sample.tail = []

    def _eos_masked(self, present: Sequence[int]) -> list[int]:
        """Positions in ``present`` of the samples still short of ``min_new_tokens``."""
        return [i for i, b in enumerate(present) if self._masks_eos(self.samples[b])]

    def _masks_eos(self, sample: _Sample) -> bool:
        """Whether ``sample`` is still short of ``min_new_tokens`` (EOS is masked)."""
        short = len(sample.ids) < self.decoding.min_new_tokens
        return bool(short and self.eos_ids)

    def _masked_eos_ids(self) -> tuple[int, ...]:
        """The EOS ids this request's greedy samples mask this step (empty: none).

        Only a request whose greedy samples read the raw distribution: the step's masked
        argmax then serves them (:meth:`StepLogits.read`).
        """
        options = self.decoding
        if not options.min_new_tokens or options.sampling or options.signal_distribution != "raw":
            return ()
        if any(s.active and self._masks_eos(s) for s in self.samples):
            return tuple(self.eos_ids)
        return ()

    def _shared_key(self, present: Sequence[int]) -> tuple[object, ...] | None:
        """What makes this request's own distribution, when requests may share its work.

        ``None`` when it needs none (greedy on the raw distribution) or its own EOS mask.
        Requests with equal keys get their distributions from one computation over all
        their rows (each row's values are the same as computed alone).
        """
        options = self.decoding
        if not (options.sampling or options.signal_distribution == "processed"):
            return None
        if self._eos_masked(present):
            return None
        return (
            options.sampling,
            options.temperature,
            options.top_k,
            options.top_p,
            options.signal_distribution,
        )

    def _own_distribution(
        self, step: StepLogits, rows: Sequence[int], present: Sequence[int]
    ) -> _Distribution | None:
        """This request's own distribution over its rows, or ``None`` (raw and greedy)."""
        masked = self._eos_masked(present)
        options = self.decoding
        if not (options.sampling or options.signal_distribution == "processed" or masked):
            return None
        if self._masked_eos_ids() and step.masked_for == tuple(self.eos_ids):
            return None  # greedy on the raw distribution: the step's masked argmax serves
        logits, raw = step.rows_of(rows)
        if masked:
            logits = _without_eos(logits, self.eos_ids, masked)
        known = None if masked else step.of_rows(rows)
        return _Distribution.of(logits, raw, options, known)

    def _draws(self, present: Sequence[int]) -> list[tuple[int, torch.Generator]]:
        """The samples that draw a token this step: position in ``present``, generator."""
        draws = []
        for i, b in enumerate(present):
            sample = self.samples[b]
            if sample.active and not sample.greedy:
                assert sample.generator is not None  # a sampled sample has its generator
                draws.append((i, sample.generator))
        return draws

    def _choose_tokens(
        self,
        step: StepLogits,
        rows: Sequence[int],
        present: Sequence[int],
        shared: _Distribution | None = None,
        drawn: _Drawn | AdaptiveRAGError | None = None,
    ) -> Iterator[TokenEvent]:
        """Pick, score and stop-check the next token of each present sample.

        Args:
            step: The batch's next-token logits and what every row shares.
            rows: This decoder's rows in the batch, in order.
            present: Its sample index on each of those rows.
            shared: Its own distribution over those rows, computed together with other
                requests' (see :meth:`_shared_key`); ``None``: computed here if needed.
            drawn: The tokens its sampled samples (:meth:`_draws`) drew together with
                other requests' from ``shared`` and their logprobs, by position in
                ``rows``, or the error its rows gave; ``None``: drawn here.
        """
        own = shared if shared is not None else self._own_distribution(step, rows, present)
        if isinstance(drawn, AdaptiveRAGError):
            raise drawn
        tokens = drawn
        if tokens is None:
            tokens = {}
            draws = self._draws(present)
            if draws:
                assert own is not None  # sampling always has its own distribution
                positions = [i for i, _ in draws]
                got, ok, logprobs = own.draw(positions, [g for _, g in draws])
                if not all(ok):
                    raise _not_a_distribution([i for i, flag in enumerate(ok) if not flag])
                tokens = dict(zip(positions, zip(got, logprobs, strict=True), strict=True))
        chosen: list[tuple[int, int, float]] = []  # (position in rows, token, logprob)
        for i, b in enumerate(present):
            sample = self.samples[b]
            if not sample.active:
                continue
            if not sample.greedy:
                chosen.append((i, *tokens[i]))
            elif own is not None:
                chosen.append((i, own.greedy[i], own.greedy_logprob[i]))
            else:  # greedy on the raw distribution: computed for every row of the step
                chosen.append((i, *step.greedy(rows[i], self._masks_eos(sample))))
        for i, token, logprob in chosen:
            b, row = present[i], rows[i]
            sample = self.samples[b]
            if token in self.eos_ids:
                sample.finish_reason = "stop"
                self._set_tail(sample, ended_on_eos=True)
                yield from self._release(b, sample, final=True)
                continue
            entropy = own.entropies[i] if own is not None else step.entropy[row]
            top = None
            if self.decoding.top_logprobs:  # the row's distribution, for its alternatives
                top = own.signal_logp[i] if own is not None else step.raw[row]
            self._append(sample, token, logprob, entropy, top)
            sample.logsumexps.append(step.logsumexp[row])  # raw logits: the energy score
            yield from self._release(b, sample, final=not sample.active)

    def _append(
        self,
        sample: _Sample,
        token: int,
        logprob: float,
        entropy: float,
        logp: torch.Tensor | None,
    ) -> None:
        options = self.decoding
        sample.ids.append(token)
        sample.logprobs.append(logprob)
        sample.entropies.append(entropy)
        if options.top_logprobs and logp is not None:
            values, indices = torch.topk(logp, options.top_logprobs)
            sample.top_ids.append(tuple(int(i) for i in indices.tolist()))
            sample.top_lps.append(tuple(float(v) for v in values.tolist()))
        piece = _piece(self._decode_text, sample.ids, sample.text)
        sample.pieces.append(piece)
        sample.text += piece
        for stop in options.stop:
            start = sample.text.find(stop, max(0, len(sample.text) - len(piece) - len(stop)))
            if start >= 0:
                sample.text = sample.text[:start]
                sample.pieces = _clip_pieces(sample.pieces, start)
                sample.finish_reason = "stop"
                sample.stop_string = stop
                self._set_tail(sample, ended_on_eos=False)
                return
        if len(sample.ids) >= options.max_new_tokens:
            sample.finish_reason = "length"
            self._set_tail(sample, ended_on_eos=False)

    def _set_tail(self, sample: _Sample, *, ended_on_eos: bool) -> None:
        """Queue the tokens still to feed so every requested signal can be read."""
        capture = self.capture
        eos = self.eos_ids[0] if self.eos_ids else None
        wants_eos = capture.hidden and capture.hidden_at != "last" and eos is not None
        if ended_on_eos:
            sample.tail = [eos] if wants_eos and eos is not None else []
        elif wants_eos and eos is not None:
            # A stop-string ending is replaced by EOS; a length ending gets one appended
            # ("eos") or has its last token replaced ("eos_replacing_last").
            replaced = sample.stop_string is not None or capture.hidden_at == "eos_replacing_last"
            sample.tail = [eos] if replaced else [sample.ids[-1], eos]
        elif capture.attention or capture.hidden:
            sample.tail = [sample.ids[-1]]
        else:
            sample.tail = []

    def _release(self, b: int, sample: _Sample, *, final: bool) -> Iterator[TokenEvent]:
        if final:
            limit = len(sample.pieces)
        else:
            safe = len(sample.text) - _longest_stop_prefix(sample.text, self.decoding.stop)
            limit, used = sample.released, sum(len(p) for p in sample.pieces[: sample.released])
            while limit < len(sample.pieces) and used + len(sample.pieces[limit]) <= safe:
                used += len(sample.pieces[limit])
                limit += 1
        for index in range(sample.released, limit):
            yield TokenEvent(
                sample=b,
                index=index,
                token_id=sample.ids[index],
                piece=sample.pieces[index],
                logprob=sample.logprobs[index],
                entropy=sample.entropies[index],
                top_token_ids=sample.top_ids[index] if sample.top_ids else (),
                top_logprobs=sample.top_lps[index] if sample.top_lps else (),
            )
        sample.released = limit

    def _next_input(self, b: int) -> int | None:
        """The token sample ``b`` feeds next, or ``None`` once it has nothing left."""
        sample = self.samples[b]
        if sample.active:
            return sample.ids[-1]
        if sample.tail:
            return sample.tail.pop(0)
        sample.done = True
        return None

    def _store_hidden(self, b: int, hidden: np.ndarray) -> None:
        if self.capture.hidden:
            self.samples[b].hidden = hidden.copy()

    def _store_row(
        self, b: int, position: int, row: np.ndarray, head_max: np.ndarray | None
    ) -> None:
        """Keep the attention row of the token sample ``b`` fed at ``position``."""
        sample = self.samples[b]
        if not self.capture.attention:
            return
        if not self.capture.attention_head_max:
            head_max = None
        if position - len(self.prompt_ids) < len(sample.ids):  # a generated token, not a tail
            sample.rows.append(_aligned(row, position))
            if head_max is not None:
                sample.head_max_rows.append(_aligned(head_max, position))

    def _trace(self, sample: _Sample) -> GenerationTrace:
        count = len(sample.ids)
        attention = head_max = None
        if self.capture.attention:
            attention = _stack_rows(sample.rows, len(self.prompt_ids), count)
            if self.capture.attention_head_max:
                head_max = _stack_rows(sample.head_max_rows, len(self.prompt_ids), count)
        top = self.decoding.top_logprobs
        return GenerationTrace(
            prompt_ids=np.asarray(self.prompt_ids, dtype=np.int64),
            token_ids=np.asarray(sample.ids, dtype=np.int64),
            tokens=list(sample.pieces),
            text=sample.text,
            logprobs=np.asarray(sample.logprobs, dtype=np.float32),
            entropies=np.asarray(sample.entropies, dtype=np.float32),
            logsumexp=np.asarray(sample.logsumexps, dtype=np.float32),
            finish_reason=sample.finish_reason or "length",
            stop_string=sample.stop_string,
            seed=sample.seed,
            attention=attention,
            attention_head_max=head_max,
            hidden=sample.hidden if self.capture.hidden else None,
            top_token_ids=np.asarray(sample.top_ids, dtype=np.int64).reshape(count, top)
            if top
            else None,
            top_logprobs=np.asarray(sample.top_lps, dtype=np.float32).reshape(count, top)
            if top
            else None,
        )


def _aligned(row: np.ndarray, position: int) -> np.ndarray:
    """The row over the sample's own positions ``0..position``.

    The row's keys end at ``position``: left padding of a shared batch comes first and is
    dropped; a sliding-window cache keeps only the last keys, so a shorter row is the end
    of the sequence and the keys before it get 0.
    """
    keys = min(row.shape[0], position + 1)
    aligned = np.zeros(position + 1, dtype=np.float32)
    aligned[position + 1 - keys :] = row[row.shape[0] - keys :]
    return aligned


def _stack_rows(rows: list[np.ndarray], prompt_len: int, count: int) -> np.ndarray:
    matrix = np.zeros((count, prompt_len + count), dtype=np.float32)
    for t, row in enumerate(rows[:count]):
        matrix[t, : row.shape[0]] = row
    return matrix


def _text_decoder(tokenizer: object) -> Callable[[list[int]], str]:
    """The tokenizer's ``decode(ids, skip_special_tokens=True)`` without tokenization clean-up.

    For a fast tokenizer whose class keeps transformers' own ``decode`` and ``_decode``,
    that is exactly its Rust tokenizer's ``decode`` (transformers' wrapper around it costs
    about twice the decoding itself, and the decoding loop decodes every sample's text
    at every token); any other tokenizer is called as it is.
    """
    backend = getattr(tokenizer, "_tokenizer", None)
    kind = type(tokenizer)
    transformers_decode, fast_decode = _transformers_decoders()
    if (
        backend is not None
        and getattr(kind, "decode", None) is transformers_decode
        and getattr(kind, "_decode", None) is fast_decode
    ):
        rust_decode: Callable[..., str] = backend.decode

        def decode_fast(ids: list[int]) -> str:
            return rust_decode(ids, skip_special_tokens=True)

        return decode_fast

    def decode(ids: list[int]) -> str:
        return str(
            tokenizer.decode(  # type: ignore[attr-defined]
                ids, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        )

    return decode


@functools.cache
def _transformers_decoders() -> tuple[object, object]:
    """The ``decode`` of transformers' tokenizers and the ``_decode`` of its fast ones."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another layout of transformers: every tokenizer is called as is
        return None, None
    return PreTrainedTokenizerBase.decode, TokenizersBackend._decode


def next_piece(tokenizer: object, ids: Sequence[int], text: str) -> str:
    """Text that the last of ``ids`` adds to ``text``, the decoded text of the others.

    An incomplete UTF-8 character decodes to nothing; its text comes with the token that
    completes it, so the pieces of a sequence always join to its decoded text.

    Args:
        tokenizer: A HuggingFace tokenizer.
        ids: Token ids decoded so far, the new one last.
        text: Text of the pieces before the new token.

    Returns:
        The new token's piece.
    """
    return _piece(_text_decoder(tokenizer), ids, text)


def _piece(decode: Callable[[list[int]], str], ids: Sequence[int], text: str) -> str:
    """:func:`next_piece` with the tokenizer's decoding function (:func:`_text_decoder`)."""
    decoded = decode(list(ids))
    if decoded.endswith("\ufffd"):
        return ""
    if decoded.startswith(text):
        return decoded[len(text) :]
    return decoded[len(_common_prefix(decoded, text)) :]


def token_pieces(tokenizer: object, ids: Sequence[int]) -> list[str]:
    """Decoded text piece of each token of ``ids`` (see :func:`next_piece`)."""
    decode = _text_decoder(tokenizer)
    pieces: list[str] = []
    text = ""
    for end in range(1, len(ids) + 1):
        piece = _piece(decode, ids[:end], text)
        pieces.append(piece)
        text += piece
    return pieces


def _common_prefix(a: str, b: str) -> str:
    size = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        size += 1
    return a[:size]


def _entropy(logp: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of log-probabilities; zero-probability entries add 0.

    An entry of probability 0 gives ``0 * -inf``, NaN, which becomes 0 in place (or
    ``-0.0`` where ``exp`` underflows, which adds nothing either): the same sums as
    selecting the positive entries, in fewer passes over the row.
    """
    return -(logp.exp() * logp).nan_to_num_(nan=0.0).sum(dim=-1)


def _warp(
    logits: torch.Tensor, options: DecodingOptions, *, sort_all: bool | None = None
) -> torch.Tensor:
    """Apply temperature, top-k and top-p to logits, shape ``(batch, vocab)``.

    Top-k keeps every token at least as likely as the ``k``-th (ties included). Top-p
    then keeps, in order of likelihood, the tokens until the ones before them hold
    ``top_p`` of the probability (always the most likely one). After top-k only the
    ``k`` kept tokens need ordering: their sorted row is the top-k values followed by
    ``-inf``, which is exactly what sorting the whole row gives unless ties at the
    ``k``-th value keep more than ``k`` tokens (then the whole row is sorted).

    Args:
        logits: ``(batch, vocab)`` logits.
        options: The temperature, ``top_k`` and ``top_p``.
        sort_all: Sort the whole row for top-p even after top-k. The default does on
            an accelerator, where sorting is cheap and checking for ties at the
            ``k``-th value would wait for the device; on a CPU sorting is the cost.
    """
    if sort_all is None:
        sort_all = logits.device.type != "cpu"
    warped = logits if options.temperature == 1.0 else logits / options.temperature
    top: tuple[torch.Tensor, torch.Tensor] | None = None  # (values, indices), descending
    if options.top_k is not None and options.top_k < warped.shape[-1]:
        values, indices = torch.topk(warped, options.top_k, dim=-1)
        below = warped < values[..., -1:]
        warped = warped.masked_fill(below, -math.inf)
        kept = warped.shape[-1] - below.sum(dim=-1)
        if not sort_all and bool((kept == options.top_k).all()):  # no ties at the k-th
            top = values, indices
    if options.top_p is not None and options.top_p < 1.0:
        if top is None:
            sorted_logits, order = torch.sort(warped, descending=True, dim=-1)
        else:
            values, order = top
            rest = values.new_full(
                (values.shape[0], warped.shape[-1] - values.shape[-1]), -math.inf
            )
            sorted_logits = torch.cat([values, rest], dim=-1)
        probs = torch.softmax(sorted_logits, dim=-1)
        remove = probs.cumsum(dim=-1) - probs >= options.top_p
        remove[..., 0] = False  # always keep the most likely token
        remove = remove[..., : order.shape[-1]]  # after the top k: already -inf
        mask = torch.zeros(warped.shape, dtype=torch.bool, device=warped.device)
        warped = warped.masked_fill(mask.scatter(-1, order, remove), -math.inf)
    return warped


def exponential_noise(like: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Exp(1) noise shaped like ``like``, row ``i`` drawn from ``generators[i]``.

    Each row equals ``torch.empty_like(row).exponential_(1.0, generator=g)`` and leaves
    the generator where that leaves it. On a CPU that kernel draws one float64 uniform
    ``u`` per entry and returns ``-log1p(-u)`` cast to the row's dtype, serially (about
    37 microseconds a row of 1,853 entries); drawing the uniforms row by row
    (``uniform_``, 14 microseconds) and taking the logarithm of every row at once gives
    the same bits. That equality is checked once per dtype and row length against
    ``exponential_`` itself (:func:`_uniforms_give_exponentials`); where it does not hold
    (another release's kernel, an accelerator), each row calls ``exponential_``.
    """
    if like.device.type == "cpu" and _uniforms_give_exponentials(like.dtype, like.shape[-1]):
        uniforms = torch.empty(like.shape, dtype=torch.float64)
        for row, generator in zip(uniforms, generators, strict=True):
            row.uniform_(generator=generator)
        return torch.log1p(uniforms.neg_()).neg_().to(like.dtype)
    noise = torch.empty_like(like)
    for row, generator in zip(noise, generators, strict=True):
        row.exponential_(1.0, generator=generator)
    return noise


def _uniforms_give_exponentials(dtype: torch.dtype, length: int) -> bool:
    """Whether CPU ``exponential_`` rows equal ``-log1p(-u)`` of ``uniform_`` float64 rows.

    Compared bit for bit over two consecutive rows of three seeds (the second row checks
    that both advance a generator alike); the answer is kept per dtype and length.
    """
    key = (dtype, length)
    known = _EXPONENTIAL_FROM_UNIFORM.get(key)
    if known is None:
        known = True
        for seed in (0, 1, 2**31 + 7):
            direct, via = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
            for _ in range(2):
                want = torch.empty(length, dtype=dtype).exponential_(1.0, generator=direct)
                uniforms = torch.empty(length, dtype=torch.float64).uniform_(generator=via)
                got = torch.log1p(uniforms.neg_()).neg_().to(dtype)
                known = known and torch.equal(got, want)
        _EXPONENTIAL_FROM_UNIFORM[key] = known
    return known


_EXPONENTIAL_FROM_UNIFORM: dict[tuple[torch.dtype, int], bool] = {}


def draw_tokens(probs: torch.Tensor, generators: Sequence[torch.Generator]) -> list[int]:
    """Draw one token from each row of ``probs``, row ``i`` with ``generators[i]``.

    Each row draws what ``torch.multinomial(probs[i], 1, generator=generators[i])`` draws
    (the argmax of ``p / q`` with ``q ~ Exp(1)`` from that generator, torch's own method
    for a single draw), but the rows share one division, one argmax and one read-back:
    no per-row validity checks, which on an accelerator wait for the device three times
    a row.

    Args:
        probs: ``(rows, vocab)`` probabilities (a softmax: no negative entries).
        generators: One generator per row, on ``probs``' device; each advances as one
            ``torch.multinomial`` call would advance it.

    Returns:
        The drawn token of each row.

    Raises:
        AdaptiveRAGError: A row is not a distribution (NaN or infinite entries, or all
            zero): the model's logits were not finite.
    """
    drawn, ok, _ = _draw(probs, generators)
    if not all(ok):
        raise _not_a_distribution([i for i, flag in enumerate(ok) if not flag])
    return drawn


def _draw(
    probs: torch.Tensor,
    generators: Sequence[torch.Generator],
    logp: torch.Tensor | None = None,
) -> tuple[list[int], list[bool], list[float]]:
    """Each row's drawn token (see :func:`draw_tokens`) and whether the row could draw.

    With ``logp`` (rows like ``probs``), also each drawn token's log-probability under it;
    tokens, flags and log-probabilities come back in one read-back.
    """
    if probs.shape[0] != len(generators):
        msg = f"draw_tokens got {probs.shape[0]} rows and {len(generators)} generators."
        raise AdaptiveRAGError(msg)
    noise = exponential_noise(probs, generators)
    best, tokens = (probs / noise).max(dim=-1)  # the first maximum, as argmax gives it
    valid = torch.isfinite(best) & (best > 0)  # NaN or inf in the row, or all zero: not
    values = [valid.to(logp.dtype if logp is not None else torch.float32)]
    if logp is not None:
        values.append(logp.gather(-1, tokens[:, None])[:, 0])
    read, (drawn,), _ = _read_back(values, [tokens], probs.shape[-1])
    logprobs = read[1] if logp is not None else []
    return drawn, [flag == 1 for flag in read[0]], logprobs


def _not_a_distribution(bad: list[int]) -> AdaptiveRAGError:
    """The error for rows that cannot be sampled (indices among a call's drawn rows)."""
    return AdaptiveRAGError(
        f"Cannot sample rows {bad}: their probabilities hold NaN or infinite values or "
        "are all zero (the model's logits were not finite). Expected finite "
        "logits; check the model's weights and dtype (float16 overflows on some models: "
        "load it with dtype='bfloat16' or 'float32')."
    )


def _eos_ids(model: PreTrainedModel, tokenizer: object) -> list[int]:
    ids: list[int] = []
    config_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(config_eos, int):
        ids.append(config_eos)
    elif isinstance(config_eos, (list, tuple)):
        ids.extend(int(i) for i in config_eos)
    tokenizer_eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(tokenizer_eos, int) and tokenizer_eos not in ids:
        ids.append(tokenizer_eos)
    return ids


def decode_together(
    model: PreTrainedModel,
    decoders: Sequence[TraceDecoder],
    *,
    capture: CaptureOptions | None = None,
    admit: Callable[[int], Sequence[TraceDecoder]] | None = None,
    between: Callable[[], None] | None = None,
    prefix_cache: PrefixCache | None = None,
    max_rows: int = 0,
    share_prompts: bool = True,
) -> Iterator[tuple[int, TokenEvent | None]]:
    """Decode several requests in one batched KV-cache loop.

    Each request's prompt is prefilled once (prompts of different lengths are left-padded,
    with an attention mask and per-row position ids), its samples read that one copy of
    its keys and values (``share_prompts``; otherwise its cache row is repeated for
    them), and every sample then decodes one token per step with its own options,
    stop strings, seed, token budget and captures. A sample that has nothing left to feed
    leaves the batch (its cache row is dropped). With ``admit``, requests that arrive
    meanwhile join at a step boundary: they are prefilled together and their cache rows
    are appended (both caches left-padded to one length). A single request runs exactly
    as a one-request batch: no padding, no mask.

    Args:
        model: The causal LM every decoder was built for.
        decoders: The requests.
        capture: The signals the loop's hooks read; it must cover every request's
            (:func:`capture_covers`). Default: the first request's.
        admit: Called at each step boundary with the number of sequences decoding; returns
            new requests to join (same capture), numbered after the earlier ones.
        between: Called at each step boundary with this loop's hooks paused, so other
            uses of the model (a reference-mode forward pass) can run between steps.
        prefix_cache: Where prefills find stored prompt prefixes and leave their prompts
            (see :mod:`~langchain_adaptive_rag.prefix_cache`); ``None``: every prompt is
            prefilled in full.
        max_rows: Rows the cache makes room for when requests join (the most that
            ``admit`` lets in), so later joins write into it instead of copying it.
        share_prompts: Let the samples of a multi-sample request read one copy of its
            prompt's keys and values (:mod:`~langchain_adaptive_rag.shared_prompts`)
            instead of one copy each, on models whose cache the loop can hold and in
            loops that capture no attention rows.

    Yields:
        ``(request index, event)`` for each released token, in decoding order, and
        ``(request index, None)`` once a request is done (its ``traces`` are set then).

    Raises:
        AdaptiveRAGError: A request asks for a signal the loop's hooks do not read.
    """
    capture = capture or decoders[0].capture
    if not all(capture_covers(capture, d.capture) for d in decoders):
        msg = (
            "Requests decoded together must ask only for signals the loop reads; "
            f"the loop reads {capture}. Fix: decode the others in another loop."
        )
        raise AdaptiveRAGError(msg)
    hooks = _Hooks(model, capture)
    modules = sharing_modules(model) if share_prompts and not capture.attention else None
    try:
        with torch.inference_mode():
            loop = _BatchLoop(
                model, list(decoders), hooks, admit, between, prefix_cache, max_rows, modules
            )
            yield from loop.run()
    finally:
        hooks.remove()


def sharing_modules(model: PreTrainedModel) -> list[nn.Module] | None:
    """Every layer's attention module, when the model can read shared prompts.

    Shared prompts need the loop's own cache (no sliding-window or hybrid layers) and an
    attention module per layer that calls transformers' ``AttentionInterface`` and knows
    its layer's cache index (``layer_idx``); ``None`` otherwise.
    """
    if not plain_model_cache(model):
        return None
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


class _BatchLoop:
    """The state of one batched decoding loop: requests, rows, cache, mask, positions."""

    def __init__(
        self,
        model: PreTrainedModel,
        decoders: list[TraceDecoder],
        hooks: _Hooks,
        admit: Callable[[int], Sequence[TraceDecoder]] | None,
        between: Callable[[], None] | None = None,
        prefix_cache: PrefixCache | None = None,
        max_rows: int = 0,
        sharing: Sequence[nn.Module] | None = None,
    ) -> None:
        self.model = model
        self.max_rows = max_rows
        self.sharing = list(sharing) if sharing is not None else None
        """The attention modules routed while rows read shared prompts (``None``: never)."""
        self.prompts = SharedPrompts(max_rows)
        self.between = between
        self.prefix_cache = prefix_cache
        self.device = model.device
        self.decoders = decoders
        self.hooks = hooks
        self.admit = admit
        self.rows: list[tuple[int, int]] = []  # (request, sample) of each cache row
        self.positions: list[int] = []  # each row's own position of its last fed token
        self.padded = False
        self.cache: Any = None
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.step: StepLogits | None = None
        """Each row's next-token logits and their shared values (read back once a step)."""
        self.unfinished: set[int] = set(range(len(decoders)))
        """Requests whose traces are not set yet (finished ones stay in ``decoders``)."""
        self._arranged = True
        """Whether the shared prompts' layout matches the rows."""

    def _prefill(self, first: int) -> None:
        """Prefill requests ``first..`` and append their rows.

        Each prompt's longest stored prefix (with a prefix cache) is taken from the cache
        and only the tokens after it are computed. Requests whose numbers of tokens to
        compute differ widely are prefilled in separate forward passes
        (:func:`prefill_groups`) so a short one is not padded to a long one; on a cache
        whose rows cannot be joined they all go in one.
        """
        requests = list(range(first, len(self.decoders)))
        matches = [self._match(self.decoders[r].prompt_ids) for r in requests]
        lengths = [len(self.decoders[r].prompt_ids) for r in requests]
        needs = [n - m for n, (m, _) in zip(lengths, matches, strict=True)]
        plain = self._joinable() if self.cache is not None else plain_model_cache(self.model)
        groups = prefill_groups(needs) if plain else [list(range(len(requests)))]
        for group in groups:
            chosen = [requests[i] for i in group]
            self._prefill_group(chosen, [matches[i] for i in group], roomy=plain)

    def _prefill_group(
        self, requests: list[int], matches: list[tuple[int, StoredPrefix | None]], *, roomy: bool
    ) -> None:
        """Prefill ``requests`` in one forward pass and append their rows.

        Every row computes ``compute`` columns (the most any of its prompts needs) after
        ``cached`` columns of stored states. A row whose prompt needs fewer recomputes
        some of its stored prefix, so every row is padding, then its own tokens. With
        ``roomy``, the pass fills a :class:`~langchain_adaptive_rag.kv_cache.RoomyCache`
        (decoding steps then append in place); otherwise the model's own cache.
        """
        new = [self.decoders[r] for r in requests]
        lengths = [len(d.prompt_ids) for d in new]
        compute = max(n - m for n, (m, _) in zip(lengths, matches, strict=True))
        cached = max(lengths) - compute
        taken = [max(0, n - compute) for n in lengths]  # stored tokens each row takes
        ids, mask_rows = [], []
        for d, n, c in zip(new, lengths, taken, strict=True):
            fed = n - c
            ids.append([d.pad_id] * (compute - fed) + d.prompt_ids[c:])
            mask_rows.append([0] * (cached - c) + [1] * c + [0] * (compute - fed) + [1] * fed)
        mask = torch.tensor(mask_rows, device=self.device)
        pads = any(0 in row for row in mask_rows)
        step: dict[str, Any] = {}
        if pads:
            positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, cached:]
            step = {"attention_mask": mask, "position_ids": positions}
        if cached:
            stored = [entry for _, entry in matches]
            step[_cache_keyword(self.model)] = _stored_cache(stored, taken, cached)
        elif roomy:
            step[_cache_keyword(self.model)] = RoomyCache()
        inputs = torch.tensor(ids, dtype=torch.long, device=self.device)
        out = self.model(input_ids=inputs, use_cache=True, logits_to_keep=1, **step)
        cache = _output_cache(out)
        self._store_prompts(new, cache)
        at = {r: j for j, r in enumerate(requests)}  # each request's row in this pass
        shared = [r for r in requests if self._shares(self.decoders[r])]
        own = [r for r in requests if r not in shared]
        rows = [(r, b) for r in own + shared for b in range(len(self.decoders[r].samples))]
        order = [at[r] for r, _ in rows]  # one prefill serves every sample of a request
        logits = out.logits[:, -1, :].float()[torch.tensor(order, device=self.device)]
        values, captured = self.hooks.read(logits, _greedy_masking(new), rows=False)
        if captured.hidden is not None:
            for r, b in rows:
                self.decoders[r]._store_hidden(b, captured.hidden[at[r]])
        self.step = values if self.cache is None or self.step is None else self.step.joined(values)
        if shared:  # their prompts are held once; their rows start with no columns
            self.prompts.add(cache, mask, [at[r] for r in shared], shared)
        own_rows = order[: len(order) - sum(len(self.decoders[r].samples) for r in shared)]
        if own_rows:
            own_mask = mask[torch.tensor(own_rows, device=self.device)]
            if self.cache is None:
                if own_rows != list(range(len(new))):
                    cache.batch_select_indices(torch.tensor(own_rows, device=self.device))
                self.cache, self.mask, self.padded = cache, own_mask, pads
            else:
                self.mask = join_rows(
                    self.cache, self.mask, cache, own_mask, own_rows, self.max_rows
                )
                self.padded = True
        if len(own_rows) < len(order):
            self._append_blank(cache, len(order) - len(own_rows))
            self._trim()  # the columns only a shared prompt needed
        self.rows += rows
        self.positions += [len(self.decoders[r].prompt_ids) - 1 for r, _ in rows]
        self._arranged = False  # new rows: the shared prompts' layout is laid out again

    def _shares(self, decoder: TraceDecoder) -> bool:
        """Whether a request's samples read one shared copy of its prompt."""
        return self.sharing is not None and len(decoder.samples) > 1

    def _append_blank(self, like: Any, count: int) -> None:
        """Append ``count`` rows that hold no columns yet (they read a shared prompt)."""
        if self.cache is not None and is_roomy(self.cache):  # in the rows' room
            for layer in self.cache.layers:
                layer.add_rows(count, self.max_rows)
            width = self.mask.shape[1]
            self.mask = torch.cat([self.mask, self.mask.new_zeros((count, width))])
            self.padded = True
            return
        blank = RoomyCache()
        for number, layer in enumerate(like.layers):
            keys = layer.keys[:1, :, :0].expand(count, -1, -1, -1)
            values = layer.values[:1, :, :0].expand(count, -1, -1, -1)
            blank.update(keys, values, number)
        blank_mask = self.mask.new_zeros((count, 0))
        if self.cache is None:
            self.cache, self.mask = blank, blank_mask
        else:
            self.mask = join_rows(
                self.cache, self.mask, blank, blank_mask, range(count), self.max_rows
            )
        self.padded = True  # positions and masks are the rows' own, never the cache's

    def _match(self, prompt_ids: list[int]) -> tuple[int, StoredPrefix | None]:
        """The stored prefix a prompt's prefill starts from (``(0, None)``: none)."""
        if self.prefix_cache is None:
            return 0, None
        return self.prefix_cache.match(prompt_ids, self.device)

    def _store_prompts(self, new: list[TraceDecoder], cache: Any) -> None:
        """Keep each prefilled prompt's keys and values (the batch's last columns)."""
        store = self.prefix_cache
        if store is None or store.max_bytes == 0 or not is_roomy(cache):
            return
        for j, decoder in enumerate(new):
            n = len(decoder.prompt_ids)

            def states(j: int = j, n: int = n) -> LayerStates:
                return [
                    (
                        layer.keys[j : j + 1, :, -n:, :].clone(),
                        layer.values[j : j + 1, :, -n:, :].clone(),
                    )
                    for layer in cache.layers
                ]

            store.add(decoder.prompt_ids, states)

    def _trim(self) -> None:
        """Drop the leading cache columns that are padding for every remaining row.

        Rows are left-padded, so a column every row masks out carries nothing; without
        this a loop that requests keep joining would attend over ever longer padding.
        """
        if not self.padded or not self._joinable() or self.mask.shape[1] == 0:
            return
        width = self.mask.shape[1]
        first = self.mask.argmax(dim=1)  # each row: zeros, then ones (or none yet)
        lead = int(torch.where(self.mask.any(dim=1), first, width).min().item())
        if lead == 0:
            return
        for layer in self.cache.layers:
            layer.drop_leading(lead)
        self.mask = self.mask[:, lead:]

    def _joinable(self) -> bool:
        return is_roomy(self.cache)

    def run(self) -> Iterator[tuple[int, TokenEvent | None]]:
        self._prefill(0)
        while True:
            if self.between is not None:
                self.hooks.pause(True)
                try:
                    self.between()
                finally:
                    self.hooks.pause(False)
            if self.admit is not None and self._joinable():
                joining = self.admit(len(self.rows))
                if joining:
                    first = len(self.decoders)
                    self.decoders += joining
                    self.unfinished.update(range(first, len(self.decoders)))
                    self._prefill(first)
            yield from self._choose()
            feed = [self.decoders[r]._next_input(b) for r, b in self.rows]  # None: done
            yield from self._finish_requests()
            keep = [i for i, token in enumerate(feed) if token is not None]
            if not keep:
                return
            if len(keep) < len(self.rows):  # finished samples leave the batch
                kept = torch.tensor(keep, device=self.device)
                if self._joinable():  # the rows after each gap move down, in place
                    self.cache.keep_rows(keep)
                else:
                    self.cache.batch_select_indices(kept)
                self.mask = self.mask[kept]
                self.rows = [self.rows[i] for i in keep]
                self.positions = [self.positions[i] for i in keep]
                self._arranged = False
                self._trim()
            self._step([feed[i] for i in keep])  # type: ignore[misc]

    def _choose(self) -> Iterator[tuple[int, TokenEvent]]:
        """Pick, score and stop-check each sample, one request at a time."""
        shared = len(self.decoders) > 1 or self.admit is not None
        step = self.step
        assert step is not None  # set by every forward pass
        owned: dict[int, list[int]] = {}  # request -> its rows, in request order
        for i, (owner, _) in enumerate(self.rows):
            owned.setdefault(owner, []).append(i)
        samples_of = {r: [self.rows[i][1] for i in present] for r, present in owned.items()}
        for r in owned:
            if self.decoders[r].stop_requested:
                self.decoders[r].cancel()
        distributions, drawn = self._shared_distributions(step, owned, samples_of)
        for r in sorted(owned):
            decoder, present, samples = self.decoders[r], owned[r], samples_of[r]
            try:
                events = list(
                    decoder._choose_tokens(
                        step, present, samples, distributions.get(r), drawn.get(r)
                    )
                )
            except Exception as error:
                if not shared:
                    raise
                decoder.error = error  # only this request fails; its rows leave the batch
                decoder.cancel()
                continue
            for event in events:
                yield r, event

    def _shared_distributions(
        self, step: StepLogits, owned: dict[int, list[int]], samples_of: dict[int, list[int]]
    ) -> tuple[dict[int, _Distribution], dict[int, _Drawn | AdaptiveRAGError]]:
        """One computation per kind of distribution for the requests that share it.

        Requests sampling with the same temperature, top-k and top-p (SeaKR's calls, for
        one) get their distributions from one pass over all their rows instead of one
        small pass each, and their samples draw in one :func:`_draw` (each row with its
        own generator, so each token is the one it draws alone); a request alone in its
        kind computes and draws its own.

        Returns:
            Each sharing request's distribution, and its drawn tokens (or the error its
            rows gave, for it alone).
        """
        groups: dict[tuple[object, ...], list[int]] = {}
        for r, samples in samples_of.items():
            key = self.decoders[r]._shared_key(samples)
            if key is not None:
                groups.setdefault(key, []).append(r)
        shared: dict[int, _Distribution] = {}
        drawn: dict[int, _Drawn | AdaptiveRAGError] = {}
        for requests in groups.values():
            if len(requests) < 2:
                continue
            rows = [i for r in requests for i in owned[r]]
            options = self.decoders[requests[0]].decoding
            logits, raw = step.rows_of(rows)
            together = _Distribution.of(logits, raw, options, step.of_rows(rows))
            start = 0
            for r in requests:
                shared[r] = together.part(start, start + len(owned[r]))
                start += len(owned[r])
            drawn.update(self._draw_together(requests, together, owned, samples_of))
        return shared, drawn

    def _draw_together(
        self,
        requests: list[int],
        together: _Distribution,
        owned: dict[int, list[int]],
        samples_of: dict[int, list[int]],
    ) -> dict[int, _Drawn | AdaptiveRAGError]:
        """Draw the sampled samples of ``requests`` (rows of ``together``) at once.

        Returns:
            Each request's tokens and their logprobs by position among its rows, or the
            error its rows gave.
        """
        positions: list[int] = []  # rows of ``together`` that draw
        generators: list[torch.Generator] = []
        mine: dict[int, list[int]] = {}  # each request's drawing positions among its rows
        start = 0
        for r in requests:
            draws = self.decoders[r]._draws(samples_of[r])
            mine[r] = [i for i, _ in draws]
            positions.extend(start + i for i, _ in draws)
            generators.extend(g for _, g in draws)
            start += len(owned[r])
        if not positions:
            return {}
        tokens, ok, logprobs = together.draw(positions, generators)
        drawn: dict[int, _Drawn | AdaptiveRAGError] = {}
        first = 0
        for r, at in mine.items():
            last = first + len(at)
            bad = [i for i, flag in enumerate(ok[first:last]) if not flag]
            picked = zip(tokens[first:last], logprobs[first:last], strict=True)
            drawn[r] = _not_a_distribution(bad) if bad else dict(zip(at, picked, strict=True))
            first = last
        return drawn

    def _finish_requests(self) -> Iterator[tuple[int, None]]:
        """Set the traces of every request whose samples are all done; announce it."""
        for r in sorted(self.unfinished):
            decoder = self.decoders[r]
            if all(sample.done for sample in decoder.samples):
                decoder.traces = [decoder._trace(sample) for sample in decoder.samples]
                self.unfinished.discard(r)
                yield r, None

    def _step(self, tokens: list[int]) -> None:
        """Feed one token per row and keep the new logits and captures.

        While rows read shared prompts, every layer is routed through
        :func:`~langchain_adaptive_rag.shared_prompts.shared_prompt_attention`, which
        reads the step's mask from the prompts (the model builds none).
        """
        self.positions = [p + 1 for p in self.positions]
        step: dict[str, torch.Tensor] = {}
        ones = self.mask.new_ones((len(self.rows), 1))
        self.mask = torch.cat([self.mask, ones], dim=1)  # kept even unpadded: a join pads it
        if not self._arranged:
            self.prompts.arrange([r for r, _ in self.rows])
            self._arranged = True
        shared = self.sharing is not None and self.prompts.layout is not None
        fed = [tokens, self.positions] if self.padded else [tokens]
        fed_on_device = torch.tensor(fed, dtype=torch.long, device=self.device)  # one copy
        inputs = fed_on_device[0].unsqueeze(1)
        if self.padded:
            step = {"position_ids": fed_on_device[1].unsqueeze(1)}
            if not shared:
                step["attention_mask"] = self.mask
        step[_cache_keyword(self.model)] = self.cache
        if shared and self.sharing is not None:
            self.prompts.set_own_mask(self.mask)
            with self.prompts.routed(self.sharing):
                out = self.model(input_ids=inputs, use_cache=True, **step)
        else:
            out = self.model(input_ids=inputs, use_cache=True, **step)
        unfinished = [self.decoders[r] for r in sorted(self.unfinished)]
        masking = _greedy_masking(unfinished)
        self.step, captured = self.hooks.read(out.logits[:, -1, :].float(), masking)
        for i, (r, b) in enumerate(self.rows):  # rows and hidden states of the fed positions
            if captured.hidden is not None:
                self.decoders[r]._store_hidden(b, captured.hidden[i])
            if captured.rows is not None:
                head_max = captured.head_max[i] if captured.head_max is not None else None
                self.decoders[r]._store_row(b, self.positions[i], captured.rows[i], head_max)


def _greedy_masking(decoders: Sequence[TraceDecoder]) -> tuple[int, ...]:
    """The EOS ids a step's masked argmax leaves out for ``decoders``' greedy samples.

    Empty when none masks, or when they mask different ids (each then computes its own).
    """
    wanted = {decoder._masked_eos_ids() for decoder in decoders} - {()}
    return wanted.pop() if len(wanted) == 1 else ()


def _cache_keyword(model: PreTrainedModel) -> str:
    """The forward argument that takes a KV cache.

    Newer transformers 5.x releases name it ``cache`` and deprecate ``past_key_values``
    (removed in 5.40); earlier 5.x releases know only ``past_key_values``.
    """
    model_class = type(model)
    keyword = _CACHE_KEYWORDS.get(model_class)
    if keyword is None:
        parameters = inspect.signature(model_class.forward).parameters
        keyword = "cache" if "cache" in parameters else "past_key_values"
        _CACHE_KEYWORDS[model_class] = keyword
    return keyword


_CACHE_KEYWORDS: dict[type, str] = {}


PREFILL_PASS_TOKENS = 128
"""What one more prefill forward pass is taken to cost, in token rows computed: a group of
requests is split off into a pass of its own only when that saves more padding."""


def prefill_groups(needs: Sequence[int], pass_tokens: int = PREFILL_PASS_TOKENS) -> list[list[int]]:
    """Split requests into prefill passes that compute the fewest token rows.

    A pass computes, for each of its requests, as many tokens as the one that needs the
    most; each pass also costs ``pass_tokens``. The requests are sorted by need and cut
    where that lowers the total (the best cut of a sorted list is found exactly).

    Args:
        needs: Tokens each request has to compute (its prompt after a stored prefix).
        pass_tokens: The cost of one more forward pass, in token rows.

    Returns:
        Groups of indices into ``needs``, the neediest group first, each sorted by index.
    """
    order = sorted(range(len(needs)), key=lambda i: (-needs[i], i))
    best = [0] + [0] * len(order)  # best[i]: least cost of the first i requests in order
    cut = [0] * (len(order) + 1)
    for i in range(1, len(order) + 1):
        best[i], cut[i] = min(
            (best[j] + (i - j) * needs[order[j]] + pass_tokens, j) for j in range(i)
        )
    groups: list[list[int]] = []
    end = len(order)
    while end > 0:
        groups.append(sorted(order[cut[end] : end]))
        end = cut[end]
    return groups[::-1]


def _stored_cache(stored: Sequence[StoredPrefix | None], taken: Sequence[int], width: int) -> Any:
    """A cache of ``width`` columns whose row ``j`` ends with ``taken[j]`` stored tokens."""
    sample = next(entry for entry in stored if entry is not None)
    cache = RoomyCache()
    for index, (keys, values) in enumerate(sample.layers):
        shape = (len(stored), keys.shape[1], width, keys.shape[3])
        layer_keys, layer_values = keys.new_zeros(shape), values.new_zeros(shape)
        for j, (entry, count) in enumerate(zip(stored, taken, strict=True)):
            if entry is not None and count:
                own_keys, own_values = entry.layers[index]
                layer_keys[j, :, width - count :, :] = own_keys[0, :, :count, :]
                layer_values[j, :, width - count :, :] = own_values[0, :, :count, :]
        cache.update(layer_keys, layer_values, index)
    return cache


def _output_cache(out: Any) -> Any:
    """The KV cache a forward pass returned, under either release's field name."""
    cache = out.get("cache") if hasattr(out, "get") else None
    return cache if cache is not None else out.past_key_values
