"""How a model follows a search protocol: shared by the search-agent benchmarks.

``run_one`` answers one question with a search-agent graph and keeps its ``search_turn``
events; ``adherence_row`` prints a table line: the share of questions whose first turn
ends in a well-formed query (the query's closing tag after an opening one, the query not
empty), the share with at least one search, searches per question, the share whose text
gives an answer in the protocol's form, EM and F1 (as ``adaptive-rag eval`` scores them),
and seconds per question.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from langchain_adaptive_rag.evaluation.metrics import exact_match, f1_score
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_protocol import read_answer

HEADER = (
    "| {label} | n | first turn a well-formed query | searched | searches/q | "
    "answer in its form | EM | F1 | s/q |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)
"""The table's header; ``{label}`` names the first column."""


def run_one(graph: Any, question: str) -> dict[str, Any]:
    """One question: its result and the ``search_turn`` events, with its seconds."""
    turns: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    started = time.perf_counter()
    for mode, chunk in graph.stream({"question": question}, stream_mode=["custom", "values"]):
        if mode == "custom" and chunk.get("event") == "search_turn":
            turns.append(chunk)
        elif mode == "values":
            result = chunk
    return {"result": result, "turns": turns, "seconds": time.perf_counter() - started}


def _well_formed(turn: dict[str, Any]) -> bool:
    """A turn that ends in a query with text (searched, or answered by a message)."""
    query = turn["query"]
    return turn["action"] in ("search", "message") and bool(query and query.strip())


def adherence_row(
    name: str, config: SearchAgentConfig, runs: Sequence[dict[str, Any]], golds: Sequence[Any]
) -> str:
    """One protocol's (or one group's) line of the table."""
    n = len(runs)
    first = sum(1 for r in runs if r["turns"] and _well_formed(r["turns"][0]))
    searched = sum(1 for r in runs if r["result"]["counts"]["retrievals"] > 0)
    searches = sum(r["result"]["counts"]["retrievals"] for r in runs) / n
    protocol = config.search_protocol
    formed = sum(
        1 for r in runs if read_answer(protocol, r["result"]["text"], "", None) is not None
    )
    em = sum(exact_match(r["result"]["answer"], g) for r, g in zip(runs, golds, strict=True)) / n
    f1 = sum(f1_score(r["result"]["answer"], g) for r, g in zip(runs, golds, strict=True)) / n
    seconds = sum(r["seconds"] for r in runs) / n
    return (
        f"| {name} | {n} | {first / n:.0%} | {searched / n:.0%} | {searches:.2f} | "
        f"{formed / n:.0%} | {em:.3f} | {f1:.3f} | {seconds:.1f} |"
    )
