"""The BM25 retriever on ``bm25s``: built in memory, saved, and loaded memory-mapped.

Scores are Lucene's BM25 ([`BM25Parameters`][]), as in the Elasticsearch index the
DRAGIN, FLARE and SeaKR papers retrieve from. [`create_bm25_retriever`][] indexes a list of
Documents with ``bm25s``; ``retriever.save(dir)`` writes the index and its passages;
``load_bm25_retriever(dir)`` memory-maps them back, reading a passage's text from disk only
when it is returned. [`build_bm25_index`][] writes the same directory from a stream of any
size (21M DPR passages) in bounded memory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_adaptive_rag.errors import AdaptiveRAGError, DamagedIndexError
from langchain_adaptive_rag.retrievers.analysis import BM25Analyzer
from langchain_adaptive_rag.retrievers.builder import (
    DATA_FILE,
    INDICES_FILE,
    INDPTR_FILE,
    MANIFEST_FILE,
    PARAMS_FILE,
    READABLE_FORMATS,
    TIE_BREAKER,
    TITLE_DIR,
    VOCAB_FILE,
    BM25Parameters,
    manifest,
    passage_id,
    passage_title,
    publish,
    staging_directory,
    write_json,
)
from langchain_adaptive_rag.retrievers.integrity import (
    AUTO_VERIFY_BYTES,
    check_csc,
    check_postings,
    check_recorded_sizes,
    check_vocabulary,
    read_array,
    read_json_file,
    verify_checksums,
)
from langchain_adaptive_rag.retrievers.store import (
    DiskPassages,
    MemoryPassages,
    PassageStore,
    write_passages,
)

__all__ = [
    "BM25Index",
    "BM25Retriever",
    "create_bm25_retriever",
    "load_bm25_retriever",
    "top_rows",
]


@dataclass(frozen=True)
class BM25Index:
    """A ``bm25s`` model with its passages and the settings that made it."""

    model: Any
    """The ``bm25s.BM25`` model of the passages' text (its arrays may be memory-mapped)."""
    title_model: Any
    """The ``bm25s.BM25`` model of their titles, or ``None`` when titles are not indexed."""
    passages: PassageStore
    """The passages by index row."""
    analyzer: BM25Analyzer
    """How texts became terms (queries are analysed the same way)."""
    params: BM25Parameters
    """BM25's ``k1`` and ``b``."""
    directory: Path | None = None
    """The directory it was loaded from, if any."""
    _checked: tuple[set[int], set[int]] = field(
        default_factory=lambda: (set(), set()), init=False, repr=False, compare=False
    )
    """Term ids whose postings were checked, per field (text, title): each once."""

    @property
    def size(self) -> int:
        """Number of passages."""
        return int(self.model.scores["num_docs"])

    @property
    def index_title(self) -> bool:
        """Whether titles are indexed as a field of their own."""
        return self.title_model is not None

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query``, float32, shape ``(size,)``.

        With a title field the score is Elasticsearch's ``best_fields`` combination,
        ``max(text, title) + 0.5 * min(text, title)``.

        Raises:
            DamagedIndexError: A query term's postings are damaged (a passage row out of
                range, a weight that is not a positive number), naming the file.
        """
        terms = self.analyzer(query)
        directory = self.directory  # None: built in memory by bm25s, nothing to check
        text_check = None if directory is None else _Check(directory, self._checked[0])
        scores = _field_scores(self.model, terms, self.size, text_check)
        if self.title_model is None:
            return scores
        title_check = None if directory is None else _Check(directory / TITLE_DIR, self._checked[1])
        rows, title = _sparse_field_scores(self.title_model, terms, title_check)
        if rows.size:  # elsewhere the title scores 0: max(text, 0) + 0.5 * 0 = text
            text = scores[rows]
            scores[rows] = np.maximum(text, title) + np.float32(TIE_BREAKER) * np.minimum(
                text, title
            )
        return scores


@dataclass(frozen=True)
class _Check:
    """Where a loaded field's files are, and which of its terms were checked already."""

    directory: Path
    done: set[int]


def _postings(
    model: Any, terms: list[str], check: _Check | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(rows, weights)`` of each query term found in one field's CSC arrays.

    A loaded field's postings are checked the first time a query reads them.
    """
    vocab: dict[str, int] = model.vocab_dict
    arrays = model.scores
    data, indices, indptr = arrays["data"], arrays["indices"], arrays["indptr"]
    found = []
    for term in terms:
        term_id = vocab.get(term)
        if term_id is not None:
            start, end = int(indptr[term_id]), int(indptr[term_id + 1])
            rows, weights = indices[start:end], data[start:end]
            if check is not None and term_id not in check.done:
                check_postings(check.directory, term, rows, weights, int(arrays["num_docs"]))
                check.done.add(term_id)
            found.append((rows, weights))
    return found


def _field_scores(model: Any, terms: list[str], size: int, check: _Check | None) -> np.ndarray:
    """Dense sum of the query terms' precomputed weights over every passage of a field."""
    scores = np.zeros(size, dtype=np.float32)
    for rows, weights in _postings(model, terms, check):
        np.add.at(scores, rows, weights)  # numpy's unbuffered scatter-add, ~2x fancy +=
    return scores


def _sparse_field_scores(
    model: Any, terms: list[str], check: _Check | None
) -> tuple[np.ndarray, np.ndarray]:
    """The passages a field scores above 0 and their scores (titles: short postings)."""
    found = _postings(model, terms, check)
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    rows, inverse = np.unique(np.concatenate([r for r, _ in found]), return_inverse=True)
    weights = np.concatenate([w for _, w in found]).astype(np.float64)
    return rows, np.bincount(inverse, weights=weights).astype(np.float32)


_BLOCK = 1024


def top_rows(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the ``k`` highest positive scores, by score then row.

    On a large corpus the candidates are the rows at or above the ``k``-th largest block
    maximum, which is at most the ``k``-th largest score, so no top row is missed and
    ties keep index order.
    """
    size = scores.size
    whole = size - size % _BLOCK
    threshold = 0.0
    if size >= 8 * _BLOCK and k <= whole // _BLOCK:
        block_max = scores[:whole].reshape(-1, _BLOCK).max(axis=1)
        threshold = float(np.partition(block_max, -k)[-k])
    if threshold > 0:
        candidates = np.flatnonzero(scores >= threshold)
    else:
        candidates = np.flatnonzero(scores > 0)
    if candidates.size > k:
        top = np.argpartition(-scores[candidates], k - 1)[:k]
        kth = scores[candidates[top]].min()  # keep every row tied with the k-th score
        candidates = candidates[scores[candidates] >= kth]
    order = candidates[np.lexsort((candidates, -scores[candidates]))]
    return order[:k]


class BM25Retriever(BaseRetriever):
    """BM25 over passages; create it with [`create_bm25_retriever`][] or load it.

    Setup:
        ``pip install langchain-adaptive-rag`` (``bm25s`` and ``PyStemmer`` come with it).

    Instantiate:
        ```python
        retriever = create_bm25_retriever(documents, k=3)
        retriever.save("my-index")
        retriever = load_bm25_retriever("my-index")  # memory-mapped
        ```

    Invoke:
        ``retriever.invoke("who directed Blue Harbour?", k=5)``: returned Documents carry
        their ``id`` and ``metadata["score"]``; passages sharing no term with the query are
        never returned, so a query can return fewer than ``k``. Equal scores keep index
        order.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    k: int = Field(default=3, ge=1)
    """Number of documents to return (per call: ``retriever.invoke(query, k=5)``)."""

    _index: BM25Index | None = PrivateAttr(default=None)

    @property
    def index(self) -> BM25Index:
        """The model, passages and settings."""
        if self._index is None:
            msg = (
                "This BM25Retriever has no index. Create it with create_bm25_retriever(...) "
                "or load_bm25_retriever(directory)."
            )
            raise AdaptiveRAGError(msg)
        return self._index

    @property
    def analyzer(self) -> BM25Analyzer:
        """How the index's texts and the queries become terms."""
        return self.index.analyzer

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query``, shape ``(number of passages,)``."""
        return self.index.scores(query)

    @property
    def documents(self) -> list[Document]:
        """Every indexed passage in index order (reads a saved store from disk)."""
        store = self.index.passages
        return [store.get(row) for row in range(len(store))]

    def save(self, directory: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the index and its passages to ``directory`` (complete or not at all).

        Args:
            directory: A new directory (or an existing one with ``overwrite``).
            overwrite: Replace an existing non-empty directory.

        Returns:
            The directory, loadable with [`load_bm25_retriever`][].

        Raises:
            AdaptiveRAGError: ``directory`` is a file or is taken.
        """
        index = self.index
        target = Path(directory)
        if index.directory is not None and target.resolve() == index.directory.resolve():
            return target
        staging = staging_directory(target, overwrite=overwrite)
        try:
            if index.directory is not None:
                for name in (*_INDEX_FILES, "passages.jsonl", "passages.offsets.npy"):
                    shutil.copyfile(index.directory / name, staging / name)
                if index.title_model is not None:
                    shutil.copytree(index.directory / TITLE_DIR, staging / TITLE_DIR)
            else:
                index.model.save(staging, show_progress=False)
                if index.title_model is not None:
                    index.title_model.save(staging / TITLE_DIR, show_progress=False)
                write_passages(staging, self.documents)
                arrays = index.model.scores
                write_json(
                    staging / MANIFEST_FILE,
                    manifest(
                        staging,
                        analyzer=index.analyzer,
                        params=index.params,
                        index_title=index.index_title,
                        num_passages=index.size,
                        vocab_size=len(index.model.vocab_dict),
                        num_postings=int(arrays["indptr"][-1]),
                    ),
                )
            publish(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return target

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = self.k if k is None else k
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            msg = f"k must be an integer >= 1, got {limit!r}."
            raise AdaptiveRAGError(msg)
        index = self.index
        scores = index.scores(query)
        found = []
        for row in top_rows(scores, limit):
            doc = index.passages.get(int(row))
            found.append(
                Document(
                    id=doc.id,
                    page_content=doc.page_content,
                    metadata={**doc.metadata, "score": float(scores[row])},
                )
            )
        return found


_FIELD_FILES = (DATA_FILE, INDICES_FILE, INDPTR_FILE, VOCAB_FILE, PARAMS_FILE)
_INDEX_FILES = (*_FIELD_FILES, MANIFEST_FILE)


def create_bm25_retriever(
    documents: Sequence[Document] | Sequence[str],
    *,
    k: int = 3,
    analyzer: BM25Analyzer | None = None,
    k1: float = 1.2,
    b: float = 0.75,
    index_title: bool = False,
) -> BM25Retriever:
    """Index documents (or plain texts) in memory for BM25 retrieval.

    For a corpus too large for memory, stream it into a directory with
    [`build_bm25_index`][] (or ``adaptive-rag index``) and [`load_bm25_retriever`][] it.

    Args:
        documents: ``Document`` objects or strings. A Document without an ``id`` takes
            ``metadata["id"]``, else ``"doc-<index>"``.
        k: Documents returned per query (``invoke(query, k=...)`` overrides it).
        analyzer: How texts become terms (default: English stop words removed, stemmed).
        k1: BM25 term-frequency saturation (Elasticsearch's default 1.2).
        b: BM25 length normalisation (Elasticsearch's default 0.75).
        index_title: Index ``metadata["title"]`` as a field of its own, scored as the
            papers' Elasticsearch query does (``best_fields``, ``tie_breaker`` 0.5); ignored
            when no document has a title. Returned texts are unchanged.

    Returns:
        The retriever.

    Raises:
        AdaptiveRAGError: If there are no documents or none has an index term.
    """
    params = BM25Parameters(k1=k1, b=b)
    analyzer = analyzer or BM25Analyzer()
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        msg = (
            f"create_bm25_retriever expected a list of Documents or strings, got "
            f"{type(documents).__name__}. Fix: pass a list (for a file, use "
            "build_bm25_index(iter_passages(path), dir))."
        )
        raise AdaptiveRAGError(msg)
    docs = [Document(page_content=d) if isinstance(d, str) else d for d in documents]
    if not docs:
        msg = (
            "create_bm25_retriever received no documents. Expected a non-empty list of "
            "Documents or strings (the passages to search)."
        )
        raise AdaptiveRAGError(msg)
    docs = [
        d
        if d.id is not None
        else Document(id=passage_id(d, i), page_content=d.page_content, metadata=d.metadata)
        for i, d in enumerate(docs)
    ]
    text = _field_model([d.page_content for d in docs], analyzer, params)
    title = (
        _field_model([passage_title(d) for d in docs], analyzer, params) if index_title else None
    )
    if text is None:
        msg = (
            f"None of the {len(docs)} documents has an index term after analysis (all empty "
            "or stop words). Expected passages with content words."
        )
        raise AdaptiveRAGError(msg)
    retriever = BM25Retriever(k=k)
    retriever._index = BM25Index(
        model=text,
        title_model=title,  # None also when no passage has a title
        passages=MemoryPassages(docs),
        analyzer=analyzer,
        params=params,
    )
    return retriever


def _field_model(texts: list[str], analyzer: BM25Analyzer, params: BM25Parameters) -> Any:
    """A ``bm25s`` Lucene model of one field, or ``None`` when no text has a term."""
    import bm25s

    vocab: dict[str, int] = {}
    corpus = [[vocab.setdefault(t, len(vocab)) for t in analyzer(text)] for text in texts]
    if not vocab:
        return None
    model = bm25s.BM25(k1=params.k1, b=params.b, method="lucene")
    model.index((corpus, vocab), create_empty_token=False, show_progress=False)
    return model


def _read_manifest(directory: Path) -> dict[str, Any]:
    file = directory / MANIFEST_FILE
    if not directory.is_dir():
        msg = (
            f"BM25 index directory {str(directory)!r} does not exist. Expected a directory "
            "written by adaptive-rag index or BM25Retriever.save. Fix: check the path, or "
            "build it: adaptive-rag index CORPUS --out DIR."
        )
        raise AdaptiveRAGError(msg)
    if not file.is_file():
        msg = (
            f"{str(directory)!r} has no {MANIFEST_FILE}: it is not a BM25 index, or its build "
            "did not finish. Fix: build it again with adaptive-rag index CORPUS --out DIR."
        )
        raise AdaptiveRAGError(msg)
    data = read_json_file(file)
    if not isinstance(data, dict) or data.get("format") not in READABLE_FORMATS:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        msg = (
            f"{str(file)!r} records index format {found!r}; this version reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))}. Fix: rebuild the index with this version."
        )
        raise AdaptiveRAGError(msg)
    files = data.get("files")
    if data["format"] >= 2 and not isinstance(files, dict):
        raise DamagedIndexError(file, "lacks the record of the index's files")
    return data


def _load_field(directory: Path, mmap: bool, num_passages: int) -> Any:
    """One field's ``bm25s`` model, each file checked (and named when refused)."""
    import bm25s

    missing = [name for name in _FIELD_FILES if not (directory / name).is_file()]
    if missing:
        msg = f"BM25 index {str(directory)!r} lacks {', '.join(missing)}. Fix: rebuild the index."
        raise AdaptiveRAGError(msg)
    params_file = directory / PARAMS_FILE
    params = read_json_file(params_file)
    if not isinstance(params, dict) or params.get("num_docs") != num_passages:
        counted = params.get("num_docs") if isinstance(params, dict) else type(params).__name__
        raise DamagedIndexError(
            params_file, f"counts {counted!r} passages; the manifest {num_passages}"
        )
    data = read_array(directory / DATA_FILE, ("float32",), mmap=mmap)
    indices = read_array(directory / INDICES_FILE, ("int32",), mmap=mmap)
    indptr = read_array(directory / INDPTR_FILE, ("int64", "int32"), mmap=mmap)
    check_csc(directory, (DATA_FILE, INDICES_FILE, INDPTR_FILE), (data, indices, indptr))
    vocab_file = directory / VOCAB_FILE
    vocab = read_json_file(vocab_file)
    check_vocabulary(vocab_file, vocab, len(indptr) - 1)
    settings = {key: value for key, value in params.items() if key not in ("num_docs", "version")}
    try:
        model = bm25s.BM25(**settings)
    except (TypeError, ValueError) as error:
        raise DamagedIndexError(params_file, f"holds settings bm25s refuses ({error})") from error
    model.vocab_dict = vocab
    model._original_version = params.get("version")
    model.unique_token_ids_set = set(vocab.values())
    model.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": num_passages}
    model.nonoccurrence_array = None
    return model


def _check_files(root: Path, recorded: dict[str, Any], verify: bool | None) -> None:
    """Sizes always; checksums when ``verify`` (``None``: for indexes up to 1 GiB)."""
    files = recorded.get("files")
    if not isinstance(files, dict):  # format 1: nothing recorded to compare with
        if verify:
            msg = (
                f"BM25 index {str(root)!r} was written in format 1, which records no "
                "checksums, so it cannot be verified. Fix: rebuild it with this version."
            )
            raise AdaptiveRAGError(msg)
        return
    total = check_recorded_sizes(root, files)
    if verify or (verify is None and total <= AUTO_VERIFY_BYTES):
        verify_checksums(root, files)


def load_bm25_retriever(
    directory: str | os.PathLike[str],
    *,
    k: int = 3,
    mmap: bool = True,
    analyzer: BM25Analyzer | None = None,
    verify: bool | None = None,
) -> BM25Retriever:
    """Load a saved BM25 index (``adaptive-rag index`` or ``BM25Retriever.save``).

    Every file's size and the arrays' structure are checked at each load; see
    ``langchain_adaptive_rag.retrievers.integrity`` for what is checked when.

    Args:
        directory: The index directory.
        k: Documents returned per query.
        mmap: Memory-map the score arrays (load in about a second at any size; pages are
            read on demand). ``False`` reads them into memory.
        analyzer: The analyzer the caller expects; a different recorded one is refused.
            ``None`` uses the recorded analyzer.
        verify: Compare every file's SHA-256 with the one recorded when it was written
            (``True``), or not (``False``). ``None``: when the files hold at most 1 GiB
            ([`AUTO_VERIFY_BYTES`][]); verify a larger index once with
            [`verify_bm25_index`][] (``adaptive-rag verify-index DIR``).

    Returns:
        The retriever; passages are read from disk when returned.

    Raises:
        DamagedIndexError: A file is missing, cut, garbled or not what was written (the
            error names it).
        AdaptiveRAGError: The directory is missing, incomplete, of another format, or was
            built with another analyzer than ``analyzer``.
    """
    root = Path(directory)
    recorded = _read_manifest(root)
    try:
        built_with = BM25Analyzer.from_dict(recorded["analyzer"])
        bm25 = recorded["bm25"]
        params = BM25Parameters(k1=float(bm25["k1"]), b=float(bm25["b"]))
    except (KeyError, TypeError, ValueError) as error:
        msg = f"{str(root / MANIFEST_FILE)!r} lacks a field ({error!r}). Fix: rebuild the index."
        raise AdaptiveRAGError(msg) from error
    if analyzer is not None and analyzer != built_with:
        msg = (
            f"The index {str(root)!r} was built with {built_with}, but {analyzer} was "
            "requested: queries would not match its terms. Fix: load it without analyzer= "
            "(or with the recorded one), or rebuild the index with the analyzer you want."
        )
        raise AdaptiveRAGError(msg)
    num_passages = recorded.get("num_passages")
    if isinstance(num_passages, bool) or not isinstance(num_passages, int) or num_passages < 1:
        raise DamagedIndexError(root / MANIFEST_FILE, f"counts {num_passages!r} passages")
    _check_files(root, recorded, verify)
    model = _load_field(root, mmap, num_passages)
    index_title = bool(recorded.get("index_title", False))
    title_model = _load_field(root / TITLE_DIR, mmap, num_passages) if index_title else None
    passages = DiskPassages(root)
    if len(passages) != recorded["num_passages"]:
        msg = (
            f"BM25 index {str(root)!r} stores {len(passages)} passages but indexes "
            f"{recorded['num_passages']}. Fix: rebuild the index."
        )
        raise AdaptiveRAGError(msg)
    retriever = BM25Retriever(k=k)
    retriever._index = BM25Index(
        model=model,
        title_model=title_model,
        passages=passages,
        analyzer=built_with,
        params=params,
        directory=root,
    )
    return retriever
