"""BM25 at 100k passages: index time and query latency of both backends, in one run.

Passages are synthetic English-like text: 30-80 words drawn from a Zipf-distributed
vocabulary of 60k words plus common stop words. Queries have 2, 5 or 10 terms.

Run: ``python benchmarks/bm25_speed.py [--passages 100000] [--queries 40]``.
Target: a query under 20 ms.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time

from langchain_adaptive_rag.retrievers import create_bm25_retriever

STOP = ["the", "of", "and", "in", "was", "a", "is", "by", "to", "for"]


def corpus(size: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    vocab = [f"w{i:05d}" for i in range(60_000)]
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
    passages = []
    for _ in range(size):
        words = rng.choices(vocab, cum_weights=cumulative, k=rng.randint(30, 80))
        words += rng.choices(STOP, k=len(words) // 3)
        rng.shuffle(words)
        passages.append(" ".join(words))
    return passages, vocab


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    passages, vocab = corpus(args.passages)
    rng = random.Random(1)
    print(f"{args.passages} passages, {args.queries} queries per length, k=3\n")
    results = {}
    for backend in ("rank_bm25", "sparse"):
        start = time.perf_counter()
        retriever = create_bm25_retriever(passages, backend=backend, k=3)
        index_s = time.perf_counter() - start
        latencies = {}
        for length in (2, 5, 10):
            queries = [" ".join(rng.choices(vocab[:5000], k=length)) for _ in range(args.queries)]
            times = []
            for query in queries:
                start = time.perf_counter()
                retriever.invoke(query)
                times.append((time.perf_counter() - start) * 1000)
            latencies[length] = (statistics.median(times), percentile(times, 0.95))
        results[backend] = (index_s, latencies)
    print("| backend | index (s) | 2 terms p50/p95 (ms) | 5 terms | 10 terms |")
    print("|---|---:|---:|---:|---:|")
    for backend, (index_s, latencies) in results.items():
        cells = " | ".join(f"{p50:.1f} / {p95:.1f}" for p50, p95 in latencies.values())
        print(f"| {backend} | {index_s:.1f} | {cells} |")
    slow, fast = results["rank_bm25"][1], results["sparse"][1]
    ratios = ", ".join(f"{n} terms {fast[n][0] / slow[n][0]:.3f}" for n in (2, 5, 10))
    print(f"\nsparse / rank_bm25 median query time: {ratios}")


if __name__ == "__main__":
    main()
