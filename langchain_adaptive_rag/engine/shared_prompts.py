"""Shared prompts: the samples of one call attend to one copy of their prompt.

A call that draws ``n`` samples of one prompt (SeaKR's greedy step and its ``k`` samples)
decodes ``n`` rows whose keys and values are the same over the whole prompt and differ
only in what each has generated. Held as ``n`` copies, the prompt is read ``n`` times at
every step: on a batch of several such calls, attention is then bound by reading memory
(toy model, 8 calls of 9 rows over 300 tokens: 17 ms a step against 5 ms for one call).

[`SharedPrompts`][] holds each call's prompt once (one row per call, left-padded to
one length) while the decoding loop's own cache holds only each row's generated tokens.
During a decoding step every attention layer is routed through
[`shared_prompt_attention`][], which scores each row's query against its call's prompt
(one matrix product per call and head, over all of the call's rows) and against the row's
own tokens, takes one softmax over both, and sums both parts' values: the attention over
the prompt followed by the row's tokens, computed without copying the prompt. Rows of
single-sample calls keep their prompt in the loop's cache and read no shared prompt.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from langchain_adaptive_rag.engine.attention_rows import register_attention
from langchain_adaptive_rag.engine.kv_cache import RoomyCache, cache_keyword, join_rows

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "SHARED_IMPLEMENTATION",
    "PromptLayout",
    "SharedPrompts",
    "attends_its_cache",
    "shared_prompt_attention",
]

SHARED_IMPLEMENTATION = "langchain_adaptive_rag_shared_prompt"
"""Name under which [`shared_prompt_attention`][] is registered in transformers'
``AttentionInterface`` (an added entry: no existing implementation is changed)."""


@dataclass(frozen=True)
class PromptLayout:
    """Which rows of a decoding step read which shared prompt, for grouped products.

    The rows of one call are consecutive. A call's rows take places ``g * width ..
    g * width + n - 1`` of a ``(calls * width)`` layout (``g``: the call's prompt row,
    ``width``: the most rows any call has), so every call's queries meet its prompt's keys
    in one batched product.
    """

    rows: int
    """Rows in the step."""
    calls: int
    """Prompts held (rows of the prompt cache)."""
    grouped: torch.Tensor
    """``(m,)`` the rows that read a shared prompt."""
    slots: torch.Tensor
    """``(m,)`` each one's place in the layout."""
    width: int
    """The most rows of one call."""
    every_row: bool
    """Whether the grouped rows are all the rows, in order."""
    dense: bool
    """Whether, moreover, the rows are the layout: each call's rows together, in the calls'
    order, every call with ``width`` rows."""
    prompt_bias: torch.Tensor
    """``(rows, 1, prompt length)``: 0 where a row sees a prompt column, -inf elsewhere
    (every column for a row that reads no shared prompt)."""


class SharedPrompts:
    """The prompts of a decoding loop's multi-sample calls, one row each.

    Args:
        max_rows: The most prompts held at once (the loop's ``max_batch_rows``): buffers
            made anew have room for up to twice the prompts they hold, but not past it.
    """

    def __init__(self, max_rows: int = 0) -> None:
        self.max_rows = max_rows
        self.cache: RoomyCache | None = None
        """Each layer's ``(calls, kv heads, prompt length, head dim)`` keys and values."""
        self.mask = torch.zeros((0, 0), dtype=torch.long)
        """``(calls, prompt length)``: 1 where a call's prompt has a token."""
        self.owners: list[int] = []
        """The request each prompt row belongs to, in row order."""
        self.layout: PromptLayout | None = None
        """The latest ``arrange``'s layout; ``None`` when no row reads a prompt."""
        self.bias = torch.zeros((0, 1, 0))
        """``(rows, 1, prompt length + own length)`` additive mask of the step."""
        self._routed: dict[int, Any] = {}
        """Each routed module's config copy, by the module's id."""

    def add(
        self, cache: Any, mask: torch.Tensor, select: Sequence[int], owners: Sequence[int]
    ) -> None:
        """Hold rows ``select`` of a prefill's cache as the prompts of requests ``owners``.

        Args:
            cache: The prefill's ``RoomyCache``
                (read, not changed).
            mask: Its ``(rows, columns)`` attention mask.
            select: The prefill rows to hold, one per request.
            owners: The request of each.
        """
        index = torch.tensor(list(select), device=mask.device)
        if self.cache is None:
            held = RoomyCache()
            for number, layer in enumerate(cache.layers):
                held.update(
                    layer.keys.index_select(0, index), layer.values.index_select(0, index), number
                )
            self.cache, self.mask = held, mask.index_select(0, index)
        else:
            self.mask = join_rows(
                self.cache, self.mask, cache, mask.index_select(0, index), select, self.max_rows
            )
        self.owners += list(owners)

    def arrange(self, requests: Sequence[int]) -> PromptLayout | None:
        """Lay out the rows of the next step; drop the prompts no row reads any more.

        Args:
            requests: The request of each row of the loop's cache, in row order (the
                loop keeps one request's rows together; any order is laid out right).

        Returns:
            The layout (also kept as ``layout``); ``None`` when no row reads a prompt.
        """
        present = set(requests)
        keep = [g for g, owner in enumerate(self.owners) if owner in present]
        if len(keep) < len(self.owners):
            self._keep(keep)
        if not self.owners:
            self.layout = None
            return None
        group_of = {owner: g for g, owner in enumerate(self.owners)}
        grouped: list[int] = []
        groups: list[int] = []
        places: list[int] = []
        counts = [0] * len(self.owners)
        for row, request in enumerate(requests):
            g = group_of.get(request)
            if g is None:
                continue
            grouped.append(row)
            groups.append(g)
            places.append(counts[g])
            counts[g] += 1
        width = max(counts)
        device = self.mask.device
        slots = [g * width + p for g, p in zip(groups, places, strict=True)]
        every_row = grouped == list(range(len(requests)))
        assert self.cache is not None
        dtype = self.cache.layers[0].keys.dtype
        hidden = torch.full(self.mask.shape, float("-inf"), dtype=dtype, device=device)
        seen = hidden.masked_fill(self.mask.bool(), 0.0)  # (calls, prompt length)
        row_of = [len(self.owners)] * len(requests)  # no prompt: the all -inf row
        for row, g in zip(grouped, groups, strict=True):
            row_of[row] = g
        bias = torch.cat([seen, hidden[:1]]).index_select(0, torch.tensor(row_of, device=device))
        self.layout = PromptLayout(
            rows=len(requests),
            calls=len(self.owners),
            grouped=torch.tensor(grouped, device=device),
            slots=torch.tensor(slots, device=device),
            width=width,
            every_row=every_row,
            dense=every_row and slots == list(range(width * len(self.owners))),
            prompt_bias=bias.unsqueeze(1),
        )
        return self.layout

    def set_own_mask(self, mask: torch.Tensor) -> None:
        """Set the step's additive mask from the loop's ``(rows, own columns)`` mask.

        Read by every layer of the step: the prompt columns a row sees, then its own.
        """
        assert self.layout is not None
        own = torch.zeros(mask.shape, dtype=self.layout.prompt_bias.dtype, device=mask.device)
        own = own.masked_fill(mask == 0, float("-inf")).unsqueeze(1)
        self.bias = torch.cat([self.layout.prompt_bias, own], dim=-1)

    def _keep(self, keep: list[int]) -> None:
        """Keep prompt rows ``keep``; forget the leading columns no kept prompt uses."""
        self.owners = [self.owners[g] for g in keep]
        if not keep:
            self.cache, self.mask = None, self.mask[:0, :0]
            return
        assert self.cache is not None
        self.cache.keep_rows(keep)
        self.mask = self.mask[torch.tensor(keep, device=self.mask.device)]
        lead = int(self.mask.argmax(dim=1).min().item())  # each row: zeros, then ones
        if lead:
            for layer in self.cache.layers:
                layer.drop_leading(lead)
            self.mask = self.mask[:, lead:]

    @contextmanager
    def routed(self, modules: Sequence[nn.Module]) -> Iterator[None]:
        """Route every attention module through [`shared_prompt_attention`][] meanwhile.

        Each module gets a shallow copy of its config naming the shared function (made
        once per module) and a reference to these prompts; both are removed on exit.
        """
        register_attention(SHARED_IMPLEMENTATION, shared_prompt_attention)
        configs: list[Any] = [module.config for module in modules]
        try:
            for module, config in zip(modules, configs, strict=True):
                routed = self._routed.get(id(module))
                if routed is None:
                    routed = copy.copy(config)
                    routed._attn_implementation = SHARED_IMPLEMENTATION
                    self._routed[id(module)] = routed
                setattr(module, "config", routed)  # noqa: B010 - an nn.Module attribute
                setattr(module, "_adaptive_rag_prompts", self)  # noqa: B010
            yield
        finally:
            for module, config in zip(modules, configs, strict=True):
                setattr(module, "config", config)  # noqa: B010
                if hasattr(module, "_adaptive_rag_prompts"):
                    delattr(module, "_adaptive_rag_prompts")


def _grouped(x: torch.Tensor, layout: PromptLayout, kv_heads: int) -> torch.Tensor:
    """``(m, heads, c)`` rows into ``(calls, kv heads, width * repeat, c)`` (zero-padded)."""
    _, heads, c = x.shape
    calls = layout.calls
    padded = x
    if not layout.dense:
        padded = x.new_zeros((calls * layout.width, heads, c))
        padded[layout.slots] = x
    repeat = heads // kv_heads
    return (
        padded.view(calls, layout.width, kv_heads, repeat, c)
        .permute(0, 2, 1, 3, 4)
        .reshape(calls, kv_heads, layout.width * repeat, c)
    )


def _ungrouped(x: torch.Tensor, layout: PromptLayout, heads: int) -> torch.Tensor:
    """The inverse of ``_grouped``: ``(calls, kv heads, width * repeat, c)`` to rows."""
    calls, kv_heads, _, c = x.shape
    repeat = heads // kv_heads
    rows = (
        x.view(calls, kv_heads, layout.width, repeat, c)
        .permute(0, 2, 1, 3, 4)
        .reshape(calls * layout.width, heads, c)
    )
    return rows if layout.dense else rows.index_select(0, layout.slots)


def shared_prompt_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    **kwargs: Any,  # the AttentionInterface's options: a kernel takes what it uses
) -> tuple[torch.Tensor, None]:
    """Attention of one decoding step over each row's shared prompt and its own tokens.

    Args:
        module: The attention module (its ``layer_idx`` names the prompt layer).
        query: ``(rows, heads, 1, head dim)`` the step's queries (after rotary).
        key: ``(rows, kv heads, own length, head dim)`` each row's own keys.
        value: Their values.
        attention_mask: The model's mask over the own columns (not read: the loop sets
            ``SharedPrompts.bias`` once per step, for every layer).
        scaling: The query scaling (``None``: ``head dim ** -0.5``).
        dropout: Ignored (decoding runs in evaluation mode).
        softcap: Tanh soft-capping of the scores, when the model uses it.
        **kwargs: The kernel's other options (none applies: a model with sliding
            windows keeps a copy of the prompt per sample).

    Returns:
        ``((rows, 1, heads, head dim) output, None)``, as transformers' kernels return it.
    """
    prompts: SharedPrompts = module._adaptive_rag_prompts  # type: ignore[assignment]
    layout = prompts.layout
    assert layout is not None and prompts.cache is not None
    layer = prompts.cache.layers[module.layer_idx]
    rows, heads, _, dim = query.shape
    kv_heads, own = key.shape[1], key.shape[2]
    repeat = heads // kv_heads
    scale = dim**-0.5 if scaling is None else scaling
    queries = query.view(rows, heads, dim)
    own_scores = torch.matmul(query.view(rows, kv_heads, repeat, dim), key.transpose(-1, -2))
    picked = queries if layout.every_row else queries.index_select(0, layout.grouped)
    prompt_scores = torch.matmul(_grouped(picked, layout, kv_heads), layer.keys.transpose(-1, -2))
    prompt_scores = _ungrouped(prompt_scores, layout, heads)
    length = prompt_scores.shape[-1]
    if not layout.every_row:
        every = prompt_scores.new_zeros((rows, heads, length))
        every[layout.grouped] = prompt_scores
        prompt_scores = every
    scores = torch.cat([prompt_scores, own_scores.view(rows, heads, own)], dim=-1) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    weights = torch.softmax(scores + prompts.bias, dim=-1, dtype=torch.float32).to(query.dtype)
    own_weights = weights[..., length:].reshape(rows, kv_heads, repeat, own)
    output = torch.matmul(own_weights, value).view(rows, heads, dim)
    prompt_weights = weights[..., :length]
    if not layout.every_row:
        prompt_weights = prompt_weights.index_select(0, layout.grouped)
    from_prompt = torch.matmul(_grouped(prompt_weights, layout, kv_heads), layer.values)
    from_prompt = _ungrouped(from_prompt, layout, heads)
    if layout.every_row:
        output = output + from_prompt
    else:
        output = output.index_add(0, layout.grouped, from_prompt)
    return output.view(rows, 1, heads, dim), None


PROBE_IMPLEMENTATION = "langchain_adaptive_rag_cache_probe"
"""Name under which the probe of [`attends_its_cache`][] is registered in transformers'
``AttentionInterface`` (an added entry, run only by a module routed to it)."""


class _Probed(Exception):  # noqa: N818 - a signal that ends the probe's forward pass
    """Raised by the probe once the routed module has handed it its states."""

    def __init__(self, reads_cache: bool) -> None:
        super().__init__()
        self.reads_cache = reads_cache


def _probe_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,  # the AttentionInterface's options: none is read
) -> tuple[torch.Tensor, None]:
    """Note whether ``key`` and ``value`` are the states the module's cache layer holds."""
    cache: RoomyCache = module._adaptive_rag_probe_cache  # type: ignore[assignment]
    layer = cache.layers[module.layer_idx]
    raise _Probed(key is layer.keys and value is layer.values)


def attends_its_cache(model: PreTrainedModel, module: nn.Module) -> bool | None:
    """Whether ``module`` hands its kernel the very keys and values its cache layer holds.

    Shared prompts replace a layer's attention by one over the prompt's cached states and
    the row's own, so they need a layer that attends over what it caches. Multi-head
    latent attention does not (DeepSeek-V2 and V3, MiniCPM3: the cache holds a compressed
    latent that each pass expands into keys and values). Checked with a two-token forward
    pass stopped at the module's kernel; the model's capabilities
    (``capabilities.ModelCapabilities.of``) ask once per model.

    Args:
        model: The causal LM.
        module: Its attention module of layer 0 (``layer_idx`` 0).

    Returns:
        ``None`` when the probe could not run the model (or never reached the kernel).
    """
    register_attention(PROBE_IMPLEMENTATION, _probe_attention)
    config: Any = module.config
    routed = copy.copy(config)
    routed._attn_implementation = PROBE_IMPLEMENTATION
    cache = RoomyCache()
    answer: bool | None = None  # a pass that never reached the kernel: not known
    setattr(module, "config", routed)  # noqa: B010 - an nn.Module attribute
    setattr(module, "_adaptive_rag_probe_cache", cache)  # noqa: B010
    try:
        device = next(model.parameters()).device
        ids = torch.tensor([[0, 1]], device=device)
        with torch.inference_mode():
            model(input_ids=ids, use_cache=True, **{cache_keyword(model): cache})
    except _Probed as probed:
        answer = probed.reads_cache
    except Exception:  # a model the probe cannot run: not known (a copy per sample)
        answer = None
    finally:
        setattr(module, "config", config)  # noqa: B010
        delattr(module, "_adaptive_rag_probe_cache")
    return answer
