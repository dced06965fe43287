"""BM25 at scale: a saved, memory-mapped bm25s index against the previous in-memory one.

One run, one synthetic corpus (default 1,000,000 passages of 100 words in DPR's TSV layout:
Zipf-distributed words from a 100k vocabulary plus stop words, a 1-3 word title), each
phase in its own process so its peak memory is its own:

- ``build``: ``build_bm25_index(iter_passages(tsv), dir)`` (streamed, title field on);
- ``load``: ``load_bm25_retriever(dir, mmap=True)``, then queries (2-6 words drawn like the
  text, so common terms with long posting lists occur);
- ``baseline``: the previous retriever (``benchmarks/baselines/sparse_bm25.py``): every
  passage read into a Document and indexed in memory, which it must redo on every run;
  then the same queries.

Printed: build time, peak memory, index size on disk, load time, memory after load, query
p50/p95, the ratios new / previous, and a linear projection to DPR's 21,015,324 passages.

Run: ``python benchmarks/bm25_scale.py [--passages 1000000] [--queries 200] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DPR_PASSAGES = 21_015_324
STOP = np.array(["the", "of", "and", "in", "was", "a", "is", "by", "to", "for", "with", "he"])


def _vocabulary(size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(4, 10, size=size)
    words = {"".join(rng.choice(letters, size=n)) for n in lengths}
    return np.array(sorted(words))


def _zipf_ids(rng: np.random.Generator, vocab: int, shape: tuple[int, ...]) -> np.ndarray:
    weights = 1.0 / np.arange(1, vocab + 1)
    cumulative = np.cumsum(weights / weights.sum())
    ids: np.ndarray = np.searchsorted(cumulative, rng.random(shape))
    return np.minimum(ids, vocab - 1)


def write_corpus(path: Path, passages: int, seed: int = 0) -> None:
    """DPR-style TSV: ``id, text, title`` with a header, 100 words a passage."""
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(100_000, seed)
    with path.open("w", encoding="utf-8") as out:
        out.write("id\ttext\ttitle\n")
        for start in range(0, passages, 50_000):
            n = min(50_000, passages - start)
            content = vocab[_zipf_ids(rng, len(vocab), (n, 70))]
            stops = STOP[rng.integers(0, len(STOP), size=(n, 30))]
            words = np.concatenate([content, stops], axis=1)
            words = np.take_along_axis(words, rng.random(words.shape).argsort(axis=1), axis=1)
            titles = vocab[_zipf_ids(rng, len(vocab), (n, 3))]
            for i in range(n):
                title = " ".join(titles[i, : 1 + (start + i) % 3]).title()
                out.write(f"{start + i + 1}\t{' '.join(words[i])}\t{title}\n")


def _queries(count: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = _vocabulary(100_000, 0)
    sizes = rng.integers(2, 7, size=count)
    return [" ".join(vocab[_zipf_ids(rng, len(vocab), (int(n),))]) for n in sizes]


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_queries(search: object, queries: list[str]) -> dict[str, float]:
    times = []
    for query in queries:
        start = time.perf_counter()
        search(query)  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return {
        "first_ms": times[0],
        "p50_ms": statistics.median(times),
        "p95_ms": statistics.quantiles(times, n=20)[-1],
    }


def phase(name: str, workdir: Path, queries: int) -> dict[str, float]:
    corpus, index = workdir / "corpus.tsv", workdir / "index"
    from langchain_adaptive_rag.evaluation import iter_passages

    if name == "build":
        from langchain_adaptive_rag.retrievers import build_bm25_index

        start = time.perf_counter()
        build_bm25_index(iter_passages(corpus), index, overwrite=True)
        size = sum(f.stat().st_size for f in index.rglob("*") if f.is_file())
        return {
            "seconds": time.perf_counter() - start,
            "peak_mb": _peak_mb(),
            "disk_mb": size / 2**20,
        }
    if name == "load":
        from langchain_adaptive_rag.retrievers import load_bm25_retriever

        before = _rss_mb()
        start = time.perf_counter()
        retriever = load_bm25_retriever(index, k=3)
        seconds = time.perf_counter() - start
        after = _rss_mb() - before
        timing = _time_queries(retriever.invoke, _queries(queries))
        return {"seconds": seconds, "rss_after_load_mb": after, **timing, "peak_mb": _peak_mb()}
    from baselines.sparse_bm25 import SparseBM25

    before = _rss_mb()
    start = time.perf_counter()
    documents = list(iter_passages(corpus))
    baseline = SparseBM25(documents)
    seconds = time.perf_counter() - start
    after = _rss_mb() - before
    timing = _time_queries(baseline.search, _queries(queries))
    return {"seconds": seconds, "rss_after_load_mb": after, **timing, "peak_mb": _peak_mb()}


def _run_phase(name: str, workdir: Path, queries: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--phase", name, "--workdir", str(workdir)]
    command += ["--queries", str(queries)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", help="keep the corpus and index here (default: a temp dir)")
    parser.add_argument("--phase", choices=["build", "load", "baseline"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        sys.path.insert(0, str(Path(__file__).parent))
        print(json.dumps(phase(args.phase, Path(args.workdir), args.queries)))
        return
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bm25-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / "corpus.tsv"
    start = time.perf_counter()
    write_corpus(corpus, args.passages)
    print(
        f"{args.passages:,} synthetic 100-word passages ({corpus.stat().st_size / 2**20:.0f} MB "
        f"TSV) written in {time.perf_counter() - start:.0f} s; {args.queries} queries of "
        "2-6 words\n"
    )
    build = _run_phase("build", workdir, args.queries)
    load = _run_phase("load", workdir, args.queries)
    base = _run_phase("baseline", workdir, args.queries)
    rows = [
        ("build / index time (s)", build["seconds"], base["seconds"]),
        ("peak memory while indexing (MB)", build["peak_mb"], base["peak_mb"]),
        ("index on disk (MB)", build["disk_mb"], float("nan")),
        ("load time, every later run (s)", load["seconds"], base["seconds"]),
        ("memory after load (MB)", load["rss_after_load_mb"], base["rss_after_load_mb"]),
        ("first query (ms)", load["first_ms"], base["first_ms"]),
        ("query p50 (ms)", load["p50_ms"], base["p50_ms"]),
        ("query p95 (ms)", load["p95_ms"], base["p95_ms"]),
    ]
    print("| measure | saved bm25s index (mmap) | previous in-memory | new / previous |")
    print("|---|---:|---:|---:|")
    for label, new, old in rows:
        ratio = f"{new / old:.3f}x" if old == old and old else "-"
        shown_old = f"{old:,.1f}" if old == old else "(cannot save)"
        print(f"| {label} | {new:,.1f} | {shown_old} | {ratio} |")
    scale = DPR_PASSAGES / args.passages
    print(f"\nLinear projection to {DPR_PASSAGES:,} passages (x{scale:.1f}):")
    print(f"- build: {build['seconds'] * scale / 3600:.1f} h on one core of this machine")
    print(f"- index on disk: {build['disk_mb'] * scale / 1024:.0f} GB")
    print(f"- query p50: {load['p50_ms'] * scale:.0f} ms (posting lists grow with the corpus)")
    print(
        f"- previous retriever: {base['seconds'] * scale / 3600:.1f} h to index on every run, "
        f"{base['rss_after_load_mb'] * scale / 1024:.0f} GB of memory"
    )


if __name__ == "__main__":
    main()
