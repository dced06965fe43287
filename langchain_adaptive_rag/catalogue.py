"""The method registry, and the names the command line offers before anything heavy loads.

[`METHODS`][] is where a method is registered: one line naming its module and the class
that carries its facts. The graphs build from it by name, and the command line, the
LangGraph server's factories and the toy world's runs take its ids from it.
``adaptive-rag --help`` and argument errors answer at once: the parsers read their
choices here, not from the graphs, calibration and prompt modules that define them from
their classes (and load langchain, LangGraph, torch and transformers). Tests check that
both agree.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_TOLERANCE",
    "METHODS",
    "METHOD_NAMES",
    "PACKAGE_PROMPTS",
    "PROMPT_SETS",
    "THRESHOLD_FIELDS",
]

METHODS: dict[str, str] = {
    "no_retrieval": "langchain_adaptive_rag.graphs.fixed:NoRetrievalPolicy",
    "single_round": "langchain_adaptive_rag.graphs.fixed:SingleRoundPolicy",
    "fix_length": "langchain_adaptive_rag.graphs.fixed:FixLengthPolicy",
    "fix_sentence": "langchain_adaptive_rag.graphs.fixed:FixSentencePolicy",
    "ircot": "langchain_adaptive_rag.graphs.ircot:IRCoTPolicy",
    "adaptive_rag": "langchain_adaptive_rag.graphs.adaptive_rag:AdaptiveRAGRouter",
    "flare": "langchain_adaptive_rag.graphs.flare:FLAREPolicy",
    "dragin": "langchain_adaptive_rag.graphs.dragin:DRAGINPolicy",
    "seakr": "langchain_adaptive_rag.graphs.seakr:SeaKRPolicy",
    "self_rag": "langchain_adaptive_rag.graphs.self_rag:SelfRAGPolicy",
    "vanilla": "langchain_adaptive_rag.graphs.ta_are:VanillaPolicy",
    "ta_are": "langchain_adaptive_rag.graphs.ta_are:TAAREPolicy",
}
"""Every method: its id and ``module:Class``, the class carrying its facts (its
[`Policy`][langchain_adaptive_rag.graphs.policy.Policy], or Adaptive-RAG's router), in
the order tables show them. A new method is one line here."""

METHOD_NAMES: tuple[str, ...] = tuple(METHODS)
"""Every method's id, in the order tables show them (the graphs' ``AVAILABLE_METHODS``)."""
THRESHOLD_FIELDS: dict[str, str] = {"flare": "theta", "dragin": "theta", "seakr": "delta"}
"""The config field each calibratable method retrieves by (as the calibration's own)."""
PROMPT_SETS: tuple[str, ...] = ("2wikimultihopqa", "hotpotqa", "iirc", "strategyqa", "simple_qa")
"""Benchmarks with a prompt of their own (``exemplars.PromptDataset``)."""
PACKAGE_PROMPTS = "default"
"""The ``prompts`` name of the package's own two demonstrations."""
DEFAULT_TOLERANCE = 1e-4
"""How far two runs' floats may differ and count as equal to rounding (``compare
--questions``, ``compare_results``)."""
