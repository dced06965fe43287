"""The public surface is explicit and stable."""

from __future__ import annotations

import re
from pathlib import Path

import langchain_adaptive_rag

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ALL = [
    "AVAILABLE_METHODS",
    "AdaptiveRAGError",
    "AttentionMatrix",
    "AttentionUnavailableError",
    "BM25Retriever",
    "ChatTransformers",
    "DRAGINConfig",
    "Exemplar",
    "FLAREConfig",
    "FixLengthConfig",
    "FixSentenceConfig",
    "GenerationConfig",
    "GenerationTrace",
    "HiddenLayerError",
    "PromptTooLongError",
    "QAPrompts",
    "RetrieverOptions",
    "SeaKRConfig",
    "TAAREConfig",
    "TokenSignals",
    "create_adaptive_rag_graph",
    "create_bm25_retriever",
    "create_dragin_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_no_retrieval_graph",
    "create_seakr_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_vanilla_graph",
    "dataset_prompts",
    "get_token_signals",
    "load_bm25_retriever",
    "load_exemplars",
]


def test_all_imports() -> None:
    assert sorted(langchain_adaptive_rag.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(langchain_adaptive_rag, name) is not None


def test_docs_home_page_is_the_readme() -> None:
    """docs/index.md is the README with its links made relative to docs/ (one text)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    home = (root / "docs" / "index.md").read_text(encoding="utf-8")
    assert home == readme.replace("](docs/", "](")
    assert len(readme.splitlines()) <= 160
    for line in readme.splitlines():  # every page the README links exists
        for target in line.split("](docs/")[1:]:
            assert (root / "docs" / target.split(")")[0]).exists(), target


def test_the_package_does_not_import_the_training_code() -> None:
    """toyworld_training/ stays out of the wheel, so nothing the wheel ships may import it."""
    importing = re.compile(r"^\s*(from|import)\s+toyworld_training\b", re.MULTILINE)
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "langchain_adaptive_rag").rglob("*.py"))
        if importing.search(path.read_text(encoding="utf-8"))
    ]
    assert not found
