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

import difflib
import re

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "DEFAULT_TOLERANCE",
    "METHODS",
    "METHOD_NAMES",
    "PACKAGE_PROMPTS",
    "PAPER_NAMES",
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
    "etc": "langchain_adaptive_rag.graphs.etc:ETCPolicy",
    "uncertainty_gate": "langchain_adaptive_rag.graphs.uncertainty_gate:UncertaintyGatePolicy",
    "self_rag": "langchain_adaptive_rag.graphs.self_rag:SelfRAGPolicy",
    "vanilla": "langchain_adaptive_rag.graphs.ta_are:VanillaPolicy",
    "ta_are": "langchain_adaptive_rag.graphs.ta_are:TAAREPolicy",
    "search_agent": "langchain_adaptive_rag.graphs.search_agent:SearchAgentPolicy",
    "tool_agent": "langchain_adaptive_rag.graphs.tool_agent:ToolAgent",
}
"""Every method: its id and ``module:Class``, the class carrying its facts (its
[`Policy`][langchain_adaptive_rag.graphs.policy.Policy], or Adaptive-RAG's router), in
the order tables show them. A new method is one line here."""

PAPER_NAMES: dict[str, str] = {
    "wo_rag": "no_retrieval",
    "sr_rag": "single_round",
    "fl_rag": "fix_length",
    "fs_rag": "fix_sentence",
}
"""The papers' names that differ from a method's id, written as [`method_id`][] reads
them (``"SR-RAG"`` is ``sr_rag``): the other papers' names are their ids (``DRAGIN``,
``Adaptive-RAG``, ``Self-RAG``, ``TA-ARE``)."""

METHOD_NAMES: tuple[str, ...] = tuple(METHODS)
"""Every method's id, in the order tables show them (the graphs' ``AVAILABLE_METHODS``)."""
THRESHOLD_FIELDS: dict[str, str] = {
    "flare": "theta",
    "dragin": "theta",
    "seakr": "delta",
    "etc": "theta",
    "uncertainty_gate": "threshold",
}
"""The config field each calibratable method retrieves by (as the calibration's own)."""
PROMPT_SETS: tuple[str, ...] = ("2wikimultihopqa", "hotpotqa", "iirc", "strategyqa", "simple_qa")
"""Benchmarks with a prompt of their own (``exemplars.PromptDataset``)."""
PACKAGE_PROMPTS = "default"
"""The ``prompts`` name of the package's own two demonstrations."""
DEFAULT_TOLERANCE = 1e-4
"""How far two runs' floats may differ and count as equal to rounding (``compare
--questions``, ``compare_results``)."""


def method_id(name: str) -> str:
    """The id of the method ``name`` names: its id or its papers' name, in any case.

    Dashes and spaces read as underscores: ``"DRAGIN"``, ``"Adaptive-RAG"`` and
    ``"SR-RAG"`` name ``dragin``, ``adaptive_rag`` and ``single_round``.

    Args:
        name: A method's id or papers' name.

    Returns:
        The method's id, one of [`METHOD_NAMES`][].

    Raises:
        AdaptiveRAGError: No method has that name; the message offers the nearest.
    """
    if not isinstance(name, str):
        msg = f"method={name!r} is not a method's name. Expected one of {list(METHOD_NAMES)}."
        raise AdaptiveRAGError(msg)
    key = re.sub(r"[\s-]+", "_", name.strip().lower())
    key = PAPER_NAMES.get(key, key)
    if key in METHODS:
        return key
    names = [*METHOD_NAMES, *PAPER_NAMES]
    near = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f" Did you mean {PAPER_NAMES.get(near[0], near[0])!r}?" if near else ""
    msg = f"method={name!r} is unknown.{hint} Expected one of {list(METHOD_NAMES)}."
    raise AdaptiveRAGError(msg)
