"""One decoding request: a prompt, its samples, and the signals each sample records.

A [`DecodeRequest`][] holds what a caller asked ([`DecodingOptions`][],
[`CaptureOptions`][]) and each sample's state ([`SampleState`][]). It runs no forward
pass: the runner (``runner``) feeds it each step's logits and
captures through a small contract (``next_input``, ``choose_tokens``, ``store_row``,
``store_hidden``, ``finish``), and it picks, scores and stop-checks tokens, holds
back text that may start a stop string, and builds a [`GenerationTrace`][] per sample.
Each sample of a request has its own seeded generator, so sample ``i`` of an
``n``-sample call with seed ``s`` draws the same tokens as a single-sample call with
seed ``s + i`` (``sampler``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from langchain_adaptive_rag.engine.layers import context_length
from langchain_adaptive_rag.engine.sampler import Distribution, Drawn, not_a_distribution
from langchain_adaptive_rag.engine.step_logits import StepLogits, without_eos
from langchain_adaptive_rag.engine.token_text import (
    clip_pieces,
    decoded_piece,
    longest_stop_prefix,
    text_decoder,
)
from langchain_adaptive_rag.errors import AdaptiveRAGError, PromptTooLongError
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    FinishReason,
    GenerationTrace,
    TokenEvent,
)

if TYPE_CHECKING:
    import threading

    from transformers import PreTrainedModel

__all__ = ["DecodeRequest", "SampleState"]


@dataclass
class SampleState:
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
    watched_lps: list[list[float]] = field(default_factory=list)
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
        """Whether the sample still chooses tokens (it has no finish reason yet)."""
        return self.finish_reason is None


class DecodeRequest:
    """``n`` samples of one prompt to decode, and the signals they record.

    The runner drives it step by step: ``next_input`` gives each sample's next token
    to feed, ``choose_tokens`` takes a step's logits and yields a [`TokenEvent`][] per
    token released (once no stop string can still start in its text), ``store_row`` and
    ``store_hidden`` keep what the hooks read, and ``finish`` sets ``traces``, one
    [`GenerationTrace`][] per sample, once every sample is ``done``.
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
        """Validate the request; nothing runs until a runner decodes it.

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
        self.longest = len(self.prompt_ids) + self.decoding.max_new_tokens + 1
        """The most positions a sample can fill: the prompt, its tokens and one fed after."""
        if limit is not None and self.longest > limit:
            raise PromptTooLongError(len(self.prompt_ids), self.decoding.max_new_tokens, limit)
        self.eos_ids = _eos_ids(model, tokenizer)
        self._decode_text = text_decoder(tokenizer)
        self.pad_id = self.eos_ids[0] if self.eos_ids else 0
        self.samples = self._make_samples(n, include_greedy)
        self.traces: list[GenerationTrace] = []
        self.error: Exception | None = None
        """What failed this request while it was decoded with others (it left the batch)."""
        self._stop_requested = False
        self.stop_event: threading.Event | None = None
        """Set when the async caller is cancelled (``cancellation``)."""

    @property
    def stop_requested(self) -> bool:
        """Whether this request is to stop at the next step (set from any thread)."""
        return self._stop_requested or (self.stop_event is not None and self.stop_event.is_set())

    @stop_requested.setter
    def stop_requested(self, value: bool) -> None:
        self._stop_requested = value

    def _make_samples(self, n: int, include_greedy: bool) -> list[SampleState]:
        device = self.model.device
        samples: list[SampleState] = []
        if include_greedy:
            samples.append(SampleState(greedy=True, seed=None, generator=None))
        base = self.decoding.seed
        if self.decoding.sampling and base is None:
            base = int(torch.randint(0, 2**31 - 1, (1,)).item())
        for i in range(n):
            if not self.decoding.sampling:
                samples.append(SampleState(greedy=True, seed=None, generator=None))
                continue
            assert base is not None
            generator = torch.Generator(device=device)
            generator.manual_seed(base + i)
            samples.append(SampleState(greedy=False, seed=base + i, generator=generator))
        return samples

    @property
    def num_samples(self) -> int:
        """How many samples (cache rows) the request decodes."""
        return len(self.samples)

    @property
    def done(self) -> bool:
        """Whether every sample has fed its last token (``finish`` may run)."""
        return all(sample.done for sample in self.samples)

    def finish(self) -> None:
        """Build each sample's trace from what it recorded."""
        self.traces = [self._trace(sample) for sample in self.samples]

    def cancel(self) -> None:
        """Stop every sample now (a caller stopped reading); its rows leave the batch."""
        for sample in self.samples:
            if sample.active:
                sample.finish_reason = "stop"
            sample.tail = []

    def _eos_masked(self, present: Sequence[int]) -> list[int]:
        """Positions in ``present`` of the samples still short of ``min_new_tokens``."""
        return [i for i, b in enumerate(present) if self._masks_eos(self.samples[b])]

    def _masks_eos(self, sample: SampleState) -> bool:
        """Whether ``sample`` is still short of ``min_new_tokens`` (EOS is masked)."""
        short = len(sample.ids) < self.decoding.min_new_tokens
        return bool(short and self.eos_ids)

    def masked_eos_ids(self) -> tuple[int, ...]:
        """The EOS ids this request's greedy samples mask this step (empty: none).

        Only a request whose greedy samples read the raw distribution: the step's masked
        argmax then serves them (``read``).
        """
        options = self.decoding
        if not options.min_new_tokens or options.sampling or options.signal_distribution != "raw":
            return ()
        if any(s.active and self._masks_eos(s) for s in self.samples):
            return tuple(self.eos_ids)
        return ()

    def shared_key(self, present: Sequence[int]) -> tuple[object, ...] | None:
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
    ) -> Distribution | None:
        """This request's own distribution over its rows, or ``None`` (raw and greedy)."""
        masked = self._eos_masked(present)
        options = self.decoding
        if not (options.sampling or options.signal_distribution == "processed" or masked):
            return None
        if self.masked_eos_ids() and step.masked_for == tuple(self.eos_ids):
            return None  # greedy on the raw distribution: the step's masked argmax serves
        logits, raw = step.rows_of(rows)
        if masked:
            logits = without_eos(logits, self.eos_ids, masked)
        known = None if masked else step.of_rows(rows)
        return Distribution.of(logits, raw, options, known)

    def draws(self, present: Sequence[int]) -> list[tuple[int, torch.Generator]]:
        """The samples that draw a token this step: position in ``present``, generator."""
        draws = []
        for i, b in enumerate(present):
            sample = self.samples[b]
            if sample.active and not sample.greedy:
                assert sample.generator is not None  # a sampled sample has its generator
                draws.append((i, sample.generator))
        return draws

    def choose_tokens(
        self,
        step: StepLogits,
        rows: Sequence[int],
        present: Sequence[int],
        shared: Distribution | None = None,
        drawn: Drawn | AdaptiveRAGError | None = None,
    ) -> Iterator[TokenEvent]:
        """Pick, score and stop-check the next token of each present sample.

        Args:
            step: The batch's next-token logits and what every row shares.
            rows: This decoder's rows in the batch, in order.
            present: Its sample index on each of those rows.
            shared: Its own distribution over those rows, computed together with other
                requests' (see ``shared_key``); ``None``: computed here if needed.
            drawn: The tokens its sampled samples (``draws``) drew together with
                other requests' from ``shared`` and their logprobs, by position in
                ``rows``, or the error its rows gave; ``None``: drawn here.
        """
        own = shared if shared is not None else self._own_distribution(step, rows, present)
        if isinstance(drawn, AdaptiveRAGError):
            raise drawn
        tokens = drawn
        if tokens is None:
            tokens = {}
            draws = self.draws(present)
            if draws:
                assert own is not None  # sampling always has its own distribution
                positions = [i for i, _ in draws]
                got, ok, logprobs = own.draw(positions, [g for _, g in draws])
                if not all(ok):
                    raise not_a_distribution([i for i, flag in enumerate(ok) if not flag])
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
            if self.decoding.top_logprobs or self.decoding.token_logprobs:  # the row's distribution
                top = own.signal_logp[i] if own is not None else step.raw[row]
            self._append(sample, token, logprob, entropy, top)
            sample.logsumexps.append(step.logsumexp[row])  # raw logits: the energy score
            yield from self._release(b, sample, final=not sample.active)

    def _append(
        self,
        sample: SampleState,
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
        if options.token_logprobs and logp is not None:
            sample.watched_lps.append(
                [float(v) for v in logp[list(options.token_logprobs)].tolist()]
            )
        piece = decoded_piece(self._decode_text, sample.ids, sample.text)
        sample.pieces.append(piece)
        sample.text += piece
        for stop in options.stop:
            start = sample.text.find(stop, max(0, len(sample.text) - len(piece) - len(stop)))
            if start >= 0:
                sample.text = sample.text[:start]
                sample.pieces = clip_pieces(sample.pieces, start)
                sample.finish_reason = "stop"
                sample.stop_string = stop
                self._set_tail(sample, ended_on_eos=False)
                return
        if len(sample.ids) >= options.max_new_tokens:
            sample.finish_reason = "length"
            self._set_tail(sample, ended_on_eos=False)

    def _set_tail(self, sample: SampleState, *, ended_on_eos: bool) -> None:
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

    def _release(self, b: int, sample: SampleState, *, final: bool) -> Iterator[TokenEvent]:
        if final:
            limit = len(sample.pieces)
        else:
            safe = len(sample.text) - longest_stop_prefix(sample.text, self.decoding.stop)
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

    def next_input(self, b: int) -> int | None:
        """The token sample ``b`` feeds next, or ``None`` once it has nothing left."""
        sample = self.samples[b]
        if sample.active:
            return sample.ids[-1]
        if sample.tail:
            return sample.tail.pop(0)
        sample.done = True
        return None

    def store_hidden(self, b: int, hidden: np.ndarray) -> None:
        """Keep the hidden state read at the position sample ``b`` fed last."""
        if self.capture.hidden:
            self.samples[b].hidden = hidden.copy()

    def store_row(
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

    def _trace(self, sample: SampleState) -> GenerationTrace:
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
            token_logprobs=np.asarray(sample.watched_lps, dtype=np.float32).reshape(
                count, len(self.decoding.token_logprobs)
            )
            if self.decoding.token_logprobs
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
