"""Test helper: llama.cpp's own ``llama-server``, built once per machine from its sources.

The tool agent needs a server that reads a model's tool calls into OpenAI's
``tool_calls`` and takes them back: llama.cpp's ``llama-server --jinja`` does,
llama-cpp-python's server does not (docs/served-models.md). ``llama-server`` is not on
PyPI as a binary; llama-cpp-python's source distribution carries the llama.cpp sources
it binds, so this downloads the sdist of the installed llama-cpp-python from the package
index, builds the ``llama-server`` target with cmake (static, one file) and keeps it in
``~/.cache/langchain-adaptive-rag/llama-server/<version>/``: about 15 minutes on 2
cores, once. ``make test`` builds it before the suite (``python -m
tests.helpers.llama_server``), so the suite's time does not include it.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = ["llama_server_binary"]

CACHE = Path.home() / ".cache" / "langchain-adaptive-rag" / "llama-server"


def llama_server_binary() -> Path:
    """The cached ``llama-server`` of the installed llama-cpp-python's sources.

    Built first when it is missing.
    """
    version = importlib.metadata.version("llama-cpp-python")
    target = CACHE / version / "llama-server"
    if not target.is_file():
        _build(version, target)
    return target


def _build(version: str, target: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:",
                "--no-deps", f"llama-cpp-python=={version}", "--dest", str(where),
            ],
            check=True,
        )  # fmt: skip
        (sdist,) = where.glob("llama_cpp_python-*.tar.gz")
        with tarfile.open(sdist) as archive:
            archive.extractall(where, filter="data")
        (source,) = where.glob("llama_cpp_python-*/vendor/llama.cpp")
        build = source / "build"
        options = [
            "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_CURL=OFF",
            "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        ]  # fmt: skip
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *options], check=True)
        jobs = str(os.cpu_count() or 2)
        subprocess.run(
            ["cmake", "--build", str(build), "--target", "llama-server", "-j", jobs], check=True
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", partial)
        partial.replace(target)  # whole or absent


if __name__ == "__main__":
    sys.stdout.write(f"{llama_server_binary()}\n")
