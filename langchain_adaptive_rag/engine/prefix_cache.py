"""Keys and values of recent prompts, so a prompt that repeats a prefix prefills only the rest.

The adaptive methods send most of a prompt again on every call: the few-shot exemplars of
the DRAGIN-format prompts (hundreds to thousands of tokens) open every prompt of every
question, and a continuation after a retrieval that returned the same documents repeats
the whole previous prompt. A [`PrefixCache`][] keeps the per-layer keys and values of
recently prefilled prompts within a memory budget (least recently used out first); the
decoding loop starts a new prompt's prefill from the longest stored prefix it shares and
computes only the tokens after it.

A token's keys and values depend only on the tokens up to it, so a reused prefix gives
the cache a full prefill would (to float rounding: the prefix was computed in another
batch shape). Rotary models store keys at each token's own position from 0 and a prompt
always starts at position 0, so a stored prefix serves any row of a left-padded batch.
Only the decoding loop's own caches (growing layers that hold every token) are stored
and served. A model with sliding-window layers gets one at any length when the loop
masks each windowed layer to its window (its attention kernel reads masks); with a
kernel that reads none, only while every request of the loop fits in the smallest
window (``ModelCapabilities.window``), and a loop past it runs on the model's own cache
and prefills in full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["PrefixCache", "PrefixCacheStats", "StoredPrefix"]

LayerStates = list[tuple[torch.Tensor, torch.Tensor]]
"""Keys and values of each layer, each ``(1, kv_heads, tokens, head_dim)``."""


@dataclass(frozen=True)
class StoredPrefix:
    """One stored prompt: its token ids and every layer's keys and values."""

    ids: np.ndarray
    layers: LayerStates

    @property
    def nbytes(self) -> int:
        """Memory the stored keys and values take."""
        return sum(k.nbytes + v.nbytes for k, v in self.layers)

    @property
    def device(self) -> torch.device:
        """Where the keys and values are."""
        return self.layers[0][0].device


@dataclass
class PrefixCacheStats:
    """What the cache saved so far (prompt tokens are counted once per prompt)."""

    prompts: int = 0
    """Prompts looked up."""
    hits: int = 0
    """Prompts whose prefill started from a stored prefix."""
    prompt_tokens: int = 0
    """Tokens of all prompts looked up."""
    reused_tokens: int = 0
    """Tokens whose keys and values came from the cache instead of a forward pass."""

    @property
    def reused_share(self) -> float:
        """Share of prompt tokens not recomputed (0 before the first prompt)."""
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def _common_length(a: np.ndarray, b: np.ndarray) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    size = min(a.shape[0], b.shape[0])
    if size == 0:
        return 0
    differ = np.flatnonzero(a[:size] != b[:size])
    return int(differ[0]) if differ.size else size


class PrefixCache:
    """Least-recently-used store of prompts' keys and values under a memory budget.

    Args:
        max_bytes: Most memory the stored keys and values may take; 0 stores nothing.
        min_tokens: Shortest shared prefix worth reusing (shorter ones prefill in full:
            copying a few tokens' states costs more than computing them).

    Raises:
        AdaptiveRAGError: A negative budget or a ``min_tokens`` below 1.
    """

    def __init__(self, max_bytes: int, *, min_tokens: int = 16) -> None:
        if max_bytes < 0:
            msg = f"max_bytes must be >= 0, got {max_bytes}. Fix: pass 0 to store nothing."
            raise AdaptiveRAGError(msg)
        if min_tokens < 1:
            msg = f"min_tokens must be >= 1, got {min_tokens}."
            raise AdaptiveRAGError(msg)
        self.max_bytes = max_bytes
        self.min_tokens = min_tokens
        self.stats = PrefixCacheStats()
        self._entries: OrderedDict[int, StoredPrefix] = OrderedDict()
        self._buckets: dict[bytes, set[int]] = {}
        """Entries by their first ``min_tokens`` tokens: only those can serve a prompt."""
        self._next_key = 0
        self._nbytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Memory the stored prompts take now."""
        return self._nbytes

    def match(self, ids: Sequence[int], device: torch.device) -> tuple[int, StoredPrefix | None]:
        """The longest stored prefix of ``ids`` that a prefill can start from.

        At least the prompt's last token is always left to compute (its logits start the
        generation). Entries on another device (the model was moved) are dropped.

        Args:
            ids: The new prompt's token ids.
            device: The model's device.

        Returns:
            How many leading tokens to take from which entry, as ``(tokens, entry)``, or
            ``(0, None)`` when no stored prefix of at least ``min_tokens`` fits.
        """
        prompt = np.asarray(ids, dtype=np.int64)
        with self._lock:
            self.stats.prompts += 1
            self.stats.prompt_tokens += prompt.shape[0]
            best, best_key = 0, None
            for key in sorted(self._buckets.get(self._bucket(prompt), ())):
                entry = self._entries[key]
                if entry.device != device:
                    self._drop(key)
                    continue
                shared = _common_length(prompt, entry.ids)
                if shared > best:
                    best, best_key = shared, key
            usable = min(best, prompt.shape[0] - 1)
            if best_key is None or usable < self.min_tokens:
                return 0, None
            self._entries.move_to_end(best_key)
            self.stats.hits += 1
            self.stats.reused_tokens += usable
            return usable, self._entries[best_key]

    def add(self, ids: Sequence[int], states: Callable[[], LayerStates]) -> None:
        """Store a prefilled prompt unless a stored one already holds it.

        Stored prompts that are prefixes of ``ids`` are replaced by it (it holds them).

        Args:
            ids: The prompt's token ids.
            states: Gives the prompt's keys and values (called only when they are stored,
                so the copy is made only then).
        """
        prompt = np.asarray(ids, dtype=np.int64)
        if prompt.shape[0] < self.min_tokens or self.max_bytes == 0:
            return
        with self._lock:
            covered = []
            bucket = self._bucket(prompt)
            for key in sorted(self._buckets.get(bucket, ())):
                entry = self._entries[key]
                shared = _common_length(prompt, entry.ids)
                if shared == prompt.shape[0]:  # already held by a stored prompt
                    self._entries.move_to_end(key)
                    return
                if shared == entry.ids.shape[0]:
                    covered.append(key)
            stored = StoredPrefix(prompt, states())
            if stored.nbytes > self.max_bytes:
                return
            for key in covered:
                self._drop(key)
            self._entries[self._next_key] = stored
            self._buckets.setdefault(bucket, set()).add(self._next_key)
            self._next_key += 1
            self._nbytes += stored.nbytes
            while self._nbytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def clear(self) -> None:
        """Forget every stored prompt (call after changing the model's weights or dtype)."""
        with self._lock:
            self._entries.clear()
            self._buckets.clear()
            self._nbytes = 0

    def _bucket(self, prompt: np.ndarray) -> bytes:
        return prompt[: self.min_tokens].tobytes()

    def _drop(self, key: int) -> None:
        entry = self._entries.pop(key)
        self._nbytes -= entry.nbytes
        bucket = self._bucket(entry.ids)
        keys = self._buckets[bucket]
        keys.discard(key)
        if not keys:
            del self._buckets[bucket]
