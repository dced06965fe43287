"""Attention rows on any kernel: recomputed for one layer from its own query and key states.

Only ``attn_implementation="eager"`` returns attention weights, and eager attention on every
layer costs 1.2-1.6x sdpa's decoding time. Instead, the captured layer alone is routed
through ``capture_attention_forward``, which runs the model's own kernel (``sdpa``,
``flash_attention_2``, ...) for the layer's output, unchanged, and computes the weights the
signals need from the query and key states the kernel received (after rotary embeddings,
norms and the KV cache): ``softmax(q k^T * scaling [softcap] + mask)`` in float32 (with
a model's attention-sink logits in the normalisation, as gpt-oss has them), the
newest query row or, for a full forward pass, every row. Grouped-query heads are scored
a key head at a time, its query heads together, so the keys are never copied per query
head. Only that layer's module sees a config naming this function; the masks are built
by the model for its own kernel and read in each form (none, boolean, additive, a
flash-attention padding mask, or a flex-attention ``BlockMask``, whose mask function is
evaluated at the rows' positions), with the layer's sliding window applied.

While the decoding loop's cache only appends, the steps' rows are deferred
([`PendingRows`][]): a step keeps a view of its newest query, and the rows of all
kept steps are computed later as one causal attention over the latest keys, so a
decoding step launches no kernel for them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.attention.flex_attention import BlockMask

from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError

__all__ = [
    "CAPTURE_IMPLEMENTATION",
    "UNREAD_OPTIONS",
    "PendingRows",
    "RowSink",
    "attention_rows",
    "block_mask_rows",
    "register_attention",
    "route_to_capture",
]

CAPTURE_IMPLEMENTATION = "langchain_adaptive_rag_rows"
"""Name under which ``capture_attention_forward`` is registered in transformers'
``AttentionInterface`` (an added entry: no existing implementation is changed)."""


UNREAD_OPTIONS = ("position_bias", "sinks")
"""Attention-interface options that change a layer's weights and that the recomputed rows
do not include: an additive position bias (T5-style relative positions), and attention
sinks given per token (one logit per query position). A layer that passes one cannot give
rows on a fast kernel: the model's eager kernel gives them."""


PENDING_SCORES = 2**25
"""Most float32 scores (128 MiB) one chunk of ``PendingRows.weights`` computes."""


@dataclass
class PendingRows:
    """Successive decoding steps' newest queries, whose rows are computed later at once.

    Over a cache that only appends (each step adds one key column to every row, and no
    window drops old keys), the keys a step's query saw are the first columns of any
    later step's keys, and the mask only gains columns. So the rows of ``S`` steps are
    the last ``S`` query rows of one causal attention over the latest step's keys: one
    computation for all of them instead of one a step.
    """

    queries: list[torch.Tensor] = field(default_factory=list)
    """Each step's ``(batch, heads, 1, head_dim)`` newest query states (views, no copy)."""
    key: torch.Tensor | None = None
    """The latest step's ``(batch, kv_heads, keys, head_dim)`` keys."""
    mask: torch.Tensor | BlockMask | None = None
    """The mask the model built for the latest step (``None``: none)."""
    scaling: float | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None
    """The layer's attention-sink logits, one per head (``None``: none)."""

    def add(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        mask: torch.Tensor | BlockMask | None,
        scaling: float | None,
        softcap: float | None,
        *,
        sinks: torch.Tensor | None = None,
    ) -> None:
        """Keep one step's newest query, and its keys, mask and sinks as the latest."""
        self.queries.append(query[:, :, -1:, :])
        self.key, self.mask, self.scaling, self.softcap = key, mask, scaling, softcap
        self.sinks = sinks

    def weights(self) -> Iterator[torch.Tensor]:
        """Every kept step's row, a chunk of steps at a time; nothing is kept after.

        Yields:
            ``(batch, heads, steps, keys)`` float32 weights of consecutive steps over the
            keys the chunk's last step saw (an earlier step ``s`` of the ``S`` kept saw
            the first ``keys - (S - 1 - s)`` of the latest step's keys; the rest get 0).
        """
        queries, key, mask = self.queries, self.key, self.mask
        self.queries, self.key, self.mask = [], None, None
        if not queries or key is None:
            return
        steps, keys = len(queries), key.shape[2]
        batch, heads, _, _ = queries[0].shape
        if isinstance(mask, BlockMask):  # as a tensor: sliced below
            mask = block_mask_rows(mask, batch, 1, keys)
        chunk = max(1, PENDING_SCORES // max(1, batch * heads * keys))
        for first in range(0, steps, chunk):
            last = min(steps, first + chunk)
            seen = keys - (steps - last)
            yield attention_rows(
                torch.cat(queries[first:last], dim=2),
                key[:, :, :seen],
                None if mask is None else mask[..., :seen],
                scaling=self.scaling,
                softcap=self.softcap,
                sinks=self.sinks,
                queries=last - first,
            )


@dataclass
class RowSink:
    """Where the routed layer leaves the weights of its latest forward pass."""

    original: str
    """The kernel the model was loaded with (``sdpa``, ``flash_attention_2``, ...)."""
    full: bool = False
    """Compute every query row (a full forward pass) instead of the newest one."""
    rows: torch.Tensor | None = None
    """``(batch, heads, queries, keys)`` float32 weights of the latest call."""
    calls: int = 0
    """Forward passes seen."""
    pending: PendingRows | None = None
    """While set, calls keep their newest query here instead of computing ``rows``."""
    extra: dict[str, Any] = field(default_factory=dict)


def block_mask_rows(mask: BlockMask, batch: int, queries: int, keys: int) -> torch.Tensor:
    """The last ``queries`` query rows of a flex-attention ``BlockMask``, as booleans.

    The mask's function is evaluated on index grids (transformers' mask functions
    broadcast: causal, sliding-window, padding and packed-sequence masks, with their
    offsets). Its query and key indices count from the kernel's first query and first
    key, as flex attention counts them.

    Args:
        mask: A flex-attention mask, as transformers builds it for a forward pass.
        batch: The batch size of the attention's inputs.
        queries: How many of its last query rows are wanted (at most its own).
        keys: The number of keys the kernel was given.

    Returns:
        ``(batch, 1, rows, keys)`` booleans, ``True`` where a query sees a key.

    Raises:
        AttentionUnavailableError: If the mask's function cannot be evaluated that way.
    """
    query_length = int(mask.seq_lengths[0])
    rows = min(queries, query_length)
    device = mask.kv_num_blocks.device
    grid = (
        torch.arange(batch, device=device).view(-1, 1, 1, 1),
        torch.zeros((1, 1, 1, 1), dtype=torch.long, device=device),
        torch.arange(query_length - rows, query_length, device=device).view(1, 1, -1, 1),
        torch.arange(keys, device=device).view(1, 1, 1, -1),
    )
    try:
        allowed = torch.as_tensor(mask.mask_mod(*grid), device=device)
        return allowed.to(torch.bool).expand(batch, 1, rows, keys)
    except (RuntimeError, TypeError, IndexError) as error:
        raise AttentionUnavailableError(
            "flex_attention",
            f"its BlockMask's mask_mod cannot be evaluated on index grids ({error})",
        ) from error


def _visible(
    attention_mask: torch.Tensor | None,
    batch: int,
    queries: int,
    keys: int,
    sliding_window: int | None,
    device: torch.device,
) -> torch.Tensor:
    """Which keys each of the last ``queries`` sees (bool, broadcasts to the scores)."""
    allowed: torch.Tensor | None = None
    if attention_mask is not None:
        mask = attention_mask
        if mask.ndim == 2:  # flash-attention padding mask (batch, keys): 1 = attend
            allowed = mask[:, None, None, -keys:].bool()
        else:
            mask = mask[..., -queries:, -keys:]
            allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
            # a 4-D mask already hides what the layer's window hides (the model's own, by
            # columns; the loop's, by each row's positions, which padding gaps keep apart)
            sliding_window = None
    window_cuts = sliding_window is not None and sliding_window < keys
    if allowed is not None and queries == 1 and not window_cuts:
        return allowed  # the newest query is after every key: only the mask hides any
    query_pos = torch.arange(keys - queries, keys, device=device)[:, None]
    key_pos = torch.arange(keys, device=device)[None, :]
    causal = key_pos <= query_pos
    if sliding_window is not None:
        causal = causal & (query_pos - key_pos < sliding_window)
    visible = causal[None, None].expand(batch, 1, queries, keys)
    return visible if allowed is None else visible & allowed


def attention_rows(
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | BlockMask | None,
    *,
    scaling: float | None,
    softcap: float | None = None,
    sliding_window: int | None = None,
    queries: int = 1,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Attention weights of the last ``queries`` query rows, as eager attention gives them.

    Args:
        query: ``(batch, heads, q, head_dim)`` query states.
        key: ``(batch, kv_heads, keys, head_dim)`` key states (the whole cache).
        attention_mask: The mask the model built for its kernel, or ``None``.
        scaling: Score scale (``head_dim ** -0.5`` when ``None``).
        softcap: Gemma-2 style logit soft-capping.
        sliding_window: Keys further back than this are not seen.
        queries: How many of the last query rows to compute.
        sinks: Attention-sink logits, one per query head (gpt-oss's ``s_aux``): each
            joins its head's softmax as one more column, which is then dropped, so a
            row sums to less than 1, as eager attention gives it.

    Returns:
        ``(batch, heads, queries, keys)`` float32 weights; each row sums to 1 (less with
        sinks).
    """
    batch, heads, length, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    if isinstance(attention_mask, BlockMask):
        attention_mask = block_mask_rows(attention_mask, batch, queries, keys)
    q = query if length == queries else query[:, :, -queries:, :]
    # each key head's group of query heads as one matrix: the keys are read once per key
    # head, never copied per query head
    grouped = q.float().reshape(batch, kv_heads, (heads // kv_heads) * queries, dim)
    scores = torch.matmul(grouped, key.float().transpose(-1, -2)).view(batch, heads, queries, keys)
    scores = scores * (dim**-0.5 if scaling is None else scaling)
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    window_cuts = sliding_window is not None and sliding_window < keys
    if attention_mask is not None or window_cuts or queries > 1:  # else every key is seen
        visible = _visible(attention_mask, batch, queries, keys, sliding_window, q.device)
        scores = scores.masked_fill(~visible, float("-inf"))
    if sinks is None:
        return torch.softmax(scores, dim=-1)
    column = sinks.float().reshape(1, heads, 1, 1).expand(batch, heads, queries, 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :keys]


def capture_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | BlockMask | None,
    **kwargs: Any,  # the kernel's own options, passed through unchanged
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The model's kernel for the output, plus the weights left in the module's sink.

    Raises:
        AttentionUnavailableError: If the layer passes an option that changes its weights
            and that the rows do not recompute ([`UNREAD_OPTIONS`][]).
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    sink: RowSink = module._adaptive_rag_sink  # type: ignore[assignment]
    unread = [name for name in UNREAD_OPTIONS if kwargs.get(name) is not None]
    if unread:
        raise AttentionUnavailableError(
            sink.original,
            f"{type(module).__name__} passes its kernel {', '.join(unread)}, which the rows "
            "recomputed from its query and key states do not include",
        )
    kernel: Callable[..., tuple[torch.Tensor, torch.Tensor | None]] = ALL_ATTENTION_FUNCTIONS[
        sink.original
    ]
    output, _ = kernel(module, query, key, value, attention_mask, **kwargs)
    sink.calls += 1
    sliding = kwargs.get("sliding_window")
    if sink.pending is not None:
        if isinstance(sliding, int) and 0 < sliding < key.shape[-2]:  # old keys hidden
            msg = (
                f"Attention rows of a sliding-window layer cannot be deferred past its window"
                f" ({key.shape[-2]} keys, window {sliding})."
            )
            raise AdaptiveRAGError(msg)
        softcap, sinks = kwargs.get("softcap"), kwargs.get("s_aux")
        sink.pending.add(query, key, attention_mask, kwargs.get("scaling"), softcap, sinks=sinks)
        return output, None
    sink.rows = attention_rows(
        query,
        key,
        attention_mask,
        scaling=kwargs.get("scaling"),
        softcap=kwargs.get("softcap"),
        sliding_window=sliding if isinstance(sliding, int) and sliding > 0 else None,
        queries=query.shape[2] if sink.full else 1,
        sinks=kwargs.get("s_aux"),
    )
    return output, None


def register_attention(name: str, function: Callable[..., Any]) -> None:
    """Add ``function`` to transformers' ``AttentionInterface`` as ``name``, once.

    An added entry: no existing implementation is changed, and a module runs it only
    while its config names it.
    """
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if name not in ALL_ATTENTION_FUNCTIONS:
        ALL_ATTENTION_FUNCTIONS.register(name, function)


class route_to_capture:  # noqa: N801 - used as a context manager, like torch.no_grad
    """Route one attention module through ``capture_attention_forward`` for a while.

    The module gets a shallow copy of its config naming the capture function and a
    [`RowSink`][]; both are removed on exit. Other layers and the model's masks keep
    the model's kernel.
    """

    def __init__(self, module: nn.Module, original: str, *, full: bool = False) -> None:
        self.module = module
        self.sink = RowSink(original=original, full=full)
        self._config: Any = None
        self._routed: Any = None
        self._outer: RowSink | None = None

    def __enter__(self) -> RowSink:
        register_attention(CAPTURE_IMPLEMENTATION, capture_attention_forward)
        config: Any = self.module.config
        self._config = config
        self._outer = getattr(self.module, "_adaptive_rag_sink", None)
        routed = copy.copy(config)
        routed._attn_implementation = CAPTURE_IMPLEMENTATION
        self._routed = routed
        setattr(self.module, "config", routed)  # noqa: B010 - an nn.Module attribute
        setattr(self.module, "_adaptive_rag_sink", self.sink)  # noqa: B010
        return self.sink

    def pause(self, paused: bool) -> None:
        """Give the module back its own config while paused (a nested use may route it)."""
        setattr(self.module, "config", self._config if paused else self._routed)  # noqa: B010
        if paused:
            delattr(self.module, "_adaptive_rag_sink")
        else:
            setattr(self.module, "_adaptive_rag_sink", self.sink)  # noqa: B010

    def __exit__(self, *exc: object) -> None:
        setattr(self.module, "config", self._config)  # noqa: B010
        if self._outer is not None:
            setattr(self.module, "_adaptive_rag_sink", self._outer)  # noqa: B010
        else:
            delattr(self.module, "_adaptive_rag_sink")
