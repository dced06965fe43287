"""Prefill planning: which prompts share a forward pass, and the caches they start from.

A prefill pass computes, for each of its prompts, as many tokens as the one that needs
the most; [`prefill_groups`][] splits the prompts into passes where padding would cost
more than another pass. A prompt whose prefix was stored (``prefix_cache``) starts from
[`stored_cache`][], a cache that holds each row's stored tokens at its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_adaptive_rag.engine.kv_cache import RoomyCache
from langchain_adaptive_rag.engine.prefix_cache import StoredPrefix

__all__ = ["PREFILL_PASS_TOKENS", "output_cache", "prefill_groups", "stored_cache"]


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


def stored_cache(stored: Sequence[StoredPrefix | None], taken: Sequence[int], width: int) -> Any:
    """A cache of ``width`` columns whose row ``j`` ends with ``taken[j]`` stored tokens."""
    sample = next(entry for entry in stored if entry is not None)
    cache = RoomyCache()
    for index, (keys, values) in enumerate(sample.layers):
        layer_keys = keys.new_zeros((len(stored), keys.shape[1], width, keys.shape[3]))
        layer_values = values.new_zeros((len(stored), values.shape[1], width, values.shape[3]))
        for j, (entry, count) in enumerate(zip(stored, taken, strict=True)):
            if entry is not None and count:
                own_keys, own_values = entry.layers[index]
                layer_keys[j, :, width - count :, :] = own_keys[0, :, :count, :]
                layer_values[j, :, width - count :, :] = own_values[0, :, :count, :]
        cache.update(layer_keys, layer_values, index)
    return cache


def output_cache(out: Any) -> Any:
    """The KV cache a forward pass returned, under either release's field name."""
    cache = out.get("cache") if hasattr(out, "get") else None
    return cache if cache is not None else out.past_key_values
