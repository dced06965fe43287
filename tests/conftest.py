"""Shared fixtures: tiny local models built from configs with a locally trained tokenizer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from langchain_adaptive_rag.testing import create_tiny_model
from tests.helpers.families import FAMILIES, WINDOWED_FAMILIES, save_tiny_family


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tiny-models")
    return {
        arch: create_tiny_model(root / arch, architecture=arch, seed=7)
        for arch in ("llama", "qwen2", "gpt2", "mistral", "gemma", "deepseek_v3")
    }


@pytest.fixture(scope="session")
def llama_dir(tiny_model_dirs: dict[str, Path]) -> Path:
    return tiny_model_dirs["llama"]


def _shared_dir() -> Path:
    import tempfile

    return Path(tempfile.gettempdir()) / f"langchain-adaptive-rag-tests-{os.getpid()}"


def shared_tiny_llama() -> str:
    """A tiny Llama directory for suites whose parameters are class properties."""
    path = _shared_dir() / "llama"
    if not (path / "config.json").exists():
        create_tiny_model(path, architecture="llama", seed=7)
    return str(path)


def boundary_stop(pieces: list[str], text: str) -> str:
    """A string spanning the boundary of two text-bearing tokens, first seen there."""
    offset = 0
    for i in range(len(pieces) - 1):
        left, right = pieces[i], pieces[i + 1]
        offset += len(left)
        if left.strip() and right.strip() and "\ufffd" not in left + right:
            candidate = left[-2:] + right[:2]
            if text.find(candidate) == offset - len(left[-2:]):
                return candidate
    raise AssertionError(f"no two adjacent text tokens in {pieces!r}")


class TinyChatParams:
    """Constructor parameters of the standard LangChain suites (mixed into both)."""

    @property
    def chat_model_class(self) -> type:
        from langchain_adaptive_rag import ChatTransformers

        return ChatTransformers

    @property
    def chat_model_params(self) -> dict[str, object]:
        return {"model": shared_tiny_llama(), "min_new_tokens": 2}

    @property
    def supports_model_override(self) -> bool:
        return False


@pytest.fixture(scope="session")
def family_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One tiny randomly initialised model of every family the engine serves."""
    root = tmp_path_factory.mktemp("families")
    return {family: save_tiny_family(family, root / family, seed=3) for family in FAMILIES}


@pytest.fixture(scope="session")
def windowed_dirs(
    tiny_model_dirs: dict[str, Path], family_dirs: dict[str, Path]
) -> dict[str, Path]:
    """The tiny models with 16-position sliding windows: Mistral's every layer, and Gemma 2,
    Gemma 3 and GPT-OSS shapes mixing windowed and global layers."""
    return {
        family: (tiny_model_dirs if family == "mistral" else family_dirs)[family]
        for family in WINDOWED_FAMILIES
    }
