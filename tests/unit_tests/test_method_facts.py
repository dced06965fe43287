"""Each method's facts live on its policy: name, the papers' name, config, threshold, colour."""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import THRESHOLD_FIELDS
from langchain_adaptive_rag.evaluation.summary import format_table
from langchain_adaptive_rag.graphs import (
    AVAILABLE_METHODS,
    config_class,
    display_name,
    policy_class,
)
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig

PAPERS = {
    "no_retrieval": "wo-RAG",
    "single_round": "SR-RAG",
    "fix_length": "FL-RAG",
    "fix_sentence": "FS-RAG",
    "ircot": "IRCoT",
    "adaptive_rag": "Adaptive-RAG",
    "flare": "FLARE",
    "dragin": "DRAGIN",
    "seakr": "SeaKR",
    "etc": "ETC",
    "uncertainty_gate": "Uncertainty gate",
    "self_rag": "Self-RAG",
    "vanilla": "Vanilla",
    "ta_are": "TA-ARE",
    "search_agent": "Search agent",
    "tool_agent": "Tool agent",
}


def test_every_method_has_its_papers_name_and_a_colour() -> None:
    assert {m: display_name(m) for m in AVAILABLE_METHODS} == PAPERS
    colours = {policy_class(m).colour for m in AVAILABLE_METHODS}
    assert len(colours) == len(AVAILABLE_METHODS)
    assert all(c.startswith("#") and len(c) == 7 for c in colours)
    assert display_name("my_method") == "my_method"  # not ours: shown as it is


def test_configs_and_thresholds_come_from_the_policies() -> None:
    assert config_class("dragin") is DRAGINConfig and config_class("flare") is FLAREConfig
    assert config_class("seakr") is SeaKRConfig
    assert THRESHOLD_FIELDS == {
        "flare": "theta",
        "dragin": "theta",
        "seakr": "delta",
        "etc": "theta",
        "uncertainty_gate": "threshold",
    }
    assert policy_class("seakr").threshold_symbol == "δ"
    assert policy_class("dragin").threshold_symbol == "θ"
    for method, field in THRESHOLD_FIELDS.items():
        assert hasattr(config_class(method)(), field)
    with pytest.raises(AdaptiveRAGError, match="Expected one of"):
        policy_class("dragon")


def test_tables_show_the_papers_names_and_csv_keeps_the_ids() -> None:
    rows = [{"method": "single_round", "em": 0.5}, {"method": "ta_are", "em": 0.25}]
    markdown = format_table(rows, "markdown")  # type: ignore[arg-type]
    assert "| SR-RAG |" in markdown and "| TA-ARE |" in markdown
    assert "single_round" not in markdown
    assert format_table(rows, "csv").splitlines()[1].startswith("single_round,")  # type: ignore[arg-type]
