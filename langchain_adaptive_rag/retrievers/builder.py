"""Build a saved BM25 index from a passage stream in bounded memory.

The corpus is read once, in chunks: each chunk's passages go straight to the passage store
on disk, and its postings (passage row, term id, term frequency), sorted by term, to a
temporary chunk file, for the text and (in ``title/``) for the title field. Then the
postings are merged one range of terms at a time (at most ``postings_budget`` postings in
memory) into the CSC arrays of a ``bm25s`` index
(``data.csc.index.npy``, ``indices.csc.index.npy``, ``indptr.csc.index.npy``,
``vocab.index.json``, ``params.index.json``), which ``bm25s.BM25.load(mmap=True)`` reads.
The arrays equal those of ``bm25s.BM25(method="lucene").index(...)`` on the same terms.

Memory is the vocabulary, 12 bytes a passage (length, offset) and one chunk or one term
range, never the corpus. The index is written under a hidden temporary name beside the
target and renamed into place only when complete, with ``manifest.json`` last: an
interrupted build leaves no directory that loads.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import socket
import uuid
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.retrievers.analysis import BM25Analyzer
from langchain_adaptive_rag.retrievers.integrity import record_files
from langchain_adaptive_rag.retrievers.store import PassageWriter

__all__ = ["BM25Parameters", "build_bm25_index"]

INDEX_FORMAT = 2
"""Version of the index directory layout, recorded in its manifest (2: with every file's
size and SHA-256)."""
READABLE_FORMATS = (1, 2)
"""Formats this version loads (1: without checksums; sizes and structure are checked)."""
MANIFEST_FILE = "manifest.json"
DATA_FILE = "data.csc.index.npy"
INDICES_FILE = "indices.csc.index.npy"
INDPTR_FILE = "indptr.csc.index.npy"
VOCAB_FILE = "vocab.index.json"
PARAMS_FILE = "params.index.json"
TITLE_DIR = "title"
"""Subdirectory of the title field's ``bm25s`` files."""
TIE_BREAKER = 0.5
"""Weight of the lower field score: Elasticsearch ``best_fields`` with ``tie_breaker`` 0.5."""


@dataclass(frozen=True)
class BM25Parameters:
    """BM25 as Lucene and Elasticsearch score it (``BM25Similarity``).

    A term ``t`` of passage ``d`` weighs ``idf(t) * tf / (tf + k1 (1 - b + b |d| / avgdl))``
    with ``idf(t) = log(1 + (N - n_t + 0.5) / (n_t + 0.5))``; a passage's score is the sum
    over the query's terms (a repeated query term counts each time).
    """

    k1: float = 1.2
    """Term-frequency saturation ``k1`` (Elasticsearch's default 1.2)."""
    b: float = 0.75
    """Length normalisation ``b`` (Elasticsearch's default 0.75)."""

    def __post_init__(self) -> None:
        if not (isinstance(self.k1, int | float) and math.isfinite(self.k1) and self.k1 >= 0):
            msg = f"BM25 k1 must be a finite number >= 0, got {self.k1!r}."
            raise AdaptiveRAGError(msg)
        if not (isinstance(self.b, int | float) and 0 <= self.b <= 1):
            msg = f"BM25 b must be a number in [0, 1], got {self.b!r}."
            raise AdaptiveRAGError(msg)


def passage_title(doc: Document) -> str:
    """A passage's ``metadata["title"]`` as text (empty when it has none)."""
    title = doc.metadata.get("title")
    return title if isinstance(title, str) else ""


def passage_id(doc: Document, row: int) -> str:
    """The id a passage is stored under: its own, else ``metadata["id"]``, else ``doc-<row>``."""
    if doc.id is not None:
        return str(doc.id)
    return str(doc.metadata.get("id", f"doc-{row}"))


class TermTable:
    """Maps words to term ids, stemming each distinct word once."""

    def __init__(self, analyzer: BM25Analyzer) -> None:
        self.analyzer = analyzer
        self.vocab: dict[str, int] = {}
        self._word_ids: dict[str, int] = {}

    def ids(self, text: str) -> list[int]:
        """Term ids of ``text`` in order (new terms get the next ids)."""
        words = self.analyzer.words(text)
        known = self._word_ids
        new = [w for w in dict.fromkeys(words) if w not in known]
        if new:
            for word, term in zip(new, self.analyzer.stem_words(new), strict=True):
                known[word] = self.vocab.setdefault(term, len(self.vocab))
        return [known[w] for w in words]


def chunk_postings(
    rows: list[list[int]], first_row: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Postings of a chunk of passages, sorted by term then passage row.

    Args:
        rows: Each passage's term ids.
        first_row: Index row of the chunk's first passage.

    Returns:
        The int32 arrays ``(terms, docs, tfs, lengths)`` of the distinct (term, passage)
        pairs with their frequency, and each passage's length in terms.
    """
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    flat = np.fromiter((t for r in rows for t in r), dtype=np.int64, count=int(lengths.sum()))
    local = np.repeat(np.arange(len(rows), dtype=np.int64), lengths)
    keys, tfs = np.unique((flat << 32) | local, return_counts=True)  # term, then row
    terms = (keys >> 32).astype(np.int32)
    docs = ((keys & 0xFFFFFFFF) + first_row).astype(np.int32)
    return terms, docs, tfs.astype(np.int32), lengths.astype(np.int32)


def lucene_idf(document_frequency: np.ndarray, size: int) -> np.ndarray:
    """``log(1 + (N - n + 0.5) / (n + 0.5))`` for each term's document frequency ``n``."""
    n = document_frequency.astype(np.float64)
    result: np.ndarray = np.log1p((size - n + 0.5) / (n + 0.5))
    return result


def term_weights(
    tfs: np.ndarray,
    lengths: np.ndarray,
    idf: np.ndarray,
    average_length: float,
    params: BM25Parameters,
) -> np.ndarray:
    """``idf * tf / (tf + k1 (1 - b + b |d| / avgdl))`` of postings, as float32."""
    tf = tfs.astype(np.float64)
    norm = params.k1 * (1.0 - params.b + params.b * lengths / (average_length or 1.0))
    weights: np.ndarray = (idf * tf / (tf + norm)).astype(np.float32)
    return weights


@dataclass
class _Chunk:
    path: Path
    terms: np.ndarray  # memory-mapped, sorted


def _save_chunk(
    directory: Path, number: int, terms: np.ndarray, docs: np.ndarray, tfs: np.ndarray
) -> _Chunk:
    base = directory / f"chunk-{number:06d}"
    np.save(f"{base}.terms.npy", terms)
    np.save(f"{base}.docs.npy", docs)
    np.save(f"{base}.tfs.npy", tfs)
    return _Chunk(base, np.load(f"{base}.terms.npy", mmap_mode="r"))


def _term_ranges(indptr: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """Consecutive term ranges holding at most ``budget`` postings (or one term)."""
    vocab = len(indptr) - 1
    low = 0
    while low < vocab:
        limit = int(indptr[low]) + budget
        high = int(np.searchsorted(indptr, limit, side="right")) - 1
        high = min(max(high, low + 1), vocab)
        yield low, high
        low = high


def bm25s_params(params: BM25Parameters, num_docs: int) -> dict[str, object]:
    """``params.index.json`` as ``bm25s.BM25.save`` writes it for ``method="lucene"``."""
    from bm25s.version import __version__

    return {
        "k1": params.k1,
        "b": params.b,
        "delta": 0.5,
        "method": "lucene",
        "idf_method": "lucene",
        "dtype": "float32",
        "int_dtype": "int32",
        "num_docs": num_docs,
        "version": __version__,
        "backend": "numpy",
    }


def manifest(
    directory: Path,
    *,
    analyzer: BM25Analyzer,
    params: BM25Parameters,
    index_title: bool,
    num_passages: int,
    vocab_size: int,
    num_postings: int,
) -> dict[str, object]:
    """The record of how an index was made, written last into its directory.

    Args:
        directory: The index directory, complete but for its manifest: every file's size
            and SHA-256 are recorded (``files``).
        analyzer: How texts became terms.
        params: BM25's ``k1`` and ``b``.
        index_title: Whether titles are a field of their own.
        num_passages: Passages indexed.
        vocab_size: Terms of the text field.
        num_postings: Postings of the text field.

    Returns:
        The manifest's JSON data.
    """
    from bm25s.version import __version__

    return {
        "format": INDEX_FORMAT,
        "kind": "langchain-adaptive-rag BM25 index",
        "analyzer": analyzer.to_dict(),
        "bm25": {"k1": params.k1, "b": params.b, "idf": "lucene", "method": "lucene"},
        "index_title": index_title,
        "fields": ["text", "title"] if index_title else ["text"],
        "tie_breaker": TIE_BREAKER,
        "num_passages": num_passages,
        "vocab_size": vocab_size,
        "num_postings": num_postings,
        "bm25s_version": __version__,
        "files": record_files(directory),
    }


def write_json(path: Path, value: Mapping[str, object]) -> None:
    """Write JSON and flush it to disk."""
    with path.open("w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())


def staging_directory(out: Path, *, overwrite: bool) -> Path:
    """A fresh hidden directory beside ``out`` to build into.

    Raises:
        AdaptiveRAGError: ``out`` is a file, or a non-empty directory without ``overwrite``.
    """
    if out.exists() and not out.is_dir():
        msg = (
            f"Index output {str(out)!r} is a file. Expected a directory path. Fix: pick "
            "another --out."
        )
        raise AdaptiveRAGError(msg)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        msg = (
            f"Index output {str(out)!r} exists and is not empty. Expected a new directory. "
            "Fix: pick another path, or pass overwrite=True (--overwrite) to replace it."
        )
        raise AdaptiveRAGError(msg)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    staging = out.parent / (
        f".{out.name}.partial-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    )
    staging.mkdir()
    return staging


def remove_stale_staging(out: Path) -> list[Path]:
    """Delete what killed builds of ``out`` left beside it.

    A build writes into ``.NAME.partial-HOST-PID-HEX`` and a replaced index waits in
    ``.NAME.replaced-HEX`` until deleted; a SIGKILL leaves them behind (gigabytes each at
    Wikipedia size). A staging directory is stale when it was made on this host by a
    process that is no longer running (one of another host is left alone); a replaced
    index is stale when ``out`` exists again.

    Args:
        out: The index directory.

    Returns:
        The directories deleted.
    """
    host = socket.gethostname()
    removed = []
    for path in out.parent.glob(f".{glob.escape(out.name)}.partial-*"):
        owner = path.name[len(f".{out.name}.partial-") :].rsplit("-", 2)
        if len(owner) == 3:  # (host, pid, hex)
            made_here = owner[0] == host
            pid = owner[1]
        else:  # an older release's (pid, hex): made on this host
            made_here = True
            pid = owner[0]
        if made_here and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    if out.is_dir():
        for path in out.parent.glob(f".{glob.escape(out.name)}.replaced-*"):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _running(pid: int) -> bool:
    """Whether a process with this id is running on this host."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # running, under another user
        return True
    except OSError:  # no signals on this platform: assume running
        return True
    return True


def publish(staging: Path, out: Path) -> None:
    """Move a complete index from ``staging`` to ``out``, replacing what was there."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.replaced-{uuid.uuid4().hex[:8]}"
        out.rename(old)
    staging.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_bm25_index(
    passages: Iterable[Document],
    out: str | os.PathLike[str],
    *,
    analyzer: BM25Analyzer | None = None,
    params: BM25Parameters | None = None,
    index_title: bool = True,
    chunk_size: int = 50_000,
    postings_budget: int = 20_000_000,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Index a passage stream into a directory that [`load_bm25_retriever`][] reads.

    Args:
        passages: Documents in index order, e.g. ``iter_passages("psgs_w100.tsv")``; read
            once, never held together.
        out: The index directory to create.
        analyzer: How texts become terms (default: English, stemmed).
        params: BM25 ``k1`` and ``b`` (default: Elasticsearch's 1.2 and 0.75).
        index_title: Index ``metadata["title"]`` as a field of its own, scored as the papers'
            Elasticsearch query does: ``max(text, title) + 0.5 * min(text, title)`` (dropped
            when no passage has a title). Returned passages keep their text alone.
        chunk_size: Passages analysed per chunk.
        postings_budget: Postings merged at once (bounds memory at about 30 bytes each).
        overwrite: Replace an existing non-empty ``out`` (only once the new index is done).
        progress: Called with the number of passages read so far after each chunk.

    Returns:
        The index directory.

    Raises:
        AdaptiveRAGError: The corpus is empty or has no index term, ``out`` is taken, or a
            size is not positive.
        DatasetFormatError: Raised by the passage stream for a malformed line.
    """
    for name, value in (("chunk_size", chunk_size), ("postings_budget", postings_budget)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            msg = f"{name} must be a positive integer, got {value!r}."
            raise AdaptiveRAGError(msg)
    analyzer = analyzer or BM25Analyzer()
    params = params or BM25Parameters()
    target = Path(out)
    staging = staging_directory(target, overwrite=overwrite)
    try:
        _build(
            passages, staging, analyzer, params, index_title, chunk_size, postings_budget, progress
        )
        publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


class FieldBuilder:
    """Postings of one field (``text`` or ``title``), spilled to chunk files as they come."""

    def __init__(self, directory: Path, analyzer: BM25Analyzer) -> None:
        self.directory = directory
        self.directory.mkdir(exist_ok=True)
        self.chunk_dir = directory / "chunks"
        self.chunk_dir.mkdir()
        self.table = TermTable(analyzer)
        self.chunks: list[_Chunk] = []
        self.lengths = array("i")
        self.frequency = np.zeros(0, dtype=np.int64)
        self.rows: list[list[int]] = []

    def add(self, text: str) -> None:
        """Analyse the next passage's text."""
        self.rows.append(self.table.ids(text))

    def flush(self) -> None:
        """Write the pending passages' postings as one chunk."""
        if not self.rows:
            return
        terms, docs, tfs, lengths = chunk_postings(self.rows, len(self.lengths))
        self.lengths.extend(lengths.tolist())
        counts = np.bincount(terms, minlength=len(self.table.vocab))
        counts[: len(self.frequency)] += self.frequency
        self.frequency = counts
        self.chunks.append(_save_chunk(self.chunk_dir, len(self.chunks), terms, docs, tfs))
        self.rows.clear()

    def finish(self, params: BM25Parameters, budget: int) -> None:
        """Merge the chunks into the field's ``bm25s`` files and drop them."""
        self.flush()
        size = len(self.lengths)
        _merge(
            self.directory,
            self.chunks,
            np.frombuffer(self.lengths, dtype=np.int32),
            self.frequency,
            params,
            budget,
        )
        write_json(self.directory / VOCAB_FILE, self.table.vocab)
        write_json(self.directory / PARAMS_FILE, bm25s_params(params, size))
        shutil.rmtree(self.chunk_dir)


def _build(
    passages: Iterable[Document],
    staging: Path,
    analyzer: BM25Analyzer,
    params: BM25Parameters,
    index_title: bool,
    chunk_size: int,
    postings_budget: int,
    progress: Callable[[int], None] | None,
) -> None:
    writer = PassageWriter(staging)
    text = FieldBuilder(staging, analyzer)
    title: FieldBuilder | None = None
    if index_title:
        title = FieldBuilder(staging / TITLE_DIR, analyzer)
    fields = [f for f in (text, title) if f is not None]
    try:
        for doc in passages:
            row = len(writer)
            stored = Document(
                id=passage_id(doc, row), page_content=doc.page_content, metadata=doc.metadata
            )
            writer.add(stored)
            text.add(doc.page_content)
            if title is not None:
                title.add(passage_title(doc))
            if len(text.rows) >= chunk_size:
                for field in fields:
                    field.flush()
                if progress is not None:
                    progress(len(writer))
    finally:
        size = writer.close()
    if size == 0:
        msg = "The corpus gave no passages. Expected at least one passage to index."
        raise AdaptiveRAGError(msg)
    if not text.table.vocab:
        msg = (
            f"None of the {size} passages has an index term after analysis (all empty or "
            "stop words). Expected passages with content words."
        )
        raise AdaptiveRAGError(msg)
    if title is not None and not title.table.vocab:  # no passage has a title
        shutil.rmtree(title.directory)
        title = None
        index_title = False
    text.finish(params, postings_budget)
    if title is not None:
        title.finish(params, postings_budget)
    if progress is not None:
        progress(size)
    write_json(
        staging / MANIFEST_FILE,
        manifest(
            staging,
            analyzer=analyzer,
            params=params,
            index_title=index_title,
            num_passages=size,
            vocab_size=len(text.table.vocab),
            num_postings=int(text.frequency.sum()),
        ),
    )


def _merge(
    staging: Path,
    chunks: list[_Chunk],
    lengths: np.ndarray,
    frequency: np.ndarray,
    params: BM25Parameters,
    budget: int,
) -> None:
    """Write the CSC arrays term range by term range from the sorted chunk files."""
    size = len(lengths)
    average = float(lengths.mean())
    idf = lucene_idf(frequency, size)
    indptr = np.zeros(len(frequency) + 1, dtype=np.int64)
    np.cumsum(frequency, out=indptr[1:])
    total = int(indptr[-1])
    data = np.lib.format.open_memmap(
        staging / DATA_FILE, mode="w+", dtype=np.float32, shape=(total,)
    )
    indices = np.lib.format.open_memmap(
        staging / INDICES_FILE, mode="w+", dtype=np.int32, shape=(total,)
    )
    for low, high in _term_ranges(indptr, budget):
        parts_terms, parts_docs, parts_tfs = [], [], []
        for chunk in chunks:
            start, end = np.searchsorted(chunk.terms, [low, high])
            if start == end:
                continue
            parts_terms.append(np.asarray(chunk.terms[start:end]))
            parts_docs.append(np.load(f"{chunk.path}.docs.npy", mmap_mode="r")[start:end])
            parts_tfs.append(np.load(f"{chunk.path}.tfs.npy", mmap_mode="r")[start:end])
        terms = np.concatenate(parts_terms)
        order = np.argsort(terms, kind="stable")  # chunks are in row order: rows stay sorted
        terms, docs, tfs = (
            terms[order],
            np.concatenate(parts_docs)[order],
            np.concatenate(parts_tfs)[order],
        )
        span = slice(int(indptr[low]), int(indptr[high]))
        data[span] = term_weights(tfs, lengths[docs], idf[terms], average, params)
        indices[span] = docs
    data.flush()
    indices.flush()
    del data, indices
    np.save(staging / INDPTR_FILE, indptr)
