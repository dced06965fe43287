"""The shipped toy model, the toy corpus retriever and the default toy world."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from langchain_core.documents import Document

from langchain_adaptive_rag.chat_models import ChatTransformers
from langchain_adaptive_rag.retrievers import BM25Analyzer, BM25Retriever, create_bm25_retriever
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.questions import ToyQuestion, evaluation_questions
from langchain_adaptive_rag.toyworld.world import ToyWorld, generate_world

__all__ = [
    "TOY_MODEL_PATH",
    "TOY_SEED",
    "load_toy_model",
    "toy_corpus",
    "toy_questions",
    "toy_retriever",
    "toy_world",
]

TOY_MODEL_PATH = Path(__file__).parent / "model"
"""Directory of the shipped toy model (weights, tokenizer, chat template)."""

TOY_SEED = 0
"""Seed of the world the shipped model was trained on."""


@lru_cache(maxsize=4)
def toy_world(seed: int = TOY_SEED) -> ToyWorld:
    """The toy world of ``seed`` (the shipped model knows the world of [`TOY_SEED`][])."""
    return generate_world(seed)


def toy_corpus(seed: int = TOY_SEED) -> list[Document]:
    """Every passage of the toy world: known and unknown facts, people, films and cities."""
    return build_corpus(toy_world(seed))


def toy_questions(seed: int = TOY_SEED) -> list[ToyQuestion]:
    """The fixed evaluation questions of the toy world."""
    return evaluation_questions(toy_world(seed))


TOY_ANALYZER = BM25Analyzer(stemmer=None, stopwords="spacy")
"""The toy retriever's analyzer: unstemmed, spaCy's stop words."""


def toy_retriever(k: int = 3, *, seed: int = TOY_SEED) -> BM25Retriever:
    """BM25 over the toy corpus, unstemmed (the toy world's thresholds were calibrated so).

    Args:
        k: Passages per query.
        seed: World seed.

    Returns:
        The retriever.
    """
    return create_bm25_retriever(toy_corpus(seed), k=k, analyzer=TOY_ANALYZER)


def load_toy_model(
    path: str | Path | None = None,
    *,
    attn_implementation: Literal["eager", "sdpa"] = "eager",
    max_new_tokens: int = 64,
    batch_concurrent_calls: bool | None = None,
) -> ChatTransformers:
    """Load the shipped toy model (or one trained by ``toyworld_training``) as a chat model.

    Args:
        path: Model directory (default: [`TOY_MODEL_PATH`][]).
        attn_implementation: ``"eager"`` (attention signals available) or ``"sdpa"``.
        max_new_tokens: Generation budget.
        batch_concurrent_calls: Decode calls arriving together from several threads in
            one batch (see ``ChatTransformers.batch_concurrent_calls``; ``None``: off
            on a CPU). Set ``True`` to answer several questions at once.

    Returns:
        The model; use it with ``prompts=TOY_PROMPTS`` in the graphs.
    """
    return ChatTransformers(
        model=str(path or TOY_MODEL_PATH),
        attn_implementation=attn_implementation,
        max_new_tokens=max_new_tokens,
        batch_concurrent_calls=batch_concurrent_calls,
        local_files_only=True,
    )
