"""Whether a saved BM25 index is the one that was written: sizes, checksums, structure.

Writing an index records every file's size and SHA-256 in its ``manifest.json``
(``files``). Loading checks, naming the damaged file in every refusal:

- the sizes, always (a ``stat`` per file: catches a cut or extended file);
- the checksums, when the index's files hold at most [`AUTO_VERIFY_BYTES`][] (1 GiB, about
  0.6 s to hash) or when asked (``load_bm25_retriever(dir, verify=True)``); a 21M-passage
  index (tens of GB) is verified on demand with [`verify_bm25_index`][] or
  ``adaptive-rag verify-index DIR``;
- the structure, always: each array's header, dtype and length; ``indptr`` starting at 0,
  never decreasing and ending at the postings' count; the vocabulary's term ids exactly
  ``0 .. V-1``; the passage offsets increasing from 0 to the store's size. A query reads
  only the postings of its terms and checks them (passage rows increasing and in range,
  weights positive and finite), so garbage that slipped past an unverified load stops
  the query with an error instead of answering wrongly. What only the checksums catch:
  a vocabulary whose term ids were swapped, and weights overwritten with other positive
  numbers.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from langchain_adaptive_rag.errors import DamagedIndexError

__all__ = [
    "AUTO_VERIFY_BYTES",
    "IndexVerification",
    "check_postings",
    "check_recorded_sizes",
    "check_vocabulary",
    "index_files",
    "read_array",
    "read_json_file",
    "record_files",
    "verify_checksums",
]

AUTO_VERIFY_BYTES = 1 << 30
"""Indexes whose files hold at most this many bytes are checksummed at every load."""
MANIFEST_NAME = "manifest.json"
_BLOCK = 4 << 20


def index_files(directory: Path) -> list[str]:
    """Every file of an index directory but its manifest, as sorted relative paths."""
    return sorted(
        path.relative_to(directory).as_posix()
        for path in directory.rglob("*")
        if path.is_file() and path.relative_to(directory).as_posix() != MANIFEST_NAME
    )


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in 4 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def record_files(directory: Path) -> dict[str, dict[str, object]]:
    """Size and SHA-256 of every file of an index directory (for its manifest).

    Args:
        directory: The index directory, complete but for its manifest.

    Returns:
        Each file's size and digest, as
        ``{relative path: {"bytes": size, "sha256": hex digest}}``.
    """
    return {
        name: {"bytes": (directory / name).stat().st_size, "sha256": sha256_of(directory / name)}
        for name in index_files(directory)
    }


def check_recorded_sizes(directory: Path, files: Mapping[str, Any]) -> int:
    """Every recorded file is there with its recorded size.

    Args:
        directory: The index directory.
        files: The manifest's ``files``.

    Returns:
        The files' total size in bytes.

    Raises:
        DamagedIndexError: A file is missing or has another size (the first such file).
    """
    total = 0
    for name, record in files.items():
        path = directory / name
        expected = record.get("bytes") if isinstance(record, Mapping) else None
        if not isinstance(expected, int):
            raise DamagedIndexError(
                directory / MANIFEST_NAME, f"its entry for {name!r} has no size"
            )
        if not path.is_file():
            raise DamagedIndexError(path, "is missing")
        size = path.stat().st_size
        if size != expected:
            raise DamagedIndexError(path, f"has {size:,} bytes; {expected:,} were written")
        total += size
    return total


def verify_checksums(directory: Path, files: Mapping[str, Any]) -> None:
    """Every recorded file has its recorded SHA-256.

    Raises:
        DamagedIndexError: Naming every damaged file.
    """
    damaged = [
        name
        for name, record in files.items()
        if not isinstance(record, Mapping) or sha256_of(directory / name) != record.get("sha256")
    ]
    if damaged:
        first = directory / damaged[0]
        others = f" (and {', '.join(damaged[1:])})" if damaged[1:] else ""
        raise DamagedIndexError(
            first, f"does not have the SHA-256 recorded when it was written{others}"
        )


def read_array(path: Path, dtypes: tuple[str, ...], *, mmap: bool) -> np.ndarray:
    """A one-dimensional ``.npy`` array of one of ``dtypes``, memory-mapped or read.

    Raises:
        DamagedIndexError: The file is not such an array (a damaged header, a cut body).
    """
    try:
        array: np.ndarray = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise DamagedIndexError(path, f"is not a readable numpy array ({error})") from error
    if array.ndim != 1 or array.dtype.name not in dtypes:
        raise DamagedIndexError(
            path,
            f"holds a {array.dtype} array of shape {array.shape}; a 1-D "
            f"{' or '.join(dtypes)} array was written",
        )
    return array


def read_json_file(path: Path) -> Any:
    """A small JSON file of the index (its parameters).

    Raises:
        DamagedIndexError: The file is not UTF-8 JSON.
    """
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError) as error:
        raise DamagedIndexError(path, f"is not valid JSON ({error})") from error


def check_vocabulary(path: Path, vocab: Any, num_terms: int) -> None:
    """The vocabulary maps terms to exactly the ids ``0 .. num_terms - 1``.

    Raises:
        DamagedIndexError: Another mapping (ids missing, repeated or out of range).
    """
    if not isinstance(vocab, dict) or len(vocab) != num_terms:
        size = len(vocab) if isinstance(vocab, dict) else type(vocab).__name__
        raise DamagedIndexError(path, f"holds {size} terms; the postings index {num_terms}")
    try:
        ids = np.fromiter(vocab.values(), dtype=np.int64, count=num_terms)
    except (TypeError, ValueError) as error:
        raise DamagedIndexError(path, f"maps a term to something not an id ({error})") from error
    seen = np.zeros(num_terms, dtype=bool)
    in_range = (ids >= 0) & (ids < num_terms)
    seen[ids[in_range]] = True
    if not in_range.all() or not seen.all():
        raise DamagedIndexError(
            path, f"does not map its terms to the ids 0..{num_terms - 1} one to one"
        )


def check_csc(
    directory: Path,
    names: tuple[str, str, str],
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    """``indptr`` starts at 0, never decreases and ends at the postings' count.

    Args:
        directory: The field's directory.
        names: The ``(data, indices, indptr)`` file names.
        arrays: The ``(data, indices, indptr)`` arrays.

    Raises:
        DamagedIndexError: Naming the file that breaks the structure.
    """
    data_name, indices_name, indptr_name = names
    data, indices, indptr = arrays
    if len(indptr) == 0 or int(indptr[0]) != 0:
        raise DamagedIndexError(directory / indptr_name, "does not start at 0")
    if len(indptr) > 1 and bool((np.diff(indptr) < 0).any()):
        raise DamagedIndexError(directory / indptr_name, "decreases somewhere")
    if int(indptr[-1]) != len(indices):
        raise DamagedIndexError(
            directory / indices_name,
            f"has {len(indices):,} postings; {indptr_name} ends at {int(indptr[-1]):,}",
        )
    if len(data) != len(indices):
        raise DamagedIndexError(
            directory / data_name, f"has {len(data):,} weights for {len(indices):,} postings"
        )


def check_postings(
    source: Path | None, term: str | None, rows: np.ndarray, weights: np.ndarray, size: int
) -> None:
    """One term's postings: rows increasing within ``[0, size)``, weights positive, finite.

    Args:
        source: The field's directory (``None``: an index built in memory).
        term: The term, for the message (``None``: a block of all postings).
        rows: Its passage rows.
        weights: Its BM25 weights.
        size: The number of passages.

    Raises:
        DamagedIndexError: Naming ``indices.csc.index.npy`` or ``data.csc.index.npy``.
    """
    if not rows.size:
        return
    whose = "" if term is None else f" for the term {term!r}"
    indices_file = _field_file(source, "indices.csc.index.npy")
    if term is not None and rows.size > 1 and not bool((rows[1:] > rows[:-1]).all()):
        raise DamagedIndexError(
            indices_file,
            f"lists the passage rows{whose} out of order (they are written increasing)",
        )
    low, high = (
        (int(rows[0]), int(rows[-1])) if term is not None else (int(rows.min()), int(rows.max()))
    )
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise DamagedIndexError(
            indices_file, f"lists passage row {bad}{whose}; the index has {size:,} passages"
        )
    if not (float(weights.min()) > 0 and float(weights.max()) < np.inf):  # NaN fails too
        raise DamagedIndexError(
            _field_file(source, "data.csc.index.npy"),
            f"holds a weight that is not a positive number{whose}",
        )


def _field_file(source: Path | None, name: str) -> Path:
    return Path(name) if source is None else source / name


@dataclass(frozen=True)
class IndexVerification:
    """What [`verify_bm25_index`][] checked."""

    directory: Path
    """The index directory."""
    files: int
    """Files whose size and SHA-256 matched the manifest."""
    bytes: int
    """Their total size."""
    postings: int
    """Postings whose passage rows and weights were checked (every field)."""
    seconds: float
    """How long it took."""
