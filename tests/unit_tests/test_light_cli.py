"""The command line answers ``--help`` and argument errors without loading the model stack."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from langchain_adaptive_rag import catalogue

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
