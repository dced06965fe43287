"""The index commands of ``adaptive-rag``.

``adaptive-rag index`` builds a saved BM25 index, or an Elasticsearch index, from a corpus
file; ``adaptive-rag verify-index`` checks a saved index in full against its checksums.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from langchain_adaptive_rag.errors import AdaptiveRAGError, DamagedIndexError
from langchain_adaptive_rag.evaluation.paths import check_output_dir

__all__ = ["add_index_command", "run_index_command", "run_verify_index_command"]


def add_index_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``index`` and ``verify-index`` on the ``adaptive-rag`` parser.

    Args:
        subparsers: The command parsers of ``adaptive-rag``.
    """
    index = subparsers.add_parser(
        "index",
        help="build a saved BM25 index (or an Elasticsearch index) from a passage file",
        description=(
            "Stream a passage corpus (DPR psgs_w100.tsv or passage JSON lines) into a BM25 "
            "index directory for `adaptive-rag eval --index DIR` and load_bm25_retriever, "
            "or into an Elasticsearch index with --elasticsearch URL."
        ),
    )
    index.add_argument("corpus", metavar="CORPUS", help="DPR TSV or passage JSON lines")
    target = index.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", metavar="DIR", help="the BM25 index directory to write")
    target.add_argument(
        "--elasticsearch", metavar="URL", help="an Elasticsearch server, e.g. http://localhost:9200"
    )
    index.add_argument(
        "--es-index", default="wiki", metavar="NAME", help="Elasticsearch index name (wiki)"
    )
    index.add_argument(
        "--stemmer",
        choices=["english", "none"],
        default="english",
        help="stem terms (default english)",
    )
    index.add_argument(
        "--stopwords",
        choices=["lucene", "spacy", "none"],
        default="lucene",
        help="English stop words to drop (default lucene, Elasticsearch's list)",
    )
    index.add_argument("--k1", type=float, default=1.2, help="BM25 k1 (default 1.2)")
    index.add_argument("--b", type=float, default=0.75, help="BM25 b (default 0.75)")
    index.add_argument(
        "--no-title", action="store_true", help="do not index passage titles as a field"
    )
    index.add_argument(
        "--chunk-size", type=int, default=50_000, metavar="N", help="passages per chunk"
    )
    index.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing index once the new one is done",
    )
    index.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    index.set_defaults(handler=run_index_command)
    verify = subparsers.add_parser(
        "verify-index",
        help="check a saved BM25 index against the checksums written with it",
        description=(
            "Read every file of a saved BM25 index, compare its SHA-256 with the one "
            "recorded when it was written, and check every posting. Loading checksums an "
            "index only up to 1 GiB of files; run this once after building, copying or "
            "downloading a larger one."
        ),
    )
    verify.add_argument("directory", metavar="DIR", help="the index directory")
    verify.set_defaults(handler=run_verify_index_command)


def run_index_command(args: argparse.Namespace) -> int:
    """Build the index and print where it is.

    Args:
        args: Parsed arguments.

    Returns:
        0 when built, 2 for bad input, 130 when Ctrl-C stopped it (nothing is left behind).
    """
    from tqdm.auto import tqdm

    from langchain_adaptive_rag.evaluation.corpus import iter_passages
    from langchain_adaptive_rag.retrievers.analysis import BM25Analyzer
    from langchain_adaptive_rag.retrievers.builder import BM25Parameters, build_bm25_index
    from langchain_adaptive_rag.retrievers.elasticsearch import index_elasticsearch

    corpus = Path(args.corpus)
    if not corpus.is_file():
        print(
            f"error: corpus file {str(corpus)!r} does not exist or is not a file.", file=sys.stderr
        )
        return 2
    if args.out is not None:
        try:
            check_output_dir(args.out, what="index directory", option="--out")
        except AdaptiveRAGError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    bar = tqdm(unit=" passages", disable=args.no_progress, file=sys.stderr)

    seen = [0]

    def progress(done: int) -> None:
        bar.update(done - seen[0])
        seen[0] = done

    start = time.perf_counter()
    try:
        params = BM25Parameters(k1=args.k1, b=args.b)
        if args.elasticsearch:
            count = index_elasticsearch(
                iter_passages(corpus),
                args.elasticsearch,
                index_name=args.es_index,
                params=params,
                overwrite=args.overwrite,
                progress=progress,
            )
            where = f"Elasticsearch index {args.es_index!r} at {args.elasticsearch}"
        else:
            analyzer = BM25Analyzer(
                stemmer=None if args.stemmer == "none" else args.stemmer,
                stopwords=None if args.stopwords == "none" else args.stopwords,
            )
            out = build_bm25_index(
                iter_passages(corpus),
                args.out,
                analyzer=analyzer,
                params=params,
                index_title=not args.no_title,
                chunk_size=args.chunk_size,
                overwrite=args.overwrite,
                progress=progress,
            )
            count = seen[0]
            where = f"{out} (adaptive-rag eval --index {out})"
    except KeyboardInterrupt:
        bar.close()
        print("\nInterrupted; no index was written.", file=sys.stderr)
        return 130
    except AdaptiveRAGError as error:
        bar.close()
        print(f"error: {error}", file=sys.stderr)
        return 2
    bar.close()
    print(f"indexed {count:,} passages in {time.perf_counter() - start:.1f} s: {where}")
    return 0


def run_verify_index_command(args: argparse.Namespace) -> int:
    """Verify an index and print what was checked.

    Args:
        args: Parsed arguments.

    Returns:
        0 when the index is intact, 1 when it is damaged (the file is named), 2 when the
        directory is not a verifiable index.
    """
    from langchain_adaptive_rag.retrievers.verify import verify_bm25_index

    try:
        report = verify_bm25_index(args.directory)
    except DamagedIndexError as error:
        print(f"damaged: {error}", file=sys.stderr)
        return 1
    except AdaptiveRAGError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(
        f"intact: {report.directory}: {report.files} files ({report.bytes:,} bytes) match "
        f"their checksums, {report.postings:,} postings checked, in {report.seconds:.1f} s"
    )
    return 0
