"""Next-token distributions and seeded draws.

Every sample draws with its own generator, and rows drawn together draw what each would
draw alone: [`draw_tokens`][] draws what ``torch.multinomial`` draws for one token,
with one division, one argmax and one read-back for all the rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from langchain_adaptive_rag.engine.step_logits import entropy_of, read_back
from langchain_adaptive_rag.errors import AdaptiveRAGError

if TYPE_CHECKING:
    from langchain_adaptive_rag.options import DecodingOptions

__all__ = [
    "SPARSE_RACE_MIN_ENTRIES",
    "SPARSE_RACE_SHARE",
    "Distribution",
    "Drawn",
    "draw_rows",
    "draw_tokens",
    "exponential_noise",
    "not_a_distribution",
    "race_values",
    "warp",
]


@dataclass(frozen=True)
class Distribution:
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
    ) -> Distribution:
        """The distribution of ``logits`` (EOS mask applied), with their raw log-softmax.

        ``step``: the rows' raw entropies, most likely tokens and their raw logprobs, when
        the step computed them for these very logits (no EOS mask): with the raw signal
        they are not computed again; otherwise every value is read back at once.
        """
        sampled = warp(logits, options) if options.sampling else logits
        signal_logp = raw
        if options.signal_distribution == "raw" and step is not None:
            entropies, greedy, greedy_logprob = step
        else:
            if options.signal_distribution == "processed":
                signal_logp = torch.log_softmax(sampled, dim=-1)
            ids = logits.argmax(dim=-1)
            picked = signal_logp.gather(-1, ids[:, None])[:, 0]
            (entropies, greedy_logprob), (greedy,), _ = read_back(
                [entropy_of(signal_logp), picked], [ids], logits.shape[-1]
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
        """Draw rows ``positions``, each with its generator (see [`draw_rows`][]).

        Returns:
            Each row's token, whether it could draw, and the token's logprob under
            ``signal_logp``; one index gathers both tensors' rows.
        """
        index = torch.tensor(positions, device=self.probs.device)
        return draw_rows(
            self.probs.index_select(0, index), generators, self.signal_logp.index_select(0, index)
        )

    def part(self, start: int, stop: int) -> Distribution:
        """Rows ``start..stop`` of a distribution computed for several requests."""
        return Distribution(
            probs=self.probs[start:stop],
            signal_logp=self.signal_logp[start:stop],
            entropies=self.entropies[start:stop],
            greedy=self.greedy[start:stop],
            greedy_logprob=self.greedy_logprob[start:stop],
        )


Drawn = dict[int, tuple[int, float]]
"""Tokens drawn for a request's samples: position among its rows -> (token, logprob)."""


def warp(
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
    ``exponential_`` itself (``_uniforms_give_exponentials``); where it does not hold
    (another release's kernel, an accelerator), each row calls ``exponential_``.
    """
    if _noise_from_uniforms(like):
        return _exponentials(_uniform_rows(like.shape, generators), like.dtype)
    noise = torch.empty_like(like)
    for row, generator in zip(noise, generators, strict=True):
        row.exponential_(1.0, generator=generator)
    return noise


SPARSE_RACE_SHARE = 8
"""The race takes its logarithms only at a row's nonzero entries when they are fewer than
one in ``SPARSE_RACE_SHARE`` of all entries (top-k and top-p leave a few dozen of a
vocabulary's) and the rows hold ``SPARSE_RACE_MIN_ENTRIES`` or more; otherwise over every
entry at once."""

SPARSE_RACE_MIN_ENTRIES = 32_768
"""Below this many entries in all, the whole rows' logarithms cost less than finding the
nonzero entries (CPU, 2 cores: 9 rows of 1,853 entries 261 against 327 microseconds; 72
rows 1,763 against 1,458)."""


def race_values(probs: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """``p / q`` for each entry, ``q ~ Exp(1)`` from its row's generator.

    Equal to ``probs / exponential_noise(probs, generators)`` and advancing each
    generator alike. Where the noise comes from uniforms (a CPU), every uniform is drawn
    (the generator must advance over the whole row) but, when few entries are nonzero,
    each row is drawn into one reused buffer (2 MiB for 262,144 entries, where a batch
    of rows would not stay in the CPU's cache) and only its nonzero entries' uniforms are
    kept: zero entries race at 0, and NaN or infinite ones still spoil their row.
    """
    if probs.shape[0] != len(generators):
        raise _generator_count_error(probs.shape[0], len(generators))
    if not _noise_from_uniforms(probs):
        return probs / exponential_noise(probs, generators)
    # NaN and inf entries are nonzero too: they race, and spoil their row
    racing = probs != 0 if probs.numel() >= SPARSE_RACE_MIN_ENTRIES else None
    if racing is None or int(torch.count_nonzero(racing)) * SPARSE_RACE_SHARE >= probs.numel():
        return probs / _exponentials(_uniform_rows(probs.shape, generators), probs.dtype)
    at = racing.nonzero(as_tuple=True)  # row-major: each row's columns in turn
    ends = torch.bincount(at[0], minlength=len(generators)).cumsum(0).tolist()
    kept = torch.empty(len(at[1]), dtype=torch.float64)
    row = torch.empty(probs.shape[-1], dtype=torch.float64)
    for generator, start, end in zip(generators, [0, *ends[:-1]], ends, strict=True):
        row.uniform_(generator=generator)
        kept[start:end] = row[at[1][start:end]]
    race = torch.zeros_like(probs)
    race[at] = probs[at] / _exponentials(kept, probs.dtype)
    return race


def _noise_from_uniforms(like: torch.Tensor) -> bool:
    """Whether ``like``'s noise is drawn as uniforms and their logarithms (see above)."""
    return like.device.type == "cpu" and _uniforms_give_exponentials(like.dtype, like.shape[-1])


def _uniform_rows(shape: torch.Size, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Float64 uniforms of ``shape``, row ``i`` drawn from ``generators[i]``.

    Each row is one serial ``uniform_`` over its generator (about 1.1 ms a row of 262,144
    entries). Drawing rows on a second thread saved a quarter of 17 such rows on 2 cores
    and cost more than it saved on fewer or shorter rows, so rows are drawn in turn.

    Raises:
        AdaptiveRAGError: ``shape`` has another number of rows than ``generators``.
    """
    if shape[0] != len(generators):
        raise _generator_count_error(shape[0], len(generators))
    uniforms = torch.empty(shape, dtype=torch.float64)
    for row, generator in zip(uniforms, generators, strict=True):
        row.uniform_(generator=generator)
    return uniforms


def _generator_count_error(rows: int, generators: int) -> AdaptiveRAGError:
    return AdaptiveRAGError(
        f"Token sampling got {rows} rows and {generators} generators; expected one generator"
        " a row (one a sequence sampled)."
    )


def _exponentials(uniforms: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``-log1p(-u)`` of float64 uniforms (overwritten), cast to ``dtype``: ``exponential_``'s."""
    return torch.log1p(uniforms.neg_()).neg_().to(dtype)


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
                got = _exponentials(uniforms, dtype)
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
            zero): the model's logits were not finite; or ``generators`` is not one a row.
    """
    drawn, ok, _ = draw_rows(probs, generators)
    if not all(ok):
        raise not_a_distribution([i for i, flag in enumerate(ok) if not flag])
    return drawn


def draw_rows(
    probs: torch.Tensor,
    generators: Sequence[torch.Generator],
    logp: torch.Tensor | None = None,
) -> tuple[list[int], list[bool], list[float]]:
    """Each row's drawn token (see [`draw_tokens`][]) and whether the row could draw.

    With ``logp`` (rows like ``probs``), also each drawn token's log-probability under it;
    tokens, flags and log-probabilities come back in one read-back.

    Raises:
        AdaptiveRAGError: ``generators`` is not one a row of ``probs``.
    """
    # the first maximum, as argmax gives it
    best, tokens = race_values(probs, generators).max(dim=-1)
    valid = torch.isfinite(best) & (best > 0)  # NaN or inf in the row, or all zero: not
    values = [valid.to(logp.dtype if logp is not None else torch.float32)]
    if logp is not None:
        values.append(logp.gather(-1, tokens[:, None])[:, 0])
    read, (drawn,), _ = read_back(values, [tokens], probs.shape[-1])
    logprobs = read[1] if logp is not None else []
    return drawn, [flag == 1 for flag in read[0]], logprobs


def not_a_distribution(bad: list[int]) -> AdaptiveRAGError:
    """The error for rows that cannot be sampled (indices among a call's drawn rows)."""
    return AdaptiveRAGError(
        f"Cannot sample rows {bad}: their probabilities hold NaN or infinite values or "
        "are all zero (the model's logits were not finite). Expected finite "
        "logits; check the model's weights and dtype (float16 overflows on some models: "
        "load it with dtype='bfloat16' or 'float32')."
    )
