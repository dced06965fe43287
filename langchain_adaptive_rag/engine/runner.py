"""The runner: the batched KV-cache loop that decodes the requests of one model together.

Requests ([`DecodeRequest`][]) are prefilled, from
a stored prefix when the prefix cache holds one, then every sample decodes one token per
step with its own options, stop strings, seed, token budget and captures. Requests that
arrive meanwhile join at a step boundary; a sample with nothing left to feed leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.hooks import CaptureHooks
from langchain_adaptive_rag.engine.kv_cache import RoomyCache, is_roomy, join_rows, select_rows
from langchain_adaptive_rag.engine.layers import attention_modules
from langchain_adaptive_rag.engine.prefill import output_cache, prefill_groups, stored_cache
from langchain_adaptive_rag.engine.prefix_cache import LayerStates, PrefixCache, StoredPrefix
from langchain_adaptive_rag.engine.sampler import Distribution, Drawn, not_a_distribution
from langchain_adaptive_rag.engine.shared_prompts import SharedPrompts
from langchain_adaptive_rag.engine.step_logits import StepLogits
from langchain_adaptive_rag.engine.weight_major import WeightMajorLinears
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.options import (
    CaptureOptions,
    GenerationTrace,
    TokenEvent,
    capture_covers,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from langchain_adaptive_rag.engine.request import DecodeRequest

__all__ = [
    "BatchRunner",
    "decode_alone",
    "decode_together",
]


def decode_together(
    model: PreTrainedModel,
    requests: Sequence[DecodeRequest],
    *,
    capture: CaptureOptions | None = None,
    admit: Callable[[int, int | None], Sequence[DecodeRequest]] | None = None,
    between: Callable[[], None] | None = None,
    step_done: Callable[[], None] | None = None,
    prefix_cache: PrefixCache | None = None,
    max_rows: int = 0,
    share_prompts: bool = True,
    capabilities: ModelCapabilities | None = None,
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
        model: The causal LM every request was built for.
        requests: The requests.
        capture: The signals the loop's hooks read; it must cover every request's
            ([`capture_covers`][]). Default: the
            first request's.
        admit: Called at each step boundary with the number of sequences decoding and the
            most positions a joining request may fill (its ``longest``; ``None``: any);
            returns new requests to join (same capture), numbered after the earlier ones.
            It is called only while the loop holds its own cache: always, but on a
            model with sliding-window layers whose kernel reads no mask, while every
            request fits in the smallest window (``ModelCapabilities.window``).
        between: Called at each step boundary with this loop's hooks paused, so other
            uses of the model (a reference-mode forward pass) can run between steps.
        step_done: Called once each step's events are yielded, before the next forward
            pass (a consumer that groups a request's events hands them over then).
        prefix_cache: Where prefills find stored prompt prefixes and leave their prompts
            (see ``prefix_cache``); ``None``: every prompt is
            prefilled in full.
        max_rows: Rows the cache makes room for when requests join (the most that
            ``admit`` lets in), so later joins write into it instead of copying it.
        share_prompts: Let the samples of a multi-sample request read one copy of its
            prompt's keys and values (``shared_prompts``)
            instead of one copy each, on models whose cache the loop can hold and in
            loops that capture no attention rows.
        capabilities: What the model supports (default: [`ModelCapabilities.of`][]
            the model, read once per model).

    Yields:
        ``(request index, event)`` for each released token, in decoding order, and
        ``(request index, None)`` once a request is done (its ``traces`` are set then).

    Raises:
        AdaptiveRAGError: A request asks for a signal the loop's hooks do not read, or
            ``admit`` returned a request longer than it was told.
    """
    capture = capture or requests[0].capture
    if not all(capture_covers(capture, d.capture) for d in requests):
        msg = (
            "Requests decoded together must ask only for signals the loop reads; "
            f"the loop reads {capture}. Fix: decode the others in another loop."
        )
        raise AdaptiveRAGError(msg)
    capabilities = capabilities or ModelCapabilities.of(model)  # its probe reads no hooks
    sharing = capabilities.shares_prompts and share_prompts and not capture.attention
    modules = attention_modules(model) if sharing else None
    hooks = CaptureHooks(model, capture)
    try:
        with torch.inference_mode():
            loop = BatchRunner(
                model,
                list(requests),
                hooks,
                admit,
                between=between,
                step_done=step_done,
                prefix_cache=prefix_cache,
                max_rows=max_rows,
                sharing=modules,
                capabilities=capabilities,
            )
            yield from loop.run()
    finally:
        hooks.remove()


def decode_alone(
    request: DecodeRequest, *, capabilities: ModelCapabilities | None = None
) -> list[GenerationTrace]:
    """Decode one request to the end on its own and return its traces.

    Args:
        request: The request.
        capabilities: What its model supports (default: read from the model).
    """
    for _ in decode_together(request.model, [request], capabilities=capabilities):
        pass
    return request.traces


class BatchRunner:
    """The state of one batched decoding loop: requests, rows, cache, mask, positions."""

    def __init__(
        self,
        model: PreTrainedModel,
        requests: list[DecodeRequest],
        hooks: CaptureHooks,
        admit: Callable[[int, int | None], Sequence[DecodeRequest]] | None,
        *,
        between: Callable[[], None] | None = None,
        step_done: Callable[[], None] | None = None,
        prefix_cache: PrefixCache | None = None,
        max_rows: int = 0,
        sharing: Sequence[nn.Module] | None = None,
        capabilities: ModelCapabilities,
    ) -> None:
        self.model = model
        self.capabilities = capabilities
        self.linears = WeightMajorLinears.of(model)
        """The model's linear layers, weight-first during this loop's passes (on CPU)."""
        self.max_rows = max_rows
        self.sharing = list(sharing) if sharing is not None else None
        """The attention modules routed while rows read shared prompts (``None``: never)."""
        self.prompts = SharedPrompts(max_rows)
        self.between = between
        self.step_done = step_done
        self.prefix_cache = prefix_cache
        self.device = model.device
        self.requests = requests
        self.hooks = hooks
        self.admit = admit
        self.rows: list[tuple[int, int]] = []  # (request, sample) of each cache row
        self.positions: list[int] = []  # each row's own position of its last fed token
        self.padded = False
        self.cache: Any = None
        self.mask = torch.zeros((0, 0), dtype=torch.long, device=self.device)
        self.step: StepLogits | None = None
        """Each row's next-token logits and their shared values (read back once a step)."""
        self.unfinished: set[int] = set(range(len(requests)))
        """Requests whose traces are not set yet (finished ones stay in ``requests``)."""
        self._arranged = True
        """Whether the shared prompts' layout matches the rows."""
        self._deferred: list[list[int]] = []
        """Each step whose attention rows the hooks deferred: the rows' fed positions."""
        self._roomy = False
        """Whether ``cache`` is the loop's own (a RoomyCache): rows can join and leave."""
        self.limit = capabilities.window
        """The most positions a row may fill in the loop's own cache (``None``: any)."""

    def _prefill(self, first: int) -> None:
        """Prefill requests ``first..`` and append their rows.

        Each prompt's longest stored prefix (with a prefix cache) is taken from the cache
        and only the tokens after it are computed. Requests whose numbers of tokens to
        compute differ widely are prefilled in separate forward passes
        ([`prefill_groups`][]) so a short one is not padded to a long one; on a cache
        whose rows cannot be joined they all go in one.
        """
        numbers = list(range(first, len(self.requests)))
        roomy = self._joinable() if self.cache is not None else self._fits(self.requests)
        none: tuple[int, StoredPrefix | None] = (0, None)  # a model's own cache starts empty
        matches = [self._match(self.requests[r].prompt_ids) if roomy else none for r in numbers]
        lengths = [len(self.requests[r].prompt_ids) for r in numbers]
        needs = [n - m for n, (m, _) in zip(lengths, matches, strict=True)]
        groups = prefill_groups(needs) if roomy else [list(range(len(numbers)))]
        for group in groups:
            chosen = [numbers[i] for i in group]
            self._prefill_group(chosen, [matches[i] for i in group], roomy=roomy)

    def _admitted(
        self, admit: Callable[[int, int | None], Sequence[DecodeRequest]]
    ) -> Sequence[DecodeRequest]:
        """The requests ``admit`` lets join at this step boundary, checked to fit."""
        joining = admit(len(self.rows), self.limit)
        if not self._fits(joining):
            longest = max(d.longest for d in joining)
            msg = (
                f"admit returned a request that may fill {longest} positions; the loop"
                f" allows {self.limit} (its model's smallest sliding window). Fix: admit"
                " only requests whose longest is within the limit given."
            )
            raise AdaptiveRAGError(msg)
        return joining

    def _fits(self, requests: Sequence[DecodeRequest]) -> bool:
        """Whether the loop's own cache gives ``requests`` what the model's would."""
        return all(self.capabilities.fits(d.longest) for d in requests)

    def _prefill_group(
        self, numbers: list[int], matches: list[tuple[int, StoredPrefix | None]], *, roomy: bool
    ) -> None:
        """Prefill the requests ``numbers`` in one forward pass and append their rows.

        Every row computes ``compute`` columns (the most any of its prompts needs) after
        ``cached`` columns of stored states. A row whose prompt needs fewer recomputes
        some of its stored prefix, so every row is padding, then its own tokens. With
        ``roomy``, the pass fills a ``RoomyCache``
        (decoding steps then append in place); otherwise the model's own cache.
        """
        new = [self.requests[r] for r in numbers]
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
            masks = self._layer_masks(mask, compute, roomy)
            step = {"attention_mask": masks, "position_ids": positions}
        if cached:
            stored = [entry for _, entry in matches]
            step[self.capabilities.cache_keyword] = stored_cache(stored, taken, cached)
        elif roomy:
            step[self.capabilities.cache_keyword] = RoomyCache()
        inputs = torch.tensor(ids, dtype=torch.long, device=self.device)
        with self.linears.active():
            out = self.model(input_ids=inputs, use_cache=True, logits_to_keep=1, **step)
        cache = output_cache(out)
        self._store_prompts(new, cache)
        at = {r: j for j, r in enumerate(numbers)}  # each request's row in this pass
        shared = [r for r in numbers if self._shares(self.requests[r])]
        own = [r for r in numbers if r not in shared]
        rows = [(r, b) for r in own + shared for b in range(self.requests[r].num_samples)]
        order = [at[r] for r, _ in rows]  # one prefill serves every sample of a request
        logits = out.logits[:, -1, :].float()[torch.tensor(order, device=self.device)]
        values, captured = self.hooks.read(logits, _greedy_masking(new), rows=False)
        if captured.hidden is not None:
            for r, b in rows:
                self.requests[r].store_hidden(b, captured.hidden[at[r]])
        self.step = values if self.cache is None or self.step is None else self.step.joined(values)
        if shared:  # their prompts are held once; their rows start with no columns
            self.prompts.add(cache, mask, [at[r] for r in shared], shared)
        own_rows = order[: len(order) - sum(self.requests[r].num_samples for r in shared)]
        if own_rows:
            own_mask = mask[torch.tensor(own_rows, device=self.device)]
            if self.cache is None:
                if own_rows != list(range(len(new))):
                    select_rows(cache, torch.tensor(own_rows, device=self.device))
                self.cache, self.mask, self.padded = cache, own_mask, pads
                self._roomy = is_roomy(cache)
            else:
                self.mask = join_rows(
                    self.cache, self.mask, cache, own_mask, own_rows, self.max_rows
                )
                self.padded = True
        if len(own_rows) < len(order):
            self._append_blank(cache, len(order) - len(own_rows))
            self._trim()  # the columns only a shared prompt needed
        self.rows += rows
        self.positions += [len(self.requests[r].prompt_ids) - 1 for r, _ in rows]
        self._arranged = False  # new rows: the shared prompts' layout is laid out again

    def _shares(self, request: DecodeRequest) -> bool:
        """Whether a request's samples read one shared copy of its prompt."""
        return self.sharing is not None and request.num_samples > 1

    def _append_blank(self, like: Any, count: int) -> None:
        """Append ``count`` rows that hold no columns yet (they read a shared prompt).

        They go into the running cache's room (a loop that shares prompts always holds a
        ``RoomyCache``); the loop's first rows start
        one, shaped like the prefill's cache ``like``.
        """
        if self.cache is None:
            self.cache = RoomyCache()
            self._roomy = True
            for number, layer in enumerate(like.layers):
                keys = layer.keys[:1, :, :0].expand(count, -1, -1, -1)
                values = layer.values[:1, :, :0].expand(count, -1, -1, -1)
                self.cache.update(keys, values, number)
            self.mask = self.mask.new_zeros((count, 0))
        else:
            for layer in self.cache.layers:
                layer.add_rows(count, self.max_rows)
            self.mask = torch.cat([self.mask, self.mask.new_zeros((count, self.mask.shape[1]))])
        self.padded = True  # positions and masks are the rows' own, never the cache's

    def _match(self, prompt_ids: list[int]) -> tuple[int, StoredPrefix | None]:
        """The stored prefix a prompt's prefill starts from (``(0, None)``: none)."""
        if self.prefix_cache is None:
            return 0, None
        return self.prefix_cache.match(prompt_ids, self.device)

    def _store_prompts(self, new: list[DecodeRequest], cache: Any) -> None:
        """Keep each prefilled prompt's keys and values (the batch's last columns)."""
        store = self.prefix_cache
        if store is None or store.max_bytes == 0 or not is_roomy(cache):
            return
        for j, request in enumerate(new):
            n = len(request.prompt_ids)

            def states(j: int = j, n: int = n) -> LayerStates:
                return [
                    (
                        layer.keys[j : j + 1, :, -n:, :].clone(),
                        layer.values[j : j + 1, :, -n:, :].clone(),
                    )
                    for layer in cache.layers
                ]

            store.add(request.prompt_ids, states)

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

    def _layer_masks(self, padding: torch.Tensor, queries: int, roomy: bool) -> Any:
        """The mask a pass hands the model.

        The loop's padding mask, or, on the loop's own cache of a windowed model, each
        layer type's 4-D mask by its window (see [`WindowMasks`][]).
        """
        masks = self.capabilities.window_masks
        if masks is None or not roomy:
            return padding
        return masks.build(padding, queries, self.model.dtype)

    def _narrows(self) -> bool:
        """Whether this step's windowed layers read only the columns their window shows.

        On the loop's own cache of a windowed model on the CPU (finding the first column
        reads the mask on the host, which an accelerator would wait for), unless the hooks
        read a windowed layer's attention rows (those cover every position).
        """
        masks = self.capabilities.window_masks
        if masks is None or not self._roomy or self.device.type != "cpu":
            return False
        capture = self.hooks.capture
        if capture.attention:
            layer = capture.attention_layer % self.capabilities.num_layers
            return layer not in masks.sliding_layers
        return True

    def _narrowed_masks(self) -> Any:
        """A step's masks, the windowed layers' cut to their window's columns.

        Sets ``RoomyCache.narrowed`` for the pass (the step clears it).
        """
        masks = self.capabilities.window_masks
        assert masks is not None
        built, start = masks.build_narrowed(self.mask, 1, self.model.dtype)
        if start:
            self.cache.narrowed = dict.fromkeys(masks.sliding_layers, start)
        return built

    def _joinable(self) -> bool:
        """Whether the loop holds its own cache (set once, when the cache is made)."""
        return self._roomy

    def run(self) -> Iterator[tuple[int, TokenEvent | None]]:
        """Prefill, then step until every row is done (see [`decode_together`][])."""
        self._prefill(0)
        while True:
            if self.between is not None:
                self.hooks.pause(True)
                try:
                    self.between()
                finally:
                    self.hooks.pause(False)
            if self.admit is not None and self._joinable():
                joining = self._admitted(self.admit)
                if joining:
                    self._store_deferred_rows()  # before the joining rows change the cache
                    first = len(self.requests)
                    self.requests += joining
                    self.unfinished.update(range(first, len(self.requests)))
                    self._prefill(first)
            yield from self._choose()
            feed = [self.requests[r].next_input(b) for r, b in self.rows]  # None: done
            if None in feed:
                self._store_deferred_rows()  # the traces read them; done rows then leave
            yield from self._finish_requests()
            if self.step_done is not None:
                self.step_done()
            keep = [i for i, token in enumerate(feed) if token is not None]
            if not keep:
                return
            if len(keep) < len(self.rows):  # finished samples leave the batch
                kept = torch.tensor(keep, device=self.device)
                if self._joinable():  # the rows after each gap move down, in place
                    self.cache.keep_rows(keep)
                else:
                    select_rows(self.cache, kept)
                self.mask = self.mask[kept]
                self.rows = [self.rows[i] for i in keep]
                self.positions = [self.positions[i] for i in keep]
                self._arranged = False
                self._trim()
            self._step([feed[i] for i in keep])  # type: ignore[misc]

    def _choose(self) -> Iterator[tuple[int, TokenEvent]]:
        """Pick, score and stop-check each sample, one request at a time."""
        shared = len(self.requests) > 1 or self.admit is not None
        step = self.step
        assert step is not None  # set by every forward pass
        owned: dict[int, list[int]] = {}  # request -> its rows, in request order
        for i, (owner, _) in enumerate(self.rows):
            owned.setdefault(owner, []).append(i)
        samples_of = {r: [self.rows[i][1] for i in present] for r, present in owned.items()}
        for r in owned:
            if self.requests[r].stop_requested:
                self.requests[r].cancel()
        distributions, drawn = self._shared_distributions(step, owned, samples_of)
        for r in sorted(owned):
            request, present, samples = self.requests[r], owned[r], samples_of[r]
            try:
                events = list(
                    request.choose_tokens(
                        step, present, samples, distributions.get(r), drawn.get(r)
                    )
                )
            except Exception as error:
                if not shared:
                    raise
                request.error = error  # only this request fails; its rows leave the batch
                request.cancel()
                continue
            for event in events:
                yield r, event

    def _shared_distributions(
        self, step: StepLogits, owned: dict[int, list[int]], samples_of: dict[int, list[int]]
    ) -> tuple[dict[int, Distribution], dict[int, Drawn | AdaptiveRAGError]]:
        """One computation per kind of distribution for the requests that share it.

        Requests sampling with the same temperature, top-k and top-p (SeaKR's calls, for
        one) get their distributions from one pass over all their rows instead of one
        small pass each, and their samples draw in one
        [`draw_rows`][] (each row with its own
        generator, so each token is the one it draws alone); a request alone in its kind
        computes and draws its own.

        Returns:
            Each sharing request's distribution, and its drawn tokens (or the error its
            rows gave, for it alone).
        """
        groups: dict[tuple[object, ...], list[int]] = {}
        for r, samples in samples_of.items():
            key = self.requests[r].shared_key(samples)
            if key is not None:
                groups.setdefault(key, []).append(r)
        shared: dict[int, Distribution] = {}
        drawn: dict[int, Drawn | AdaptiveRAGError] = {}
        for numbers in groups.values():
            if len(numbers) < 2:
                continue
            rows = [i for r in numbers for i in owned[r]]
            options = self.requests[numbers[0]].decoding
            logits, raw = step.rows_of(rows)
            together = Distribution.of(logits, raw, options, step.of_rows(rows))
            start = 0
            for r in numbers:
                shared[r] = together.part(start, start + len(owned[r]))
                start += len(owned[r])
            drawn.update(self._draw_together(numbers, together, owned, samples_of))
        return shared, drawn

    def _draw_together(
        self,
        numbers: list[int],
        together: Distribution,
        owned: dict[int, list[int]],
        samples_of: dict[int, list[int]],
    ) -> dict[int, Drawn | AdaptiveRAGError]:
        """Draw the sampled samples of the requests ``numbers`` (rows of ``together``) at once.

        Returns:
            Each request's tokens and their logprobs by position among its rows, or the
            error its rows gave.
        """
        positions: list[int] = []  # rows of ``together`` that draw
        generators: list[torch.Generator] = []
        mine: dict[int, list[int]] = {}  # each request's drawing positions among its rows
        start = 0
        for r in numbers:
            draws = self.requests[r].draws(samples_of[r])
            mine[r] = [i for i, _ in draws]
            positions.extend(start + i for i, _ in draws)
            generators.extend(g for _, g in draws)
            start += len(owned[r])
        if not positions:
            return {}
        tokens, ok, logprobs = together.draw(positions, generators)
        drawn: dict[int, Drawn | AdaptiveRAGError] = {}
        first = 0
        for r, at in mine.items():
            last = first + len(at)
            bad = [i for i, flag in enumerate(ok[first:last]) if not flag]
            picked = zip(tokens[first:last], logprobs[first:last], strict=True)
            drawn[r] = not_a_distribution(bad) if bad else dict(zip(at, picked, strict=True))
            first = last
        return drawn

    def _finish_requests(self) -> Iterator[tuple[int, None]]:
        """Set the traces of every request whose samples are all done; announce it."""
        for r in sorted(self.unfinished):
            request = self.requests[r]
            if request.done:
                request.finish()
                self.unfinished.discard(r)
                yield r, None

    def _step(self, tokens: list[int]) -> None:
        """Feed one token per row and keep the new logits and captures.

        While rows read shared prompts, every layer is routed through
        [`shared_prompt_attention`][], which
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
        narrowing = not shared and self._narrows()
        if self.padded:
            step = {"position_ids": fed_on_device[1].unsqueeze(1)}
        if narrowing:
            step["attention_mask"] = self._narrowed_masks()
        elif self.padded and not shared and self.capabilities.masked_steps:
            step["attention_mask"] = self._layer_masks(self.mask, 1, self._roomy)
        step[self.capabilities.cache_keyword] = self.cache
        deferred = False  # attention rows computed in the pass (see _store_deferred_rows)
        if shared and self.sharing is not None:
            self.prompts.set_own_mask(self.mask)
            with self.prompts.routed(self.sharing), self.linears.active():
                out = self.model(input_ids=inputs, use_cache=True, **step)
        else:
            # a windowed layer's rows are computed at their step (its mask moves on)
            defer = self._joinable() and self.capabilities.window_masks is None
            with self.hooks.deferring_rows(defer) as deferred, self.linears.active():
                try:
                    out = self.model(input_ids=inputs, use_cache=True, **step)
                finally:
                    if narrowing:
                        self.cache.narrowed = {}
        unfinished = [self.requests[r] for r in sorted(self.unfinished)]
        masking = _greedy_masking(unfinished)
        logits = out.logits[:, -1, :].float()
        self.step, captured = self.hooks.read(logits, masking, rows=not deferred)
        if deferred:
            self._deferred.append(list(self.positions))
        for i, (r, b) in enumerate(self.rows):  # rows and hidden states of the fed positions
            if captured.hidden is not None:
                self.requests[r].store_hidden(b, captured.hidden[i])
            if captured.rows is not None:
                head_max = captured.head_max[i] if captured.head_max is not None else None
                self.requests[r].store_row(b, self.positions[i], captured.rows[i], head_max)

    def _store_deferred_rows(self) -> None:
        """Compute the attention rows of the steps that deferred them and store them.

        The rows have not changed since those steps (the caller changes them only
        after this), and each step appended one key column to every row: step ``s`` of
        ``S`` saw all but the last ``S - 1 - s`` columns of the latest keys.
        """
        taken = self.hooks.take_rows()
        if taken is None:
            return
        rows, head_max = taken
        steps, keys = len(self._deferred), rows.shape[-1]
        for s, positions in enumerate(self._deferred):
            seen = keys - (steps - 1 - s)
            for i, (r, b) in enumerate(self.rows):
                maxima = head_max[i, s, :seen] if head_max is not None else None
                self.requests[r].store_row(b, positions[i], rows[i, s, :seen], maxima)
        self._deferred.clear()


def _greedy_masking(requests: Sequence[DecodeRequest]) -> tuple[int, ...]:
    """The EOS ids a step's masked argmax leaves out for ``requests``' greedy samples.

    Empty when none masks, or when they mask different ids (each then computes its own).
    """
    wanted = {request.masked_eos_ids() for request in requests} - {()}
    return wanted.pop() if len(wanted) == 1 else ()
