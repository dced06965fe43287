"""One decoding step's next-token logits, and the values every row's signals share.

On an accelerator each read back to the host waits for the device, so a step's
entropies, log-sum-exps, greedy tokens and their logprobs travel back with what the
forward pass captured in one float32 buffer ([`read_back`][]).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = [
    "StepLogits",
    "entropy_of",
    "read_back",
    "without_eos",
]


def entropy_of(logp: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of log-probabilities; zero-probability entries add 0.

    An entry of probability 0 gives ``0 * -inf``, NaN, which becomes 0 in place (or
    ``-0.0`` where ``exp`` underflows, which adds nothing either): the same sums as
    selecting the positive entries, in fewer passes over the row.
    """
    return -(logp.exp() * logp).nan_to_num_(nan=0.0).sum(dim=-1)


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
    """The end-of-sequence ids ``masked_argmax`` excludes (empty: not computed)."""
    masked_argmax: list[int] = field(default_factory=list)
    """Each row's most likely token other than ``masked_for`` (a greedy sample
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
        values = [entropy_of(raw), torch.logsumexp(logits, dim=-1), raw.gather(-1, argmax)[:, 0]]
        ids = [argmax[:, 0]]
        if eos_ids:
            masked = without_eos(logits, eos_ids).argmax(dim=-1, keepdim=True)
            values.append(raw.gather(-1, masked)[:, 0])
            ids.append(masked[:, 0])
        read, id_lists, host = read_back(values, ids, logits.shape[-1], captured)
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


def without_eos(
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


def read_back(
    values: list[torch.Tensor],
    ids: Sequence[torch.Tensor],
    vocab: int,
    captured: Sequence[torch.Tensor] = (),
) -> tuple[list[list[float]], list[list[int]], list[np.ndarray]]:
    """Per-row float ``values``, token ``ids`` (below ``vocab``) and ``captured`` tensors.

    On an accelerator each read-back waits for the device, so everything travels in one
    float32 buffer where that is exact: float32 values and captures, and ``vocab`` at
    most ``_EXACT_INDEX`` (the ids ride along as floats). Otherwise the values, the
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
