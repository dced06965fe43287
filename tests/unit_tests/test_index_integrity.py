"""A damaged saved BM25 index never answers wrongly in silence: fault injection.

Every file of a saved index (both fields, the passage store) is damaged in each of the
ways a disk, a copy or a hand can damage it: cut short, extended, overwritten with
same-size garbage, its tail zeroed, deleted, and, for the JSON files, rewritten as valid
JSON with other content. Each damaged copy must be refused at load with an error that
names the damaged file, or answer every probe query exactly as the intact index does.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from langchain_adaptive_rag.cli import main
from langchain_adaptive_rag.errors import AdaptiveRAGError, DamagedIndexError
from langchain_adaptive_rag.retrievers import (
    build_bm25_index,
    create_bm25_retriever,
    load_bm25_retriever,
    verify_bm25_index,
)
from langchain_adaptive_rag.retrievers.integrity import index_files
from tests.helpers.bm25_docs import VOCAB, random_docs

PROBES = [" ".join(VOCAB[i : i + 3]) for i in range(0, 300, 7)] + ["T3", "w1 T5 w2"]


def _answers(directory: Path, *, verify: bool | None) -> list[list[tuple[str | None, float]]]:
    retriever = load_bm25_retriever(directory, k=5, verify=verify)
    return [[(d.id, d.metadata["score"]) for d in retriever.invoke(probe)] for probe in PROBES]


def _cut(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _extend(data: bytes) -> bytes:
    return data + b"\x00" * 64


def _garbage(data: bytes) -> bytes:
    return np.random.default_rng(len(data)).bytes(len(data))


def _zero_tail(data: bytes) -> bytes:
    keep = len(data) - max(len(data) // 4, 8)
    return data[:keep] + b"\x00" * (len(data) - keep)


def _body_garbage(data: bytes) -> bytes:
    """Same size, header kept: an array whose values are random bits."""
    if not data.startswith(b"\x93NUMPY"):
        return _garbage(data)
    header = 10 + int.from_bytes(data[8:10], "little")
    return data[:header] + np.random.default_rng(7).bytes(len(data) - header)


def _other_json(data: bytes) -> bytes:
    value = json.loads(data)
    if isinstance(value, dict) and all(isinstance(v, int) for v in value.values()):
        ids = list(value.values())
        return json.dumps(dict(zip(value, ids[1:] + ids[:1], strict=True))).encode()
    if isinstance(value, dict):
        return json.dumps({**value, "k1": 0.1, "num_docs": value.get("num_docs", 0)}).encode()
    return data


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    "cut": _cut,
    "extended": _extend,
    "garbage": _garbage,
    "body garbage": _body_garbage,
    "zeroed tail": _zero_tail,
    "other json": _other_json,
}


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("intact") / "ix"
    return build_bm25_index(random_docs(150), out, chunk_size=40)


def _damaged_copies(intact: Path, root: Path) -> list[tuple[str, str, Path]]:
    copies = []
    for name in [*index_files(intact), "manifest.json"]:
        original = (intact / name).read_bytes()
        for damage, change in DAMAGES.items():
            if damage == "other json" and not name.endswith(".json"):
                continue
            changed = change(original)
            if changed == original:
                continue
            copy = root / f"{name.replace('/', '_')}-{damage.replace(' ', '_')}"
            shutil.copytree(intact, copy)
            (copy / name).write_bytes(changed)
            copies.append((name, damage, copy))
        copy = root / f"{name.replace('/', '_')}-deleted"
        shutil.copytree(intact, copy)
        (copy / name).unlink()
        copies.append((name, "deleted", copy))
    return copies


def test_every_damaged_copy_is_refused_naming_its_file(intact: Path, tmp_path: Path) -> None:
    expected = _answers(intact, verify=None)
    copies = _damaged_copies(intact, tmp_path)
    assert len(copies) >= 60
    silent = []
    for name, damage, copy in copies:
        try:
            answers = _answers(copy, verify=None)
        except AdaptiveRAGError as error:
            file_name = name.rsplit("/", 1)[-1]
            assert file_name in str(error), (name, damage, str(error))
            if isinstance(error, DamagedIndexError):
                assert error.path.endswith(name), (name, damage, error.path)
            continue
        if answers != expected:
            silent.append((name, damage))
    assert silent == []  # nothing answers wrongly without an error


def test_without_checksums_damage_still_never_crashes_a_query(intact: Path, tmp_path: Path) -> None:
    """``verify=False`` (a large index): sizes and structure at load, postings at query.

    Same-size random bits in the weights can only be caught by the checksums, so here a
    damaged copy must either refuse (load or query) naming the file, or answer; it must
    never raise anything but the package's named errors.
    """
    refused_at_query = 0
    for name, damage, copy in _damaged_copies(intact, tmp_path):
        try:
            _answers(copy, verify=False)
        except DamagedIndexError as error:
            assert error.path.endswith(name.rsplit("/", 1)[-1]) or name == "manifest.json", (
                name,
                damage,
                error.path,
            )
            refused_at_query += "lists passage row" in str(error) or "weight" in str(error)
        except AdaptiveRAGError as error:
            assert name.rsplit("/", 1)[-1] in str(error) or "manifest" in str(error), (
                name,
                damage,
                str(error),
            )
    assert refused_at_query > 0  # the query-time checks did catch some


def test_query_time_checks_name_the_file(intact: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(intact, tmp_path / "ix")
    indices = np.load(copy / "indices.csc.index.npy")
    indices += 10**6  # still increasing per term, far beyond the 150 passages
    np.save(copy / "indices.csc.index.npy", indices)
    with pytest.raises(DamagedIndexError, match=r"indices.csc.index.npy' does not have the SHA"):
        load_bm25_retriever(copy)
    retriever = load_bm25_retriever(copy, verify=False)  # sizes and structure still hold
    with pytest.raises(DamagedIndexError, match=r"indices.csc.index.npy' lists passage row 100"):
        retriever.invoke("w1 w2 w3")
    indices -= 10**6
    indices[5:] = 0  # a zeroed tail: rows no longer increase
    np.save(copy / "indices.csc.index.npy", indices)
    retriever = load_bm25_retriever(copy, verify=False)
    with pytest.raises(DamagedIndexError, match=r"indices.csc.index.npy' lists the passage rows"):
        for probe in PROBES:
            retriever.invoke(probe)


def test_verify_reports_and_refuses(intact: Path, tmp_path: Path) -> None:
    report = verify_bm25_index(intact)
    assert report.files == len(index_files(intact)) and report.bytes > 0
    assert report.postings > 0
    copy = shutil.copytree(intact, tmp_path / "ix")
    data = (copy / "title" / "data.csc.index.npy").read_bytes()
    (copy / "title" / "data.csc.index.npy").write_bytes(_body_garbage(data))
    with pytest.raises(DamagedIndexError, match=r"title/data.csc.index.npy' does not have"):
        verify_bm25_index(copy)


def test_an_index_saved_from_memory_records_its_files(tmp_path: Path) -> None:
    directory = create_bm25_retriever(random_docs(30), index_title=True).save(tmp_path / "ix")
    recorded = json.loads((directory / "manifest.json").read_text())["files"]
    assert sorted(recorded) == index_files(directory)
    assert all(len(entry["sha256"]) == 64 for entry in recorded.values())
    assert verify_bm25_index(directory).files == len(recorded)


def test_a_format_1_index_loads_but_cannot_be_verified(intact: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(intact, tmp_path / "ix")
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["files"]
    (copy / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    assert _answers(copy, verify=None) == _answers(intact, verify=None)
    with pytest.raises(AdaptiveRAGError, match=r"format 1, which records no checksums"):
        load_bm25_retriever(copy, verify=True)


def test_verify_index_command(
    intact: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify-index", str(intact)]) == 0
    assert "intact:" in capsys.readouterr().out
    copy = shutil.copytree(intact, tmp_path / "ix")
    passages = bytearray((copy / "passages.jsonl").read_bytes())
    passages[100] ^= 1  # one bit flipped in a passage's text
    (copy / "passages.jsonl").write_bytes(bytes(passages))
    assert main(["verify-index", str(copy)]) == 1
    assert "passages.jsonl' does not have the SHA-256" in capsys.readouterr().err
    assert main(["verify-index", str(tmp_path / "nowhere")]) == 2
