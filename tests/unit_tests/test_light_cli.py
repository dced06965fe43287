"""The command line answers ``--help`` and argument errors without loading the model stack."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from langchain_adaptive_rag import catalogue
from langchain_adaptive_rag.errors import AdaptiveRAGError

HEAVY = ("torch", "transformers", "langgraph", "bm25s", "spacy", "numpy")

PROBE = """
import sys
from langchain_adaptive_rag.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(sorted(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["eval", "--help"],
        ["calibrate", "--help"],
        ["compare", "--help"],
        ["index", "--help"],
        ["verify-index", "--help"],
        ["model", "--help"],
        ["eval", "--method", "nope"],
        ["demo", "--per-category", "0"],
        ["demo", "--methods", "DRAGIN,dragn"],
        ["--version"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_help_and_argument_errors_load_nothing_heavy(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr


def test_the_catalogue_agrees_with_the_classes_that_define_its_names() -> None:
    from langchain_adaptive_rag.evaluation.calibration import THRESHOLD_FIELDS
    from langchain_adaptive_rag.evaluation.setup import PACKAGE_PROMPTS
    from langchain_adaptive_rag.exemplars import PromptDataset
    from langchain_adaptive_rag.graphs import AVAILABLE_METHODS

    assert catalogue.METHOD_NAMES == AVAILABLE_METHODS
    assert catalogue.THRESHOLD_FIELDS == THRESHOLD_FIELDS
    assert get_args(PromptDataset) == catalogue.PROMPT_SETS
    assert catalogue.PACKAGE_PROMPTS == PACKAGE_PROMPTS


def test_the_served_graphs_module_imports_nothing_heavy() -> None:
    probe = "import sys, langchain_adaptive_rag.langgraph_app as app\n"
    probe += f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dragin", "dragin"),
        ("DRAGIN", "dragin"),
        ("Adaptive-RAG", "adaptive_rag"),
        ("adaptive rag", "adaptive_rag"),
        ("SR-RAG", "single_round"),
        ("wo-RAG", "no_retrieval"),
        ("Self-RAG", "self_rag"),
        (" TA-ARE ", "ta_are"),
    ],
)
def test_a_method_is_named_by_its_id_or_its_papers_name_in_any_case(
    name: str, expected: str
) -> None:
    assert catalogue.method_id(name) == expected


def test_every_papers_name_names_its_method() -> None:
    from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, display_name, policy_class

    for method in AVAILABLE_METHODS:
        assert catalogue.method_id(display_name(method)) == method
        assert policy_class(display_name(method).upper()) is policy_class(method)


def test_a_near_miss_is_answered_with_the_nearest_name() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"'dragn' is unknown\. Did you mean 'dragin'"):
        catalogue.method_id("dragn")
    with pytest.raises(AdaptiveRAGError, match="Did you mean 'single_round'"):
        catalogue.method_id("sr-rg")
    with pytest.raises(AdaptiveRAGError, match=r"'raptor' is unknown. Expected one of \["):
        catalogue.method_id("raptor")


def test_version_and_method_names_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from langchain_adaptive_rag import __version__
    from langchain_adaptive_rag.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["--version"])
    assert ended.value.code == 0 and capsys.readouterr().out == f"adaptive-rag {__version__}\n"
    with pytest.raises(SystemExit) as ended:
        main(["demo", "--methods", "flare,DRAGN"])
    assert ended.value.code == 2
    assert "Did you mean 'dragin'" in capsys.readouterr().err
