"""What an index's integrity checks cost: load with and without checksums, queries with
and without the postings check, each against the unchecked baseline in the same run.

The corpus is ``../shared/data/corpus/wiki_passages_mixed.jsonl`` (41,417 passages)
repeated ``--copies`` times (default 5: about 207k passages, 240 MB of index files). The
index is built once into ``--workdir``; each round loads it fresh:

- load: ``verify=False`` (sizes and structure) as the baseline, the default (checksums
  too, under 1 GiB), and ``verify_bm25_index`` (every checksum and every posting);
- queries: the first 80 characters of ``--queries`` passages, two passes over the same
  queries, with the postings check against the check replaced by a no-op. The first pass
  checks each term once; the second reads only checked terms.

Run: ``python benchmarks/index_checks.py [--copies 5] [--queries 100] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_adaptive_rag.retrievers import (
    bm25,
    build_bm25_index,
    load_bm25_retriever,
    verify_bm25_index,
)

CORPUS = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "corpus" / "wiki_passages_mixed.jsonl"
)


def _passages(copies: int) -> Iterator[Document]:
    rows = [json.loads(line) for line in CORPUS.open(encoding="utf-8")]
    for copy in range(copies):
        for row in rows:
            yield Document(
                id=f"{row['id']}-{copy}", page_content=row["text"], metadata={"title": row["title"]}
            )


def _timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def _query_passes(directory: Path, queries: list[str], checked: bool) -> tuple[float, float]:
    original = bm25.check_postings
    if not checked:
        bm25.check_postings = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        retriever = load_bm25_retriever(directory, verify=False)
        passes = [
            _timed(lambda: [retriever.invoke(q) for q in queries]) / len(queries) for _ in range(2)
        ]
    finally:
        bm25.check_postings = original
    return passes[0], passes[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="index-checks-"))
    directory = workdir / f"mixed-x{args.copies}"
    if not (directory / "manifest.json").is_file():
        seconds = _timed(lambda: build_bm25_index(_passages(args.copies), directory))
        print(f"built {directory} in {seconds:.1f} s")
    rows = [json.loads(line) for line in CORPUS.open(encoding="utf-8")]
    queries = [row["text"][:80] for row in rows[: 3 * args.queries : 3]]
    loads: dict[str, list[float]] = {"sizes+structure": [], "default": [], "verify": []}
    first: dict[bool, list[float]] = {True: [], False: []}
    second: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        loads["sizes+structure"].append(
            _timed(lambda: load_bm25_retriever(directory, verify=False))
        )
        loads["default"].append(_timed(lambda: load_bm25_retriever(directory)))
        loads["verify"].append(_timed(lambda: verify_bm25_index(directory)))
        for checked in (False, True):
            one, two = _query_passes(directory, queries, checked)
            first[checked].append(one)
            second[checked].append(two)
    report = verify_bm25_index(directory)
    print(f"index: {report.files} files, {report.bytes / 1e6:.0f} MB, {report.postings:,} postings")
    base = statistics.median(loads["sizes+structure"])
    for name, times in loads.items():
        median = statistics.median(times)
        print(f"load {name:16s} {median * 1000:8.1f} ms  {median / base:5.2f}x")
    for label, table in (("first pass", first), ("second pass", second)):
        checked, unchecked = statistics.median(table[True]), statistics.median(table[False])
        print(
            f"query {label:11s} checked {checked * 1000:.3f} ms, unchecked "
            f"{unchecked * 1000:.3f} ms: {checked / unchecked:.2f}x"
        )


if __name__ == "__main__":
    main()
