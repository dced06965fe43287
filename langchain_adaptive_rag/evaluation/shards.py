"""Splitting a run across machines: which questions a shard answers.

``adaptive-rag eval --shard I/N`` answers the I-th of every N questions (positions
``I-1, I-1+N, ...`` of the run's questions, after ``--limit``) into a run directory of its
own, resumable as any run. ``run.json`` records the shard (``"shard": "I/N"``) and how many
questions it holds (``shard_questions``); neither enters the settings fingerprint, so the
shards of one run share it with the unsharded run. [`merge_shards`][] (``adaptive-rag
merge``) joins them. This module is light to import (the command line parses ``--shard``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple, TypeVar

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["Shard", "parse_shard"]

T = TypeVar("T")

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class Shard(NamedTuple):
    """Shard ``number`` (1-based) of ``total``."""

    number: int
    """Which shard (``I``, from 1)."""
    total: int
    """How many shards the run is split into (``N``)."""

    @property
    def label(self) -> str:
        """``"I/N"``, as written on the command line and in ``run.json``."""
        return f"{self.number}/{self.total}"

    def select(self, items: Sequence[T]) -> list[T]:
        """The items of this shard: positions ``number - 1``, ``number - 1 + total``, ..."""
        return list(items[self.number - 1 :: self.total])


def parse_shard(text: str) -> Shard:
    """Read ``"I/N"`` (1 <= I <= N).

    Raises:
        AdaptiveRAGError: Anything else, naming what was received.
    """
    match = _SHARD.fullmatch(text)
    if match is None or not 1 <= int(match.group(1)) <= int(match.group(2)):
        msg = (
            f"Received shard {text!r}. Expected I/N with 1 <= I <= N, e.g. 2/4 for the "
            "second of four shards. Fix: --shard 1/4 on the first machine, 2/4 on the next..."
        )
        raise AdaptiveRAGError(msg)
    return Shard(int(match.group(1)), int(match.group(2)))
