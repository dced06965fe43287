"""Passage stores: the documents a BM25 index returns, in memory or read from disk by row.

On disk a store is two files: ``passages.jsonl`` (one JSON array ``[id, text, metadata]``
per passage, in index order) and ``passages.offsets.npy`` (``N + 1`` byte offsets, int64).
Reading passage ``i`` slices one line out of a read-only memory map, so a 21M-passage store
costs its offsets (8 bytes a passage) in memory, not its text.
"""

from __future__ import annotations

import json
import mmap
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Protocol

import numpy as np
from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError, DamagedIndexError

__all__ = ["DiskPassages", "PassageStore", "PassageWriter"]

PASSAGES_FILE = "passages.jsonl"
OFFSETS_FILE = "passages.offsets.npy"
_CHECK_BLOCK = 1 << 22


class PassageStore(Protocol):
    """Passages by index row."""

    def __len__(self) -> int: ...

    def get(self, row: int) -> Document:
        """The passage at ``row`` (its ``id``, text and metadata)."""
        ...


class MemoryPassages:
    """Passages held as a list of Documents (in-memory indexes)."""

    def __init__(self, documents: Sequence[Document]) -> None:
        self.documents = list(documents)

    def __len__(self) -> int:
        return len(self.documents)

    def get(self, row: int) -> Document:
        """The passage at ``row``."""
        return self.documents[row]


def _record(doc: Document) -> bytes:
    metadata = {k: v for k, v in doc.metadata.items() if k != "score"}
    line = json.dumps([doc.id, doc.page_content, metadata], ensure_ascii=False, default=str)
    return line.encode("utf-8") + b"\n"


class PassageWriter:
    """Appends passages to a store directory; ``close`` writes the offsets."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._handle: IO[bytes] = (directory / PASSAGES_FILE).open("wb")
        self._offsets = array("q", [0])

    def add(self, doc: Document) -> None:
        """Append one passage (its ``id`` must be set)."""
        data = _record(doc)
        self._handle.write(data)
        self._offsets.append(self._offsets[-1] + len(data))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def close(self) -> int:
        """Flush the text, write the offsets and return the number of passages."""
        self._handle.close()
        np.save(self.directory / OFFSETS_FILE, np.frombuffer(self._offsets, dtype=np.int64))
        return len(self)


def write_passages(directory: Path, documents: Sequence[Document]) -> None:
    """Write a whole store at once (saving an in-memory index)."""
    writer = PassageWriter(directory)
    try:
        for doc in documents:
            writer.add(doc)
    finally:
        writer.close()


class DiskPassages:
    """A store read from disk: offsets memory-mapped, one line decoded per passage."""

    def __init__(self, directory: Path) -> None:
        text_file = directory / PASSAGES_FILE
        offsets_file = directory / OFFSETS_FILE
        for file in (text_file, offsets_file):
            if not file.is_file():
                msg = (
                    f"The index directory {str(directory)!r} lacks {file.name}. Expected a "
                    "directory written by BM25Retriever.save or adaptive-rag index. Fix: "
                    "rebuild the index."
                )
                raise AdaptiveRAGError(msg)
        try:
            self._offsets = np.load(offsets_file, mmap_mode="r", allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            raise DamagedIndexError(
                offsets_file, f"is not a readable numpy array ({error})"
            ) from error
        size = text_file.stat().st_size
        offsets = self._offsets
        if offsets.ndim != 1 or offsets.dtype != np.int64 or len(offsets) < 2:
            raise DamagedIndexError(
                offsets_file, f"holds a {offsets.dtype} array of shape {offsets.shape}"
            )
        if int(offsets[0]) != 0 or int(offsets[-1]) != size:
            raise DamagedIndexError(
                offsets_file,
                f"runs from byte {int(offsets[0]):,} to {int(offsets[-1]):,}, but "
                f"{PASSAGES_FILE} has {size:,} bytes: one of the two is cut or from another "
                "index",
            )
        for begin in range(0, len(offsets) - 1, _CHECK_BLOCK):
            block = np.asarray(offsets[begin : begin + _CHECK_BLOCK + 1])
            if bool((np.diff(block) <= 0).any()):
                raise DamagedIndexError(offsets_file, "does not increase from row to row")
        self._file = text_file
        with text_file.open("rb") as handle:
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def get(self, row: int) -> Document:
        """Decode the passage at ``row`` from disk."""
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        try:
            passage_id, text, metadata = json.loads(self._map[start:end])
        except (ValueError, TypeError) as error:
            raise DamagedIndexError(
                self._file, f"holds a damaged passage at row {row}, bytes {start}-{end} ({error})"
            ) from error
        return Document(id=passage_id, page_content=text, metadata=metadata)

    def documents(self) -> list[Document]:
        """Every passage, in index order (reads the whole store)."""
        return [self.get(row) for row in range(len(self))]
