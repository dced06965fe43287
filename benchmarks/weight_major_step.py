"""One batched decoding step of Gemma 3 270M: linear layers as ``nn.Linear`` or
weight-first, windowed layers over every column or their window's.

A prompt of ``--positions`` tokens is prefilled once into the loop's own cache, whose
rows are copied to each batch size; then decoding steps of 1 to 16 rows (``--rows``;
one token a row, each windowed layer masked by its window as the loop masks it) are timed three
ways, in turn, median of ``--steps`` steps each: the model's linear layers as they
are, each windowed layer reading every cached column (the loop before weight-first
layers and narrowed windows); the linear layers routed through
``WeightMajorLinears.active`` (``(W @ x.T).T``); and, on top, the windowed layers
reading only the columns their window shows (``WindowMasks.build_narrowed`` and
``RoomyCache.narrowed``, as the loop runs now). Printed: milliseconds a step, each
against the first, and each way's time per row against its own 1-row step (what
concurrency can gain at best).

``python benchmarks/weight_major_step.py [--positions 1800] [--steps 10] [--rows 1,2,4,8,12,16]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import nullcontext
from typing import Any

import torch
from transformers import AutoModelForCausalLM

from langchain_adaptive_rag.engine.kv_cache import RoomyCache
from langchain_adaptive_rag.engine.weight_major import WeightMajorLinears
from langchain_adaptive_rag.engine.window_masks import WindowMasks, window_masks_of
from langchain_adaptive_rag.pretrained import get_gemma_3_270m

ROW_COUNTS = (1, 2, 4, 8, 12, 16)


def batch_of(prompt: RoomyCache, rows: int) -> RoomyCache:
    """A loop cache holding ``rows`` copies of the prompt's row."""
    cache = RoomyCache()
    for i, layer in enumerate(prompt.layers):
        cache.update(layer.keys.repeat(rows, 1, 1, 1), layer.values.repeat(rows, 1, 1, 1), i)
    return cache


WAYS = ("as is", "weight-first", "weight-first, narrowed")


def step_ms(
    model: Any, masks: WindowMasks, prompt: RoomyCache, rows: int, positions: int, steps: int
) -> list[float]:
    """Median milliseconds of a ``rows``-row step, each of the [`WAYS`][]."""
    linears = WeightMajorLinears.of(model)
    times: list[list[float]] = [[] for _ in WAYS]
    caches = [batch_of(prompt, rows) for _ in WAYS]
    for n in range(steps + 1):
        for way, cache in enumerate(caches):
            padding = torch.ones(rows, positions + n + 1, dtype=torch.long)
            start = time.perf_counter()
            if way == 2:
                mask, first = masks.build_narrowed(padding, 1, model.dtype)
                cache.narrowed = dict.fromkeys(masks.sliding_layers, first)
            else:
                mask = masks.build(padding, 1, model.dtype)
            with linears.active() if way else nullcontext():
                model(
                    input_ids=torch.randint(10, 1000, (rows, 1)),
                    position_ids=torch.full((rows, 1), positions + n),
                    attention_mask=mask,
                    past_key_values=cache,
                    use_cache=True,
                )
            cache.narrowed = {}
            if n:  # the first step of each is a warm-up
                times[way].append((time.perf_counter() - start) * 1000)
    return [statistics.median(t) for t in times]


def row_counts(text: str) -> tuple[int, ...]:
    """``--rows``: positive counts, comma-separated, the first of them 1 (the baseline)."""
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        counts = ()
    if not counts or counts[0] != 1 or min(counts) < 1:
        msg = f"--rows got {text!r}; expected positive counts starting at 1, e.g. 1,3,24"
        raise argparse.ArgumentTypeError(msg)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=1800)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--rows",
        type=row_counts,
        default=ROW_COUNTS,
        help="comma-separated rows a step, from 1 (default: 1,2,4,8,12,16)",
    )
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(
        get_gemma_3_270m(), attn_implementation="sdpa", dtype=torch.float32
    ).eval()
    masks = window_masks_of(model)
    assert masks is not None
    with torch.inference_mode():
        prompt = RoomyCache()
        ids = torch.randint(10, 1000, (1, args.positions))
        full = masks.build(
            torch.ones(1, args.positions, dtype=torch.long), args.positions, model.dtype
        )
        model(input_ids=ids, attention_mask=full, past_key_values=prompt, use_cache=True)
        results = {
            rows: step_ms(model, masks, prompt, rows, args.positions, args.steps)
            for rows in args.rows
        }
    routed = len(WeightMajorLinears.of(model).layers)
    print(
        f"Gemma 3 270M (float32, sdpa), {torch.get_num_threads()} CPU threads, one decoding "
        f"step over {args.positions} cached positions; {routed} linear layers routed; "
        f"median of {args.steps} steps\n"
    )
    print(
        "| rows | " + " | ".join(f"{w} ms" for w in WAYS) + " | weight-first / as is "
        "| narrowed / as is | per row vs 1 row: " + " | ".join(WAYS) + " |"
    )
    print("|---:" * (2 * len(WAYS) + 3) + "|")
    ones = results[1]
    for rows, ms in results.items():
        cells = [f"{m:.0f}" for m in ms] + [f"{ms[1] / ms[0]:.2f}", f"{ms[2] / ms[0]:.2f}"]
        cells += [f"{rows * one / m:.2f}x" for one, m in zip(ones, ms, strict=True)]
        print(f"| {rows} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
