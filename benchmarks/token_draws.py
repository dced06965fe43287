"""Seeded token draws over a 262,144-word vocabulary: ``torch.multinomial`` row by row
against the engine's ``draw_rows``.

Rows are next-token distributions as SeaKR samples them (temperature 1, top-k 50, top-p
0.9, so a few dozen nonzero entries a row), each row with its own generator. Printed for
each row count: milliseconds a call (median of ``--repeats``), ``torch.multinomial``
called once a row (the baseline, measured in the same run) and ``draw_rows`` (every
row's uniforms drawn, on up to ``torch.get_num_threads()`` threads, logarithms taken at
the nonzero entries only), their ratio, and whether both drew the same tokens.

``python benchmarks/token_draws.py [--vocab 262144] [--repeats 20]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from langchain_adaptive_rag.engine.sampler import draw_rows, warp
from langchain_adaptive_rag.options import DecodingOptions

ROW_COUNTS = (1, 3, 8, 17, 24)
SEAKR_SAMPLING = DecodingOptions(do_sample=True, temperature=1.0, top_k=50, top_p=0.9)


def multinomial_rows(probs: torch.Tensor, generators: list[torch.Generator]) -> list[int]:
    """The baseline: one ``torch.multinomial`` call a row, each with its generator."""
    return [
        int(torch.multinomial(row, 1, generator=generator).item())
        for row, generator in zip(probs, generators, strict=True)
    ]


def timed(draw: Callable[[], list[int]], repeats: int) -> tuple[float, list[int]]:
    """Median milliseconds of ``repeats`` calls, and the first call's tokens."""
    tokens = draw()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        draw()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=262_144)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(
        f"vocabulary {args.vocab}, top-k 50, top-p 0.9, {torch.get_num_threads()} CPU threads, "
        f"median of {args.repeats} calls\n"
    )
    print("| rows | torch.multinomial ms | draw_rows ms | multinomial / draw_rows | same tokens |")
    print("|---:|---:|---:|---:|---|")
    for rows in ROW_COUNTS:
        base_ms, ours_ms, same = measure(rows, args.vocab, args.repeats)
        print(f"| {rows} | {base_ms:.1f} | {ours_ms:.1f} | {base_ms / ours_ms:.2f}x | {same} |")


def measure(rows: int, vocab: int, repeats: int) -> tuple[float, float, str]:
    """Both ways' milliseconds for ``rows`` rows, and whether they drew the same tokens."""
    logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(rows)) * 3
    probs = torch.softmax(warp(logits, SEAKR_SAMPLING), dim=-1)

    def seeded() -> list[torch.Generator]:
        return [torch.Generator().manual_seed(seed) for seed in range(rows)]

    with torch.inference_mode():
        base_ms, expected = timed(lambda: multinomial_rows(probs, seeded()), repeats)
        ours_ms, drawn = timed(lambda: draw_rows(probs, seeded())[0], repeats)
    return base_ms, ours_ms, "yes" if drawn == expected else "no"


if __name__ == "__main__":
    main()
