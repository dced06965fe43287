"""The names the command line offers before anything heavy loads.

``adaptive-rag --help`` and argument errors answer at once: the parsers read their
choices here, not from the graphs, calibration and prompt modules that define them from
their classes (and load langchain, LangGraph, torch and transformers). Tests check that
both agree.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TOLERANCE",
    "METHOD_NAMES",
    "PACKAGE_PROMPTS",
    "PROMPT_SETS",
    "THRESHOLD_FIELDS",
]

METHOD_NAMES: tuple[str, ...] = (
    "no_retrieval",
    "single_round",
    "fix_length",
    "fix_sentence",
    "ircot",
    "adaptive_rag",
    "flare",
    "dragin",
    "seakr",
    "self_rag",
    "vanilla",
    "ta_are",
)
"""Every method's id, in the order tables show them ([`graphs.AVAILABLE_METHODS`][])."""
THRESHOLD_FIELDS: dict[str, str] = {"flare": "theta", "dragin": "theta", "seakr": "delta"}
"""The config field each calibratable method retrieves by ([`calibration.THRESHOLD_FIELDS`][])."""
PROMPT_SETS: tuple[str, ...] = ("2wikimultihopqa", "hotpotqa", "iirc", "strategyqa", "simple_qa")
"""Benchmarks with a prompt of their own ([`exemplars.PromptDataset`][])."""
PACKAGE_PROMPTS = "default"
"""The ``prompts`` name of the package's own two demonstrations."""
DEFAULT_TOLERANCE = 1e-4
"""How far two runs' floats may differ and count as equal to rounding (``compare
--questions``, ``compare_results``)."""
