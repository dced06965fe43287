"""Saved BM25 indexes: streamed build equals bm25s, save/load, mmap, atomic builds, errors."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError
from langchain_adaptive_rag.evaluation import iter_passages
from langchain_adaptive_rag.retrievers import (
    BM25Analyzer,
    build_bm25_index,
    create_bm25_retriever,
    load_bm25_retriever,
)
from tests.helpers.bm25_docs import VOCAB, random_docs


def postings(model: object) -> dict[str, tuple[list[int], np.ndarray]]:
    """Each term's (passage rows, weights), independent of term numbering."""
    arrays = model.scores  # type: ignore[attr-defined]
    indptr = arrays["indptr"]
    return {
        term: (
            list(arrays["indices"][indptr[i] : indptr[i + 1]]),
            np.asarray(arrays["data"][indptr[i] : indptr[i + 1]]),
        )
        for term, i in model.vocab_dict.items()  # type: ignore[attr-defined]
    }


@pytest.mark.parametrize(("chunk_size", "budget"), [(37, 50), (10_000, 10**9)])
def test_streamed_build_equals_bm25s_index(tmp_path: Path, chunk_size: int, budget: int) -> None:
    docs = random_docs(400)
    reference = create_bm25_retriever(docs, index_title=True)  # bm25s.BM25.index
    out = build_bm25_index(
        iter(docs), tmp_path / "ix", chunk_size=chunk_size, postings_budget=budget
    )
    built = load_bm25_retriever(out)
    for field in ("model", "title_model"):
        expected = postings(getattr(reference.index, field))
        found = postings(getattr(built.index, field))
        assert expected.keys() == found.keys()
        for term, (rows, weights) in expected.items():
            assert found[term][0] == rows, term
            np.testing.assert_allclose(found[term][1], weights, rtol=1e-6)
    assert built.index.model.scores["data"].dtype == np.float32
    rng = random.Random(1)
    for _ in range(40):
        query = " ".join(rng.choices([*VOCAB, "t3"], k=rng.randint(1, 6)))
        np.testing.assert_allclose(built.scores(query), reference.scores(query), rtol=1e-6)
        assert [d.id for d in built.invoke(query)] == [d.id for d in reference.invoke(query)]


def test_save_then_load_memory_mapped(tmp_path: Path) -> None:
    docs = random_docs(120)
    retriever = create_bm25_retriever(docs, k=4, index_title=True)
    directory = retriever.save(tmp_path / "saved")
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["analyzer"] == {
        "pattern": r"\w+",
        "lowercase": True,
        "stemmer": "english",
        "stopwords": "lucene",
    }
    assert manifest["num_passages"] == 120 and manifest["fields"] == ["text", "title"]
    loaded = load_bm25_retriever(directory, k=4)
    assert isinstance(loaded.index.model.scores["data"], np.memmap)
    assert loaded.analyzer == retriever.analyzer and loaded.index.index_title
    in_memory = load_bm25_retriever(directory, mmap=False)
    assert not isinstance(in_memory.index.model.scores["data"], np.memmap)
    for query in ("w1 w2", "w17 t3 w200", "w5"):
        assert loaded.invoke(query) == retriever.invoke(query)  # ids, texts, metadata, scores
    assert loaded.documents[3] == Document(
        id="p3", page_content=docs[3].page_content, metadata=docs[3].metadata
    )
    # a loaded index saves by copying its files
    copy = load_bm25_retriever(loaded.save(tmp_path / "copy"), k=4)
    assert copy.invoke("w1 w2") == retriever.invoke("w1 w2")


def test_load_refuses_another_analyzer(tmp_path: Path) -> None:
    directory = create_bm25_retriever(random_docs(20)).save(tmp_path / "ix")
    with pytest.raises(AdaptiveRAGError, match=r"was built with BM25Analyzer.*stemmer='english'"):
        load_bm25_retriever(directory, analyzer=BM25Analyzer(stemmer=None))
    assert load_bm25_retriever(directory, analyzer=BM25Analyzer()).index.size == 20


def test_save_refuses_a_taken_directory(tmp_path: Path) -> None:
    retriever = create_bm25_retriever(random_docs(10))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(AdaptiveRAGError, match="exists and is not empty"):
        retriever.save(tmp_path / "taken")
    (tmp_path / "file").write_text("x")
    with pytest.raises(AdaptiveRAGError, match="is a file"):
        retriever.save(tmp_path / "file")
    retriever.save(tmp_path / "taken", overwrite=True)
    assert not (tmp_path / "taken" / "notes.txt").exists()
    assert load_bm25_retriever(tmp_path / "taken").index.size == 10


def _corrupt(directory: Path, how: str) -> None:
    if how == "no manifest":
        (directory / "manifest.json").unlink()
    elif how == "bad manifest":
        (directory / "manifest.json").write_text("{not json")
    elif how == "other format":
        (directory / "manifest.json").write_text(json.dumps({"format": 99}))
    elif how == "truncated passages":
        data = (directory / "passages.jsonl").read_bytes()
        (directory / "passages.jsonl").write_bytes(data[: len(data) // 2])
    elif how == "garbage array":
        (directory / "data.csc.index.npy").write_bytes(b"\x00garbage")
    elif how == "short array":
        np.save(directory / "indices.csc.index.npy", np.zeros(3, dtype=np.int32))
    elif how == "missing title field":
        (directory / "title" / "vocab.index.json").unlink()


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("no manifest", "has no manifest.json: it is not a BM25 index, or its build"),
        ("bad manifest", "manifest.json' is not valid JSON"),
        ("other format", "records index format 99; this version reads formats 1, 2"),
        ("truncated passages", r"passages.jsonl' has 2,\d\d\d bytes; 4,\d\d\d were written"),
        ("garbage array", r"data.csc.index.npy' has 8 bytes"),
        ("short array", r"indices.csc.index.npy' has 140 bytes"),
        ("missing title field", r"title/vocab.index.json' is missing"),
    ],
)
def test_corrupt_index_is_refused_with_the_fix(tmp_path: Path, how: str, message: str) -> None:
    directory = create_bm25_retriever(random_docs(30), index_title=True).save(tmp_path / "ix")
    _corrupt(directory, how)
    with pytest.raises(AdaptiveRAGError, match=message) as caught:
        load_bm25_retriever(directory)
    assert "rebuild" in str(caught.value) or "build it again" in str(caught.value)


def test_missing_directory_is_explained(tmp_path: Path) -> None:
    with pytest.raises(AdaptiveRAGError, match=r"does not exist.*adaptive-rag index"):
        load_bm25_retriever(tmp_path / "nowhere")


def _failing(docs: list[Document], after: int, error: BaseException) -> Iterator[Document]:
    yield from docs[:after]
    raise error


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()])
def test_interrupted_build_leaves_nothing(tmp_path: Path, error: BaseException) -> None:
    with pytest.raises(type(error)):
        build_bm25_index(_failing(random_docs(100), 60, error), tmp_path / "ix", chunk_size=16)
    assert list(tmp_path.iterdir()) == []  # no index and no staging directory


def test_interrupted_rebuild_keeps_the_old_index(tmp_path: Path) -> None:
    out = build_bm25_index(random_docs(50), tmp_path / "ix")
    with pytest.raises(RuntimeError):
        build_bm25_index(_failing(random_docs(100), 80, RuntimeError("stop")), out, overwrite=True)
    assert load_bm25_retriever(out).index.size == 50


def test_killed_build_leaves_no_loadable_index(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, time
        from langchain_core.documents import Document
        from langchain_adaptive_rag.retrievers import build_bm25_index

        def slow():
            for i in range(10**6):
                if i == 200:
                    print("started", flush=True)
                    time.sleep(60)
                yield Document(page_content=f"passage {i} word{i % 13}", metadata={"id": str(i)})

        build_bm25_index(slow(), sys.argv[1], chunk_size=50)
        """
    )
    out = tmp_path / "ix"
    process = subprocess.Popen(
        [sys.executable, "-c", script, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    assert not out.exists()
    with pytest.raises(AdaptiveRAGError, match="does not exist"):
        load_bm25_retriever(out)
    (left,) = tmp_path.glob(".ix.partial-*")  # the killed build's staging directory
    # what the next build finds beside the target: the killed build's directory, one of
    # an older release (pid, hex) whose process is gone, one of a live process (this
    # one), one made on another host, and an index replaced by an overwrite
    gone = _dead_pid()
    older = tmp_path / f".ix.partial-{gone}-0badc0de"
    live = tmp_path / f".ix.partial-{socket.gethostname()}-{os.getpid()}-feedface"
    remote = tmp_path / f".ix.partial-some-other-host-{gone}-12345678"
    for path in (older, live, remote):
        path.mkdir()
    build_bm25_index(random_docs(20), out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["ix", live.name, remote.name])
    replaced = tmp_path / ".ix.replaced-0123abcd"
    replaced.mkdir()
    build_bm25_index(random_docs(20), out, overwrite=True)
    assert not replaced.exists() and not left.exists() and load_bm25_retriever(out).index.size == 20


def _dead_pid() -> int:
    """The id of a process that has exited."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=30)
    return process.pid


def test_empty_and_termless_corpora_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AdaptiveRAGError, match="gave no passages"):
        build_bm25_index([], tmp_path / "a")
    with pytest.raises(AdaptiveRAGError, match="has an index term"):
        build_bm25_index([Document(page_content="the of")], tmp_path / "b")
    with pytest.raises(AdaptiveRAGError, match="chunk_size must be a positive integer"):
        build_bm25_index(random_docs(3), tmp_path / "c", chunk_size=0)
    assert list(tmp_path.iterdir()) == []


def test_malformed_corpus_line_names_file_and_line(tmp_path: Path) -> None:
    corpus = tmp_path / "psgs.tsv"
    corpus.write_text("id\ttext\ttitle\n1\tAnna Berg was born in 1931.\tAnna Berg\n2\tbroken\n")
    with pytest.raises(DatasetFormatError, match=r"psgs.tsv.*line 3.*2 tab-separated columns"):
        build_bm25_index(iter_passages(corpus), tmp_path / "ix")
    assert not (tmp_path / "ix").exists()


def test_dpr_tsv_builds_with_titles_and_ids(tmp_path: Path) -> None:
    corpus = tmp_path / "psgs_w100.tsv"
    corpus.write_text(
        "id\ttext\ttitle\n"
        '1\t"Anna Berg (born 1931) is a Swedish film director."\tAnna Berg\n'
        "2\tBlue Harbour is a 1962 film.\tBlue Harbour\n"
        "3\tCarl Lind was born in Oslo in 1902.\tCarl Lind\n"
    )
    retriever = load_bm25_retriever(build_bm25_index(iter_passages(corpus), tmp_path / "ix"))
    (top, *_) = retriever.invoke("Who directed Blue Harbour?")
    assert top.id == "2" and top.metadata["title"] == "Blue Harbour"
    assert top.page_content == "Blue Harbour is a 1962 film."
    assert retriever.invoke("Swedish directors")[0].id == "1"  # stemmed: director(s)
